/* fuzz_npy.c: libFuzzer target: the .npy reader (src/cli/npy.c), then a write and re-read of
 * what it read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/npy.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_temp_file(data, size, ".npy");
    if (!path) return 0;
    char err[512], path2[300];
    graft_tensor t, back;
    if (npy_read(path, &t, err, sizeof err) != 0) return 0;
    snprintf(path2, sizeof path2, "%s.out.npy", path);
    if (npy_write(path2, &t, err, sizeof err) == 0 &&
        npy_read(path2, &back, err, sizeof err) == 0) {
        size_t bytes = (size_t)graft_tensor_numel(&t) * graft_dtype_size(t.dtype);
        /* What was written reads back the same. */
        if (back.dtype != t.dtype || back.ndim != t.ndim ||
            memcmp(back.dims, t.dims, sizeof t.dims[0] * (size_t)t.ndim) != 0 ||
            (bytes && memcmp(back.data, t.data, bytes) != 0))
            __builtin_trap();
        free(back.data);
    }
    remove(path2);
    free(t.data);
    return 0;
}
