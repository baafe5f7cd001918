/* unicode.h: the Unicode facts BERT's tokenizer needs: UTF-8, character classes, lower-case, accent
 * stripping. */
#ifndef GRAFT_DATA_UNICODE_H
#define GRAFT_DATA_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Class bits of a code point (uni_class). */
enum {
    UNI_CONTROL = 1, /* general category C* (Cc, Cf, Cn, Co, Cs) */
    UNI_PUNCT = 2,   /* general category P*, or ASCII punctuation ($, +, <, =, >, ^, `, |, ~) */
    UNI_MN = 4,      /* nonspacing mark (removed by accent stripping) */
    UNI_SPACE = 8,   /* White_Space property (tab, newline and CR included) */
    UNI_CJK = 16,    /* a CJK ideograph BERT splits out as its own word */
};

typedef struct uni_range {
    uint32_t lo, hi; /* inclusive */
    uint32_t klass;  /* UNI_CONTROL, UNI_PUNCT or UNI_MN */
} uni_range;

typedef struct uni_lower_entry {
    uint32_t cp;
    uint32_t n; /* 1 or 2 code points */
    uint32_t to[2];
} uni_lower_entry;

typedef struct uni_strip_entry {
    uint32_t cp;
    uint32_t n; /* 0 to 3 code points: NFD without its nonspacing marks */
    uint32_t to[3];
} uni_strip_entry;

typedef struct uni_strip_part {
    const uni_strip_entry *entries;
    int count;
} uni_strip_part;

/* Generated tables (unicode_tables_*.c, tools/make_unicode_tables.py), sorted by code point. The
 * accent-stripping table comes in parts (one per file), listed in code point order. */
extern const uni_range uni_class_ranges[];
extern const int uni_class_range_count;
extern const uni_lower_entry uni_lower_table[];
extern const int uni_lower_count;
extern const uni_strip_part uni_strip_parts[];
extern const int uni_strip_part_count;

/* Decode one code point of s[*pos..n); advances *pos. Returns 0, or -1 for invalid UTF-8
 * (overlong forms, surrogates, values past U+10FFFF, truncated sequences). */
int utf8_decode(const char *s, size_t n, size_t *pos, uint32_t *cp);
/* Encode cp into out (4 bytes of room); returns the byte count. */
int utf8_encode(uint32_t cp, char *out);

/* UNI_* bits of cp. */
uint32_t uni_class(uint32_t cp);
/* Full lower-case mapping of one code point (as Rust's char::to_lowercase); returns 1 or 2. */
int uni_lower(uint32_t cp, uint32_t out[2]);
/* Canonical decomposition of cp with nonspacing marks removed; returns 0 to 3. */
int uni_strip_accents(uint32_t cp, uint32_t out[3]);

#endif
