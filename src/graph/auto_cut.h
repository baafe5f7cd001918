/* auto_cut.h: the tensor `--cut auto` takes, with the pooling the cut adds and why. */
#ifndef GRAFT_GRAPH_AUTO_CUT_H
#define GRAFT_GRAPH_AUTO_CUT_H

#include "model.h"

typedef struct auto_cut {
    int value;             /* the tensor cut at */
    graft_pooling pooling; /* what GRAFT_POOLING_AUTO gives: NONE, CLS or SPATIAL */
    int64_t features;      /* per sample after that pooling; -1 when not known */
    char why[512];
} auto_cut;

/* The auto cut of m's graph; GRAFT_E_NOT_FOUND (in e) when no rule fits. */
graft_status model_auto_cut(const graft_model *m, auto_cut *c, graft_err *e);

#endif
