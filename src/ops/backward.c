/* backward.c: shape inference of the Backward node (layout in backward.h): gradient k takes
 * forward input k's dtype and shape. */
#include "backward.h"

#include <string.h>

#include "grad.h"

bool backward_own_attr(const char *name) {
    return !strcmp(name, "op") || !strcmp(name, "fwd_opset") || !strcmp(name, "n_fwd_in") ||
           !strcmp(name, "n_fwd_out");
}

graft_status backward_read_layout(const ir_node *node, int n_in, int n_out, backward_layout *l,
                                  graft_err *e) {
    l->op = attr_s(node, "op", NULL);
    int64_t opset = attr_i(node, "fwd_opset", -1);
    int64_t fin = attr_i(node, "n_fwd_in", -1), fout = attr_i(node, "n_fwd_out", -1);
    if (!l->op || !l->op[0] || opset < 1 || opset > 1000 || fin < 1 || fin > 1000 || fout < 1 ||
        fout > 1000)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL,
                        "needs attributes op (a string), fwd_opset, n_fwd_in and n_fwd_out "
                        "(positive ints)");
    l->fwd_opset = (int)opset;
    l->n_fwd_in = (int)fin;
    l->n_fwd_out = (int)fout;
    if (n_in != l->n_fwd_in + 2 * l->n_fwd_out || n_out != l->n_fwd_in)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL,
                        "backward of %s (%d inputs, %d outputs) has %d inputs and %d outputs; "
                        "expected %d and %d",
                        l->op, l->n_fwd_in, l->n_fwd_out, n_in, n_out,
                        l->n_fwd_in + 2 * l->n_fwd_out, l->n_fwd_in);
    if (!grad_find(l->op))
        return op_error(node, e, GRAFT_E_UNSUPPORTED, "graft has no backward rule for %s", l->op);
    return GRAFT_OK;
}

graft_status op_infer_Backward(const ir_node *node, const value_info *in, int n_in, value_info *out,
                               int n_out, graft_err *e) {
    backward_layout l;
    TRY(backward_read_layout(node, n_in, n_out, &l, e));
    for (int k = 0; k < n_out; k++) {
        memset(&out[k], 0, sizeof out[k]);
        if (node->outputs && node->outputs[k] < 0) continue; /* not wanted */
        if (!in[k].present)
            return op_error(node, e, GRAFT_E_MALFORMED_MODEL,
                            "wants the gradient of forward input %d, which is omitted", k);
        if (!dtype_is_float(in[k].dtype) && in[k].dtype != GRAFT_DTYPE_UNDEFINED)
            return op_error(node, e, GRAFT_E_DTYPE,
                            "wants the gradient of forward input %d, which is %s", k,
                            graft_dtype_name(in[k].dtype));
        op_same(&out[k], &in[k]);
    }
    return GRAFT_OK;
}
