/* backend.h: the backend interface (a table of functions) that the executor runs nodes through. */
#ifndef GRAFT_CORE_BACKEND_H
#define GRAFT_CORE_BACKEND_H

#include <stdbool.h>

#include "../ops/op.h"

typedef struct graft_backend {
    const char *name;
    void *impl;
    /* Buffers for tensors this backend computes on. */
    void *(*alloc)(void *impl, size_t bytes);
    void (*free)(void *impl, void *ptr);
    /* Can this backend run this node (op type, dtypes)? */
    bool (*supports)(void *impl, const ir_node *node);
    /* Run one node. `node_index` keys per-node state (prepacked weights, primitives), which the
     * backend keeps until release_state or destroy. */
    graft_status (*run)(void *impl, int node_index, const op_call *call);
    void (*release_state)(void *impl);
    graft_status (*synchronize)(void *impl);
    void (*destroy)(void *impl);
} graft_backend;

#endif
