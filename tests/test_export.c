/* test_export.c: graft_model_export on generated models: the exported file loads in graft and
 * gives the same outputs (whole, cut, fp16 weights), metadata round-trips, opset upgrades keep
 * results, unwritable paths are clear errors. Kept exports are listed as EXPORTED lines for
 * tools/check_export.py (ONNX Runtime). Usage: test_export GEN_DIR [OUT_DIR] */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/cli/npy.h"
#include "../src/graph/model.h"
#include "../src/onnx/onnx_write.h"
#include "test_model.h"
#include "test_util.h"

#define MAX_IO 8

static const char *gen;
static char out_dir[1024];

typedef struct outputs {
    int n;
    graft_tensor t[MAX_IO];
    char *names[MAX_IO];
} outputs;

/* Load `path`, reading its inputs from the generated model `name`'s recorded .npy files. */
static int load(loaded *l, const char *path, const char *name) {
    return loaded_open(l, path, gen, name);
}

static void outputs_free(outputs *o) {
    for (int i = 0; i < o->n; i++) free(o->t[i].data), free(o->names[i]);
    o->n = 0;
}

/* Run l's model and copy its outputs. */
static int run(loaded *l, outputs *o) {
    memset(o, 0, sizeof *o);
    if (graft_model_run(l->m, l->in, l->n_in) != GRAFT_OK) return -1;
    for (int i = 0; i < graft_model_output_count(l->m) && i < MAX_IO; i++) {
        const graft_tensor *t;
        graft_value_info info;
        graft_model_output(l->m, i, &t);
        graft_model_output_info(l->m, i, &info);
        size_t bytes = (size_t)tensor_nbytes(t);
        o->t[i] = *t;
        o->t[i].data = malloc(bytes + 1);
        memcpy(o->t[i].data, t->data, bytes);
        o->names[i] = strdup(info.name);
        o->n++;
    }
    return 0;
}

/* Largest |a - b| over the largest |b| across all float outputs; 1e30 on a shape mismatch. */
static double max_rel(const outputs *a, const outputs *b) {
    if (a->n != b->n) return 1e30;
    double d = 0, ref = 1e-12;
    for (int i = 0; i < a->n; i++) {
        const graft_tensor *x = &a->t[i], *y = &b->t[i];
        if (x->dtype != y->dtype || !shapes_equal(x->ndim, x->dims, y->ndim, y->dims)) return 1e30;
        int64_t n = graft_tensor_numel(x);
        for (int64_t k = 0; k < n; k++) {
            double u = tensor_get_f64(x, k), v = tensor_get_f64(y, k);
            if (fabs(u - v) > d) d = fabs(u - v);
            if (fabs(v) > ref) ref = fabs(v);
        }
    }
    return d / ref;
}

/* Save the inputs and graft's outputs next to an export, for tools/check_export.py. */
static void save_for_ort(const char *path, const loaded *l, const outputs *o) {
    char p[1400], err[512];
    size_t n = strlen(path) - strlen(".onnx");
    for (int i = 0; i < l->n_in; i++) {
        snprintf(p, sizeof p, "%.*s.in.%s.npy", (int)n, path, l->in[i].name);
        npy_write(p, &l->in[i].tensor, err, sizeof err);
    }
    for (int i = 0; i < o->n; i++) {
        snprintf(p, sizeof p, "%.*s.graft.%s.npy", (int)n, path, o->names[i]);
        npy_write(p, &o->t[i], err, sizeof err);
    }
    printf("EXPORTED %s\n", path);
}

/* Load `model`, cut it when cut is set, run it, export it, load and run the export: outputs agree
 * within tol. */
static void round_trip(const char *tag, const char *model, const char *cut, graft_pooling pooling,
                       int fp16, double tol) {
    char src[1200], dst[1200], test[256];
    snprintf(src, sizeof src, "%s/%s.onnx", gen, model);
    snprintf(dst, sizeof dst, "%s/%s.onnx", out_dir, tag);
    snprintf(test, sizeof test, "export_%s", tag);
    if (access(src, R_OK) != 0) {
        MISSING(test, "model not generated (tools/make_models.py)");
        return;
    }
    loaded a = {0}, b = {0};
    outputs want, got;
    memset(&want, 0, sizeof want), memset(&got, 0, sizeof got);
    if (load(&a, src, model) != 0) {
        CHECK(test, 0, "loading %s: %s", src, graft_last_error(a.ctx));
        loaded_close(&a);
        return;
    }
    graft_status st = cut ? graft_model_cut(a.m, cut, pooling) : GRAFT_OK;
    if (st == GRAFT_OK && run(&a, &want) != 0) st = GRAFT_E_INTERNAL;
    graft_export_options opts = GRAFT_EXPORT_OPTIONS_INIT;
    opts.fp16_weights = fp16;
    if (st == GRAFT_OK) st = graft_model_export(a.m, dst, &opts);
    CHECK(test, st == GRAFT_OK, "%s", graft_last_error(a.ctx));
    if (st != GRAFT_OK) {
        loaded_close(&a);
        return;
    }
    int ok = load(&b, dst, model) == 0 && run(&b, &got) == 0;
    double rel = ok ? max_rel(&got, &want) : 1e30;
    snprintf(test, sizeof test, "export_%s_same_outputs", tag);
    CHECK(test, ok && rel <= tol, "%s; max relative difference %.3g (tolerance %.0e)",
          ok ? "loaded" : graft_last_error(b.ctx), rel, tol);
    if (ok) save_for_ort(dst, &a, &want);
    outputs_free(&want), outputs_free(&got);
    loaded_close(&a), loaded_close(&b);
}

static const char *find_metadata(const graft_model *m, const char *key) {
    for (int i = 0; i < graft_model_metadata_count(m); i++) {
        const char *k, *v;
        if (graft_model_metadata(m, i, &k, &v) == GRAFT_OK && strcmp(k, key) == 0) return v;
    }
    return NULL;
}

static void metadata_round_trip(void) {
    char src[1200], dst[1200];
    snprintf(src, sizeof src, "%s/mobilenet_tiny.onnx", gen);
    snprintf(dst, sizeof dst, "%s/metadata.onnx", out_dir);
    graft_ctx *ctx;
    graft_ctx_create(NULL, &ctx);
    graft_model *m = NULL, *back = NULL;
    if (graft_model_load(ctx, src, &m) != GRAFT_OK) {
        MISSING("export_metadata", "mobilenet_tiny not generated");
        graft_ctx_free(ctx);
        return;
    }
    const char *names[] = {"cat", "dog \"big\"", "back\\slash"};
    graft_export_options opts = GRAFT_EXPORT_OPTIONS_INIT;
    opts.class_names = names;
    opts.n_class_names = 3;
    opts.preprocessing = "{\"mean\": [0.5, 0.5, 0.5], \"size\": 32}";
    graft_status st = graft_model_export(m, dst, &opts);
    if (st == GRAFT_OK) st = graft_model_load(ctx, dst, &back);
    CHECK("export_metadata_load", st == GRAFT_OK, "%s", graft_last_error(ctx));
    if (st == GRAFT_OK) {
        const char *classes = find_metadata(back, "graft.classes");
        const char *prep = find_metadata(back, "graft.preprocessing");
        CHECK("export_metadata_classes",
              classes && !strcmp(classes, "[\"cat\",\"dog \\\"big\\\"\",\"back\\\\slash\"]"),
              "got %s", classes ? classes : "(none)");
        CHECK("export_metadata_preprocessing", prep && !strcmp(prep, opts.preprocessing), "got %s",
              prep ? prep : "(none)");
        int kept = 1;
        for (int i = 0; i < graft_model_metadata_count(m); i++) {
            const char *k, *v, *v2;
            graft_model_metadata(m, i, &k, &v);
            v2 = find_metadata(back, k);
            kept &= v2 && !strcmp(v, v2);
        }
        CHECK("export_metadata_kept",
              kept && graft_model_metadata_count(back) == graft_model_metadata_count(m) + 2,
              "%d entries, originally %d", graft_model_metadata_count(back),
              graft_model_metadata_count(m));
    }
    graft_model_free(back);
    graft_model_free(m);
    graft_ctx_free(ctx);
}

static int has_temp_file(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        found |= strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    if (d) closedir(d);
    return found;
}

static void unwritable(void) {
    char src[1200], dst[1200];
    snprintf(src, sizeof src, "%s/mobilenet_tiny.onnx", gen);
    graft_ctx *ctx;
    graft_ctx_create(NULL, &ctx);
    graft_model *m = NULL;
    if (graft_model_load(ctx, src, &m) != GRAFT_OK) {
        MISSING("export_unwritable", "mobilenet_tiny not generated");
        graft_ctx_free(ctx);
        return;
    }
    const char *missing = "/nonexistent-graft-dir/model.onnx";
    graft_status st = graft_model_export(m, missing, NULL);
    CHECK("export_unwritable_missing_dir",
          st == GRAFT_E_IO && strstr(graft_last_error(ctx), missing) != NULL, "status %d: %s",
          (int)st, graft_last_error(ctx));
    /* A directory in the way: the rename fails after the data was written. */
    snprintf(dst, sizeof dst, "%s/in_the_way", out_dir);
    mkdir(dst, 0755);
    st = graft_model_export(m, dst, NULL);
    CHECK("export_unwritable_directory",
          st == GRAFT_E_IO && strstr(graft_last_error(ctx), dst) != NULL, "status %d: %s", (int)st,
          graft_last_error(ctx));
    CHECK("export_unwritable_no_temp_left", !has_temp_file(out_dir, "in_the_way.tmp"),
          "a temporary file is left in %s", out_dir);
    rmdir(dst);
    CHECK("export_null_path", graft_model_export(m, NULL, NULL) == GRAFT_E_INVALID_ARGUMENT,
          "no error");
    graft_model_free(m);
    graft_ctx_free(ctx);
}

void opset_upgrade_tests(const char *dir); /* test_export_opset.c */

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s GEN_DIR [OUT_DIR]\n", argv[0]);
        return 2;
    }
    gen = argv[1];
    if (argc > 2) {
        snprintf(out_dir, sizeof out_dir, "%s", argv[2]);
        mkdir(out_dir, 0755);
    } else {
        snprintf(out_dir, sizeof out_dir, "/tmp/graft_export_XXXXXX");
        if (!mkdtemp(out_dir)) return 2;
    }
    const double tight = 1e-5, fp16 = 1e-2;
    round_trip("resnet18", "resnet18", NULL, GRAFT_POOLING_AUTO, 0, tight);
    round_trip("bert_tiny", "bert_tiny_decomposed", NULL, GRAFT_POOLING_AUTO, 0, tight);
    round_trip("mobilenet_tiny", "mobilenet_tiny", NULL, GRAFT_POOLING_AUTO, 0, tight);
    round_trip("resnet18_cut", "resnet18", "auto", GRAFT_POOLING_AUTO, 0, tight);
    round_trip("bert_tiny_cut", "bert_tiny_decomposed", "auto", GRAFT_POOLING_AUTO, 0, tight);
    round_trip("bert_tiny_cut_mean", "bert_tiny_decomposed", "auto", GRAFT_POOLING_MEAN, 0, tight);
    round_trip("mobilenet_tiny_cut", "mobilenet_tiny", "auto", GRAFT_POOLING_AUTO, 0, tight);
    round_trip("resnet18_fp16", "resnet18", NULL, GRAFT_POOLING_AUTO, 1, fp16);
    round_trip("bert_tiny_cut_fp16", "bert_tiny_decomposed", "auto", GRAFT_POOLING_AUTO, 1, fp16);
    round_trip("mobilenet_tiny_fp16", "mobilenet_tiny", NULL, GRAFT_POOLING_AUTO, 1, fp16);
    metadata_round_trip();
    unwritable();
    opset_upgrade_tests(out_dir);
    return test_failures ? 1 : 0;
}
