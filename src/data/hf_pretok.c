/* hf_pretok.c: tokenizer.json pre-tokenizers (BertPreTokenizer, ByteLevel, Metaspace, Whitespace,
 * WhitespaceSplit, Split, Punctuation, Digits) and the patterns they and Replace match. */
#include <stdlib.h>
#include <string.h>

#include "data/hf_tokenizer.h"
#include "data/unicode.h"

uint32_t hf_byte_char(unsigned char c); /* hf_normalize.c */

static uint32_t cp_at(const char *s, size_t n, size_t i, size_t *next) {
    uint32_t cp;
    *next = i;
    if (utf8_decode(s, n, next, &cp)) {
        *next = i + 1;
        return 0xFFFD;
    }
    return cp;
}

/* GPT-2's 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ at i:
 * the end of the match (every position matches). */
static size_t gpt2_match(const char *s, size_t n, size_t i) {
    if (s[i] == '\'' && i + 1 < n) {
        char c = s[i + 1];
        if (c == 's' || c == 't' || c == 'm' || c == 'd') return i + 2;
        if (i + 2 < n && ((c == 'r' && s[i + 2] == 'e') || (c == 'v' && s[i + 2] == 'e') ||
                          (c == 'l' && s[i + 2] == 'l')))
            return i + 3;
    }
    size_t j = i, next;
    if (s[i] == ' ' && i + 1 < n) j = i + 1;
    for (int cls = 0; cls < 3; cls++) { /* letters, numbers, others */
        for (size_t start = j;; start = i) {
            uint32_t cp = cp_at(s, n, start, &next);
            bool ok = cls == 0 ? hfu_is_letter(cp)
                      : cls == 1
                          ? hfu_is_number(cp)
                          : !hfu_is_whitespace(cp) && !hfu_is_letter(cp) && !hfu_is_number(cp);
            if (ok) {
                size_t end = next;
                while (end < n) {
                    cp = cp_at(s, n, end, &next);
                    ok = cls == 0 ? hfu_is_letter(cp)
                         : cls == 1
                             ? hfu_is_number(cp)
                             : !hfu_is_whitespace(cp) && !hfu_is_letter(cp) && !hfu_is_number(cp);
                    if (!ok) break;
                    end = next;
                }
                return end;
            }
            if (start == i) break; /* the optional space not taken: tried both */
        }
    }
    /* whitespace: the run, less its last character when a non-space follows it */
    size_t end = i, last = i;
    while (end < n) {
        uint32_t cp = cp_at(s, n, end, &next);
        if (!hfu_is_whitespace(cp)) break;
        last = end, end = next;
    }
    if (end == i) return cp_at(s, n, i, &next), next; /* not reached: every class is covered */
    if (end < n && last > i) return last;
    return end;
}

int hf_pattern_find(const hf_pattern *p, const char *s, size_t n,
                    int (*on_match)(void *ctx, size_t start, size_t end), void *ctx) {
    size_t i = 0, next;
    while (i < n) {
        size_t end = i;
        switch (p->kind) {
        case HF_PAT_LITERAL:
            if (p->len == 0) return 0;
            if (n - i >= p->len && memcmp(s + i, p->text, p->len) == 0) end = i + p->len;
            break;
        case HF_PAT_SPACES2:
            while (end < n && s[end] == ' ') end++;
            if (end - i < 2) end = i;
            break;
        case HF_PAT_WHITESPACE:
            while (end < n && hfu_is_whitespace(cp_at(s, n, end, &next))) end = next;
            break;
        case HF_PAT_WORDS: {
            uint32_t cp = cp_at(s, n, i, &next);
            int cls = hfu_is_word(cp) ? 1 : hfu_is_whitespace(cp) ? 0 : 2;
            while (cls && end < n) {
                cp = cp_at(s, n, end, &next);
                int k = hfu_is_word(cp) ? 1 : hfu_is_whitespace(cp) ? 0 : 2;
                if (k != cls) break;
                end = next;
            }
            break;
        }
        case HF_PAT_GPT2:
            end = gpt2_match(s, n, i);
            break;
        }
        if (end > i) {
            if (on_match(ctx, i, end)) return -1;
            i = end;
        } else {
            cp_at(s, n, i, &next);
            i = next;
        }
    }
    return 0;
}

int hf_words_add(hf_words *w, const char *s, size_t n, bool first) {
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 32;
        size_t *st = realloc(w->start, cap * sizeof *st);
        if (st) w->start = st;
        size_t *en = realloc(w->end, cap * sizeof *en);
        if (en) w->end = en;
        bool *fi = realloc(w->first, cap * sizeof *fi);
        if (fi) w->first = fi;
        if (!st || !en || !fi) return -1;
        w->cap = cap;
    }
    size_t at = w->text.n;
    if (hf_buf_put(&w->text, s, n)) return -1;
    w->start[w->n] = at, w->end[w->n] = at + n, w->first[w->n] = first;
    w->n++;
    return 0;
}

void hf_words_free(hf_words *w) {
    hf_buf_free(&w->text);
    free(w->start), free(w->end), free(w->first);
    memset(w, 0, sizeof *w);
}

/* Spans of one word, each a match of the pre-tokenizer's pattern or the gap between two. */
typedef struct spans {
    size_t *a, *b;
    bool *m;
    size_t n, cap;
} spans;

static int span_add(spans *sp, size_t a, size_t b, bool m) {
    if (sp->n == sp->cap) {
        size_t cap = sp->cap ? sp->cap * 2 : 32;
        size_t *na = realloc(sp->a, cap * sizeof *na);
        if (na) sp->a = na;
        size_t *nb = realloc(sp->b, cap * sizeof *nb);
        if (nb) sp->b = nb;
        bool *nm = realloc(sp->m, cap * sizeof *nm);
        if (nm) sp->m = nm;
        if (!na || !nb || !nm) return -1;
        sp->cap = cap;
    }
    sp->a[sp->n] = a, sp->b[sp->n] = b, sp->m[sp->n] = m;
    sp->n++;
    return 0;
}

typedef struct span_ctx {
    spans *sp;
    size_t prev;
} span_ctx;

static int on_span(void *ctx, size_t start, size_t end) {
    span_ctx *c = ctx;
    if (c->prev != start && span_add(c->sp, c->prev, start, false)) return -1;
    c->prev = end;
    return span_add(c->sp, start, end, true);
}

typedef enum char_class {
    CC_NONE,
    CC_WHITESPACE,
    CC_BERT_PUNCT,
    CC_PUNCT,
    CC_DIGIT,
    CC_CHAR
} char_class;

static bool in_class(char_class k, uint32_t cp, uint32_t which) {
    switch (k) {
    case CC_WHITESPACE:
        return hfu_is_whitespace(cp);
    case CC_BERT_PUNCT:
        return (uni_class(cp) & UNI_PUNCT) != 0;
    case CC_PUNCT:
        return (cp < 128 && (uni_class(cp) & UNI_PUNCT)) || hfu_is_punct(cp);
    case CC_DIGIT:
        return hfu_is_number(cp);
    case CC_CHAR:
        return cp == which;
    default:
        return false;
    }
}

/* The spans of s[0..n): per character of a class (each its own match), or per pattern match. */
static int find_spans(const char *s, size_t n, char_class k, uint32_t which, const hf_pattern *p,
                      spans *sp) {
    span_ctx c = {sp, 0};
    sp->n = 0;
    if (k != CC_NONE) {
        for (size_t i = 0, next; i < n; i = next)
            if (in_class(k, cp_at(s, n, i, &next), which) && on_span(&c, i, next)) return -1;
    } else if (hf_pattern_find(p, s, n, on_span, &c)) {
        return -1;
    }
    return c.prev != n ? span_add(sp, c.prev, n, false) : 0;
}

/* Apply a split behavior to the spans and append the kept, non-empty pieces of word s. */
static int emit(const char *s, spans *sp, hf_split_behavior how, bool invert, bool first,
                hf_words *out) {
    if (invert)
        for (size_t i = 0; i < sp->n; i++) sp->m[i] = !sp->m[i];
    size_t k = 0; /* merge in place: pieces [a, b) with a removal flag in m */
    if (how == HF_SPLIT_MERGED_NEXT) {
        bool prev = false;
        size_t w = sp->n; /* fill from the back */
        for (size_t i = sp->n; i-- > 0;) {
            bool m = sp->m[i];
            if (m && !prev && w < sp->n)
                sp->a[w] = sp->a[i];
            else
                w--, sp->a[w] = sp->a[i], sp->b[w] = sp->b[i], sp->m[w] = false;
            prev = m;
        }
        for (size_t i = w; i < sp->n; i++)
            sp->a[k] = sp->a[i], sp->b[k] = sp->b[i], sp->m[k] = false, k++;
    } else {
        bool prev = false;
        for (size_t i = 0; i < sp->n; i++) {
            bool m = sp->m[i], merge = false, remove = false;
            if (how == HF_SPLIT_REMOVED) remove = m;
            if (how == HF_SPLIT_CONTIGUOUS) merge = m == prev && k > 0;
            if (how == HF_SPLIT_MERGED_PREVIOUS) merge = m && !prev && k > 0;
            if (merge)
                sp->b[k - 1] = sp->b[i];
            else
                sp->a[k] = sp->a[i], sp->b[k] = sp->b[i], sp->m[k] = remove, k++;
            prev = m;
        }
    }
    for (size_t i = 0; i < k; i++)
        if (!sp->m[i] && sp->b[i] > sp->a[i] &&
            hf_words_add(out, s + sp->a[i], sp->b[i] - sp->a[i], first && sp->a[i] == 0))
            return -1;
    return 0;
}

/* Metaspace on one word: spaces become the replacement, which may be prepended. */
static int metaspace(const hf_pretok *p, const char *s, size_t n, bool first, hf_buf *tmp) {
    size_t rl = strlen(p->replacement);
    tmp->n = 0;
    bool starts = n >= rl && memcmp(s, p->replacement, rl) == 0;
    bool prepend =
        p->prepend_scheme == HF_PREPEND_ALWAYS || (p->prepend_scheme == HF_PREPEND_FIRST && first);
    starts = starts || s[0] == ' '; /* a leading space becomes the replacement */
    if (hf_buf_put(tmp, NULL, 0) || (prepend && !starts && hf_buf_put(tmp, p->replacement, rl)))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (s[i] == ' ' ? hf_buf_put(tmp, p->replacement, rl) : hf_buf_put(tmp, s + i, 1))
            return -1;
    return 0;
}

static int byte_chars(const char *s, size_t n, hf_buf *tmp) {
    tmp->n = 0;
    if (hf_buf_put(tmp, NULL, 0)) return -1;
    for (size_t i = 0; i < n; i++)
        if (hf_buf_cp(tmp, hf_byte_char((unsigned char)s[i]))) return -1;
    return 0;
}

/* BertPreTokenizer on one word: split at whitespace (removed), then punctuation (isolated). */
static int bert_word(const char *s, size_t n, bool first, hf_words *out, spans *sp) {
    hf_words mid = {0};
    int bad = find_spans(s, n, CC_WHITESPACE, 0, NULL, sp) ||
              emit(s, sp, HF_SPLIT_REMOVED, false, first, &mid);
    for (size_t k = 0; k < mid.n && !bad; k++)
        bad = find_spans(mid.text.s + mid.start[k], mid.end[k] - mid.start[k], CC_BERT_PUNCT, 0,
                         NULL, sp) ||
              emit(mid.text.s + mid.start[k], sp, HF_SPLIT_ISOLATED, false, mid.first[k], out);
    hf_words_free(&mid);
    return bad;
}

/* ByteLevel on one word: the prefix space, GPT-2's split, then bytes to GPT-2's characters (the
 * new words rewritten at the end of out's text). */
static int byte_level_word(const hf_pretok *p, const char *s, size_t n, bool first, hf_words *out,
                           spans *sp, hf_buf *tmp) {
    static const hf_pattern gpt2 = {HF_PAT_GPT2, NULL, 0};
    hf_buf sp_text = {0};
    if (p->add_prefix_space && s[0] != ' ') {
        if (hf_buf_put(&sp_text, " ", 1) || hf_buf_put(&sp_text, s, n)) return -1;
        s = sp_text.s, n = sp_text.n;
    }
    size_t before = out->n;
    int bad = p->use_regex ? find_spans(s, n, CC_NONE, 0, &gpt2, sp) ||
                                 emit(s, sp, HF_SPLIT_ISOLATED, false, first, out)
                           : hf_words_add(out, s, n, first);
    hf_buf_free(&sp_text);
    for (size_t k = before; k < out->n && !bad; k++) {
        bad = byte_chars(out->text.s + out->start[k], out->end[k] - out->start[k], tmp);
        out->start[k] = out->text.n;
        bad = bad || hf_buf_put(&out->text, tmp->s, tmp->n);
        out->end[k] = out->text.n;
    }
    return bad;
}

/* One pre-tokenizer over every word of in, into out. */
static int pretok_one(const hf_pretok *p, const hf_words *in, hf_words *out, spans *sp,
                      hf_buf *tmp) {
    static const hf_pattern words = {HF_PAT_WORDS, NULL, 0};
    for (size_t w = 0; w < in->n; w++) {
        const char *s = in->text.s + in->start[w];
        size_t n = in->end[w] - in->start[w];
        bool first = in->first[w];
        switch (p->kind) {
        case HF_PRE_BERT:
            if (bert_word(s, n, first, out, sp)) return -1;
            break;
        case HF_PRE_BYTE_LEVEL:
            if (byte_level_word(p, s, n, first, out, sp, tmp)) return -1;
            break;
        case HF_PRE_METASPACE: {
            if (metaspace(p, s, n, first, tmp)) return -1;
            if (p->split ? find_spans(tmp->s, tmp->n, CC_CHAR, p->replacement_cp, NULL, sp) ||
                               emit(tmp->s, sp, HF_SPLIT_MERGED_NEXT, false, first, out)
                         : hf_words_add(out, tmp->s, tmp->n, first))
                return -1;
            break;
        }
        case HF_PRE_WHITESPACE:
            if (find_spans(s, n, CC_NONE, 0, &words, sp) ||
                emit(s, sp, HF_SPLIT_REMOVED, true, first, out))
                return -1;
            break;
        case HF_PRE_WHITESPACE_SPLIT:
            if (find_spans(s, n, CC_WHITESPACE, 0, NULL, sp) ||
                emit(s, sp, HF_SPLIT_REMOVED, false, first, out))
                return -1;
            break;
        case HF_PRE_SPLIT:
            if (find_spans(s, n, CC_NONE, 0, &p->pattern, sp) ||
                emit(s, sp, p->behavior, p->invert, first, out))
                return -1;
            break;
        case HF_PRE_PUNCTUATION:
            if (find_spans(s, n, CC_PUNCT, 0, NULL, sp) ||
                emit(s, sp, p->behavior, false, first, out))
                return -1;
            break;
        case HF_PRE_DIGITS:
            if (find_spans(s, n, CC_DIGIT, 0, NULL, sp) ||
                emit(s, sp, p->individual_digits ? HF_SPLIT_ISOLATED : HF_SPLIT_CONTIGUOUS, false,
                     first, out))
                return -1;
            break;
        }
    }
    return 0;
}

graft_status hf_pretokenize(const hf_tokenizer *t, const char *s, size_t n, bool at_start,
                            hf_words *out, graft_err *e) {
    hf_words a = {0}, b = {0};
    spans sp = {0};
    hf_buf tmp = {0};
    int bad = n > 0 && hf_words_add(&a, s, n, at_start);
    for (size_t k = 0; k < t->n_pretoks && !bad; k++) {
        b.n = 0, b.text.n = 0;
        bad = pretok_one(&t->pretoks[k], &a, &b, &sp, &tmp);
        hf_words swap = a;
        a = b, b = swap;
    }
    hf_words_free(&b);
    free(sp.a), free(sp.b), free(sp.m);
    hf_buf_free(&tmp);
    if (bad) {
        hf_words_free(&a);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory pre-tokenizing");
    }
    hf_words_free(out);
    *out = a;
    return GRAFT_OK;
}
