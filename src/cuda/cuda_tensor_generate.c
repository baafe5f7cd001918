/* cuda_tensor_generate.c: CUDA kernels of the ops that make tensors from attributes, shapes or
 * host scalars (ConstantOfShape, Shape, Range) and of Pad; launchers in tensor.cu. */
#include <stdint.h>
#include <string.h>

#include "../ops/shape_plan.h"
#include "cuda_tensor.h"
#include "tensor_launch.h"

_Static_assert((int)CUDA_PAD_CONSTANT == (int)PAD_CONSTANT &&
                   (int)CUDA_PAD_REFLECT == (int)PAD_REFLECT &&
                   (int)CUDA_PAD_EDGE == (int)PAD_EDGE && (int)CUDA_PAD_WRAP == (int)PAD_WRAP,
               "tensor_launch.h's pad modes follow tensor_plan.h's");

static bool all_zero(const unsigned char *bytes, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (bytes[i]) return false;
    return true;
}

/* Fill n elements of elem bytes at dst with value (host memory): a memset when the value is all
 * zero bytes, else the value repeated into the widest unit the size and alignment allow. */
static graft_status fill_value(cuda_backend *be, const op_call *c, void *dst, int64_t n,
                               const unsigned char *value, size_t elem) {
    int64_t bytes = n * (int64_t)elem;
    if (bytes <= 0) return GRAFT_OK;
    if (all_zero(value, elem)) {
        CUDA_TRY(c->err, cudaMemsetAsync(dst, 0, (size_t)bytes, be->stream),
                 "clearing a tensor on the GPU");
        return GRAFT_OK;
    }
    int unit = 16;
    while (unit > (int)elem && (bytes % unit != 0 || (uintptr_t)dst % (uintptr_t)unit != 0))
        unit /= 2;
    unsigned char pattern[16];
    for (int i = 0; i < unit; i++) pattern[i] = value[(size_t)i % elem];
    CUDA_TRY(c->err, cuda_tensor_fill(dst, bytes / unit, unit, pattern, be->stream),
             "launching the fill kernel");
    return GRAFT_OK;
}

graft_status cuda_tensor_constant_of_shape(cuda_backend *be, const op_call *c, void **state,
                                           bool *handled) {
    (void)state;
    *handled = true;
    tensor *out = c->out[0];
    const tensor *value;
    TRY(constant_of_shape_value(c, &value));
    int64_t n = tensor_numel(out);
    if (!value) {
        static const unsigned char zero[4] = {0};
        return fill_value(be, c, out->data, n, zero, sizeof zero);
    }
    size_t elem = graft_dtype_size(out->dtype);
    if (elem > 8 || elem == 0) return op_bad_output(c, "the value attribute");
    if (n > 0 && (uintptr_t)out->data % elem != 0) {
        *handled = false; /* a misaligned output: let the CPU write it */
        return GRAFT_OK;
    }
    return fill_value(be, c, out->data, n, value->data, elem);
}

/* Shape on the device, where its answer feeds only device nodes (exec_place.c): the dims, known
 * on the host, written by kernels whose arguments carry them, so a CUDA-graph recording holds
 * them (they are part of the plan's input-shape signature). */
graft_status cuda_tensor_shape(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    *handled = true;
    tensor *out = c->out[0];
    if (out->dtype != GRAFT_DTYPE_I64 || out->ndim != 1 || out->dims[0] > GRAFT_MAX_DIMS)
        return op_bad_output(c, "the shape");
    int64_t dims[GRAFT_MAX_DIMS];
    tensor host = *out;
    host.data = dims;
    tensor *outs[1] = {&host};
    op_call ref = {c->node, c->in, c->n_in, outs, 1, c->err};
    TRY(ref_Shape(&ref));
    for (int64_t i = 0; i < out->dims[0]; i++)
        CUDA_TRY(c->err,
                 cuda_tensor_fill((int64_t *)out->data + i, 1, (int)sizeof(int64_t), &dims[i],
                                  be->stream),
                 "writing a shape on the GPU");
    return GRAFT_OK;
}

graft_status cuda_tensor_range_kernel(cuda_backend *be, const op_call *c, void **state,
                                      bool *handled) {
    (void)state;
    *handled = true;
    tensor *out = c->out[0];
    if (c->n_in < 3) return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "needs 3 inputs");
    int64_t n;
    TRY(range_check(c, &n));
    switch (out->dtype) {
    case GRAFT_DTYPE_F32:
    case GRAFT_DTYPE_F64:
    case GRAFT_DTYPE_I16:
    case GRAFT_DTYPE_I32:
    case GRAFT_DTYPE_I64:
        break;
    default:
        *handled = false; /* the reference reports the dtype it does not support */
        return GRAFT_OK;
    }
    if ((uintptr_t)out->data % graft_dtype_size(out->dtype) != 0) {
        *handled = false; /* a misaligned output: let the CPU write it */
        return GRAFT_OK;
    }
    /* start and delta are host memory: they travel as kernel arguments, no copy needed. */
    CUDA_TRY(
        c->err,
        cuda_tensor_range(out->data, out->dtype, n, c->in[0]->data, c->in[2]->data, be->stream),
        "launching the Range kernel");
    return GRAFT_OK;
}

graft_status cuda_tensor_pad_kernel(cuda_backend *be, const op_call *c, void **state,
                                    bool *handled) {
    (void)state;
    *handled = true;
    const tensor *in = c->in[0];
    tensor *out = c->out[0];
    if (!in) return op_missing_input(c, 0);
    /* Only input 0 is device memory; the plan reads its shape and the host-side pads/axes. */
    pad_plan p;
    unsigned char cval[16];
    TRY(pad_call_plan(c, &p, cval));
    size_t elem = graft_dtype_size(in->dtype);
    if (tensor_numel(out) == 0) return GRAFT_OK;
    bool aligned = (uintptr_t)out->data % elem == 0 && (uintptr_t)in->data % elem == 0;
    if (elem == 0 || elem > 8 || !aligned) {
        *handled = false;
        return GRAFT_OK;
    }
    if (in->ndim == 0) {
        CUDA_TRY(c->err,
                 cudaMemcpyAsync(out->data, in->data, elem, cudaMemcpyDeviceToDevice, be->stream),
                 "copying a scalar on the GPU");
        return GRAFT_OK;
    }
    CUDA_TRY(c->err,
             cuda_tensor_pad(out->data, in->data, (int)elem, in->ndim, out->dims, in->dims, p.begin,
                             (int)p.mode, cval, be->stream),
             "launching the Pad kernel");
    return GRAFT_OK;
}
