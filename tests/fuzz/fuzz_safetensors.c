/* fuzz_safetensors.c: libFuzzer target: the .safetensors reader on arbitrary bytes.
 * GRAFT_FUZZ_MAKE_SEED=FILE writes a seed (graft's writer: tensors of several dtypes and
 * metadata) and exits. */
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "train/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    safetensors_file *f = NULL;
    graft_err e;
    if (safetensors_from_memory(&f, data, size, &e) != GRAFT_OK) return 0;
    /* Touch every tensor's bytes and every metadata entry (ASan checks they lie in the file). */
    volatile uint8_t sink = 0;
    for (int i = 0; i < safetensors_count(f); i++) {
        const st_tensor *t = safetensors_tensor_at(f, i);
        if (!t) continue;
        if (t->nbytes)
            sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
        (void)safetensors_find(f, t->name);
    }
    for (int i = 0; i < safetensors_meta_count(f); i++) {
        const char *v = NULL;
        const char *k = safetensors_meta_at(f, i, &v);
        if (k && v) sink ^= (uint8_t)(strlen(k) + strlen(v));
    }
    (void)sink;
    safetensors_free(f);
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *seed = getenv("GRAFT_FUZZ_MAKE_SEED");
    if (!seed || !*seed) return 0;
    const float w[6] = {1, -2, 3.5f, 0, 1e-3f, 7};
    const int64_t ids[3] = {1, 2, 3}, d23[2] = {2, 3}, d3[1] = {3};
    const uint16_t h[3] = {0x3c00, 0xbc00, 0x7bff};
    const st_tensor_in t[4] = {{"head.weight", GRAFT_DTYPE_F32, 2, d23, w},
                               {"head.bias", GRAFT_DTYPE_F16, 1, d3, h},
                               {"ids", GRAFT_DTYPE_I64, 1, d3, ids},
                               {"scale", GRAFT_DTYPE_F32, 0, NULL, w}};
    const char *keys[2] = {"graft.classes", "format"}, *values[2] = {"[\"a\",\"b\"]", "pt"};
    graft_err e;
    exit(safetensors_write(seed, t, 4, keys, values, 2, &e) == GRAFT_OK ? 0 : 1);
}
