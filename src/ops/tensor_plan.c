/* tensor_plan.c: integer-list readers and the Slice, Pad and Transpose parameter plans shared by
 * shape inference and the reference kernels of the tensor op family. */
#include <stdint.h>
#include <string.h>

#include "tensor_plan.h"

const value_info *tensor_opt_input(const value_info *in, int n_in, int i) {
    if (i >= n_in || !in[i].present) return NULL;
    return &in[i];
}

static bool is_index_dtype(graft_dtype dt) {
    return dt == GRAFT_DTYPE_I64 || dt == GRAFT_DTYPE_I32;
}

graft_status int_list_from_input(const ir_node *node, const value_info *in, const char *what,
                                 int max, int_list *out, graft_err *e) {
    memset(out, 0, sizeof *out);
    out->state = INT_LIST_ABSENT;
    if (!in) return GRAFT_OK;
    graft_dtype dt = in->value ? in->value->dtype : in->dtype;
    if (dt != GRAFT_DTYPE_UNDEFINED && !is_index_dtype(dt))
        return op_error(node, e, GRAFT_E_DTYPE, "input '%s' must be int32 or int64, not %s", what,
                        graft_dtype_name(dt));
    int ndim = in->value ? in->value->ndim : in->ndim;
    if (ndim > 1) {
        char s[128];
        return op_error(node, e, GRAFT_E_SHAPE, "input '%s' must be 1-D, got shape %s", what,
                        shape_str(s, sizeof s, ndim, in->value ? in->value->dims : in->dims));
    }
    if (!in->value) {
        out->state = INT_LIST_UNKNOWN;
        out->n = ndim == 0 ? 1 : ndim == 1 && in->dims[0] >= 0 ? (int)in->dims[0] : -1;
        if (ndim == 1 && in->dims[0] > max) out->n = -1;
        return GRAFT_OK;
    }
    int64_t n = tensor_numel(in->value);
    if (n < 0 || n > max)
        return op_error(node, e, GRAFT_E_UNSUPPORTED,
                        "input '%s' has %lld values, more than the %d supported", what,
                        (long long)n, max);
    out->state = INT_LIST_KNOWN;
    out->n = (int)n;
    for (int64_t i = 0; i < n; i++) out->v[i] = tensor_get_i64(in->value, i);
    return GRAFT_OK;
}

graft_status int_list_from_attr(const ir_node *node, const char *name, int max, int_list *out,
                                graft_err *e) {
    memset(out, 0, sizeof *out);
    out->state = INT_LIST_ABSENT;
    const ir_attr *a = ir_node_attr(node, name);
    if (!a) return GRAFT_OK;
    if (a->type != IR_ATTR_INTS)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "attribute '%s' must be a list of ints",
                        name);
    if (a->n > max)
        return op_error(node, e, GRAFT_E_UNSUPPORTED,
                        "attribute '%s' has %lld values, more than the %d supported", name,
                        (long long)a->n, max);
    out->state = INT_LIST_KNOWN;
    out->n = (int)a->n;
    for (int64_t i = 0; i < a->n; i++) out->v[i] = a->ints[i];
    return GRAFT_OK;
}

void tensor_value_info(value_info *vi, const tensor *t) {
    memset(vi, 0, sizeof *vi);
    if (!t) return;
    vi->present = true;
    vi->dtype = t->dtype;
    vi->ndim = t->ndim;
    for (int i = 0; i < t->ndim && i < GRAFT_MAX_DIMS; i++) vi->dims[i] = t->dims[i];
    vi->value = t;
}

graft_status transpose_perm(const ir_node *node, int rank, int *perm, graft_err *e) {
    int_list p;
    TRY(int_list_from_attr(node, "perm", GRAFT_MAX_DIMS, &p, e));
    if (p.state == INT_LIST_ABSENT) {
        for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
        return GRAFT_OK;
    }
    if (p.n != rank)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "perm has %d entries but the input has rank %d", p.n, rank);
    bool seen[GRAFT_MAX_DIMS] = {false};
    for (int i = 0; i < rank; i++) {
        if (p.v[i] < 0 || p.v[i] >= rank || seen[p.v[i]])
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                            "perm is not a permutation of 0..%d (entry %d is %lld)", rank - 1, i,
                            (long long)p.v[i]);
        seen[p.v[i]] = true;
        perm[i] = (int)p.v[i];
    }
    return GRAFT_OK;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* ONNX Slice on one axis of size dim: negative start/end count from the back, then clamp (to
 * [0, dim] going forward, [-1, dim-1] going backward); written so INT64_MIN/MAX cannot overflow. */
static void slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first,
                       int64_t *len) {
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    if (step > 0) {
        start = clamp64(start, 0, dim);
        end = clamp64(end, 0, dim);
        *len = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
        int64_t back = step == INT64_MIN ? INT64_MAX : -step;
        start = clamp64(start, 0, dim - 1);
        end = clamp64(end, -1, dim - 1);
        *len = dim > 0 && start > end ? (start - end - 1) / back + 1 : 0;
    }
    *first = *len > 0 ? start : 0;
}

static graft_status slice_lists(const ir_node *node, const value_info *in, int n_in,
                                int_list *starts, int_list *ends, int_list *axes, int_list *steps,
                                graft_err *e) {
    if (node->opset < 10) {
        TRY(int_list_from_attr(node, "starts", GRAFT_MAX_DIMS, starts, e));
        TRY(int_list_from_attr(node, "ends", GRAFT_MAX_DIMS, ends, e));
        TRY(int_list_from_attr(node, "axes", GRAFT_MAX_DIMS, axes, e));
        memset(steps, 0, sizeof *steps);
    } else {
        TRY(int_list_from_input(node, tensor_opt_input(in, n_in, 1), "starts", GRAFT_MAX_DIMS,
                                starts, e));
        TRY(int_list_from_input(node, tensor_opt_input(in, n_in, 2), "ends", GRAFT_MAX_DIMS, ends,
                                e));
        TRY(int_list_from_input(node, tensor_opt_input(in, n_in, 3), "axes", GRAFT_MAX_DIMS, axes,
                                e));
        TRY(int_list_from_input(node, tensor_opt_input(in, n_in, 4), "steps", GRAFT_MAX_DIMS, steps,
                                e));
    }
    if (starts->state == INT_LIST_ABSENT || ends->state == INT_LIST_ABSENT)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "needs both starts and ends");
    int n = starts->n >= 0 ? starts->n : ends->n;
    const int_list *lists[3] = {ends, axes, steps};
    for (int i = 0; i < 3; i++)
        if (lists[i]->state != INT_LIST_ABSENT && lists[i]->n >= 0 && n >= 0 && lists[i]->n != n)
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                            "starts, ends, axes and steps must have the same length (%d vs %d)", n,
                            lists[i]->n);
    return GRAFT_OK;
}

graft_status slice_plan_make(const ir_node *node, const value_info *in, int n_in, slice_plan *p,
                             graft_err *e) {
    int_list starts, ends, axes, steps;
    TRY(slice_lists(node, in, n_in, &starts, &ends, &axes, &steps, e));
    const value_info *data = &in[0];
    p->ndim = data->ndim;
    if (p->ndim < 0) return GRAFT_OK;
    for (int i = 0; i < p->ndim; i++) {
        p->start[i] = 0;
        p->step[i] = 1;
        p->len[i] = data->dims[i];
    }
    int n = starts.n >= 0                   ? starts.n
            : ends.n >= 0                   ? ends.n
            : axes.state != INT_LIST_ABSENT ? axes.n
                                            : -1;
    bool values_known = starts.state == INT_LIST_KNOWN && ends.state == INT_LIST_KNOWN &&
                        steps.state != INT_LIST_UNKNOWN;
    if (axes.state == INT_LIST_UNKNOWN || (axes.state == INT_LIST_ABSENT && n < 0)) {
        /* Which axes are sliced is not known: only the rank is. */
        for (int i = 0; i < p->ndim; i++) p->len[i] = -1;
        return GRAFT_OK;
    }
    bool seen[GRAFT_MAX_DIMS] = {false};
    for (int k = 0; k < n; k++) {
        int axis;
        TRY(op_axis(node, axes.state == INT_LIST_KNOWN ? axes.v[k] : k, p->ndim, &axis, e));
        if (seen[axis])
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "axis %d is sliced twice", axis);
        seen[axis] = true;
        int64_t step = steps.state == INT_LIST_KNOWN ? steps.v[k] : 1;
        if (values_known && step == 0)
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "step on axis %d is zero", axis);
        if (!values_known || data->dims[axis] < 0) {
            p->len[axis] = -1;
            continue;
        }
        p->step[axis] = step;
        slice_axis(data->dims[axis], starts.v[k], ends.v[k], step, &p->start[axis], &p->len[axis]);
    }
    return GRAFT_OK;
}

static graft_status pad_mode_parse(const ir_node *node, pad_mode *mode, graft_err *e) {
    const char *m = attr_s(node, "mode", "constant");
    if (strcmp(m, "constant") == 0)
        *mode = PAD_CONSTANT;
    else if (strcmp(m, "reflect") == 0)
        *mode = PAD_REFLECT;
    else if (strcmp(m, "edge") == 0)
        *mode = PAD_EDGE;
    else if (strcmp(m, "wrap") == 0)
        *mode = PAD_WRAP;
    else
        return op_error(node, e, GRAFT_E_UNSUPPORTED,
                        "mode '%s' is not one of constant, reflect, edge, wrap", m);
    return GRAFT_OK;
}

graft_status pad_plan_make(const ir_node *node, const value_info *in, int n_in, pad_plan *p,
                           graft_err *e) {
    memset(p, 0, sizeof *p);
    TRY(pad_mode_parse(node, &p->mode, e));
    int_list pads, axes;
    memset(&axes, 0, sizeof axes);
    if (node->opset < 11) {
        TRY(int_list_from_attr(node, "pads", 2 * GRAFT_MAX_DIMS, &pads, e));
    } else {
        TRY(int_list_from_input(node, tensor_opt_input(in, n_in, 1), "pads", 2 * GRAFT_MAX_DIMS,
                                &pads, e));
        if (node->opset >= 18)
            TRY(int_list_from_input(node, tensor_opt_input(in, n_in, 3), "axes", GRAFT_MAX_DIMS,
                                    &axes, e));
    }
    if (pads.state == INT_LIST_ABSENT)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "needs pads");
    p->ndim = in[0].ndim;
    if (p->ndim < 0 && axes.state == INT_LIST_ABSENT && pads.n >= 0) p->ndim = pads.n / 2;
    if (pads.state == INT_LIST_UNKNOWN || axes.state == INT_LIST_UNKNOWN || p->ndim < 0)
        return GRAFT_OK;
    int naxes = axes.state == INT_LIST_KNOWN ? axes.n : p->ndim;
    if (pads.n != 2 * naxes)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "has %d pads, expected %d (two per padded axis)", pads.n, 2 * naxes);
    bool seen[GRAFT_MAX_DIMS] = {false};
    for (int k = 0; k < naxes; k++) {
        int axis = k;
        if (axes.state == INT_LIST_KNOWN) TRY(op_axis(node, axes.v[k], p->ndim, &axis, e));
        if (seen[axis])
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "axis %d is padded twice", axis);
        seen[axis] = true;
        p->begin[axis] = pads.v[k];
        p->end[axis] = pads.v[k + naxes];
    }
    p->pads_known = true;
    return GRAFT_OK;
}

/* The input index that output index o of an axis reads, or -1 for the constant. */
int64_t pad_plan_source(pad_mode mode, int64_t o, int64_t begin, int64_t dim) {
    int64_t i = o - begin;
    if (i >= 0 && i < dim) return i;
    if (dim == 0) return -1;
    switch (mode) {
    case PAD_CONSTANT:
        return -1;
    case PAD_EDGE:
        return i < 0 ? 0 : dim - 1;
    case PAD_WRAP:
        return ((i % dim) + dim) % dim;
    case PAD_REFLECT: {
        if (dim == 1) return 0;
        /* Reflection without repeating the edge is periodic with period 2 * (dim - 1). */
        int64_t period = 2 * (dim - 1), k = ((i % period) + period) % period;
        return k < dim ? k : period - k;
    }
    }
    return -1;
}
