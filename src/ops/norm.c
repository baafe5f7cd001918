/* norm.c: shape inference and attribute checks of InstanceNormalization and GroupNormalization,
 * plus the parameters their kernels share. */
#include "norm.h"

static bool float_dtype(graft_dtype dt) {
    return dt == GRAFT_DTYPE_UNDEFINED || dtype_is_float(dt);
}

/* X, scale and B are all float, of one dtype (unknown dtypes pass). */
static graft_status check_float_inputs(const ir_node *node, const value_info *in, int n_in,
                                       graft_err *e) {
    static const char *names[] = {"X", "scale", "B"};
    for (int i = 0; i < n_in && i < 3; i++) {
        if (!in[i].present)
            return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "input %s is missing", names[i]);
        if (!float_dtype(in[i].dtype))
            return op_error(node, e, GRAFT_E_DTYPE, "%s has dtype %s, expected a float type",
                            names[i], graft_dtype_name(in[i].dtype));
        if (in[i].dtype && in[0].dtype && in[i].dtype != in[0].dtype)
            return op_error(node, e, GRAFT_E_DTYPE, "%s has dtype %s but X has %s", names[i],
                            graft_dtype_name(in[i].dtype), graft_dtype_name(in[0].dtype));
    }
    return GRAFT_OK;
}

/* scale / B must be 1-D of `want` elements (unknown sizes pass). */
static graft_status check_vector(const ir_node *node, const char *what, const value_info *p,
                                 int64_t want, const char *of, graft_err *e) {
    if (p->ndim < 0) return GRAFT_OK;
    if (p->ndim != 1)
        return op_error(node, e, GRAFT_E_SHAPE, "%s must be 1-D, it has rank %d", what, p->ndim);
    if (p->dims[0] >= 0 && want >= 0 && p->dims[0] != want)
        return op_error(node, e, GRAFT_E_SHAPE, "%s has %lld elements, expected %lld (%s)", what,
                        (long long)p->dims[0], (long long)want, of);
    return GRAFT_OK;
}

graft_status op_infer_InstanceNormalization(const ir_node *node, const value_info *in, int n_in,
                                            value_info *out, int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 3, 3, n_out, 1, 1, e));
    TRY(check_float_inputs(node, in, n_in, e));
    const value_info *x = &in[0];
    if (x->ndim >= 0 && x->ndim < 3)
        return op_error(node, e, GRAFT_E_SHAPE, "X must have rank >= 3 (N, C, D1, ...), not %d",
                        x->ndim);
    int64_t c = x->ndim > 0 ? x->dims[1] : -1;
    TRY(check_vector(node, "scale", &in[1], c, "the channels of X", e));
    TRY(check_vector(node, "B", &in[2], c, "the channels of X", e));
    op_same(&out[0], x);
    return GRAFT_OK;
}

graft_status group_norm_params(const ir_node *node, int64_t channels, int64_t *groups,
                               bool *per_channel, graft_err *e) {
    *groups = attr_i(node, "num_groups", -1);
    *per_channel = node->opset >= 21;
    if (!ir_node_attr(node, "num_groups"))
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "attribute num_groups is missing");
    if (*groups < 1)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "num_groups is %lld, expected >= 1",
                        (long long)*groups);
    if (channels >= 0 && channels % *groups != 0)
        return op_error(node, e, GRAFT_E_SHAPE,
                        "the %lld channels of X do not divide into num_groups %lld groups",
                        (long long)channels, (long long)*groups);
    int64_t stash = attr_i(node, "stash_type", GRAFT_DTYPE_F32);
    if (stash != GRAFT_DTYPE_F32)
        return op_error(node, e, GRAFT_E_UNSUPPORTED,
                        "stash_type %lld is not supported (graft computes in float or wider)",
                        (long long)stash);
    return GRAFT_OK;
}

graft_status op_infer_GroupNormalization(const ir_node *node, const value_info *in, int n_in,
                                         value_info *out, int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 3, 3, n_out, 1, 1, e));
    TRY(check_float_inputs(node, in, n_in, e));
    const value_info *x = &in[0];
    if (x->ndim >= 0 && x->ndim < 2)
        return op_error(node, e, GRAFT_E_SHAPE, "X must have rank >= 2 (N, C, ...), not %d",
                        x->ndim);
    int64_t c = x->ndim > 0 ? x->dims[1] : -1, groups;
    bool per_channel;
    TRY(group_norm_params(node, c, &groups, &per_channel, e));
    /* Opset 18 took one scale and bias per group; opset 21 takes them per channel. */
    int64_t want = per_channel ? c : groups;
    const char *of = per_channel ? "the channels of X" : "num_groups";
    TRY(check_vector(node, "scale", &in[1], want, of, e));
    TRY(check_vector(node, "bias", &in[2], want, of, e));
    op_same(&out[0], x);
    return GRAFT_OK;
}
