/* fuzz_onnx.c: libFuzzer target: the ONNX loader from memory (protobuf, load-time passes); a
 * model that loads is summarised, run once on small zero inputs when its shapes and cost are
 * small, and exported and reloaded. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { FUZZ_MAX_INPUTS = 8, FUZZ_MAX_NUMEL = 4096, FUZZ_MAX_NODES = 64 };

/* Zero-filled inputs of the declared shapes (symbolic dims as 1, 2 or 3 by `sym`); 0 when a
 * shape is unknown or too large. */
static int make_inputs(graft_model *m, int sym, graft_named_tensor *in, int *n) {
    *n = graft_model_input_count(m);
    if (*n < 0 || *n > FUZZ_MAX_INPUTS) return 0;
    for (int i = 0; i < *n; i++) {
        graft_value_info info;
        if (graft_model_input_info(m, i, &info) != GRAFT_OK || info.ndim < 0 ||
            info.ndim > GRAFT_MAX_DIMS)
            return 0;
        graft_tensor *t = &in[i].tensor;
        in[i].name = info.name;
        t->dtype = info.dtype;
        t->ndim = info.ndim;
        for (int d = 0; d < info.ndim; d++) t->dims[d] = info.dims[d] < 0 ? sym : info.dims[d];
        int64_t numel = graft_tensor_numel(t);
        size_t es = graft_dtype_size(t->dtype);
        if (numel < 0 || numel > FUZZ_MAX_NUMEL || es == 0) return 0;
        t->data = calloc((size_t)numel + 1, es);
        if (!t->data) return 0;
    }
    return 1;
}

/* Runs only models that are small by the summary's measure: a value whose size is unknown or over
 * 1 GiB leaves flops_per_sample at -1 (the model asks for that memory at run time, legitimately).
 */
static void try_run(graft_model *m) {
    graft_model_summary s;
    if (graft_model_summarize(m, &s) != GRAFT_OK || s.node_count > FUZZ_MAX_NODES ||
        s.parameter_bytes > (1 << 20) || s.flops_per_sample < 0 || s.flops_per_sample > 1e7)
        return;
    graft_named_tensor in[FUZZ_MAX_INPUTS];
    memset(in, 0, sizeof in);
    int n = 0;
    if (make_inputs(m, 2, in, &n) && graft_model_run(m, in, n) == GRAFT_OK) {
        for (int i = 0; i < graft_model_output_count(m); i++) {
            const graft_tensor *out = NULL;
            graft_model_output(m, i, &out);
        }
    }
    for (int i = 0; i < FUZZ_MAX_INPUTS; i++) free(in[i].tensor.data);
}

static void inspect(graft_model *m) {
    graft_value_info info;
    for (int i = 0; i < graft_model_input_count(m); i++) graft_model_input_info(m, i, &info);
    for (int i = 0; i < graft_model_output_count(m); i++) graft_model_output_info(m, i, &info);
    const char *why = NULL, *k = NULL, *v = NULL;
    int64_t count;
    (void)graft_model_fixed_batch(m, &why);
    for (int i = 0; i < graft_model_op_type_count(m); i++) graft_model_op_type(m, i, &k, &count);
    for (int i = 0; i < graft_model_metadata_count(m); i++) graft_model_metadata(m, i, &k, &v);
    graft_auto_cut_info cut;
    (void)graft_model_auto_cut_info(m, &cut);
    graft_freeze_point_info point;
    for (int i = 0; i < graft_model_freeze_point_count(m); i++)
        (void)graft_model_freeze_point(m, i, &point);
    (void)graft_model_unfreeze_point(m, 1, &k, NULL, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static graft_ctx *ctx;
    if (!ctx && !(ctx = fuzz_ctx())) return 0;
    graft_model *m = NULL;
    if (graft_model_load_memory(ctx, data, size, NULL, &m) != GRAFT_OK) return 0;
    inspect(m);
    try_run(m);
    const char *path = fuzz_temp_file(NULL, 0, ".onnx");
    graft_model *back = NULL;
    if (path && graft_model_export(m, path, NULL) == GRAFT_OK) {
        /* What graft writes, graft loads. */
        if (graft_model_load(ctx, path, &back) != GRAFT_OK) __builtin_trap();
        graft_model_free(back);
    }
    if (path) remove(path);
    graft_model_free(m);
    return 0;
}
