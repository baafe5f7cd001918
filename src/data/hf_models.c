/* hf_models.c: tokenizer.json models on one pre-tokenized word: WordPiece (greedy longest match),
 * BPE (merges by rank, byte fallback, unknown fusing), Unigram (Viterbi over scored pieces) and
 * WordLevel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/hf_tokenizer.h"
#include "data/unicode.h"
#include "data/token_ids.h"

#define UNK_PENALTY 10.0 /* Unigram: an unknown character scores min_score - this */

static size_t char_len(const char *s, size_t n, size_t at) {
    size_t pos = at;
    uint32_t cp;
    if (utf8_decode(s, n, &pos, &cp)) return 1;
    return pos - at;
}

static graft_status oom(graft_err *e) {
    return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory tokenizing");
}

static graft_status no_unk(const char *model, graft_err *e) {
    return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                   "%s: a word needs the unknown token, but the model has none", model);
}

static graft_status wordpiece(const hf_model *m, const char *w, size_t n, int64_t **ids,
                              size_t *n_ids, size_t *cap, graft_err *e) {
    size_t chars = 0;
    for (size_t i = 0; i < n; i += char_len(w, n, i)) chars++;
    size_t first = *n_ids;
    hf_buf piece = {0};
    graft_status st = GRAFT_OK;
    bool unknown = chars > (size_t)m->max_chars;
    for (size_t start = 0; start < n && !unknown;) {
        int64_t id = -1;
        size_t end = n;
        while (end > start) {
            piece.n = 0;
            if ((start > 0 && hf_buf_put(&piece, m->prefix, m->prefix_len)) ||
                hf_buf_put(&piece, w + start, end - start)) {
                st = oom(e);
                goto done;
            }
            if ((id = str_map_get(&m->vocab, piece.s, piece.n)) >= 0) break;
            do end--; /* to the previous character boundary */
            while (end > start && ((unsigned char)w[end] & 0xC0) == 0x80);
        }
        if (id < 0) {
            unknown = true;
            break;
        }
        if (token_ids_push(ids, n_ids, cap, id)) {
            st = oom(e);
            goto done;
        }
        start = end;
    }
    if (unknown) {
        *n_ids = first;
        if (m->unk < 0)
            st = no_unk("WordPiece", e);
        else if (token_ids_push(ids, n_ids, cap, m->unk))
            st = oom(e);
    }
done:
    hf_buf_free(&piece);
    return st;
}

/* BPE: symbols (ids) of the word's characters, then merges, lowest rank first (leftmost on a
 * tie), as the tokenizers package's priority queue orders them. */
static graft_status bpe(const hf_model *m, const char *w, size_t n, int64_t **ids, size_t *n_ids,
                        size_t *cap, graft_err *e) {
    if (m->ignore_merges) {
        int64_t id = str_map_get(&m->vocab, w, n);
        if (id >= 0) return token_ids_push(ids, n_ids, cap, id) ? oom(e) : GRAFT_OK;
    }
    uint32_t *sym = malloc((n + 1) * sizeof *sym);
    hf_buf piece = {0};
    size_t k = 0;
    int64_t unk_pending = -1; /* an unknown run waiting to be written (fuse_unk) */
    graft_status st = sym ? GRAFT_OK : oom(e);
    for (size_t i = 0; i < n && st == GRAFT_OK;) {
        size_t len = char_len(w, n, i);
        piece.n = 0;
        int bad = (i > 0 && m->prefix && hf_buf_put(&piece, m->prefix, m->prefix_len)) ||
                  hf_buf_put(&piece, w + i, len) ||
                  (i + len == n && m->suffix && hf_buf_put(&piece, m->suffix, m->suffix_len));
        if (bad) {
            st = oom(e);
            break;
        }
        i += len;
        int64_t id = str_map_get(&m->vocab, piece.s, piece.n);
        if (id >= 0) {
            if (unk_pending >= 0) sym[k++] = (uint32_t)unk_pending, unk_pending = -1;
            sym[k++] = (uint32_t)id;
            continue;
        }
        if (m->byte_fallback) {
            int64_t bytes[16];
            size_t nb = 0;
            for (size_t j = 0; j < piece.n && nb < 16; j++) {
                char name[8];
                snprintf(name, sizeof name, "<0x%02X>", (unsigned char)piece.s[j]);
                if ((bytes[nb] = str_map_get(&m->vocab, name, 6)) < 0) break;
                nb++;
            }
            if (nb == piece.n) {
                uint32_t *more = realloc(sym, (k + nb + (n - i) + 2) * sizeof *sym);
                if (!more) {
                    st = oom(e);
                    break;
                }
                sym = more;
                for (size_t j = 0; j < nb; j++) sym[k++] = (uint32_t)bytes[j];
                continue;
            }
        }
        if (m->unk < 0) continue; /* no unknown token: the character is dropped */
        if (unk_pending >= 0 && !m->fuse_unk) sym[k++] = (uint32_t)unk_pending;
        unk_pending = m->unk;
    }
    if (st == GRAFT_OK && unk_pending >= 0) sym[k++] = (uint32_t)unk_pending;
    while (st == GRAFT_OK && k > 1) {
        uint32_t best_rank = UINT32_MAX, best_id = 0, rank, id;
        size_t best = 0;
        for (size_t j = 0; j + 1 < k; j++)
            if (pair_map_get(&m->merges, sym[j], sym[j + 1], &rank, &id) && rank < best_rank)
                best_rank = rank, best_id = id, best = j;
        if (best_rank == UINT32_MAX) break;
        sym[best] = best_id;
        memmove(sym + best + 1, sym + best + 2, (k - best - 2) * sizeof *sym);
        k--;
    }
    for (size_t j = 0; j < k && st == GRAFT_OK; j++)
        if (token_ids_push(ids, n_ids, cap, sym[j])) st = oom(e);
    free(sym);
    hf_buf_free(&piece);
    return st;
}

/* Push the id of one Unigram piece: its id, else its bytes' <0xNN> tokens, else unknown. */
static graft_status unigram_piece(const hf_model *m, const char *p, size_t len, int64_t **ids,
                                  size_t *n_ids, size_t *cap, graft_err *e) {
    int64_t id = str_map_get(&m->vocab, p, len);
    if (id < 0 && m->byte_fallback) {
        size_t first = *n_ids, j = 0;
        for (; j < len; j++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", (unsigned char)p[j]);
            int64_t b = str_map_get(&m->vocab, name, 6);
            if (b < 0) break;
            if (token_ids_push(ids, n_ids, cap, b)) return oom(e);
        }
        if (j == len) return GRAFT_OK;
        *n_ids = first;
    }
    if (id < 0 && (id = m->unk) < 0) return no_unk("Unigram", e);
    return token_ids_push(ids, n_ids, cap, id) ? oom(e) : GRAFT_OK;
}

typedef struct best_node {
    double score;
    int64_t id;
    size_t from; /* SIZE_MAX: not reached yet */
} best_node;

static graft_status unigram(const hf_model *m, const char *w, size_t n, int64_t **ids,
                            size_t *n_ids, size_t *cap, graft_err *e) {
    best_node *best = malloc((n + 1) * sizeof *best);
    if (!best) return oom(e);
    for (size_t i = 0; i <= n; i++) best[i] = (best_node){0.0, 0, SIZE_MAX};
    double unk_score = m->min_score - UNK_PENALTY;
    graft_status st = GRAFT_OK;
    for (size_t at = 0; at < n && st == GRAFT_OK;) {
        double here = best[at].score;
        size_t mblen = char_len(w, n, at);
        bool single = false;
        /* every vocabulary piece that prefixes w[at..), shortest first (the trie's order) */
        for (size_t end = at + mblen; end <= n && end - at <= m->vocab.max_len;
             end += end < n ? char_len(w, n, end) : 1) {
            int64_t id = str_map_get(&m->vocab, w + at, end - at);
            if (id >= 0 && m->scores[id] > -INFINITY) { /* -inf: never matched (SentencePiece's
                                                           control and unused pieces) */
                double cand = m->scores[id] + here;
                if (best[end].from == SIZE_MAX || cand > best[end].score)
                    best[end] = (best_node){cand, id, at};
                if (end - at == mblen) single = true;
            }
            if (end == n) break;
        }
        if (!single) {
            if (m->unk < 0) st = no_unk("Unigram", e);
            double cand = unk_score + here;
            best_node *t = &best[at + mblen];
            if (t->from == SIZE_MAX || cand > t->score) *t = (best_node){cand, m->unk, at};
        }
        at += mblen;
    }
    for (size_t end = n; end > 0 && st == GRAFT_OK; end = best[end].from)
        if (best[end].from == SIZE_MAX)
            st = err_set(e, GRAFT_E_INVALID_ARGUMENT, "Unigram: no path through a word");
    if (st != GRAFT_OK) {
        free(best);
        return st;
    }
    /* the best path's pieces in order, runs of unknown pieces fused into one */
    size_t count = 0;
    for (size_t end = n; end > 0; end = best[end].from) count++;
    size_t *bound = malloc((count + 1) * sizeof *bound);
    bool *is_unk = malloc((count + 1) * sizeof *is_unk);
    if (!bound || !is_unk) st = oom(e);
    size_t c = count;
    for (size_t end = n; st == GRAFT_OK && end > 0; end = best[end].from)
        bound[c] = end, is_unk[c] = best[end].id == m->unk, c--;
    if (st == GRAFT_OK) bound[0] = 0;
    for (size_t i = 1; st == GRAFT_OK && i <= count;) {
        size_t j = i;
        while (is_unk[i] && j + 1 <= count && is_unk[j + 1]) j++; /* fuse unknown runs */
        st = unigram_piece(m, w + bound[i - 1], bound[j] - bound[i - 1], ids, n_ids, cap, e);
        i = j + 1;
    }
    free(bound), free(is_unk), free(best);
    return st;
}

graft_status hf_model_word(const hf_model *m, const char *w, size_t n, int64_t **ids, size_t *n_ids,
                           size_t *cap, graft_err *e) {
    if (n == 0) return GRAFT_OK;
    switch (m->kind) {
    case HF_WORDPIECE:
        return wordpiece(m, w, n, ids, n_ids, cap, e);
    case HF_BPE:
        return bpe(m, w, n, ids, n_ids, cap, e);
    case HF_UNIGRAM:
        return unigram(m, w, n, ids, n_ids, cap, e);
    case HF_WORDLEVEL: {
        int64_t id = str_map_get(&m->vocab, w, n);
        if (id < 0 && (id = m->unk) < 0) return no_unk("WordLevel", e);
        return token_ids_push(ids, n_ids, cap, id) ? oom(e) : GRAFT_OK;
    }
    }
    return GRAFT_OK;
}
