/* cuda_tensor_index.c: CUDA kernels of GatherElements, GatherND, ScatterND (reduction none),
 * Tile and Trilu: host-side checks and plans; launchers in tensor_index.cu, Tile as a strided
 * copy (tensor.cu). */
#include <stdint.h>
#include <string.h>

#include "../ops/tensor_index.h"
#include "cuda_internal.h"
#include "cuda_tensor.h"
#include "tensor_index_launch.h"

/* Element sizes the index kernels move, and indices they can load whole (aligned). */
static bool covered(const tensor *data, const tensor *idx) {
    size_t elem = graft_dtype_size(data->dtype);
    bool elem_ok = elem == 1 || elem == 2 || elem == 4 || elem == 8;
    return elem_ok && (!idx || (uintptr_t)idx->data % graft_dtype_size(idx->dtype) == 0);
}

static graft_status launched(const op_call *c, cudaError_t err, const char *what) {
    return cuda_fail_if(c->err, err, what);
}

graft_status cuda_tensor_gather_elements(cuda_backend *be, const op_call *c, void **state,
                                         bool *handled) {
    (void)state;
    int axis;
    TRY(gather_elements_check(c, &axis));
    const tensor *data = c->in[0], *idx = c->in[1];
    *handled = covered(data, idx);
    if (!*handled || tensor_numel(idx) == 0) return GRAFT_OK;
    /* Every index is out of range for an empty axis: that much the host can see. */
    if (data->dims[axis] == 0)
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                        "gathers %lld indices from the empty axis %d", (long long)tensor_numel(idx),
                        axis);
    int64_t strides[GRAFT_MAX_DIMS];
    dims_strides(data->ndim, data->dims, strides);
    return launched(
        c,
        cuda_gather_elements(c->out[0]->data, data->data, idx->data, idx->dtype == GRAFT_DTYPE_I64,
                             (int)graft_dtype_size(data->dtype), idx->ndim, idx->dims, strides,
                             axis, data->dims[axis], be->bad_index, be->stream),
        "launching the GatherElements kernel");
}

static void tuples_of(const nd_plan *p, cuda_nd_tuples *t) {
    memset(t, 0, sizeof *t);
    t->m = p->m;
    t->batches = p->batches;
    t->tuples = p->tuples;
    t->slice = p->slice;
    t->batch_stride = p->batch_stride;
    for (int j = 0; j < p->m; j++) {
        t->dims[j] = p->dims[j];
        t->strides[j] = p->strides[j];
    }
}

graft_status cuda_tensor_gather_nd(cuda_backend *be, const op_call *c, void **state,
                                   bool *handled) {
    (void)state;
    nd_plan p;
    TRY(gather_nd_plan(c, &p));
    *handled = covered(c->in[0], c->in[1]);
    if (!*handled) return GRAFT_OK;
    cuda_nd_tuples t;
    tuples_of(&p, &t);
    return launched(c,
                    cuda_gather_nd(c->out[0]->data, c->in[0]->data, c->in[1]->data,
                                   c->in[1]->dtype == GRAFT_DTYPE_I64,
                                   (int)graft_dtype_size(c->in[0]->dtype), &t, be->bad_index,
                                   be->stream),
                    "launching the GatherND kernel");
}

/* Reductions (add, mul, max, min) would need atomics per dtype: those run on the CPU. With
 * reduction none and repeated indices, which update lands is not defined (ONNX says so). */
graft_status cuda_tensor_scatter_nd(cuda_backend *be, const op_call *c, void **state,
                                    bool *handled) {
    (void)state;
    nd_plan p;
    scatter_mode mode;
    TRY(scatter_nd_plan(c, &p, &mode));
    *handled = mode == SCATTER_NONE && covered(c->in[0], c->in[1]);
    if (!*handled) return GRAFT_OK;
    int64_t bytes = tensor_nbytes(c->in[0]);
    if (bytes > 0 && c->out[0]->data != c->in[0]->data)
        CUDA_TRY(c->err,
                 cudaMemcpyAsync(c->out[0]->data, c->in[0]->data, (size_t)bytes,
                                 cudaMemcpyDeviceToDevice, be->stream),
                 "copying ScatterND's data on the GPU");
    cuda_nd_tuples t;
    tuples_of(&p, &t);
    return launched(c,
                    cuda_scatter_nd(c->out[0]->data, c->in[2]->data, c->in[1]->data,
                                    c->in[1]->dtype == GRAFT_DTYPE_I64,
                                    (int)graft_dtype_size(c->in[0]->dtype), &t, be->bad_index,
                                    be->stream),
                    "launching the ScatterND kernel");
}

/* Tile as a copy of the input viewed with a broadcast axis (stride 0, the repeats) before each
 * of its axes; views that stay longer than the copy kernels take (rank > 4 with every axis
 * repeated) run on the CPU. */
graft_status cuda_tensor_tile(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    int64_t reps[GRAFT_MAX_DIMS];
    TRY(tile_check(c, reps));
    const tensor *x = c->in[0];
    *handled = true;
    if (tensor_numel(c->out[0]) == 0) return GRAFT_OK;
    int64_t xs[GRAFT_MAX_DIMS], dims[2 * GRAFT_MAX_DIMS], strides[2 * GRAFT_MAX_DIMS];
    int64_t d[2 * GRAFT_MAX_DIMS], s[2 * GRAFT_MAX_DIMS];
    dims_strides(x->ndim, x->dims, xs);
    for (int k = 0; k < x->ndim; k++) {
        dims[2 * k] = reps[k];
        strides[2 * k] = 0;
        dims[2 * k + 1] = x->dims[k];
        strides[2 * k + 1] = xs[k];
    }
    int n = view_simplify(2 * x->ndim, dims, strides, d, s);
    if (n > GRAFT_MAX_DIMS) {
        *handled = false;
        return GRAFT_OK;
    }
    return cuda_tensor_copy_strided(be, c, c->out[0]->data, x->data, graft_dtype_size(x->dtype), n,
                                    d, s);
}

graft_status cuda_tensor_trilu(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    const tensor *x = c->in[0];
    if (!x) return op_missing_input(c, 0);
    int64_t k;
    TRY(trilu_diagonal(c->node, c->n_in > 1 ? c->in[1] : NULL, &k, c->err));
    if (x->ndim < 2) return op_error(c->node, c->err, GRAFT_E_SHAPE, "input must have rank >= 2");
    TRY(op_expect_output(c, c->out[0], x->dtype, x->ndim, x->dims));
    *handled = covered(x, NULL);
    if (!*handled) return GRAFT_OK;
    int64_t rows = x->dims[x->ndim - 2], cols = x->dims[x->ndim - 1];
    return launched(c,
                    cuda_trilu(c->out[0]->data, x->data, (int)graft_dtype_size(x->dtype),
                               dims_numel(x->ndim - 2, x->dims), rows, cols, k,
                               attr_i(c->node, "upper", 1) != 0, be->stream),
                    "launching the Trilu kernel");
}
