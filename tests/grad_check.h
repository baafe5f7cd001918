/* grad_check.h: checking a backward rule against central finite differences in f64 of the
 * op's forward (its reference kernel or a given one), and the f32 rule against the f64 one;
 * shared by test_grad.c and test_grad_blocks.c. */
#ifndef GRAFT_TEST_GRAD_CHECK_H
#define GRAFT_TEST_GRAD_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "ops/grad.h"
#include "test_node.h"
#include "test_util.h"

#define MAX_IO 6

/* ---- nodes and tensors by hand -------------------------------------------------------------- */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static inline double rand_uniform(void) { /* in [-1, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 4503599627370496.0 - 1.0;
}

/* A random f64 tensor (ndim 0 is a scalar). */
static inline void rand_tensor(tensor *t, int ndim, const int64_t *dims, double scale) {
    tensor_make(t, GRAFT_DTYPE_F64, ndim, dims, NULL);
    for (int64_t i = 0; i < tensor_numel(t); i++) ((double *)t->data)[i] = scale * rand_uniform();
}

/* A copy of t converted to dtype dt (float tensors only). */
static inline void convert(tensor *dst, const tensor *src, graft_dtype dt) {
    if (!dtype_is_float(src->dtype)) {
        tensor_clone(dst, src, NULL);
        return;
    }
    tensor_make(dst, dt, src->ndim, src->dims, NULL);
    for (int64_t i = 0; i < tensor_numel(src); i++) tensor_set_f64(dst, i, tensor_get_f64(src, i));
}

/* ---- one rule checked by finite differences ------------------------------------------------- */

/* A case: the node, its forward inputs (NULL data where omitted), outputs to produce, and the
 * forward to run (the op's reference kernel unless given). */
typedef struct fd_case {
    const char *name;
    test_node *tn;
    tensor *in;
    int n_in, n_out;
    op_compute_fn forward;
    unsigned no_grad;  /* bit i: input i takes no gradient (Dropout's ratio) */
    op_infer_fn infer; /* the shapes of the outputs, when not the op's own inference */
} fd_case;

typedef struct fwd_state {
    tensor out[MAX_IO];
    const tensor *ins[MAX_IO];
} fwd_state;

static inline void fwd_free(fwd_state *s, int n_out) {
    for (int i = 0; i < n_out; i++) tensor_release(&s->out[i]);
}

/* Infer the outputs' shapes, allocate them and run the forward. */
static inline graft_status run_forward(const fd_case *fc, tensor *in, fwd_state *s,
                                       graft_err *err) {
    value_info vi[MAX_IO] = {{0}}, vo[MAX_IO];
    memset(s, 0, sizeof *s);
    memset(vo, 0, sizeof vo);
    for (int i = 0; i < fc->n_in && i < MAX_IO; i++) {
        if (!in[i].data) continue; /* omitted */
        s->ins[i] = &in[i];
        vi[i].present = true;
        vi[i].dtype = in[i].dtype;
        vi[i].ndim = in[i].ndim;
        memcpy(vi[i].dims, in[i].dims, sizeof in[i].dims);
        /* integer inputs (shapes, axes, starts, indices) are known, as constants are when a
         * model loads; others stay unknown: inference would reject a known training_mode */
        if (in[i].dtype == GRAFT_DTYPE_I64 || in[i].dtype == GRAFT_DTYPE_I32) vi[i].value = &in[i];
    }
    const op_def *def = op_find(fc->tn->node.op_type);
    if (!def && (!fc->infer || !fc->forward))
        return err_set(err, GRAFT_E_UNSUPPORTED, "no op %s", fc->tn->node.op_type);
    TRY((fc->infer ? fc->infer : def->infer)(&fc->tn->node, vi, fc->n_in, vo, fc->n_out, err));
    tensor *outs[MAX_IO];
    for (int i = 0; i < fc->n_out; i++) {
        TRY(tensor_make(&s->out[i], vo[i].dtype, vo[i].ndim, vo[i].dims, err));
        outs[i] = &s->out[i];
    }
    op_call call = {&fc->tn->node, s->ins, fc->n_in, outs, fc->n_out, err};
    return (fc->forward ? fc->forward : def->reference)(&call);
}

/* L = sum over float outputs of r[o] . out[o] */
static inline double functional(const fwd_state *s, int n_out, tensor *r) {
    double sum = 0.0;
    for (int o = 0; o < n_out; o++) {
        if (!r[o].data) continue;
        for (int64_t i = 0; i < tensor_numel(&s->out[o]); i++)
            sum += tensor_get_f64(&r[o], i) * tensor_get_f64(&s->out[o], i);
    }
    return sum;
}

/* Run forward + backward in dtype dt; din[i] is filled for every present float input. */
static inline graft_status analytic(const fd_case *fc, graft_dtype dt, tensor *r, tensor *din,
                                    graft_err *err) {
    tensor in[MAX_IO], dout[MAX_IO];
    memset(in, 0, sizeof in);
    memset(dout, 0, sizeof dout);
    for (int i = 0; i < fc->n_in; i++)
        if (fc->in[i].data) convert(&in[i], &fc->in[i], dt);
    fwd_state s;
    graft_status st = run_forward(fc, in, &s, err);
    const tensor *douts[MAX_IO] = {0}, *outs[MAX_IO] = {0};
    tensor *dins[MAX_IO] = {0};
    for (int o = 0; o < fc->n_out && st == GRAFT_OK; o++) {
        outs[o] = &s.out[o];
        if (r[o].data) {
            convert(&dout[o], &r[o], dt);
            douts[o] = &dout[o];
        }
    }
    for (int i = 0; i < fc->n_in && st == GRAFT_OK; i++)
        if (in[i].data && dtype_is_float(in[i].dtype) && !(fc->no_grad >> i & 1)) {
            tensor_make(&din[i], dt, in[i].ndim, in[i].dims, NULL);
            dins[i] = &din[i];
        }
    if (st == GRAFT_OK) {
        grad_fn fn = grad_find(fc->tn->node.op_type);
        grad_call gc = {&fc->tn->node, s.ins, fc->n_in, outs, fc->n_out, douts, dins, err};
        st = fn ? fn(&gc) : err_set(err, GRAFT_E_UNSUPPORTED, "no rule");
    }
    fwd_free(&s, fc->n_out);
    for (int i = 0; i < MAX_IO; i++) {
        tensor_release(&in[i]);
        tensor_release(&dout[i]);
    }
    return st;
}

static inline double fd_at(const fd_case *fc, tensor *r, int input, int64_t j, double h) {
    double *v = (double *)fc->in[input].data + j, keep = *v, l[2];
    for (int k = 0; k < 2; k++) {
        *v = keep + (k ? -h : h);
        fwd_state s;
        graft_err err = {0};
        if (run_forward(fc, fc->in, &s, &err) != GRAFT_OK)
            l[k] = NAN;
        else
            l[k] = functional(&s, fc->n_out, r);
        fwd_free(&s, fc->n_out);
    }
    *v = keep;
    return (l[0] - l[1]) / (2.0 * h);
}

/* Normwise relative difference max|a - b| / max|b|. */
static inline double rel_diff(const tensor *a, const tensor *b) {
    double num = 0.0, den = 1e-300;
    for (int64_t i = 0; i < tensor_numel(b); i++) {
        double x = tensor_get_f64(a, i), y = tensor_get_f64(b, i);
        num = fmax(num, fabs(x - y));
        den = fmax(den, fabs(y));
    }
    return num / den;
}

static inline void check_rule(const fd_case *fc) {
    graft_err err = {0};
    tensor r[MAX_IO], din[MAX_IO], din32[MAX_IO], fd;
    memset(r, 0, sizeof r);
    memset(din, 0, sizeof din);
    memset(din32, 0, sizeof din32);
    fwd_state s;
    char why[1400] = "";
    if (run_forward(fc, fc->in, &s, &err) != GRAFT_OK) {
        printf("FAIL %s: forward: %s\n", fc->name, err.msg);
        test_failures++;
        return;
    }
    for (int o = 0; o < fc->n_out; o++)
        if (dtype_is_float(s.out[o].dtype)) rand_tensor(&r[o], s.out[o].ndim, s.out[o].dims, 1.0);
    fwd_free(&s, fc->n_out);
    if (analytic(fc, GRAFT_DTYPE_F64, r, din, &err) != GRAFT_OK)
        snprintf(why, sizeof why, "f64 backward: %s", err.msg);
    else if (analytic(fc, GRAFT_DTYPE_F32, r, din32, &err) != GRAFT_OK)
        snprintf(why, sizeof why, "f32 backward: %s", err.msg);
    double worst = 0.0;
    for (int i = 0; i < fc->n_in && !why[0]; i++) {
        if (!din[i].data) continue;
        tensor_make(&fd, GRAFT_DTYPE_F64, din[i].ndim, din[i].dims, NULL);
        for (int64_t j = 0; j < tensor_numel(&fd); j++)
            ((double *)fd.data)[j] = fd_at(fc, r, i, j, 1e-6);
        double d = rel_diff(&din[i], &fd), d32 = rel_diff(&din32[i], &din[i]);
        worst = fmax(worst, d);
        if (!(d < 1e-6))
            snprintf(why, sizeof why, "input %d: analytic vs finite differences differ by %.3g", i,
                     d);
        else if (!(d32 < 1e-4))
            snprintf(why, sizeof why, "input %d: f32 rule vs f64 rule differ by %.3g", i, d32);
        tensor_release(&fd);
    }
    if (why[0]) {
        printf("FAIL %s: %s\n", fc->name, why);
        test_failures++;
    } else {
        printf("PASS %s (rel err %.2g)\n", fc->name, worst);
    }
    fflush(stdout);
    for (int i = 0; i < MAX_IO; i++) {
        tensor_release(&r[i]);
        tensor_release(&din[i]);
        tensor_release(&din32[i]);
    }
}

/* Check one case and release its inputs; no_grad as in fd_case, infer NULL for the op's own. */
static inline void grad_check_case(const char *name, test_node *tn, tensor *in, int n_in, int n_out,
                                   op_compute_fn fwd, op_infer_fn infer, unsigned no_grad) {
    fd_case fc = {name, tn, in, n_in, n_out, fwd, no_grad, infer};
    check_rule(&fc);
    for (int i = 0; i < n_in; i++) tensor_release(&in[i]);
}

#endif
