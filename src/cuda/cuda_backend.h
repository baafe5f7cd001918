/* cuda_backend.h: what the rest of graft sees of the CUDA backend: devices, and a backend. */
#ifndef GRAFT_CUDA_BACKEND_H
#define GRAFT_CUDA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "../core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuda_device_info {
    int index;
    char name[256];
    int cc_major, cc_minor;
    int multiprocessors;
    size_t total_bytes, free_bytes;
    int driver_version;  /* e.g. 13000 for 13.0 */
    int runtime_version; /* the CUDA runtime graft runs with */
    size_t cudnn_version;
    size_t cublaslt_version;
} cuda_device_info;

/* Usable GPUs (0 when there is no driver or no device; `why` then says which). */
int cuda_device_count(char *why, size_t why_size);
graft_status cuda_device_query(int index, cuda_device_info *out, graft_err *e);

typedef void (*cuda_log_fn)(void *user, int level, const char *msg);

typedef struct cuda_backend_options {
    int device;      /* CUDA device ordinal */
    bool allow_tf32; /* fp32 matrix products and convolutions may use TF32 */
    cuda_log_fn log; /* warnings (a node falling back to the CPU); NULL: none */
    void *log_user;
    int num_threads; /* for the CPU reference the backend falls back to */
} cuda_backend_options;

graft_status cuda_backend_create(const cuda_backend_options *o, graft_backend *out, graft_err *e);

#ifdef __cplusplus
}
#endif

#endif
