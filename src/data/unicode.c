/* unicode.c: UTF-8 coding and look-ups in the generated Unicode tables for the tokenizer. */
#include "data/unicode.h"

int utf8_decode(const char *str, size_t n, size_t *pos, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = *pos;
    unsigned c = s[i];
    if (c < 0x80) {
        *cp = c;
        *pos = i + 1;
        return 0;
    }
    int len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, v = c & 0x07, min = 0x10000;
    else
        return -1;
    if (i + (size_t)len > n) return -1;
    for (int k = 1; k < len; k++) {
        unsigned b = s[i + (size_t)k];
        if ((b & 0xC0) != 0x80) return -1;
        v = (v << 6) | (b & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return -1;
    *cp = v;
    *pos = i + (size_t)len;
    return 0;
}

int utf8_encode(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

static int is_white_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

/* The ranges BERT calls Chinese characters (those of the tokenizers package). */
static int is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static uint32_t table_class(uint32_t cp) {
    int lo = 0, hi = uni_class_range_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < uni_class_ranges[mid].lo)
            hi = mid - 1;
        else if (cp > uni_class_ranges[mid].hi)
            lo = mid + 1;
        else
            return uni_class_ranges[mid].klass;
    }
    return 0;
}

uint32_t uni_class(uint32_t cp) {
    uint32_t k = table_class(cp);
    if (cp < 0x80 && ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
                      (cp >= 123 && cp <= 126)))
        k |= UNI_PUNCT;
    if (is_white_space(cp)) k |= UNI_SPACE;
    if (is_cjk(cp)) k |= UNI_CJK;
    return k;
}

int uni_lower(uint32_t cp, uint32_t out[2]) {
    if (cp < 0x80) {
        out[0] = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
        return 1;
    }
    int lo = 0, hi = uni_lower_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < uni_lower_table[mid].cp)
            hi = mid - 1;
        else if (cp > uni_lower_table[mid].cp)
            lo = mid + 1;
        else {
            out[0] = uni_lower_table[mid].to[0];
            out[1] = uni_lower_table[mid].to[1];
            return (int)uni_lower_table[mid].n;
        }
    }
    out[0] = cp;
    return 1;
}

/* cp's entry in the accent-stripping table, or NULL; the parts follow each other in code point
 * order, so only the first part whose last entry is not below cp can hold it. */
static const uni_strip_entry *strip_entry(uint32_t cp) {
    for (int p = 0; p < uni_strip_part_count; p++) {
        const uni_strip_entry *t = uni_strip_parts[p].entries;
        int lo = 0, hi = uni_strip_parts[p].count - 1;
        if (hi < 0 || cp > t[hi].cp) continue;
        while (lo <= hi) {
            int mid = (lo + hi) / 2;
            if (cp < t[mid].cp)
                hi = mid - 1;
            else if (cp > t[mid].cp)
                lo = mid + 1;
            else
                return &t[mid];
        }
        return NULL;
    }
    return NULL;
}

int uni_strip_accents(uint32_t cp, uint32_t out[3]) {
    if (cp < 0xC0) {
        out[0] = cp;
        return 1;
    }
    if (cp >= 0xAC00 && cp <= 0xD7A3) { /* Hangul syllable: L V (T), all kept */
        uint32_t s = cp - 0xAC00, t = s % 28;
        out[0] = 0x1100 + s / (21 * 28);
        out[1] = 0x1161 + (s % (21 * 28)) / 28;
        if (t == 0) return 2;
        out[2] = 0x11A7 + t;
        return 3;
    }
    const uni_strip_entry *e = strip_entry(cp);
    if (e) {
        for (uint32_t k = 0; k < e->n; k++) out[k] = e->to[k];
        return (int)e->n;
    }
    if (uni_class(cp) & UNI_MN) return 0;
    out[0] = cp;
    return 1;
}
