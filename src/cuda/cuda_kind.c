/* cuda_kind.c: the CUDA backend's entry in the device registry (core/device_kind.h). */
#include <stdio.h>
#include <string.h>

#include "../core/device_kind.h"
#include "cuda_backend.h"
#include "graft_config.h"

static graft_status query(int index, graft_gpu_info *out, graft_err *e) {
    cuda_device_info d;
    TRY(cuda_device_query(index, &d, e));
    memset(out, 0, sizeof *out);
    out->index = d.index;
    snprintf(out->name, sizeof out->name, "%s", d.name);
    out->cc_major = d.cc_major;
    out->cc_minor = d.cc_minor;
    out->multiprocessors = d.multiprocessors;
    out->total_bytes = d.total_bytes;
    out->free_bytes = d.free_bytes;
    out->driver_version = d.driver_version;
    out->runtime_version = d.runtime_version;
    out->cudnn_version = d.cudnn_version;
    out->cublaslt_version = d.cublaslt_version;
    return GRAFT_OK;
}

static graft_status create(const device_backend_options *o, graft_backend *out, graft_err *e) {
    cuda_backend_options c = {.device = o->device,
                              .allow_tf32 = o->allow_tf32,
                              .log = o->log,
                              .log_user = o->log_user,
                              .num_threads = o->num_threads};
    return cuda_backend_create(&c, out, e);
}

#if GRAFT_HAVE_NCCL
extern const device_collectives cuda_nccl_collectives; /* cuda_nccl.c */
#define CUDA_COLLECTIVES (&cuda_nccl_collectives)
#else
#define CUDA_COLLECTIVES NULL
#endif

const device_kind cuda_device_kind = {"cuda", cuda_device_count, query, create, CUDA_COLLECTIVES};
