/* frozen_part.h: the frozen part of a model whose last blocks are fine-tuned: a model of its own
 * that computes, per sample, the freeze tensor and the side inputs the trainable part reads,
 * flattened to floats and concatenated into one row (what the feature cache stores). */
#ifndef GRAFT_TRAIN_FROZEN_PART_H
#define GRAFT_TRAIN_FROZEN_PART_H

#include "../graph/model.h"
#include "train_graph.h"

#define FROZEN_MAX_PIECES 32

/* One tensor of a row: the freeze tensor, or a side input. */
typedef struct frozen_piece {
    const char *name;             /* the value's name in the model (borrowed) */
    graft_dtype dtype;            /* the trainable part reads this dtype (rows hold floats) */
    int ndim;                     /* with the batch dimension first */
    int64_t dims[GRAFT_MAX_DIMS]; /* dims[0]: the batch (set per call) */
    int64_t numel;                /* per sample */
    int64_t offset;               /* where the piece starts in a row */
} frozen_piece;

typedef struct frozen_part {
    /* inputs: the model's; output 0 "frozen/row" (batch, row); while not resolved, output 1 + k
     * is piece k's shape (int64) */
    graft_model *model;
    int n_pieces; /* the freeze tensor, then the training graph's side inputs in order */
    frozen_piece pieces[FROZEN_MAX_PIECES];
    int64_t row;   /* floats per sample (0 until resolved) */
    bool resolved; /* the pieces' sizes per sample are known (from the model's shapes, or
                      frozen_part_resolve after a run) */
} frozen_part;

/* The frozen part of m for training graph tg (built from m's graph). A piece's size per sample
 * may depend on the inputs' sizes (a text model's sequence length): it is then resolved by
 * frozen_part_resolve after the first run. Errors name a tensor without a batch dimension. */
graft_status frozen_part_create(graft_model *m, const train_graph *tg, frozen_part *fp,
                                graft_err *e);
void frozen_part_free(frozen_part *fp);
/* The pieces' sizes per sample from the frozen model's last run (its shape outputs). */
graft_status frozen_part_resolve(frozen_part *fp, graft_err *e);

/* Piece k of rows (n, row) into out (allocated by the caller: pieces[k]'s dtype and per-sample
 * dims with n first), converted from float. */
graft_status frozen_part_unpack(const frozen_part *fp, int k, const float *rows, int64_t n,
                                tensor *out, graft_err *e);

#endif
