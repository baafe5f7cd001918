/* nn.c: reference kernels of BatchNormalization (inference) and GlobalAveragePool; Conv, the
 * pools and the matrix products live in conv.c, pool.c and matmul.c next to this file. */
#include <math.h>
#include <stdlib.h>

#include "nn_ref.h"

/* ---- BatchNormalization ------------------------------------------------------------------- */

/* y = x * scale' + shift' with scale' = scale / sqrt(var + eps) and shift' = B - mean * scale',
 * one pair per channel (or per activation for spatial=0 in opsets 7 and 8). */
static graft_status bn_fold(const op_call *c, int64_t count, double **scale, double **shift) {
    double eps = attr_f(c->node, "epsilon", 1e-5f);
    *scale = malloc((size_t)count * sizeof(double));
    *shift = malloc((size_t)count * sizeof(double));
    if (!*scale || !*shift) {
        free(*scale);
        free(*shift);
        return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "folding BatchNormalization");
    }
    for (int i = 1; i < 5; i++)
        if (tensor_numel(c->in[i]) != count)
            return op_error(c->node, c->err, GRAFT_E_SHAPE,
                            "input %d has %lld values, expected %lld", i,
                            (long long)tensor_numel(c->in[i]), (long long)count);
    for (int64_t i = 0; i < count; i++) {
        double s = tensor_get_f64(c->in[1], i) / sqrt(tensor_get_f64(c->in[4], i) + eps);
        (*scale)[i] = s;
        (*shift)[i] = tensor_get_f64(c->in[2], i) - tensor_get_f64(c->in[3], i) * s;
    }
    return GRAFT_OK;
}

graft_status ref_BatchNormalization(const op_call *c) {
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    int64_t n = x->dims[0], ch = x->dims[1];
    int64_t inner = dims_numel(x->ndim - 2, x->dims + 2);
    /* Per-activation parameters (spatial=0) have one value per (channel, position). */
    bool per_activation = tensor_numel(c->in[1]) != ch;
    int64_t groups = per_activation ? ch * inner : ch, run = per_activation ? 1 : inner;
    double *scale = NULL, *shift = NULL;
    graft_status st = bn_fold(c, groups, &scale, &shift);
    if (st != GRAFT_OK) {
        free(scale);
        free(shift);
        return st;
    }
    int64_t runs = n * groups;
    if (x->dtype == GRAFT_DTYPE_F32) {
        const float *xs = x->data;
        float *ys = y->data;
#pragma omp parallel for if (runs * run >= 32768 && nn_may_parallelize())
        for (int64_t r = 0; r < runs; r++) {
            float s = (float)scale[r % groups], b = (float)shift[r % groups];
            const float *xr = xs + r * run;
            float *yr = ys + r * run;
            for (int64_t i = 0; i < run; i++) yr[i] = xr[i] * s + b;
        }
    } else {
        for (int64_t r = 0; r < runs; r++)
            for (int64_t i = 0; i < run; i++)
                tensor_set_f64(y, r * run + i,
                               tensor_get_f64(x, r * run + i) * scale[r % groups] +
                                   shift[r % groups]);
    }
    /* Inference mode hands the running statistics back unchanged (opset 14+ optional outputs). */
    for (int o = 1; o < c->n_out && o < 3; o++)
        if (c->out[o])
            for (int64_t i = 0; i < tensor_numel(c->out[o]); i++)
                tensor_set_f64(c->out[o], i, tensor_get_f64(c->in[o + 2], i));
    free(scale);
    free(shift);
    return GRAFT_OK;
}

/* ---- GlobalAveragePool -------------------------------------------------------------------- */

graft_status ref_GlobalAveragePool(const op_call *c) {
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    int64_t planes = x->dims[0] * x->dims[1];
    int64_t size = dims_numel(x->ndim - 2, x->dims + 2);
    if (x->dtype == GRAFT_DTYPE_F32) {
        const float *xs = x->data;
        float *ys = y->data;
#pragma omp parallel for if (planes * size >= 32768 && nn_may_parallelize())
        for (int64_t p = 0; p < planes; p++) {
            double sum = 0.0;
            const float *xp = xs + p * size;
            for (int64_t i = 0; i < size; i++) sum += xp[i];
            ys[p] = size > 0 ? (float)(sum / (double)size) : 0.0f;
        }
        return GRAFT_OK;
    }
    for (int64_t p = 0; p < planes; p++) {
        double sum = 0.0;
        for (int64_t i = 0; i < size; i++) sum += tensor_get_f64(x, p * size + i);
        tensor_set_f64(y, p, size > 0 ? sum / (double)size : 0.0);
    }
    return GRAFT_OK;
}
