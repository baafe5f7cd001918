/* devices.c: the public view of the GPUs graft can use (none in a build without CUDA). */
#include <stdio.h>
#include <string.h>

#include "graft_config.h"
#include "error.h"
#if GRAFT_HAVE_CUDA
#include "../cuda/cuda_backend.h"
#endif

int graft_cuda_built(void) {
    return GRAFT_HAVE_CUDA;
}

int graft_gpu_count(char *why, size_t why_size) {
#if GRAFT_HAVE_CUDA
    return cuda_device_count(why, why_size);
#else
    if (why && why_size) snprintf(why, why_size, "this graft was built without CUDA");
    return 0;
#endif
}

graft_status graft_gpu_info_get(int index, graft_gpu_info *out) {
    if (!out) return GRAFT_E_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
#if GRAFT_HAVE_CUDA
    cuda_device_info d;
    graft_status st = cuda_device_query(index, &d, NULL);
    if (st != GRAFT_OK) return st;
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
#else
    (void)index;
    return GRAFT_E_UNSUPPORTED;
#endif
}
