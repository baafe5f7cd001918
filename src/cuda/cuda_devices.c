/* cuda_devices.c: finding usable GPUs and describing them (name, memory, compute capability,
 * driver, CUDA runtime, cuDNN and cuBLASLt versions); errors of the CUDA libraries as text. */
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"

int cuda_device_count(char *why, size_t why_size) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        if (why) snprintf(why, why_size, "%s", cudaGetErrorString(err));
        cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        return 0;
    }
    if (n == 0 && why) snprintf(why, why_size, "the driver reports no CUDA device");
    return n;
}

graft_status cuda_device_query(int index, cuda_device_info *out, graft_err *e) {
    memset(out, 0, sizeof *out);
    int n = cuda_device_count(NULL, 0);
    if (index < 0 || index >= n)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "cuda:%d does not exist (%d GPU%s found)",
                       index, n, n == 1 ? "" : "s");
    struct cudaDeviceProp p;
    CUDA_TRY(e, cudaGetDeviceProperties(&p, index), "reading the GPU's properties");
    out->index = index;
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->multiprocessors = p.multiProcessorCount;
    out->total_bytes = p.totalGlobalMem;
    int prev = 0;
    cudaGetDevice(&prev);
    if (cudaSetDevice(index) == cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) out->free_bytes = free_b;
        cudaSetDevice(prev);
    }
    cudaDriverGetVersion(&out->driver_version);
    cudaRuntimeGetVersion(&out->runtime_version);
    out->cudnn_version = cudnnGetVersion();
    out->cublaslt_version = cublasLtGetVersion();
    return GRAFT_OK;
}

graft_status cuda_fail(graft_err *e, cudaError_t err, const char *what) {
    graft_status st = err == cudaErrorMemoryAllocation ? GRAFT_E_OUT_OF_MEMORY : GRAFT_E_BACKEND;
    return err_set(e, st, "CUDA: %s failed: %s (%s)", what, cudaGetErrorString(err),
                   cudaGetErrorName(err));
}

graft_status cudnn_fail(graft_err *e, cudnnStatus_t s, const char *what) {
    graft_status st = s == CUDNN_STATUS_ALLOC_FAILED ? GRAFT_E_OUT_OF_MEMORY : GRAFT_E_BACKEND;
    return err_set(e, st, "cuDNN: %s failed: %s", what, cudnnGetErrorString(s));
}

graft_status cublas_fail(graft_err *e, cublasStatus_t s, const char *what) {
    graft_status st = s == CUBLAS_STATUS_ALLOC_FAILED ? GRAFT_E_OUT_OF_MEMORY : GRAFT_E_BACKEND;
    return err_set(e, st, "cuBLASLt: %s failed: status %d", what, (int)s);
}

graft_status cuda_check_launch(graft_err *e, const char *what) {
    cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? GRAFT_OK : cuda_fail(e, err, what);
}
