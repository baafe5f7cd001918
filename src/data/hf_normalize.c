/* hf_normalize.c: tokenizer.json normalizers: BertNormalizer, Lowercase, NFC/NFD/NFKC/NFKD,
 * Strip, StripAccents, Replace, Prepend, ByteLevel and SentencePiece's Precompiled charsmap. */
#include <stdlib.h>
#include <string.h>

#include "data/hf_tokenizer.h"
#include "data/unicode.h"

/* Decode the next code point of s[*pos..n); the pipeline checked the text's UTF-8 up front, and
 * a normalizer's output is valid UTF-8 too (a bad byte is passed through as U+FFFD). */
static uint32_t next_cp(const char *s, size_t n, size_t *pos) {
    uint32_t cp;
    if (utf8_decode(s, n, pos, &cp)) {
        (*pos)++;
        return 0xFFFD;
    }
    return cp;
}

static int bert(const hf_normalizer *z, const char *s, size_t n, hf_buf *out) {
    for (size_t pos = 0; pos < n;) {
        uint32_t cp = next_cp(s, n, &pos), k = uni_class(cp);
        if (z->clean_text) {
            if (cp == 0 || cp == 0xFFFD ||
                ((k & UNI_CONTROL) && cp != '\t' && cp != '\n' && cp != '\r'))
                continue;
            if (k & UNI_SPACE) cp = ' ';
        }
        bool cjk = z->chinese && (k & UNI_CJK);
        if (cjk && hf_buf_cp(out, ' ')) return -1;
        uint32_t stripped[3], low[2];
        int ns = 1;
        stripped[0] = cp;
        if (z->strip_accents) ns = uni_strip_accents(cp, stripped);
        for (int i = 0; i < ns; i++) {
            int nl = 1;
            low[0] = stripped[i];
            if (z->lowercase) nl = uni_lower(stripped[i], low);
            for (int j = 0; j < nl; j++)
                if (hf_buf_cp(out, low[j])) return -1;
        }
        if (cjk && hf_buf_cp(out, ' ')) return -1;
    }
    return 0;
}

static int lowercase(const char *s, size_t n, hf_buf *out) {
    for (size_t pos = 0; pos < n;) {
        uint32_t low[2];
        int nl = uni_lower(next_cp(s, n, &pos), low);
        for (int j = 0; j < nl; j++)
            if (hf_buf_cp(out, low[j])) return -1;
    }
    return 0;
}

static bool strip_cp(const hf_normalizer *z, uint32_t cp) {
    return z->spaces_only ? cp == ' ' : hfu_is_whitespace(cp);
}

static int strip(const hf_normalizer *z, const char *s, size_t n, hf_buf *out) {
    size_t a = 0, b = n;
    if (z->left)
        for (size_t pos = 0; pos < n; a = pos)
            if (!strip_cp(z, next_cp(s, n, &pos))) break;
    if (z->right && b > a) {
        size_t end = a; /* the end of the last non-space character */
        for (size_t pos = a; pos < n;)
            if (!strip_cp(z, next_cp(s, n, &pos))) end = pos;
        b = end;
    }
    return hf_buf_put(out, s + a, b - a);
}

static int strip_accents(const char *s, size_t n, hf_buf *out) {
    for (size_t pos = 0; pos < n;) {
        size_t at = pos;
        uint32_t cp = next_cp(s, n, &pos);
        if (!hfu_is_mark(cp) && hf_buf_put(out, s + at, pos - at)) return -1;
    }
    return 0;
}

typedef struct replace_ctx {
    const hf_normalizer *z;
    const char *s;
    hf_buf *out;
    size_t done; /* bytes of s copied or replaced so far */
} replace_ctx;

static int on_replace(void *ctx, size_t start, size_t end) {
    replace_ctx *r = ctx;
    if (hf_buf_put(r->out, r->s + r->done, start - r->done) ||
        hf_buf_put(r->out, r->z->content, r->z->content_len))
        return -1;
    r->done = end;
    return 0;
}

static int replace(const hf_normalizer *z, const char *s, size_t n, hf_buf *out) {
    replace_ctx r = {z, s, out, 0};
    if (hf_pattern_find(&z->pattern, s, n, on_replace, &r)) return -1;
    return hf_buf_put(out, s + r.done, n - r.done);
}

/* Units of the darts-clone double array in SentencePiece's charsmap. */
static uint32_t unit_offset(uint32_t u) {
    return (u >> 10) << ((u & (1u << 9)) >> 6);
}

/* The replacement of the shortest key that prefixes s[0..n) (as the tokenizers package takes the
 * first of the common-prefix search's results), or with longest of the longest (SentencePiece's
 * own rule), or NULL; *klen gets the key's length. */
static const char *charsmap_find(const hf_normalizer *z, const char *s, size_t n, bool longest,
                                 size_t *len, size_t *klen) {
    size_t node = 0;
    const char *found = NULL;
    if (z->trie_n == 0) return NULL;
    node ^= unit_offset(z->trie[0]);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0) break;
        node ^= c;
        if (node >= z->trie_n) break;
        uint32_t u = z->trie[node];
        if ((u & ((1u << 31) | 0xFF)) != c) break;
        node ^= unit_offset(u);
        if (node >= z->trie_n) break;
        if ((u >> 8) & 1) {
            size_t at = z->trie[node] & ((1u << 31) - 1);
            if (at > z->normalized_n) break;
            found = z->normalized + at;
            *len = strnlen(found, z->normalized_n - at), *klen = i + 1;
            if (!longest) break;
        }
    }
    return found;
}

static const char *charsmap_lookup(const hf_normalizer *z, const char *s, size_t n, size_t *len) {
    size_t klen;
    return charsmap_find(z, s, n, false, len, &klen);
}

/* SentencePiece's walk: the longest key at each position, else one character as it is. */
static graft_status precompiled_longest(const hf_normalizer *z, const char *s, size_t n,
                                        hf_buf *out, graft_err *e) {
    int bad = 0;
    for (size_t pos = 0; pos < n && !bad;) {
        size_t len, klen, at = pos;
        const char *r = charsmap_find(z, s + pos, n - pos, true, &len, &klen);
        if (r) {
            bad = hf_buf_put(out, r, len);
            pos += klen;
            continue;
        }
        next_cp(s, n, &pos);
        bad = hf_buf_put(out, s + at, pos - at);
    }
    return bad ? err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory normalizing") : GRAFT_OK;
}

/* Grapheme by grapheme: a cluster under 6 bytes whose bytes start with a key is replaced whole;
 * otherwise each character is looked up alone (as the tokenizers package does). */
static graft_status precompiled(const hf_normalizer *z, const char *s, size_t n, hf_buf *out,
                                graft_err *e) {
    if (z->longest) return precompiled_longest(z, s, n, out, e);
    size_t *b, nb;
    TRY(hfu_graphemes(s, n, &b, &nb, e));
    int bad = 0;
    for (size_t g = 0; g + 1 < nb && !bad; g++) {
        size_t a = b[g], z_end = b[g + 1], len;
        const char *r = z_end - a < 6 ? charsmap_lookup(z, s + a, z_end - a, &len) : NULL;
        if (r) {
            bad = hf_buf_put(out, r, len);
            continue;
        }
        for (size_t pos = a; pos < z_end && !bad;) {
            size_t at = pos;
            next_cp(s, z_end, &pos);
            r = charsmap_lookup(z, s + at, pos - at, &len);
            bad = r ? hf_buf_put(out, r, len) : hf_buf_put(out, s + at, pos - at);
        }
    }
    free(b);
    return bad ? err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory normalizing") : GRAFT_OK;
}

/* GPT-2's bytes-to-characters table: printable Latin-1 bytes stand for themselves, the others
 * for 256 + their rank among them. */
uint32_t hf_byte_char(unsigned char c);
uint32_t hf_byte_char(unsigned char c) {
    if ((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE) return c;
    uint32_t rank = 0;
    for (unsigned k = 0; k < c; k++)
        if (!((k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || k >= 0xAE)) rank++;
    return 256 + rank;
}

static int byte_level(const char *s, size_t n, hf_buf *out) {
    for (size_t i = 0; i < n; i++)
        if (hf_buf_cp(out, hf_byte_char((unsigned char)s[i]))) return -1;
    return 0;
}

static graft_status apply(const hf_normalizer *z, const char *s, size_t n, hf_buf *out,
                          graft_err *e) {
    static const char *const forms[] = {"C", "D", "KC", "KD"};
    int bad = 0;
    out->n = 0;
    if (hf_buf_put(out, NULL, 0)) bad = 1;
    switch (z->kind) {
    case HF_NORM_BERT:
        bad = bad || bert(z, s, n, out);
        break;
    case HF_NORM_LOWERCASE:
        bad = bad || lowercase(s, n, out);
        break;
    case HF_NORM_NFC:
    case HF_NORM_NFD:
    case HF_NORM_NFKC:
    case HF_NORM_NFKD:
        return hfu_normalize(forms[z->kind - HF_NORM_NFC], s, n, out, e);
    case HF_NORM_STRIP:
        bad = bad || strip(z, s, n, out);
        break;
    case HF_NORM_STRIP_ACCENTS:
        bad = bad || strip_accents(s, n, out);
        break;
    case HF_NORM_REPLACE:
        bad = bad || replace(z, s, n, out);
        break;
    case HF_NORM_PREPEND:
        bad = bad || (n && hf_buf_put(out, z->content, z->content_len)) || hf_buf_put(out, s, n);
        break;
    case HF_NORM_PRECOMPILED:
        return bad ? GRAFT_E_OUT_OF_MEMORY : precompiled(z, s, n, out, e);
    case HF_NORM_BYTE_LEVEL:
        bad = bad || byte_level(s, n, out);
        break;
    }
    return bad ? err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory normalizing") : GRAFT_OK;
}

graft_status hf_normalize(const hf_tokenizer *t, const char *s, size_t n, hf_buf *out,
                          graft_err *e) {
    hf_buf tmp = {0};
    out->n = 0;
    graft_status st = hf_buf_put(out, s, n) ? GRAFT_E_OUT_OF_MEMORY : GRAFT_OK;
    for (size_t k = 0; k < t->n_norms && st == GRAFT_OK; k++) {
        st = apply(&t->norms[k], out->s, out->n, &tmp, e);
        hf_buf swap = *out;
        *out = tmp, tmp = swap;
    }
    hf_buf_free(&tmp);
    if (st == GRAFT_E_OUT_OF_MEMORY) err_set(e, st, "out of memory normalizing");
    return st;
}
