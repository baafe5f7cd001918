/* hf_tokenizer.h: Hugging Face tokenizer.json pipelines (normalizers, pre-tokenizers, WordPiece /
 * BPE / Unigram / WordLevel models, post-processors, added tokens), ids equal to the tokenizers
 * package's. Internal to src/data; the public face is graft_tokenizer. */
#ifndef GRAFT_DATA_HF_TOKENIZER_H
#define GRAFT_DATA_HF_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/str_map.h"

/* A growing byte string (always NUL-terminated when s is not NULL). */
typedef struct hf_buf {
    char *s;
    size_t n, cap;
} hf_buf;
int hf_buf_put(hf_buf *b, const char *s, size_t n); /* 0, or -1 out of memory */
int hf_buf_cp(hf_buf *b, uint32_t cp);
void hf_buf_free(hf_buf *b);

typedef enum hf_norm_kind {
    HF_NORM_BERT,
    HF_NORM_LOWERCASE,
    HF_NORM_NFC,
    HF_NORM_NFD,
    HF_NORM_NFKC,
    HF_NORM_NFKD,
    HF_NORM_STRIP,
    HF_NORM_STRIP_ACCENTS,
    HF_NORM_REPLACE,
    HF_NORM_PREPEND,
    HF_NORM_PRECOMPILED,
    HF_NORM_BYTE_LEVEL,
} hf_norm_kind;

/* Regular expressions are not interpreted in general: the patterns the families' files use are
 * recognised exactly and run by hand-written matchers (hf_pattern_*). */
typedef enum hf_pattern_kind {
    HF_PAT_LITERAL,    /* the bytes of `text` */
    HF_PAT_SPACES2,    /* " {2,}" (SentencePiece converters' Replace) */
    HF_PAT_GPT2,       /* GPT-2's split regex (ByteLevel's) */
    HF_PAT_WHITESPACE, /* \s+ */
    HF_PAT_WORDS,      /* \w+|[^\w\s]+ (the Whitespace pre-tokenizer) */
} hf_pattern_kind;

typedef struct hf_pattern {
    hf_pattern_kind kind;
    char *text; /* HF_PAT_LITERAL */
    size_t len;
} hf_pattern;

typedef struct hf_normalizer {
    hf_norm_kind kind;
    bool clean_text, chinese, strip_accents, lowercase; /* BertNormalizer */
    bool left, right;                                   /* Strip */
    bool spaces_only;   /* Strip: only U+0020 (SentencePiece's remove_extra_whitespaces) */
    hf_pattern pattern; /* Replace */
    char *content;      /* Replace, Prepend */
    size_t content_len;
    uint32_t *trie; /* Precompiled: darts double array units */
    size_t trie_n;
    char *normalized; /* Precompiled: NUL-separated replacement strings */
    size_t normalized_n;
    bool longest; /* Precompiled: SentencePiece's longest-match walk, not grapheme by grapheme */
} hf_normalizer;

typedef enum hf_split_behavior {
    HF_SPLIT_REMOVED,
    HF_SPLIT_ISOLATED,
    HF_SPLIT_MERGED_PREVIOUS,
    HF_SPLIT_MERGED_NEXT,
    HF_SPLIT_CONTIGUOUS,
} hf_split_behavior;

typedef enum hf_pre_kind {
    HF_PRE_BERT,
    HF_PRE_BYTE_LEVEL,
    HF_PRE_METASPACE,
    HF_PRE_WHITESPACE,
    HF_PRE_WHITESPACE_SPLIT,
    HF_PRE_SPLIT,
    HF_PRE_PUNCTUATION,
    HF_PRE_DIGITS,
} hf_pre_kind;

typedef enum hf_prepend_scheme {
    HF_PREPEND_ALWAYS,
    HF_PREPEND_FIRST,
    HF_PREPEND_NEVER
} hf_prepend_scheme;

typedef struct hf_pretok {
    hf_pre_kind kind;
    bool add_prefix_space, use_regex; /* ByteLevel */
    char replacement[8];              /* Metaspace: UTF-8 of the replacement character */
    uint32_t replacement_cp;
    hf_prepend_scheme prepend_scheme; /* Metaspace */
    bool split;                       /* Metaspace */
    hf_pattern pattern;               /* Split */
    hf_split_behavior behavior;       /* Split, Punctuation */
    bool invert;                      /* Split */
    bool individual_digits;           /* Digits */
} hf_pretok;

typedef enum hf_model_kind { HF_WORDPIECE, HF_BPE, HF_UNIGRAM, HF_WORDLEVEL } hf_model_kind;

typedef struct hf_model {
    hf_model_kind kind;
    str_map vocab; /* token -> id */
    int64_t unk;   /* -1: none */
    /* WordPiece */
    char *prefix; /* continuing_subword_prefix (WordPiece, BPE); NULL: none */
    size_t prefix_len;
    int max_chars;
    /* BPE */
    char *suffix; /* end_of_word_suffix; NULL: none */
    size_t suffix_len;
    pair_map merges;
    bool fuse_unk, byte_fallback, ignore_merges;
    /* Unigram */
    double *scores; /* (vocab size,) by id */
    double min_score;
} hf_model;

typedef struct hf_added {
    char *content; /* as matched: the normalized form for normalized tokens */
    size_t len;
    int64_t id;
    bool single_word, lstrip, rstrip, normalized, special;
} hf_added;

/* One element of a TemplateProcessing template (or of Bert/Roberta's fixed ones). */
typedef struct hf_piece {
    int seq; /* 0: $A, 1: $B, -1: special tokens */
    int type_id;
    int64_t *ids; /* the special token's ids */
    size_t n_ids;
} hf_piece;

typedef struct hf_template {
    hf_piece *pieces;
    size_t n;
} hf_template;

typedef struct hf_tokenizer {
    char *name; /* the file, for messages */
    hf_normalizer *norms;
    size_t n_norms;
    hf_pretok *pretoks;
    size_t n_pretoks;
    hf_model model;
    hf_added *added;
    size_t n_added;
    hf_template single, pair;   /* no post-processor: both empty */
    bool roberta_types;         /* RobertaProcessing: every type id 0 */
    int64_t cls, sep, pad, unk; /* -1 where the tokenizer has none */
    char **id_tokens;           /* (n_ids,) the text of each id (model vocab and added tokens) */
    int64_t n_ids;
} hf_tokenizer;

/* Parse a tokenizer.json's text; name stands for it in messages. */
graft_status hf_tokenizer_load(hf_tokenizer **out, const char *json, size_t size, const char *name,
                               graft_err *e);
void hf_tokenizer_free(hf_tokenizer *t);

/* Ids of text[0..len) without post-processing (added tokens, normalizer, pre-tokenizer, model);
 * *ids grows as needed (capacity *cap). */
graft_status hf_tokenize(const hf_tokenizer *t, const char *text, size_t len, int64_t **ids,
                         size_t *n, size_t *cap, graft_err *e);
/* As wordpiece_encode (see wordpiece.h), with the tokenizer's post-processor. */
graft_status hf_encode(const hf_tokenizer *t, const char *a, const char *b, int max_len, bool pad,
                       int64_t *input_ids, int64_t *type_ids, int64_t *mask, size_t cap,
                       size_t *out_len, graft_err *e);
int64_t hf_token_id(const hf_tokenizer *t, const char *token, size_t len);

/* Pipeline stages (hf_normalize.c, hf_pretok.c, hf_models.c). */
graft_status hf_normalize(const hf_tokenizer *t, const char *s, size_t n, hf_buf *out,
                          graft_err *e);
/* A list of words, each a span of one buffer. */
typedef struct hf_words {
    hf_buf text;
    size_t *start, *end;
    bool *first; /* the word begins the text (Metaspace's prepend_scheme "first") */
    size_t n, cap;
} hf_words;
int hf_words_add(hf_words *w, const char *s, size_t n, bool first); /* appends a copy */
void hf_words_free(hf_words *w);
/* Split s[0..n) into words with the pre-tokenizers; at_start: the piece begins the text. */
graft_status hf_pretokenize(const hf_tokenizer *t, const char *s, size_t n, bool at_start,
                            hf_words *out, graft_err *e);
/* Append the ids of one word. */
graft_status hf_model_word(const hf_model *m, const char *w, size_t n, int64_t **ids, size_t *n_ids,
                           size_t *cap, graft_err *e);

/* Matches of a pattern in s[0..n): calls on_match(start, end) left to right. */
int hf_pattern_find(const hf_pattern *p, const char *s, size_t n,
                    int (*on_match)(void *ctx, size_t start, size_t end), void *ctx);

/* Unicode facts (hf_unicode.c, through ICU). */
bool hfu_is_whitespace(uint32_t cp); /* White_Space */
bool hfu_is_letter(uint32_t cp);     /* L* */
bool hfu_is_number(uint32_t cp);     /* N* */
bool hfu_is_punct(uint32_t cp);      /* P* */
bool hfu_is_mark(uint32_t cp);       /* M* */
bool hfu_is_word(uint32_t cp);       /* \w: Alphabetic, M*, Nd, Pc, Join_Control */
/* form: 'C', 'D', 'KC', 'KD' as "C" "D" "KC" "KD". */
graft_status hfu_normalize(const char *form, const char *s, size_t n, hf_buf *out, graft_err *e);
/* Extended grapheme cluster boundaries of s[0..n): *bounds (malloc'd) gets *count offsets,
 * the first 0, the last n. */
graft_status hfu_graphemes(const char *s, size_t n, size_t **bounds, size_t *count, graft_err *e);

#endif
