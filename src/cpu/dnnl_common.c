/* dnnl_common.c: the oneDNN engine and stream of the CPU backend, per-node state release and the
 * helpers the oneDNN kernels share. */
#include "graft_config.h"

#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl_debug.h>

#include "dnnl_common.h"

graft_status dnnl_backend_init(cpu_backend *be, graft_err *e) {
    dnnl_engine_t engine = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_status_t st = dnnl_engine_create(&engine, dnnl_cpu, 0);
    if (st == dnnl_success) st = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
    if (st != dnnl_success) {
        if (engine) dnnl_engine_destroy(engine);
        return err_set(e, GRAFT_E_BACKEND, "oneDNN: could not create the CPU engine (%s)",
                       dnnl_status2str(st));
    }
    be->dnnl_engine = engine;
    be->dnnl_stream = stream;
    return GRAFT_OK;
}

void dnnl_backend_fini(cpu_backend *be) {
    if (be->dnnl_stream) dnnl_stream_destroy((dnnl_stream_t)be->dnnl_stream);
    if (be->dnnl_engine) dnnl_engine_destroy((dnnl_engine_t)be->dnnl_engine);
    be->dnnl_stream = NULL;
    be->dnnl_engine = NULL;
}

void dnnl_free_state(void *state) {
    dnnl_node_state *s = state;
    if (s && s->destroy) s->destroy(s);
}

graft_status dnnl_check(dnnl_status_t status, const op_call *call, const char *what) {
    if (status == dnnl_success) return GRAFT_OK;
    return op_error(call->node, call->err, GRAFT_E_BACKEND, "oneDNN failed to %s: %s", what,
                    dnnl_status2str(status));
}

dnnl_status_t dnnl_plain_md(dnnl_memory_desc_t *md, int ndim, const int64_t *dims) {
    dnnl_dims_t d, strides;
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        d[i] = dims[i];
        strides[i] = s;
        s *= dims[i] > 0 ? dims[i] : 1;
    }
    return dnnl_memory_desc_init_by_strides(md, ndim, d, dnnl_f32, strides);
}

bool dnnl_bf16_capable(void) {
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return ((unsigned)isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) ==
           (unsigned)dnnl_cpu_isa_avx512_core_bf16;
}

dnnl_primitive_attr_t dnnl_make_attr(void) {
    dnnl_primitive_attr_t attr = NULL;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success) return NULL;
    if (dnnl_primitive_attr_set_fpmath_mode(attr, dnnl_fpmath_mode_strict) != dnnl_success) {
        dnnl_primitive_attr_destroy(attr);
        return NULL;
    }
    return attr;
}

graft_status dnnl_make_primitive(cpu_backend *be, const void *op_desc,
                                 const_dnnl_primitive_attr_t attr, const op_call *call,
                                 dnnl_primitive_desc_t *pd, dnnl_primitive_t *prim, bool *usable) {
    *pd = NULL;
    *prim = NULL;
    *usable = false;
    dnnl_status_t st =
        dnnl_primitive_desc_create(pd, op_desc, attr, (dnnl_engine_t)be->dnnl_engine, NULL);
    /* Only running out of memory is an error; a case oneDNN rejects runs in graft's code. */
    if (st == dnnl_out_of_memory) return dnnl_check(st, call, "describe the primitive");
    if (st != dnnl_success) return GRAFT_OK;
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(*pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
        impl && !strncmp(impl, "ref", 3)) {
        /* oneDNN's reference code is slower than graft's own loops. */
        dnnl_destroy_pd(pd);
        return GRAFT_OK;
    }
    st = dnnl_primitive_create(prim, *pd);
    if (st != dnnl_success) {
        dnnl_destroy_pd(pd);
        return dnnl_check(st, call, "create the primitive");
    }
    *usable = true;
    return GRAFT_OK;
}

graft_status dnnl_make_memory(cpu_backend *be, const dnnl_memory_desc_t *md, void *handle,
                              const op_call *call, dnnl_memory_t *mem) {
    return dnnl_check(dnnl_memory_create(mem, md, (dnnl_engine_t)be->dnnl_engine,
                                         handle ? handle : DNNL_MEMORY_NONE),
                      call, "create a memory object");
}

graft_status dnnl_execute(cpu_backend *be, const_dnnl_primitive_t prim, int nargs,
                          const dnnl_exec_arg_t *args, const op_call *call) {
    dnnl_stream_t stream = (dnnl_stream_t)be->dnnl_stream;
    TRY(dnnl_check(dnnl_primitive_execute(prim, stream, nargs, args), call, "execute"));
    return dnnl_check(dnnl_stream_wait(stream), call, "finish");
}

void dnnl_destroy_primitive(dnnl_primitive_t *prim) {
    if (*prim) dnnl_primitive_destroy(*prim);
    *prim = NULL;
}

void dnnl_destroy_pd(dnnl_primitive_desc_t *pd) {
    if (*pd) dnnl_primitive_desc_destroy(*pd);
    *pd = NULL;
}

void dnnl_destroy_memory(dnnl_memory_t *mem) {
    if (*mem) dnnl_memory_destroy(*mem);
    *mem = NULL;
}

bool dnnl_all_f32(const op_call *call) {
    for (int i = 0; i < call->n_in; i++)
        if (call->in[i] && call->in[i]->dtype != GRAFT_DTYPE_F32) return false;
    return call->n_out >= 1 && call->out[0] && call->out[0]->dtype == GRAFT_DTYPE_F32;
}

/* A hash of 64 weights spread over the tensor. The state is keyed by the weights' address, and
 * whoever changes weights in place must release the backend's state (graft_backend's
 * release_state); this catches most who forget (an optimizer step moves every weight) at no
 * measurable cost, where hashing every weight on every call would cost a few percent. */
uint64_t dnnl_weights_fingerprint(const tensor *w) {
    int64_t n = tensor_numel(w);
    const uint32_t *bits = w->data;
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < 64 && n > 0; i++) {
        h ^= bits[i * n / 64];
        h *= 1099511628211ull;
    }
    return h;
}

/* Copy `from` (memory over user data) into a new buffer in layout `md`, once. */
graft_status dnnl_make_reorder(cpu_backend *be, const dnnl_memory_desc_t *from,
                               const dnnl_memory_desc_t *to, const op_call *c,
                               dnnl_primitive_t *prim) {
    dnnl_engine_t engine = (dnnl_engine_t)be->dnnl_engine;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = dnnl_make_attr();
    dnnl_status_t st = dnnl_reorder_primitive_desc_create(&pd, from, engine, to, engine, attr);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (st == dnnl_success) st = dnnl_primitive_create(prim, pd);
    dnnl_destroy_pd(&pd);
    return dnnl_check(st, c, "create a reorder");
}

graft_status dnnl_reorder_once(cpu_backend *be, dnnl_memory_t from, const dnnl_memory_desc_t *md,
                               const op_call *c, void **buf, dnnl_memory_t *to) {
    const dnnl_memory_desc_t *from_md = NULL;
    TRY(dnnl_check(dnnl_memory_get_memory_desc(from, &from_md), c, "query a memory layout"));
    size_t bytes = dnnl_memory_desc_get_size(md);
    *buf = host_alloc_aligned(bytes);
    if (!*buf) return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "reordering weights");
    TRY(dnnl_make_memory(be, md, *buf, c, to));
    dnnl_engine_t engine = (dnnl_engine_t)be->dnnl_engine;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_primitive_attr_t attr = dnnl_make_attr();
    dnnl_status_t st = dnnl_reorder_primitive_desc_create(&pd, from_md, engine, md, engine, attr);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (st == dnnl_success) st = dnnl_primitive_create(&prim, pd);
    dnnl_destroy_pd(&pd);
    graft_status gs = dnnl_check(st, c, "create a weights reorder");
    if (gs == GRAFT_OK) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, *to}};
        gs = dnnl_execute(be, prim, 2, args, c);
    }
    dnnl_destroy_primitive(&prim);
    return gs;
}
