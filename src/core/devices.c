/* devices.c: the public view of the GPUs graft can use (the device registry's first kind; none
 * in a build without a device backend). */
#include <stdio.h>
#include <string.h>

#include "device_kind.h"
#include "error.h"

/* The GPU kind: the registry's first. */
static const device_kind *gpu_kind(void) {
    int n;
    const device_kind *const *k = device_kinds(&n);
    return n > 0 ? k[0] : NULL;
}

int graft_cuda_built(void) {
    return device_kind_of("cuda") != NULL;
}

int graft_gpu_count(char *why, size_t why_size) {
    const device_kind *k = gpu_kind();
    if (k) return k->count(why, why_size);
    if (why && why_size) snprintf(why, why_size, "this graft was built without CUDA");
    return 0;
}

graft_status graft_gpu_info_get(int index, graft_gpu_info *out) {
    if (!out) return GRAFT_E_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    const device_kind *k = gpu_kind();
    return k ? k->query(index, out, NULL) : GRAFT_E_UNSUPPORTED;
}
