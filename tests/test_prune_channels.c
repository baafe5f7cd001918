/* test_prune_channels.c: structured channel pruning on generated CNNs: the pruned model equals the
 * dense model with the same channels zeroed (filters and biases of every group member), residual
 * and depthwise groups stay consistent, parameters, FLOPs and the exported file shrink, and the
 * export loads in graft with the same outputs. Usage: test_prune_channels GEN OUTDIR [models]. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../src/cli/npy.h"
#include "../src/graph/model.h"
#include "../src/prune/channel_groups.h"
#include "test_model.h"
#include "test_util.h"

static const char *gen, *outdir;

static int load(loaded *l, const char *model_path, const char *name) {
    return loaded_open(l, model_path, gen, name);
}

static double max_rel(const float *a, const float *b, int64_t n) {
    double d = 0, ref = 1e-12;
    for (int64_t i = 0; i < n; i++) {
        if (fabs((double)a[i] - b[i]) > d) d = fabs((double)a[i] - b[i]);
        if (fabs(b[i]) > ref) ref = fabs(b[i]);
    }
    return d / ref;
}

/* Zero, in m's own weights, the filters and biases of the channels plan p removes; rebuild the
 * executor (kernels keep reordered weights). Returns the number of member filters zeroed. */
static int64_t zero_removed(graft_model *m, const chan_plan *p) {
    ir_graph *g = &m->g;
    int64_t zeroed = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        if (!(p->roles[i].roles & (CHAN_SOURCE | CHAN_DEPTHWISE))) continue;
        const ir_node *n = &g->nodes[i];
        bool *keep;
        int64_t len, kept;
        chan_value_keep(p, n->outputs[0], &keep, &len, &kept, NULL);
        if (!keep) continue;
        tensor *w = &g->values[n->inputs[1]].data;
        float *b = n->n_in > 2 && n->inputs[2] >= 0 ? g->values[n->inputs[2]].data.data : NULL;
        int64_t per = tensor_numel(w) / w->dims[0];
        for (int64_t c = 0; c < len; c++) {
            if (keep[c]) continue;
            memset((float *)w->data + c * per, 0, sizeof(float) * (size_t)per);
            if (b) b[c] = 0;
            zeroed++;
        }
        free(keep);
    }
    exec_free(&m->exec);
    m->backend.release_state(m->backend.impl);
    exec_init(&m->exec, g, &m->backend, &m->ctx->err);
    return zeroed;
}

static int conv_group(const ir_graph *g, const char *name) {
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, name)) return (int)attr_i(&g->nodes[i], "group", 1);
    return -1;
}

/* Largest number of Conv members in one pruned group (residual groups have several). */
static int widest_pruned_group(const chan_plan *p) {
    int best = 0;
    for (int r = 0; r < p->n_groups; r++) {
        if (chan_group_root(p, r) != r || !p->keep[r]) continue;
        int members = 0;
        for (int q = 0; q < p->n_groups; q++) members += chan_group_root(p, q) == r;
        if (members > best) best = members;
    }
    return best;
}

/* The name of the first depthwise Conv losing channels and its group count after pruning. */
static int first_pruned_depthwise(const chan_plan *p, const ir_graph *g, char *name, size_t size) {
    for (int i = 0; i < p->n_nodes; i++) {
        if (!(p->roles[i].roles & CHAN_DEPTHWISE)) continue;
        bool *keep;
        int64_t len, kept;
        chan_value_keep(p, g->nodes[i].outputs[0], &keep, &len, &kept, NULL);
        free(keep);
        if (!keep) continue;
        snprintf(name, size, "%s", g->nodes[i].name);
        return (int)kept;
    }
    return 0;
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void check_export(const char *name, loaded *pruned, const float *want, int64_t n,
                         const char *dense_path) {
    char path[1024], test[256];
    snprintf(path, sizeof path, "%s/%s.pruned.onnx", outdir, name);
    snprintf(test, sizeof test, "channels_%s_export", name);
    graft_status st = graft_model_export(pruned->m, path, NULL);
    long dense = file_size(dense_path), small = file_size(path);
    CHECK(test, st == GRAFT_OK && small > 0 && small < dense, "status %d, %ld vs %ld bytes: %s", st,
          small, dense, graft_last_error(pruned->ctx));
    printf("INFO %s: file %ld -> %ld bytes\n", name, dense, small);
    /* Inputs and graft's output next to the export, for tools/check_export.py (ONNX Runtime). */
    char err[512], npy[1024];
    for (int i = 0; i < pruned->n_in; i++) {
        snprintf(npy, sizeof npy, "%s/%s.pruned.in.%s.npy", outdir, name, pruned->in[i].name);
        npy_write(npy, &pruned->in[i].tensor, err, sizeof err);
    }
    graft_value_info info;
    const graft_tensor *t;
    graft_model_output_info(pruned->m, 0, &info);
    graft_model_output(pruned->m, 0, &t);
    graft_tensor out = *t;
    out.data = (void *)want;
    snprintf(npy, sizeof npy, "%s/%s.pruned.graft.%s.npy", outdir, name, info.name);
    npy_write(npy, &out, err, sizeof err);
    loaded back;
    snprintf(test, sizeof test, "channels_%s_export_reloads", name);
    if (load(&back, path, name) != 0) {
        CHECK(test, 0, "cannot load %s: %s", path, back.ctx ? graft_last_error(back.ctx) : "");
        loaded_close(&back);
        return;
    }
    int64_t m = 0;
    float *got = loaded_run_copy(&back, 0, &m);
    double rel = got && m == n ? max_rel(got, want, n) : 1e9;
    CHECK(test, rel <= 1e-5, "max relative error %.3g", rel);
    free(got);
    loaded_close(&back);
}

static void check_model(const char *name) {
    char path[1024], dense_path[1024], test[256];
    snprintf(path, sizeof path, "%s/%s.onnx", gen, name);
    loaded pruned, ref;
    if (load(&pruned, path, name) != 0 || load(&ref, path, name) != 0) {
        snprintf(test, sizeof test, "channels_%s", name);
        SKIP(test, "model not generated");
        loaded_close(&pruned);
        loaded_close(&ref);
        return;
    }
    graft_prune_options o = GRAFT_PRUNE_OPTIONS_INIT;
    o.method = GRAFT_PRUNE_CHANNELS;
    o.sparsity = 0.5;
    snprintf(dense_path, sizeof dense_path, "%s/dense", outdir);
    mkdir(dense_path, 0755);
    snprintf(dense_path, sizeof dense_path, "%s/dense/%s.onnx", outdir, name);
    graft_model_export(ref.m, dense_path, NULL);
    chan_plan plan;
    graft_status st = chan_plan_build(&ref.m->g, &o, &plan, &ref.ctx->err);
    snprintf(test, sizeof test, "channels_%s_plan", name);
    CHECK(test, st == GRAFT_OK && plan.channels_removed > 0 && plan.groups_excluded > 0,
          "status %d, %lld channels, %d excluded groups: %s", st, (long long)plan.channels_removed,
          plan.groups_excluded, graft_last_error(ref.ctx));
    if (st != GRAFT_OK) {
        loaded_close(&pruned);
        loaded_close(&ref);
        return;
    }
    printf("INFO %s: %d groups: %d pruned, %d unprunable, %d excluded; widest pruned group %d "
           "convs\n",
           name, plan.groups_total, plan.groups_pruned, plan.groups_unprunable,
           plan.groups_excluded, widest_pruned_group(&plan));
    int64_t n0 = 0;
    float *dense = loaded_run_copy(&ref, 0, &n0);
    int64_t zeroed = zero_removed(ref.m, &plan);
    /* Remember a depthwise conv's group count to see it shrink. */
    char dw_name[256] = "";
    int dw_group = first_pruned_depthwise(&plan, &ref.m->g, dw_name, sizeof dw_name);
    graft_prune_report r;
    st = graft_model_prune(pruned.m, &o, &r);
    snprintf(test, sizeof test, "channels_%s_prune", name);
    CHECK(test,
          st == GRAFT_OK && r.units_removed == plan.channels_removed &&
              r.params_after < r.params_before && r.flops_after < r.flops_before,
          "status %d: %s; removed %lld (plan %lld), params %lld -> %lld, flops %.3g -> %.3g", st,
          graft_last_error(pruned.ctx), (long long)r.units_removed,
          (long long)plan.channels_removed, (long long)r.params_before, (long long)r.params_after,
          r.flops_before, r.flops_after);
    printf("INFO %s: %lld channels removed (%lld member filters), params %lld -> %lld, "
           "FLOPs %.4g -> %.4g\n",
           name, (long long)r.units_removed, (long long)zeroed, (long long)r.params_before,
           (long long)r.params_after, r.flops_before, r.flops_after);
    if (dw_name[0]) {
        snprintf(test, sizeof test, "channels_%s_depthwise_group", name);
        int gr = conv_group(&pruned.m->g, dw_name);
        CHECK(test, gr == dw_group, "'%s' has group %d, want %d", dw_name, gr, dw_group);
    }
    int64_t n1 = 0, n2 = 0;
    float *want = st == GRAFT_OK ? loaded_run_copy(&ref, 0, &n1) : NULL;
    float *got = want ? loaded_run_copy(&pruned, 0, &n2) : NULL;
    double rel = got && n1 == n2 ? max_rel(got, want, n1) : 1e9;
    snprintf(test, sizeof test, "channels_%s_equals_zeroed", name);
    CHECK(test, rel <= 1e-5, "max relative error %.3g (%lld vs %lld values): %s", rel,
          (long long)n2, (long long)n1, graft_last_error(pruned.ctx));
    /* The comparison means something only if zeroing the channels changed the output. */
    double moved = dense && want && n0 == n1 ? max_rel(dense, want, n1) : 0;
    snprintf(test, sizeof test, "channels_%s_zeroing_changes_output", name);
    CHECK(test, moved > 1e-3, "zeroed output differs from dense by only %.3g", moved);
    free(dense);
    if (got) check_export(name, &pruned, got, n2, dense_path);
    free(want), free(got);
    chan_plan_free(&plan);
    loaded_close(&pruned);
    loaded_close(&ref);
}

/* A cut model's features are a graph output: the group producing them keeps its channels, the
 * rest is pruned and the feature width stays. */
static void check_cut(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/resnet18.onnx", gen);
    loaded l;
    if (load(&l, path, "resnet18") != 0) {
        SKIP("channels_cut_features_kept", "resnet18 not generated");
        loaded_close(&l);
        return;
    }
    graft_status st = graft_model_cut(l.m, "auto", GRAFT_POOLING_AUTO);
    graft_prune_options o = GRAFT_PRUNE_OPTIONS_INIT;
    o.method = GRAFT_PRUNE_CHANNELS;
    o.sparsity = 0.25;
    o.importance = GRAFT_IMPORTANCE_L2;
    chan_plan plan;
    memset(&plan, 0, sizeof plan);
    if (st == GRAFT_OK) st = chan_plan_build(&l.m->g, &o, &plan, &l.ctx->err);
    graft_value_info before, after;
    graft_model_output_info(l.m, 0, &before);
    graft_prune_report r;
    if (st == GRAFT_OK) st = graft_model_prune(l.m, &o, &r);
    graft_model_output_info(l.m, 0, &after);
    int64_t n = 0;
    float *f = st == GRAFT_OK ? loaded_run_copy(&l, 0, &n) : NULL;
    CHECK("channels_cut_features_kept",
          st == GRAFT_OK && plan.groups_unprunable == 1 && r.units_removed > 0 && f &&
              after.ndim == 2 && after.dims[1] == before.dims[1],
          "status %d: %s; %d unprunable groups, %lld removed, width %lld -> %lld", st,
          graft_last_error(l.ctx), plan.groups_unprunable, (long long)r.units_removed,
          (long long)before.dims[1], (long long)after.dims[1]);
    free(f);
    chan_plan_free(&plan);
    loaded_close(&l);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s GEN_DIR OUT_DIR [model...]\n", argv[0]);
        return 2;
    }
    gen = argv[1];
    outdir = argv[2];
    mkdir(outdir, 0755);
    const char *all[] = {"resnet18", "resnet50", "mobilenet_tiny"};
    if (argc > 3)
        for (int i = 3; i < argc; i++) check_model(argv[i]);
    else
        for (int i = 0; i < 3; i++) check_model(all[i]);
    check_cut();
    return test_failures ? 1 : 0;
}
