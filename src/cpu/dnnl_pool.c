/* dnnl_pool.c: MaxPool (without its Indices output) and AveragePool, f32, 1-D to 3-D, through
 * oneDNN's pooling on plain NC(D)(H)W tensors, or NHWC ones where the layout plan keeps X and Y
 * channels-last. */
#include "graft_config.h"

#include <stdlib.h>
#include <string.h>

#include "../ops/nn.h"
#include "dnnl_common.h"

typedef struct pool_state {
    dnnl_node_state base;
    int ndim;
    int64_t x_dims[GRAFT_MAX_DIMS]; /* what the state was made for */
    bool nhwc;
    bool usable;
    dnnl_primitive_t prim;
    dnnl_memory_t x, y;
} pool_state;

static void pool_state_destroy(dnnl_node_state *base) {
    pool_state *s = (pool_state *)base;
    dnnl_destroy_primitive(&s->prim);
    dnnl_destroy_memory(&s->x);
    dnnl_destroy_memory(&s->y);
    free(s);
}

/* oneDNN's right padding: what the last window needs (ceil_mode may reach past the pads), and
 * false when its arithmetic would differ from ONNX's: an average that counts padding over a
 * window reaching beyond the declared pads (oneDNN would count those taps too), or a window that
 * sees no input at all. */
static bool pool_right_pad(const nn_window *w, int i, bool count_pad, int64_t *pad_r) {
    int64_t extent = nn_window_extent(w, i);
    int64_t needed = (w->out[i] - 1) * w->stride[i] + extent - w->in[i] - w->pad_begin[i];
    *pad_r = needed > w->pad_end[i] ? needed : w->pad_end[i];
    if (needed > w->pad_end[i] && count_pad) return false;
    if (w->pad_begin[i] >= extent || *pad_r >= extent) return false;
    /* oneDNN checks (in + pad_l + pad_r - extent) / stride + 1 == out */
    return (w->in[i] + w->pad_begin[i] + *pad_r - extent) / w->stride[i] + 1 == w->out[i];
}

static graft_status pool_build(cpu_backend *be, const op_call *c, bool is_max, pool_state *s) {
    const tensor *x = c->in[0], *y = c->out[0];
    nn_window win;
    TRY(nn_window_init(c->node, x->ndim - 2, x->dims + 2, NULL, &win, c->err));
    bool count_pad = !is_max && attr_i(c->node, "count_include_pad", 0) == 1;
    dnnl_dims_t strides, kernel, dilation, pad_l, pad_r;
    for (int i = 0; i < win.nsp; i++) {
        if (!pool_right_pad(&win, i, count_pad, &pad_r[i])) return GRAFT_OK;
        strides[i] = win.stride[i];
        kernel[i] = win.kernel[i];
        dilation[i] = win.dilation[i] - 1; /* oneDNN counts the gaps between taps */
        pad_l[i] = win.pad_begin[i];
    }
    dnnl_alg_kind_t alg = is_max      ? dnnl_pooling_max
                          : count_pad ? dnnl_pooling_avg_include_padding
                                      : dnnl_pooling_avg_exclude_padding;
    dnnl_memory_desc_t x_md, y_md;
    if (s->nhwc) {
        dnnl_dims_t xd = {x->dims[0], x->dims[1], x->dims[2], x->dims[3]};
        dnnl_dims_t yd = {y->dims[0], y->dims[1], y->dims[2], y->dims[3]};
        TRY(dnnl_check(dnnl_memory_desc_init_by_tag(&x_md, 4, xd, dnnl_f32, dnnl_nhwc), c, "X"));
        TRY(dnnl_check(dnnl_memory_desc_init_by_tag(&y_md, 4, yd, dnnl_f32, dnnl_nhwc), c, "Y"));
    } else {
        TRY(dnnl_check(dnnl_plain_md(&x_md, x->ndim, x->dims), c, "describe X"));
        TRY(dnnl_check(dnnl_plain_md(&y_md, y->ndim, y->dims), c, "describe Y"));
    }
    dnnl_pooling_v2_desc_t desc;
    if (dnnl_pooling_v2_forward_desc_init(&desc, dnnl_forward_inference, alg, &x_md, &y_md, strides,
                                          kernel, dilation, pad_l, pad_r) != dnnl_success)
        return GRAFT_OK; /* not usable: the reference runs */
    dnnl_primitive_attr_t attr = dnnl_make_attr();
    if (!attr) return op_error(c->node, c->err, GRAFT_E_BACKEND, "oneDNN attributes");
    dnnl_primitive_desc_t pd = NULL;
    graft_status st = dnnl_make_primitive(be, &desc, attr, c, &pd, &s->prim, &s->usable);
    dnnl_primitive_attr_destroy(attr);
    dnnl_destroy_pd(&pd);
    if (st != GRAFT_OK || !s->usable) return st;
    TRY(dnnl_make_memory(be, &x_md, NULL, c, &s->x));
    return dnnl_make_memory(be, &y_md, NULL, c, &s->y);
}

static graft_status run_pool(cpu_backend *be, const op_call *c, void **state, bool is_max,
                             bool *handled) {
    *handled = false;
    const tensor *x = c->in[0];
    if (!be->dnnl_engine || !dnnl_all_f32(c) || x->ndim < 3 || x->ndim > 5 ||
        tensor_numel(x) == 0 || tensor_numel(c->out[0]) == 0)
        return GRAFT_OK;
    if (c->n_out > 1 && c->out[1]) return GRAFT_OK; /* Indices: the reference computes them */
    bool nhwc = cpu_in_nhwc(be, c, 0);
    if (nhwc != cpu_out_nhwc(be, c, 0) || (nhwc && x->ndim != 4)) return GRAFT_OK;
    pool_state *s = *state;
    if (!s || s->ndim != x->ndim || s->nhwc != nhwc ||
        memcmp(s->x_dims, x->dims, (size_t)x->ndim * sizeof(int64_t))) {
        if (s) pool_state_destroy(&s->base);
        *state = NULL;
        s = calloc(1, sizeof *s);
        if (!s) return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "pooling state");
        s->base.destroy = pool_state_destroy;
        s->ndim = x->ndim;
        s->nhwc = nhwc;
        memcpy(s->x_dims, x->dims, (size_t)x->ndim * sizeof(int64_t));
        graft_status st = pool_build(be, c, is_max, s);
        if (st != GRAFT_OK) {
            pool_state_destroy(&s->base);
            return st;
        }
        *state = s;
    }
    if (!s->usable) return GRAFT_OK;
    TRY(dnnl_check(dnnl_memory_set_data_handle(s->x, x->data), c, "bind X"));
    TRY(dnnl_check(dnnl_memory_set_data_handle(s->y, c->out[0]->data), c, "bind Y"));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, s->x}, {DNNL_ARG_DST, s->y}};
    TRY(dnnl_execute(be, s->prim, 2, args, c));
    *handled = true;
    return GRAFT_OK;
}

graft_status dnnl_run_MaxPool(cpu_backend *be, const op_call *c, void **state, bool *handled) {
    return run_pool(be, c, state, true, handled);
}

graft_status dnnl_run_AveragePool(cpu_backend *be, const op_call *c, void **state, bool *handled) {
    return run_pool(be, c, state, false, handled);
}
