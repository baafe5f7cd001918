/* cuda_norm.c: CUDA kernels of InstanceNormalization, GroupNormalization and Resize (nearest,
 * linear and cubic, one pass per resized axis): plans on the host (src/ops/norm.c, resize.c),
 * launches from norm_launch.h. Other dtypes and antialias run on the CPU. */
#include "../ops/norm.h"
#include "../ops/resize.h"
#include "cuda_float_types.h"
#include "cuda_internal.h"
#include "norm_launch.h"

static graft_status launched(const op_call *c, cudaError_t err, const char *what) {
    if (err == cudaSuccess) return GRAFT_OK;
    return op_error(c->node, c->err, GRAFT_E_BACKEND, "%s: %s (%s)", what, cudaGetErrorString(err),
                    cudaGetErrorName(err));
}

static graft_status run_norm(cuda_backend *be, const op_call *c, bool instance, bool *handled) {
    const tensor *x = c->in[0];
    *handled = c->n_in >= 3 && c->in[1] && c->in[2] && cuda_is_float(x->dtype) &&
               c->in[1]->dtype == x->dtype && c->in[2]->dtype == x->dtype && x->ndim >= 2;
    if (!*handled) return GRAFT_OK;
    int64_t channels = x->dims[1], spatial = 1, groups = channels;
    for (int d = 2; d < x->ndim; d++) spatial *= x->dims[d];
    bool per_channel = true;
    if (!instance) TRY(group_norm_params(c->node, channels, &groups, &per_channel, c->err));
    int64_t want = per_channel ? channels : groups;
    if (tensor_numel(c->in[1]) != want || tensor_numel(c->in[2]) != want)
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "scale and bias must have %lld elements, they have %lld and %lld",
                        (long long)want, (long long)tensor_numel(c->in[1]),
                        (long long)tensor_numel(c->in[2]));
    TRY(op_check_output(c, 0, x->dtype, tensor_numel(x)));
    float eps = attr_f(c->node, "epsilon", 1e-5f);
    return launched(c,
                    cuda_group_norm(x->data, c->in[1]->data, c->in[2]->data, c->out[0]->data,
                                    x->dims[0], groups, channels / groups, spatial, !per_channel,
                                    eps, x->dtype, be->stream),
                    "group normalization kernel");
}

static graft_status k_instance_norm(cuda_backend *be, const op_call *c, void **state,
                                    bool *handled) {
    (void)state;
    return run_norm(be, c, true, handled);
}

static graft_status k_group_norm(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    return run_norm(be, c, false, handled);
}

/* ---- Resize ---------------------------------------------------------------------------------- */

static cuda_resize_axis axis_params(const resize_plan *p, const int64_t *dims, int axis) {
    cuda_resize_axis a = {(int)p->mode,
                          (int)p->coord,
                          (int)p->rounding,
                          p->exclude_outside,
                          p->cubic_a,
                          p->extrapolation,
                          1,
                          dims[axis],
                          p->out_dims[axis],
                          1,
                          p->scales[axis],
                          p->roi_start[axis],
                          p->roi_end[axis]};
    for (int d = 0; d < axis; d++) a.outer *= dims[d];
    for (int d = axis + 1; d < p->ndim; d++) a.inner *= dims[d];
    return a;
}

/* The passes: x -> (f32 scratch ->)* y, each resized axis once. */
static graft_status resize_passes(cuda_backend *be, const op_call *c, const resize_plan *p,
                                  const int *axes, int n_axes, void *scratch[2]) {
    const tensor *x = c->in[0];
    int64_t dims[GRAFT_MAX_DIMS];
    for (int d = 0; d < p->ndim; d++) dims[d] = x->dims[d];
    const void *src = x->data;
    graft_dtype src_dt = x->dtype;
    for (int k = 0; k < n_axes; k++) {
        bool last = k == n_axes - 1;
        void *dst = last ? c->out[0]->data : scratch[k % 2];
        graft_dtype dst_dt = last ? x->dtype : GRAFT_DTYPE_F32;
        cuda_resize_axis a = axis_params(p, dims, axes[k]);
        TRY(launched(c, cuda_resize_pass(src, src_dt, dst, dst_dt, &a, be->stream),
                     "resize kernel"));
        dims[axes[k]] = p->out_dims[axes[k]];
        src = dst;
        src_dt = dst_dt;
    }
    return GRAFT_OK;
}

static graft_status k_resize(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    const tensor *x = c->in[0];
    value_info vi[4];
    int n = call_value_infos(c, vi, 4);
    resize_plan p;
    TRY(resize_make_plan(c->node, vi, n, &p, c->err));
    *handled = cuda_is_float(x->dtype) && !p.antialias;
    if (!*handled) return GRAFT_OK;
    int axes[GRAFT_MAX_DIMS], n_axes = 0;
    int64_t dims[GRAFT_MAX_DIMS], biggest = 0;
    for (int d = 0; d < p.ndim; d++) dims[d] = x->dims[d];
    for (int d = 0; d < p.ndim; d++) {
        if (p.identity[d]) continue;
        axes[n_axes++] = d;
        dims[d] = p.out_dims[d];
        int64_t m = 1;
        for (int k = 0; k < p.ndim; k++) m *= dims[k];
        if (m > biggest) biggest = m;
    }
    TRY(op_expect_output(c, c->out[0], x->dtype, p.ndim, p.out_dims));
    if (tensor_numel(c->out[0]) == 0) return GRAFT_OK;
    if (n_axes == 0) { /* every axis an identity: a copy */
        CUDA_TRY(c->err,
                 cudaMemcpyAsync(c->out[0]->data, x->data, (size_t)tensor_nbytes(x),
                                 cudaMemcpyDeviceToDevice, be->stream),
                 "copying Resize's input");
        return GRAFT_OK;
    }
    void *scratch[2] = {NULL, NULL};
    size_t bytes = sizeof(float) * (size_t)biggest;
    graft_status st = GRAFT_OK;
    for (int i = 0; i < 2 && i < n_axes - 1 && st == GRAFT_OK; i++)
        st = cuda_malloc(be, bytes, &scratch[i], c->err);
    if (st == GRAFT_OK) st = resize_passes(be, c, &p, axes, n_axes, scratch);
    for (int i = 0; i < 2; i++)
        if (scratch[i]) cuda_free(be, scratch[i]);
    return st;
}

const cuda_kernel cuda_norm_kernels[] = {
    {"InstanceNormalization", k_instance_norm, NULL},
    {"GroupNormalization", k_group_norm, NULL},
    {"Resize", k_resize, NULL},
    {NULL, NULL, NULL},
};
