/* backend.h: the backend interface (a table of functions) that the executor runs nodes through. */
#ifndef GRAFT_CORE_BACKEND_H
#define GRAFT_CORE_BACKEND_H

#include <stdbool.h>

#include "../ops/op.h"

typedef struct graft_backend {
    const char *name;
    void *impl;
    /* Buffers live in device memory (true) or host memory (false). For a device backend the
     * executor moves tensors with copy_to_device/copy_to_host; a node's inputs at the positions
     * node_input_on_host() names stay on the host (shape-like inputs its inference reads). */
    bool is_device;
    /* Buffers for tensors this backend computes on. alloc fails with a message naming how much
     * was asked for and what is free. Host buffers come zero-filled; device buffers do not, so
     * device kernels write every element of their outputs. */
    graft_status (*alloc)(void *impl, size_t bytes, void **out, graft_err *e);
    void (*free)(void *impl, void *ptr);
    /* Can this backend run this node's op type? run may still hand a case it lacks a kernel for
     * (a dtype, an attribute) to the CPU reference itself. */
    bool (*supports)(void *impl, const ir_node *node);
    /* Run one node. `node_index` keys per-node state (prepacked weights, primitives), which the
     * backend keeps until release_state or destroy. */
    graft_status (*run)(void *impl, int node_index, const op_call *call);
    void (*release_state)(void *impl);
    graft_status (*synchronize)(void *impl, graft_err *e);
    /* Device backends only (NULL otherwise). copy_to_device returns once `src` may change (the
     * device copy completes in stream order, before any later work); copy_to_host returns with
     * the data in `dst`. */
    graft_status (*copy_to_device)(void *impl, void *dst, const void *src, size_t bytes,
                                   graft_err *e);
    graft_status (*copy_to_host)(void *impl, void *dst, const void *src, size_t bytes,
                                 graft_err *e);
    graft_status (*copy_on_device)(void *impl, void *dst, const void *src, size_t bytes,
                                   graft_err *e);
    /* Optional (device backends): page-locked host memory, which copy_to_device and
     * copy_to_host move directly (no staging through a bounce buffer); host_free takes only
     * what host_alloc gave, and may be called after destroy. */
    graft_status (*host_alloc)(void *impl, size_t bytes, void **out, graft_err *e);
    void (*host_free)(void *ptr);
    /* Optional (device backends): an upload from page-locked host memory on a copy stream of
     * its own, so that it runs beside the work queued after it (it starts once the work queued
     * before it is done); returns at once. wait_uploads makes the work queued from now on wait,
     * on the device, for the uploads into [ptr, ptr + bytes); sync_uploads waits on the host for
     * every upload. Nothing may be captured between an upload and its wait. */
    graft_status (*upload_async)(void *impl, void *dst, const void *src, size_t bytes,
                                 graft_err *e);
    graft_status (*wait_uploads)(void *impl, const void *ptr, size_t bytes, graft_err *e);
    graft_status (*sync_uploads)(void *impl, graft_err *e);
    /* Device backends that can record their queued work and replay it (CUDA graphs); NULL
     * otherwise. Between capture_begin and capture_end nothing may synchronize or copy from
     * pageable host memory; capture_end returns an instantiated graph (or an error, after which
     * the backend is usable again). */
    graft_status (*capture_begin)(void *impl, graft_err *e);
    graft_status (*capture_end)(void *impl, void **graph, graft_err *e);
    graft_status (*replay)(void *impl, void *graph, graft_err *e);
    void (*graph_free)(void *impl, void *graph);
    /* Optional: fused groups. Called after placement with how many nodes read each value (+1
     * for a graph output); sets group_end[i] to the last member of the group node i belongs to
     * (i when it is on its own). The executor keeps every buffer a member reads or writes alive
     * until that last member has run; the backend may defer the members' work until then. */
    void (*plan_groups)(void *impl, const ir_graph *g, const unsigned char *node_on_dev,
                        const int *readers, int *group_end);
    /* Optional: the name of the fused group node_index ends (static storage), else NULL; a
     * profile lists the group's time under it. */
    const char *(*group_name)(void *impl, int node_index);
    /* Optional: a value the group node_index ends reads that may share its buffer with the
     * group's output 0 (the last member's), when nothing reads that value afterwards (a residual
     * the convolution adds in place); -1 when none. */
    int (*group_inplace_input)(void *impl, const ir_graph *g, int node_index);
    /* Optional (device backends): timing marks for profiles. mark queues mark k (k >= 0) after
     * the work queued so far; mark_seconds waits for marks a and b and gives the device time
     * between them. */
    graft_status (*mark)(void *impl, int k, graft_err *e);
    graft_status (*mark_seconds)(void *impl, int a, int b, double *seconds, graft_err *e);
    /* How many node runs fell back to the CPU so far (they cannot be captured). */
    int64_t (*fallback_count)(void *impl);
    void (*destroy)(void *impl);
} graft_backend;

#endif
