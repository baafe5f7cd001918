/* dnnl_common.h: what the oneDNN kernels share: the per-node state header, status mapping,
 * plain memory descriptors, primitive creation that refuses oneDNN's slow reference code. */
#ifndef GRAFT_CPU_DNNL_COMMON_H
#define GRAFT_CPU_DNNL_COMMON_H

#include <oneapi/dnnl/dnnl.h>

#include "cpu_backend.h"

/* Every kernel's state starts with this, so that dnnl_free_state can free any of them. */
typedef struct dnnl_node_state {
    void (*destroy)(struct dnnl_node_state *state);
} dnnl_node_state;

/* GRAFT_OK on dnnl_success, else GRAFT_E_BACKEND naming the node and what failed. */
graft_status dnnl_check(dnnl_status_t status, const op_call *call, const char *what);

/* Row-major f32 descriptor of the given dims. */
dnnl_status_t dnnl_plain_md(dnnl_memory_desc_t *md, int ndim, const int64_t *dims);

/* Attributes every primitive gets: strict f32 math (never bf16/tf32 behind our back, whatever
 * ONEDNN_DEFAULT_FPMATH_MODE says) and a scratchpad the library manages. NULL on failure. */
dnnl_primitive_attr_t dnnl_make_attr(void);

/* Create a primitive descriptor and the primitive. *usable is false (and GRAFT_OK returned) when
 * oneDNN has no implementation, or only its slow reference one, so that graft's runs instead. */
graft_status dnnl_make_primitive(cpu_backend *be, const void *op_desc,
                                 const_dnnl_primitive_attr_t attr, const op_call *call,
                                 dnnl_primitive_desc_t *pd, dnnl_primitive_t *prim, bool *usable);

/* A memory object over `md`; its buffer is set per call (handle NULL) or given. */
graft_status dnnl_make_memory(cpu_backend *be, const dnnl_memory_desc_t *md, void *handle,
                              const op_call *call, dnnl_memory_t *mem);

/* Run a primitive on the backend's stream and wait for it. */
graft_status dnnl_execute(cpu_backend *be, const_dnnl_primitive_t prim, int nargs,
                          const dnnl_exec_arg_t *args, const op_call *call);

/* Destroy helpers that accept NULL. */
void dnnl_destroy_primitive(dnnl_primitive_t *prim);
void dnnl_destroy_pd(dnnl_primitive_desc_t *pd);
void dnnl_destroy_memory(dnnl_memory_t *mem);

/* A hash of 64 values spread over w. Kernel state holding reordered weights is keyed by their
 * address; whoever changes weights in place must release the backend's state (graft_backend's
 * release_state); this catches most who forget (an optimizer step moves every weight) at no
 * measurable cost, where hashing every weight on every call would cost a few percent. */
uint64_t dnnl_weights_fingerprint(const tensor *w);

/* Copy `from` (memory over user data) into a new buffer *buf (malloc'ed) in layout `md`, with
 * *to a memory object over it. */
/* A reorder primitive from one layout (or dtype) to another. */
graft_status dnnl_make_reorder(cpu_backend *be, const dnnl_memory_desc_t *from,
                               const dnnl_memory_desc_t *to, const op_call *c,
                               dnnl_primitive_t *prim);
graft_status dnnl_reorder_once(cpu_backend *be, dnnl_memory_t from, const dnnl_memory_desc_t *md,
                               const op_call *c, void **buf, dnnl_memory_t *to);

/* An eltwise primitive (alg: a dnnl_alg_kind_t) over n f32 values as one flat array, with
 * memory objects for X and, unless y is NULL (in place), Y; *usable false when oneDNN has no
 * fast kernel for it (dnnl_eltwise.c). */
graft_status dnnl_eltwise_make(cpu_backend *be, const op_call *call, int alg, float alpha,
                               float beta, int64_t n, dnnl_primitive_t *prim, dnnl_memory_t *x,
                               dnnl_memory_t *y, bool *usable);

/* True when every input of the call that is present, and output 0, is f32. */
bool dnnl_all_f32(const op_call *call);

#endif
