/* hf_encode.c: the tokenizer.json pipeline on a text: added tokens matched (raw, then normalized),
 * normalizer, pre-tokenizer and model on the rest; then truncation, the post-processor's special
 * tokens and padding. */
#include <stdlib.h>
#include <string.h>

#include "data/token_ids.h"
#include "data/hf_tokenizer.h"
#include "data/unicode.h"
#include "data/wordpiece.h"

static bool word_before(const char *s, size_t at) { /* \w$ on s[0..at) */
    if (at == 0) return false;
    size_t i = at - 1, pos;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    uint32_t cp;
    pos = i;
    return utf8_decode(s, at, &pos, &cp) == 0 && hfu_is_word(cp);
}

static bool word_after(const char *s, size_t n, size_t at) { /* ^\w on s[at..n) */
    uint32_t cp;
    return at < n && utf8_decode(s, n, &at, &cp) == 0 && hfu_is_word(cp);
}

/* The start of the whitespace run that ends at `at` (lstrip). */
static size_t space_run_before(const char *s, size_t at) {
    while (at > 0) {
        size_t i = at - 1, pos;
        while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
        uint32_t cp;
        pos = i;
        if (utf8_decode(s, at, &pos, &cp) || !hfu_is_whitespace(cp)) break;
        at = i;
    }
    return at;
}

static size_t space_run_after(const char *s, size_t n, size_t at) { /* rstrip */
    while (at < n) {
        size_t pos = at;
        uint32_t cp;
        if (utf8_decode(s, n, &pos, &cp) || !hfu_is_whitespace(cp)) break;
        at = pos;
    }
    return at;
}

/* The added token (of those with normalized == which) that starts at s[i] and is longest. */
static const hf_added *added_at(const hf_tokenizer *t, bool which, const char *s, size_t n,
                                size_t i) {
    const hf_added *best = NULL;
    for (size_t k = 0; k < t->n_added; k++) {
        const hf_added *a = &t->added[k];
        if (a->normalized != which || a->len == 0 || a->len > n - i ||
            (best && a->len <= best->len))
            continue;
        if (memcmp(s + i, a->content, a->len) == 0) best = a;
    }
    return best;
}

typedef struct segment_ctx {
    const hf_tokenizer *t;
    int64_t **ids;
    size_t *n, *cap;
    hf_words words;
} segment_ctx;

static graft_status push(segment_ctx *c, int64_t id, graft_err *e) {
    return token_ids_push(c->ids, c->n, c->cap, id)
               ? err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory tokenizing")
               : GRAFT_OK;
}

static graft_status text_segment(segment_ctx *c, const char *s, size_t n, bool at_start,
                                 bool normalized, graft_err *e);

/* Split s[0..n) at the added tokens of one kind (leftmost-longest, with their lstrip, rstrip and
 * single_word rules); the stretches between go on to text_segment. */
static graft_status split_added(segment_ctx *c, const char *s, size_t n, bool at_start,
                                bool normalized, graft_err *e) {
    size_t done = 0; /* bytes of s handled */
    for (size_t i = 0; i < n;) {
        const hf_added *a = added_at(c->t, normalized, s, n, i);
        if (!a) {
            i++;
            continue;
        }
        size_t start = i, stop = i + a->len;
        i = stop;
        if (a->single_word && (word_before(s, start) || word_after(s, n, stop))) continue;
        if (a->lstrip) {
            start = space_run_before(s, start);
            if (start < done) start = done;
        }
        if (a->rstrip) stop = space_run_after(s, n, stop);
        if (start > done)
            TRY(text_segment(c, s + done, start - done, at_start && done == 0, normalized, e));
        TRY(push(c, a->id, e));
        done = i = stop;
    }
    return done < n ? text_segment(c, s + done, n - done, at_start && done == 0, normalized, e)
                    : GRAFT_OK;
}

/* A stretch free of added tokens: raw text is normalized and searched for the normalized added
 * tokens; normalized text is pre-tokenized and each word goes through the model. */
static graft_status text_segment(segment_ctx *c, const char *s, size_t n, bool at_start,
                                 bool normalized, graft_err *e) {
    if (!normalized) {
        hf_buf norm = {0};
        graft_status st = hf_normalize(c->t, s, n, &norm, e);
        if (st == GRAFT_OK) st = split_added(c, norm.s, norm.n, at_start, true, e);
        hf_buf_free(&norm);
        return st;
    }
    TRY(hf_pretokenize(c->t, s, n, at_start, &c->words, e));
    for (size_t w = 0; w < c->words.n; w++)
        TRY(hf_model_word(&c->t->model, c->words.text.s + c->words.start[w],
                          c->words.end[w] - c->words.start[w], c->ids, c->n, c->cap, e));
    return GRAFT_OK;
}

graft_status hf_tokenize(const hf_tokenizer *t, const char *text, size_t len, int64_t **ids,
                         size_t *n, size_t *cap, graft_err *e) {
    *n = 0;
    for (size_t pos = 0; pos < len;) {
        uint32_t cp;
        size_t at = pos;
        if (utf8_decode(text, len, &pos, &cp))
            return err_set(e, GRAFT_E_INVALID_ARGUMENT, "invalid UTF-8 at byte offset %zu", at);
    }
    segment_ctx c = {.t = t, .ids = ids, .n = n, .cap = cap};
    graft_status st = split_added(&c, text, len, true, false, e);
    hf_words_free(&c.words);
    return st;
}

int64_t hf_token_id(const hf_tokenizer *t, const char *token, size_t len) {
    for (size_t k = 0; k < t->n_added; k++) /* added tokens as written, not as matched */
        if (t->id_tokens && t->added[k].id < t->n_ids) {
            const char *w = t->id_tokens[t->added[k].id];
            if (w && strlen(w) == len && memcmp(w, token, len) == 0) return t->added[k].id;
        }
    return str_map_get(&t->model.vocab, token, len);
}

static size_t template_specials(const hf_template *tp) {
    size_t k = 0;
    for (size_t i = 0; i < tp->n; i++)
        if (tp->pieces[i].seq < 0) k += tp->pieces[i].n_ids;
    return k;
}

static graft_status tokenize_str(const hf_tokenizer *t, const char *s, int64_t **ids, size_t *n,
                                 size_t *cap, const char *which, graft_err *e) {
    graft_status st = hf_tokenize(t, s, strlen(s), ids, n, cap, e);
    if (st != GRAFT_OK) err_prefix(e, "%s text", which);
    return st;
}

/* Lay out the template (or, without a post-processor, a then b) into the caller's buffers. */
static size_t assemble(const hf_tokenizer *t, const hf_template *tp, const int64_t *ia, size_t na,
                       const int64_t *ib, size_t nb, bool pair, int64_t *out, int64_t *types) {
    size_t p = 0;
    if (tp->n == 0) {
        for (size_t i = 0; i < na; i++) out[p] = ia[i], types[p++] = 0;
        for (size_t i = 0; pair && i < nb; i++) out[p] = ib[i], types[p++] = 1;
        return p;
    }
    for (size_t k = 0; k < tp->n; k++) {
        const hf_piece *pc = &tp->pieces[k];
        const int64_t *src = pc->seq < 0 ? pc->ids : pc->seq == 0 ? ia : ib;
        size_t cnt = pc->seq < 0 ? pc->n_ids : pc->seq == 0 ? na : nb;
        for (size_t i = 0; i < cnt; i++)
            out[p] = src[i], types[p++] = t->roberta_types ? 0 : pc->type_id;
    }
    return p;
}

graft_status hf_encode(const hf_tokenizer *t, const char *a, const char *b, int max_len, bool pad,
                       int64_t *input_ids, int64_t *type_ids, int64_t *mask, size_t cap,
                       size_t *out_len, graft_err *e) {
    if (b && !*b) b = NULL; /* an empty second text counts as no pair, as for WordPiece */
    const hf_template *tp = b ? &t->pair : &t->single;
    size_t specials = template_specials(tp);
    if (max_len < 0 || (max_len > 0 && (size_t)max_len < specials) || (pad && max_len == 0))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "max_len %d leaves no room for the %zu special tokens%s", max_len, specials,
                       pad && max_len == 0 ? " (padding needs max_len > 0)" : "");
    if (pad && t->pad < 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "%s: padding needs a padding token, and the tokenizer has none", t->name);
    int64_t *ia = NULL, *ib = NULL, *types = NULL;
    size_t na = 0, nb = 0, ca = 0, cb = 0;
    graft_status st = tokenize_str(t, a, &ia, &na, &ca, "first", e);
    if (st == GRAFT_OK && b) st = tokenize_str(t, b, &ib, &nb, &cb, "second", e);
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
    if (st == GRAFT_OK && !(types = malloc((total ? total : 1) * sizeof *types)))
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory encoding");
    if (st == GRAFT_OK) {
        size_t p = assemble(t, tp, ia, na, ib, nb, b != NULL, input_ids, types);
        for (size_t i = 0; i < padded; i++) {
            if (i >= p) input_ids[i] = t->pad;
            if (type_ids) type_ids[i] = i < p ? types[i] : 0;
            if (mask) mask[i] = i < p;
        }
        *out_len = p;
    }
    free(types);
    free(ia);
    free(ib);
    return st;
}
