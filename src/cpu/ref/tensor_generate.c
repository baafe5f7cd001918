/* tensor_generate.c: reference kernels of the ops that make tensors from shapes, attributes or
 * scalars (Shape, ConstantOfShape, Constant, Range) and of Pad. */
#include <stdlib.h>
#include <string.h>

#include "../../ops/shape_plan.h"
#include "tensor_copy.h"

graft_status ref_Shape(const op_call *c) {
    const tensor *in = c->in[0];
    tensor *out = c->out[0];
    if (!in) return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "input is missing");
    int64_t r = in->ndim, start = 0, end = r;
    if (c->node->opset >= 15) {
        start = attr_i(c->node, "start", 0);
        end = attr_i(c->node, "end", r);
        if (start < 0) start += r;
        if (end < 0) end += r;
        start = start < 0 ? 0 : start > r ? r : start;
        end = end < 0 ? 0 : end > r ? r : end;
    }
    int64_t n = end > start ? end - start : 0;
    if (out->dtype != GRAFT_DTYPE_I64 || out->ndim != 1 || out->dims[0] != n)
        return op_bad_output(c, "the shape");
    int64_t *v = out->data;
    for (int64_t i = 0; i < n; i++) v[i] = in->dims[start + i];
    return GRAFT_OK;
}

graft_status ref_ConstantOfShape(const op_call *c) {
    tensor *out = c->out[0];
    const tensor *value;
    TRY(constant_of_shape_value(c, &value));
    if (!value) {
        memset(out->data, 0, (size_t)tensor_nbytes(out));
        return GRAFT_OK;
    }
    fill_elements(out->data, value->data, graft_dtype_size(out->dtype), tensor_numel(out));
    return GRAFT_OK;
}

graft_status ref_Constant(const op_call *c) {
    tensor *out = c->out[0];
    const ir_attr *a = ir_node_attr(c->node, "value");
    const void *src = NULL;
    int64_t nbytes = -1;
    if (a && a->type == IR_ATTR_TENSOR) {
        if (a->t.dtype != out->dtype || !shapes_equal(a->t.ndim, a->t.dims, out->ndim, out->dims))
            return op_bad_output(c, "the value attribute");
        src = a->t.data;
        nbytes = tensor_nbytes(&a->t);
    } else if ((a = ir_node_attr(c->node, "value_float")) != NULL) {
        src = &a->f;
        nbytes = sizeof(float);
    } else if ((a = ir_node_attr(c->node, "value_floats")) != NULL) {
        src = a->floats;
        nbytes = a->n * (int64_t)sizeof(float);
    } else if ((a = ir_node_attr(c->node, "value_int")) != NULL) {
        src = &a->i;
        nbytes = sizeof(int64_t);
    } else if ((a = ir_node_attr(c->node, "value_ints")) != NULL) {
        src = a->ints;
        nbytes = a->n * (int64_t)sizeof(int64_t);
    } else {
        return op_error(c->node, c->err, GRAFT_E_UNSUPPORTED, "has no supported value attribute");
    }
    if (nbytes != tensor_nbytes(out)) return op_bad_output(c, "the value attribute");
    if (nbytes > 0) memcpy(out->data, src, (size_t)nbytes);
    return GRAFT_OK;
}

graft_status ref_Range(const op_call *c) {
    tensor *out = c->out[0];
    const tensor *start = c->in[0], *delta = c->in[2];
    int64_t n;
    TRY(range_check(c, &n));
    if (out->dtype == GRAFT_DTYPE_F32) {
        float s = *(const float *)start->data, d = *(const float *)delta->data;
        float *o = out->data;
        for (int64_t i = 0; i < n; i++) o[i] = s + (float)i * d;
    } else if (out->dtype == GRAFT_DTYPE_F64) {
        double s = *(const double *)start->data, d = *(const double *)delta->data;
        double *o = out->data;
        for (int64_t i = 0; i < n; i++) o[i] = s + (double)i * d;
    } else {
        /* Unsigned wrap-around is exact for every value that lies inside [start, limit). */
        uint64_t s = (uint64_t)tensor_get_i64(start, 0), d = (uint64_t)tensor_get_i64(delta, 0);
        for (int64_t i = 0; i < n; i++) {
            int64_t v = (int64_t)(s + (uint64_t)i * d);
            switch (out->dtype) {
            case GRAFT_DTYPE_I64:
                ((int64_t *)out->data)[i] = v;
                break;
            case GRAFT_DTYPE_I32:
                ((int32_t *)out->data)[i] = (int32_t)v;
                break;
            case GRAFT_DTYPE_I16:
                ((int16_t *)out->data)[i] = (int16_t)v;
                break;
            default:
                return op_bad_output(c, "a range of f32, f64, i16, i32 or i64");
            }
        }
    }
    return GRAFT_OK;
}
