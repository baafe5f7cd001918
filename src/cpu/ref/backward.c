/* backward.c: the reference kernel of the Backward node: the forward op's backward rule applied
 * to a stand-in forward node (layout in src/ops/backward.h). */
#include <stdlib.h>
#include <string.h>

#include "../../ops/backward.h"
#include "../../ops/grad.h"

/* The forward node the rule sees: op, opset and the forward's attributes (shallow copies). */
static graft_status stand_in(const op_call *c, const backward_layout *l, ir_node *fwd,
                             ir_attr **attrs) {
    const ir_node *n = c->node;
    memset(fwd, 0, sizeof *fwd);
    *attrs = malloc(sizeof(ir_attr) * (size_t)(n->n_attrs > 0 ? n->n_attrs : 1));
    if (!*attrs) return op_error(n, c->err, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < n->n_attrs; i++)
        if (!backward_own_attr(n->attrs[i].name)) (*attrs)[fwd->n_attrs++] = n->attrs[i];
    fwd->name = n->name;
    fwd->op_type = (char *)l->op;
    fwd->domain = (char *)"";
    fwd->opset = l->fwd_opset;
    fwd->op = op_find(l->op);
    fwd->attrs = *attrs;
    fwd->n_in = l->n_fwd_in;
    fwd->n_out = l->n_fwd_out;
    fwd->inputs = n->inputs;
    fwd->outputs = n->inputs ? n->inputs + l->n_fwd_in : NULL;
    return GRAFT_OK;
}

graft_status ref_Backward(const op_call *c) {
    backward_layout l;
    TRY(backward_read_layout(c->node, c->n_in, c->n_out, &l, c->err));
    ir_node fwd;
    ir_attr *attrs;
    TRY(stand_in(c, &l, &fwd, &attrs));
    grad_call gc = {.node = &fwd,
                    .in = c->in,
                    .n_in = l.n_fwd_in,
                    .out = c->in + l.n_fwd_in,
                    .n_out = l.n_fwd_out,
                    .dout = c->in + l.n_fwd_in + l.n_fwd_out,
                    .din = c->out,
                    .err = c->err};
    graft_status st = grad_find(l.op)(&gc);
    free(attrs);
    return st;
}
