/* device_kind.h: the registry of device backends (GPUs): each kind of device graft can run on
 * names itself, counts and describes its devices and creates a backend (backend.h) on one. The
 * core and the graph reach devices only through it, so a new backend is a folder that defines
 * one device_kind and one line in device_registry.c. */
#ifndef GRAFT_CORE_DEVICE_KIND_H
#define GRAFT_CORE_DEVICE_KIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "graft.h"

typedef void (*device_log_fn)(void *user, int level, const char *msg);

typedef struct device_backend_options {
    int device;        /* the kind's device index */
    bool allow_tf32;   /* fp32 matrix products and convolutions may use TF32 (or the like) */
    device_log_fn log; /* warnings (a node falling back to the CPU); NULL: none */
    void *log_user;
    int num_threads; /* for the CPU reference the backend falls back to */
} device_backend_options;

/* A group of processes, one device each, summing and broadcasting through the device kind's
 * collective library (NCCL for CUDA): src/dist/ reaches it through the kind. */
typedef struct device_comm device_comm;

typedef struct device_collectives {
    const char *library; /* "NCCL 2.x.y", for messages */
    size_t id_bytes;     /* the group's id that rank 0 makes and every rank receives */
    graft_status (*make_id)(void *id, graft_err *e);
    /* Join the group of world ranks as rank on the kind's device index (the calling thread's
     * current device becomes it); every later call waits at most timeout_s for the others. */
    graft_status (*open)(int device, const void *id, int rank, int world, double timeout_s,
                         device_comm **out, graft_err *e);
    /* Sum n host values (f64: doubles, else floats) in place across ranks, through the device. */
    graft_status (*allreduce)(device_comm *c, void *host, int64_t n, bool f64, graft_err *e);
    /* Sum n buffers of device memory (numels[i] floats each, on the group's device) in place
     * across ranks, as one fused call; waits for the device's work on them first. */
    graft_status (*allreduce_device)(device_comm *c, void *const *bufs, const int64_t *numels,
                                     int n, graft_err *e);
    /* Root's bytes of host memory into every rank's. */
    graft_status (*broadcast)(device_comm *c, void *host, size_t bytes, int root, graft_err *e);
    /* Leave (abort: without waiting for ranks that may never come) and free. */
    void (*close)(device_comm *c, bool abort);
} device_collectives;

typedef struct device_kind {
    const char *name; /* device strings are "<name>" (device 0) or "<name>:N" */
    /* Usable devices (0 when there is no driver or no device; `why` then says which). */
    int (*count)(char *why, size_t why_size);
    /* The device's description, memory and library versions. */
    graft_status (*query)(int index, graft_gpu_info *out, graft_err *e);
    graft_status (*create)(const device_backend_options *o, graft_backend *out, graft_err *e);
    const device_collectives *collectives; /* NULL: the kind has no collective library */
} device_kind;

/* The kinds this build has, in the order "auto" tries them; n_out their count. */
const device_kind *const *device_kinds(int *n_out);
/* The kind of a device string ("cuda", "cuda:1"): NULL when this build has none of that name. */
const device_kind *device_kind_of(const char *device);
/* The device index a device string names: "<kind>" -> 0, "<kind>:N" -> N; -2 for anything
 * else. */
int device_index_of(const char *device);
/* Whether `device` names a kind graft knows, built here or not ("cuda" in a CPU build). */
bool device_kind_known(const char *device);

#endif
