/* tokenizer_api.c: the public graft_tokenizer, a thin handle over the WordPiece tokenizer. */
#include <stdlib.h>
#include <string.h>

#include "../core/context.h"
#include "wordpiece.h"

struct graft_tokenizer {
    wordpiece *wp;
};

graft_status graft_tokenizer_load(graft_ctx *ctx, const char *vocab_path, int cased,
                                  graft_tokenizer **out) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ctx->err;
    err_clear(e);
    if (!vocab_path || !out) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "no vocab path given");
    graft_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    graft_status st = wordpiece_load(&t->wp, vocab_path, !cased, e);
    if (st != GRAFT_OK) {
        free(t);
        return st;
    }
    *out = t;
    return GRAFT_OK;
}

graft_status graft_tokenizer_load_memory(graft_ctx *ctx, const char *vocab, size_t size, int cased,
                                         graft_tokenizer **out) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ctx->err;
    err_clear(e);
    if (!vocab || !out) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "no vocabulary given");
    graft_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    graft_status st = wordpiece_load_memory(&t->wp, vocab, size, "the vocabulary", !cased, e);
    if (st != GRAFT_OK) {
        free(t);
        return st;
    }
    *out = t;
    return GRAFT_OK;
}

int64_t graft_tokenizer_token_id(const graft_tokenizer *tok, const char *token) {
    return tok && token ? wordpiece_token_id(tok->wp, token, strlen(token)) : -1;
}

graft_status graft_tokenizer_encode(graft_ctx *ctx, const graft_tokenizer *tok, const char *a,
                                    const char *b, int max_len, int pad, int64_t *ids,
                                    int64_t *type_ids, int64_t *mask, size_t cap, size_t *len) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ctx->err;
    err_clear(e);
    if (!tok || !a || !ids || !len)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "graft_tokenizer_encode: NULL argument");
    return wordpiece_encode(tok->wp, a, b, max_len, pad != 0, ids, type_ids, mask, cap, len, e);
}

void graft_tokenizer_free(graft_tokenizer *tok) {
    if (!tok) return;
    wordpiece_free(tok->wp);
    free(tok);
}

int64_t graft_tokenizer_vocab_size(const graft_tokenizer *tok) {
    return tok ? wordpiece_vocab_size(tok->wp) : 0;
}
