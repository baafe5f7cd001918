/* wordpiece.c: BERT's tokenizer: text cleaning, CJK and punctuation splitting, (un)cased
 * normalisation, greedy WordPiece, [CLS]/[SEP] encoding. */
#include "data/wordpiece.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/token_ids.h"
#include "data/unicode.h"
#include "../core/files.h"

#define MAX_WORD_CHARS 100 /* longer words become [UNK] (max_input_chars_per_word) */

/* The special tokens matched literally in raw text, before any normalisation (as Hugging Face
 * matches its added special tokens). */
static const char *const SPECIALS[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
enum { N_SPECIALS = 5 };

struct wordpiece {
    char *pool;      /* every token, NUL-terminated, in id order */
    size_t *offsets; /* (n_tokens,) start of each token in pool */
    uint32_t *lens;  /* (n_tokens,) byte length of each token */
    int n_tokens;
    int32_t *slots; /* (n_slots,) open-addressing hash table of ids, -1 when empty */
    size_t n_slots; /* a power of two, at least twice n_tokens */
    size_t max_token_bytes;
    bool lowercase;
    int64_t special_ids[N_SPECIALS]; /* -1 where the vocabulary lacks it */
    int64_t unk, cls, sep, pad;
};

/* A growing array of code points or ids. */
typedef struct u32vec {
    uint32_t *v;
    size_t n, cap;
} u32vec;

static int u32_push(u32vec *a, uint32_t x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        uint32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v) return -1;
        a->v = v, a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

int token_ids_push(int64_t **ids, size_t *n, size_t *cap, int64_t id) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        int64_t *v = realloc(*ids, c * sizeof *v);
        if (!v) return -1;
        *ids = v, *cap = c;
    }
    (*ids)[(*n)++] = id;
    return 0;
}

/* FNV-1a over an optional "##" prefix and then s[0..len). */
static uint64_t hash_bytes(bool prefix, const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull;
    if (prefix) {
        h = (h ^ '#') * 1099511628211ull;
        h = (h ^ '#') * 1099511628211ull;
    }
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int64_t lookup(const wordpiece *wp, bool prefix, const char *s, size_t len) {
    size_t full = len + (prefix ? 2 : 0);
    if (full > wp->max_token_bytes) return -1;
    size_t mask = wp->n_slots - 1;
    for (size_t i = hash_bytes(prefix, s, len) & mask;; i = (i + 1) & mask) {
        int32_t id = wp->slots[i];
        if (id < 0) return -1;
        const char *t = wp->pool + wp->offsets[id];
        if (wp->lens[id] == full && (!prefix || (t[0] == '#' && t[1] == '#')) &&
            memcmp(t + (prefix ? 2 : 0), s, len) == 0)
            return id;
    }
}

int64_t wordpiece_token_id(const wordpiece *wp, const char *token, size_t len) {
    return lookup(wp, false, token, len);
}

int wordpiece_vocab_size(const wordpiece *wp) {
    return wp->n_tokens;
}

const char *wordpiece_token(const wordpiece *wp, int64_t id) {
    return id >= 0 && id < wp->n_tokens ? wp->pool + wp->offsets[id] : NULL;
}

int64_t wordpiece_pad_id(const wordpiece *wp) {
    return wp->pad;
}

void wordpiece_free(wordpiece *wp) {
    if (!wp) return;
    free(wp->pool);
    free(wp->offsets);
    free(wp->lens);
    free(wp->slots);
    free(wp);
}

graft_status tokenizer_read_file(const char *path, const char *what, char **out, size_t *size,
                                 graft_err *e) {
    const char *why = NULL;
    int too_big = 0;
    if (file_read_all(path, TOKENIZER_MAX_FILE_BYTES, out, size, &why, &too_big) == 0)
        return GRAFT_OK;
    if (too_big)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "%s: the %s is over graft's limit of %u bytes for a tokenizer file", path,
                       what, (unsigned)TOKENIZER_MAX_FILE_BYTES);
    return err_set(e, strcmp(why, "out of memory") ? GRAFT_E_IO : GRAFT_E_OUT_OF_MEMORY,
                   "%s: cannot open %s: %s", path, what, why);
}

/* Split the file into lines in place (the pool) and index them; a later duplicate wins. */
static graft_status index_vocab(wordpiece *wp, size_t size, const char *path, graft_err *e) {
    size_t n = 0;
    for (size_t i = 0; i < size; i++) n += wp->pool[i] == '\n';
    if (size > 0 && wp->pool[size - 1] != '\n') n++;
    if (n == 0 || n > INT32_MAX / 4)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "%s: vocabulary is empty or too large", path);
    wp->offsets = malloc(n * sizeof *wp->offsets);
    wp->lens = malloc(n * sizeof *wp->lens);
    for (wp->n_slots = 16; wp->n_slots < 2 * n;) wp->n_slots *= 2;
    wp->slots = malloc(wp->n_slots * sizeof *wp->slots);
    if (!wp->offsets || !wp->lens || !wp->slots)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "%s: out of memory indexing vocabulary", path);
    memset(wp->slots, 0xff, wp->n_slots * sizeof *wp->slots);
    size_t start = 0;
    for (size_t id = 0; id < n; id++) {
        size_t end = start;
        while (end < size && wp->pool[end] != '\n') end++;
        size_t next = end + 1, len = end - start;
        while (len > 0 && wp->pool[start + len - 1] == '\r') len--;
        wp->pool[start + len] = 0;
        wp->offsets[id] = start, wp->lens[id] = (uint32_t)len;
        if (len > wp->max_token_bytes) wp->max_token_bytes = len;
        size_t mask = wp->n_slots - 1, i = hash_bytes(false, wp->pool + start, len) & mask;
        for (; wp->slots[i] >= 0; i = (i + 1) & mask) {
            int32_t o = wp->slots[i];
            if (wp->lens[o] == len && memcmp(wp->pool + wp->offsets[o], wp->pool + start, len) == 0)
                break;
        }
        wp->slots[i] = (int32_t)id;
        start = next;
    }
    wp->n_tokens = (int)n;
    return GRAFT_OK;
}

/* Index wp->pool (size bytes, the vocabulary file's text; wp owns it) and find the special
 * tokens; frees wp on failure. name is the vocabulary's name in messages. */
static graft_status finish_load(wordpiece **out, wordpiece *wp, size_t size, const char *name,
                                bool lowercase, graft_err *e) {
    graft_status st = index_vocab(wp, size, name, e);
    if (st != GRAFT_OK) {
        wordpiece_free(wp);
        return st;
    }
    wp->lowercase = lowercase;
    for (int k = 0; k < N_SPECIALS; k++)
        wp->special_ids[k] = lookup(wp, false, SPECIALS[k], strlen(SPECIALS[k]));
    wp->pad = wp->special_ids[0], wp->unk = wp->special_ids[1];
    wp->cls = wp->special_ids[2], wp->sep = wp->special_ids[3];
    for (int k = 0; k < 4; k++) {
        if (wp->special_ids[k] < 0) {
            err_set(e, GRAFT_E_INVALID_ARGUMENT, "%s: vocabulary has no %s token", name,
                    SPECIALS[k]);
            wordpiece_free(wp);
            return GRAFT_E_INVALID_ARGUMENT;
        }
    }
    *out = wp;
    return GRAFT_OK;
}

graft_status wordpiece_load(wordpiece **out, const char *vocab_path, bool lowercase, graft_err *e) {
    *out = NULL;
    wordpiece *wp = calloc(1, sizeof *wp);
    if (!wp) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "%s: out of memory", vocab_path);
    size_t size = 0;
    graft_status st = tokenizer_read_file(vocab_path, "vocabulary", &wp->pool, &size, e);
    if (st != GRAFT_OK) {
        wordpiece_free(wp);
        return st;
    }
    return finish_load(out, wp, size, vocab_path, lowercase, e);
}

graft_status wordpiece_load_memory(wordpiece **out, const char *data, size_t size, const char *name,
                                   bool lowercase, graft_err *e) {
    *out = NULL;
    wordpiece *wp = calloc(1, sizeof *wp);
    if (wp) wp->pool = malloc(size + 1);
    if (!wp || !wp->pool) {
        wordpiece_free(wp);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "%s: out of memory", name);
    }
    memcpy(wp->pool, data, size);
    wp->pool[size] = 0;
    return finish_load(out, wp, size, name, lowercase, e);
}

/* Append cp to norm after BERT's normalisation: cleaning, CJK spacing, accent stripping and
 * lower-casing (the last two only for uncased vocabularies). */
static int normalize_cp(const wordpiece *wp, uint32_t cp, u32vec *norm) {
    uint32_t k = uni_class(cp);
    if (cp == 0 || cp == 0xFFFD || ((k & UNI_CONTROL) && cp != '\t' && cp != '\n' && cp != '\r'))
        return 0;
    if (k & UNI_SPACE) return u32_push(norm, ' ');
    bool cjk = (k & UNI_CJK) != 0;
    if (cjk && u32_push(norm, ' ')) return -1;
    if (!wp->lowercase) {
        if (u32_push(norm, cp)) return -1;
    } else {
        uint32_t stripped[3], low[2];
        int ns = uni_strip_accents(cp, stripped);
        for (int i = 0; i < ns; i++) {
            int nl = uni_lower(stripped[i], low);
            for (int j = 0; j < nl; j++)
                if (u32_push(norm, low[j])) return -1;
        }
    }
    return cjk ? u32_push(norm, ' ') : 0;
}

/* Greedy longest-match-first WordPiece of one word (w[0..m) code points), appending ids. */
static int wordpiece_word(const wordpiece *wp, const uint32_t *w, size_t m, char *bytes, size_t *bo,
                          int64_t **ids, size_t *n, size_t *cap) {
    if (m > MAX_WORD_CHARS) return token_ids_push(ids, n, cap, wp->unk);
    bo[0] = 0;
    for (size_t i = 0; i < m; i++) bo[i + 1] = bo[i] + (size_t)utf8_encode(w[i], bytes + bo[i]);
    size_t first = *n, start = 0;
    while (start < m) {
        size_t end = m;
        int64_t id = -1;
        for (; end > start; end--) {
            id = lookup(wp, start > 0, bytes + bo[start], bo[end] - bo[start]);
            if (id >= 0) break;
        }
        if (id < 0) {
            *n = first;
            return token_ids_push(ids, n, cap, wp->unk);
        }
        if (token_ids_push(ids, n, cap, id)) return -1;
        start = end;
    }
    return 0;
}

/* Normalise, split and WordPiece one stretch of text free of special tokens. */
static int tokenize_segment(const wordpiece *wp, const uint32_t *cps, size_t count, u32vec *norm,
                            int64_t **ids, size_t *n, size_t *cap) {
    norm->n = 0;
    for (size_t i = 0; i < count; i++)
        if (normalize_cp(wp, cps[i], norm)) return -1;
    char bytes[4 * MAX_WORD_CHARS + 8];
    size_t bo[MAX_WORD_CHARS + 1];
    size_t i = 0;
    while (i < norm->n) {
        uint32_t k = uni_class(norm->v[i]);
        if (k & UNI_SPACE) {
            i++;
            continue;
        }
        size_t j = i + 1;
        if (!(k & UNI_PUNCT))
            while (j < norm->n && !(uni_class(norm->v[j]) & (UNI_SPACE | UNI_PUNCT))) j++;
        if (wordpiece_word(wp, norm->v + i, j - i, bytes, bo, ids, n, cap)) return -1;
        i = j;
    }
    return 0;
}

/* The special token that starts at cps[i], or -1. */
static int special_at(const wordpiece *wp, const uint32_t *cps, size_t count, size_t i) {
    if (cps[i] != '[') return -1;
    for (int k = 0; k < N_SPECIALS; k++) {
        size_t len = strlen(SPECIALS[k]);
        if (wp->special_ids[k] < 0 || i + len > count) continue;
        size_t j = 0;
        while (j < len && cps[i + j] == (uint32_t)(unsigned char)SPECIALS[k][j]) j++;
        if (j == len) return k;
    }
    return -1;
}

graft_status wordpiece_tokenize(const wordpiece *wp, const char *text, size_t len, int64_t **ids,
                                size_t *n, size_t *cap, graft_err *e) {
    u32vec cps = {0}, norm = {0};
    graft_status st = GRAFT_OK;
    *n = 0;
    for (size_t pos = 0; pos < len;) {
        uint32_t cp;
        size_t at = pos;
        if (utf8_decode(text, len, &pos, &cp)) {
            st = err_set(e, GRAFT_E_INVALID_ARGUMENT, "invalid UTF-8 at byte offset %zu", at);
            goto done;
        }
        if (u32_push(&cps, cp)) goto oom;
    }
    size_t seg = 0;
    for (size_t i = 0; i <= cps.n; i++) {
        int k = i < cps.n ? special_at(wp, cps.v, cps.n, i) : -1;
        if (k < 0 && i < cps.n) continue;
        /* An empty stretch is skipped: cps.v is NULL for an empty text. */
        if (i > seg && tokenize_segment(wp, cps.v + seg, i - seg, &norm, ids, n, cap)) goto oom;
        if (k >= 0) {
            if (token_ids_push(ids, n, cap, wp->special_ids[k])) goto oom;
            i += strlen(SPECIALS[k]) - 1;
            seg = i + 1;
        }
    }
    goto done;
oom:
    st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory tokenizing %zu bytes", len);
done:
    free(cps.v);
    free(norm.v);
    return st;
}

/* Lengths after 'longest_first' truncation of a pair to `room` tokens (the tokenizers package's
 * rule: the shorter keeps its length when the longer alone can absorb the cut; otherwise each
 * gets room/2 and the longer, or the second on a tie, the odd token). */
void tokens_truncate_pair(size_t *na, size_t *nb, size_t room) {
    if (*na + *nb <= room) return;
    bool swap = *na > *nb;
    size_t n1 = swap ? *nb : *na, n2 = swap ? *na : *nb;
    n2 = n1 > room ? n1 : (n1 > room - n1 ? n1 : room - n1);
    if (n1 + n2 > room) n1 = room / 2, n2 = n1 + room % 2;
    size_t ta = swap ? n2 : n1, tb = swap ? n1 : n2;
    if (ta < *na) *na = ta;
    if (tb < *nb) *nb = tb;
}

static graft_status tokenize_str(const wordpiece *wp, const char *s, int64_t **ids, size_t *n,
                                 size_t *cap, const char *which, graft_err *e) {
    graft_status st = wordpiece_tokenize(wp, s, strlen(s), ids, n, cap, e);
    if (st != GRAFT_OK) err_prefix(e, "%s text", which);
    return st;
}

graft_status wordpiece_encode(const wordpiece *wp, const char *a, const char *b, int max_len,
                              bool pad, int64_t *input_ids, int64_t *type_ids, int64_t *mask,
                              size_t cap, size_t *out_len, graft_err *e) {
    if (b && !*b) b = NULL; /* Hugging Face encodes an empty second text as no pair */
    size_t specials = b ? 3 : 2;
    if (max_len < 0 || (max_len > 0 && (size_t)max_len < specials) || (pad && max_len == 0))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "max_len %d leaves no room for the %zu special tokens%s", max_len, specials,
                       pad && max_len == 0 ? " (padding needs max_len > 0)" : "");
    int64_t *ia = NULL, *ib = NULL;
    size_t na = 0, nb = 0, ca = 0, cb = 0;
    graft_status st = tokenize_str(wp, a, &ia, &na, &ca, "first", e);
    if (st == GRAFT_OK && b) st = tokenize_str(wp, b, &ib, &nb, &cb, "second", e);
    if (st == GRAFT_OK && max_len > 0) {
        size_t room = (size_t)max_len - specials;
        if (b)
            tokens_truncate_pair(&na, &nb, room);
        else if (na > room)
            na = room;
    }
    size_t total = na + nb + specials, padded = pad ? (size_t)max_len : total;
    if (st == GRAFT_OK && padded > cap)
        st = err_set(e, GRAFT_E_INVALID_ARGUMENT,
                     "encoding of %zu tokens exceeds the buffer of %zu", padded, cap);
    if (st == GRAFT_OK) {
        size_t p = 0;
        input_ids[p++] = wp->cls;
        for (size_t i = 0; i < na; i++) input_ids[p++] = ia[i];
        input_ids[p++] = wp->sep;
        size_t first_len = p;
        for (size_t i = 0; i < nb; i++) input_ids[p++] = ib[i];
        if (b) input_ids[p++] = wp->sep;
        for (size_t i = 0; i < padded; i++) {
            if (i >= total) input_ids[i] = wp->pad;
            if (type_ids) type_ids[i] = i >= first_len && i < total;
            if (mask) mask[i] = i < total;
        }
        *out_len = total;
    }
    free(ia);
    free(ib);
    return st;
}
