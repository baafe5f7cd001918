/* blocks_chunked.c: fine-tuning blocks of a model that runs one batch size only (an export that
 * pins its traced batch, blocks.h's `fixed`): the training graph runs in chunks of that size. */
#include <stdlib.h>
#include <string.h>

#include "blocks.h"

void blocks_chunks_free(blocks *b) {
    if (b->chunk) train_exec_host_free(&b->run, b->chunk);
    free(b->all_to), free(b->all_dto);
    b->chunk = b->all_to = b->all_dto = NULL;
    b->all_rows = 0;
}

static graft_status ensure_buffers(blocks *b, int64_t n, graft_err *e) {
    if (!b->chunk)
        b->chunk =
            train_exec_host_alloc(&b->run, sizeof(float) * (size_t)(b->fixed * b->frozen.row));
    if (n > b->all_rows) {
        free(b->all_to), free(b->all_dto);
        b->all_to = malloc(sizeof(float) * (size_t)(n * b->feat));
        b->all_dto = malloc(sizeof(float) * (size_t)(n * b->feat));
        b->all_rows = b->all_to && b->all_dto ? n : 0;
    }
    if (!b->chunk || !b->all_rows)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for the blocks' chunks");
    return GRAFT_OK;
}

/* Rows at..at+m of rows (n, row) in the chunk buffer, padded to `fixed` with the last one. */
static const float *chunk_of(blocks *b, const float *rows, int64_t at, int64_t m) {
    int64_t row = b->frozen.row;
    memcpy(b->chunk, rows + at * row, sizeof(float) * (size_t)(m * row));
    for (int64_t i = m; i < b->fixed; i++)
        memcpy(b->chunk + i * row, rows + (at + m - 1) * row, sizeof(float) * (size_t)row);
    return b->chunk;
}

/* The features of rows (n, row) into all_to (n, feat). */
static graft_status features_into_all(blocks *b, const float *rows, int64_t n, graft_err *e) {
    for (int64_t at = 0; at < n; at += b->fixed) {
        int64_t m = n - at < b->fixed ? n - at : b->fixed;
        const float *to;
        TRY(blocks_run_features(b, chunk_of(b, rows, at, m), b->fixed, &to, e));
        memcpy(b->all_to + at * b->feat, to, sizeof(float) * (size_t)(m * b->feat));
    }
    return GRAFT_OK;
}

graft_status blocks_features_chunked(blocks *b, const float *rows, int64_t n, const float **out,
                                     graft_err *e) {
    TRY(ensure_buffers(b, n, e));
    TRY(features_into_all(b, rows, n, e));
    *out = b->all_to;
    return GRAFT_OK;
}

graft_status blocks_step_chunked(blocks *b, const float *rows, int64_t n, blocks_head_fn head,
                                 void *user, graft_err *e) {
    TRY(ensure_buffers(b, n, e));
    TRY(features_into_all(b, rows, n, e));
    TRY(head(user, b->all_to, n, b->all_dto, e));
    float *dto = malloc(sizeof(float) * (size_t)(b->fixed * b->feat));
    if (!dto) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for the blocks' chunks");
    graft_status st = GRAFT_OK;
    for (int64_t at = 0; at < n && st == GRAFT_OK; at += b->fixed) {
        int64_t m = n - at < b->fixed ? n - at : b->fixed;
        memset(dto, 0, sizeof(float) * (size_t)(b->fixed * b->feat)); /* padding: no gradient */
        memcpy(dto, b->all_dto + at * b->feat, sizeof(float) * (size_t)(m * b->feat));
        st = blocks_run_training(b, chunk_of(b, rows, at, m), b->fixed, NULL, NULL, dto, e);
    }
    free(dto);
    return st;
}
