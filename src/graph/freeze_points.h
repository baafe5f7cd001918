/* freeze_points.h: the tensors a model can be frozen at (dominators of its cut), grouped into the
 * stages of a CNN or the layers of an encoder. */
#ifndef GRAFT_GRAPH_FREEZE_POINTS_H
#define GRAFT_GRAPH_FREEZE_POINTS_H

#include "model.h"

typedef struct freeze_point {
    int value;                    /* the tensor */
    int unit;                     /* N when `--unfreeze N` picks it, else 0 */
    const char *kind;             /* "stage", "layer", "block" or "tensor" (static) */
    int first_node;               /* the first node of the trainable part that reads it */
    int64_t trainable_parameters; /* elements of the parameters after it, up to the cut */
} freeze_point;

typedef struct freeze_points {
    int cut;             /* the value the candidates lead to */
    freeze_point *point; /* nearest the cut first */
    int n;
    int units;             /* stages or layers found (0: no grouping recognised) */
    const char *unit_kind; /* "stage", "layer" or NULL */
} freeze_points;

/* The candidate freeze points of m's graph before value `cut` (docs/training.md, "Freeze
 * points", states the rule). fp is overwritten; free it with freeze_points_free. */
graft_status model_freeze_points(const graft_model *m, int cut, freeze_points *fp, graft_err *e);
void freeze_points_free(freeze_points *fp);
/* Forget m's cached freeze points (its graph changed). */
void model_drop_freeze_points(graft_model *m);

#endif
