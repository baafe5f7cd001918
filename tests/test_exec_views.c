/* test_exec_views.c: reshapes planned as views: after the plan is learned every Reshape-like
 * output that can share its input's bytes does (same offset, same arena), and the outputs are
 * bit for bit those of the same model planned without views (GRAFT_PLAN_VIEWS=0's path); and
 * (residual_inplace, on the CPU with oneDNN) which residual groups write over their residual.
 * Usage: test_exec_views GEN_DIR [--device cuda:0] MODEL... */
#include <stdlib.h>
#include <string.h>

#include "../src/graph/model.h"
#include "graft_config.h"
#include "gpu_test_util.h"
#include "test_model.h"
#include "test_util.h"

/* A fused group's output planned over an input of one of the group's members (its residual). */
static bool inplace_view(const executor *x, int v) {
    int end = x->g->values[v].producer;
    for (int i = x->group_first[end]; i <= end; i++) {
        if (x->group_end[i] != end) continue;
        const ir_node *n = &x->g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            int u = n->inputs[k];
            if (u >= 0 && u != v && x->plan.bytes[u] == x->plan.bytes[v] &&
                x->plan.offsets[u] == x->plan.offsets[v])
                return true;
        }
    }
    return false;
}

/* How many values the plan holds as views; -1 when one is at another offset than its source. */
static int checked_views(const executor *x) {
    int views = 0;
    for (int v = 0; v < x->g->n_values; v++) {
        if (!x->plan.view[v]) continue;
        int p = x->g->values[v].producer;
        if (x->group_first[p] != p && inplace_view(x, v)) {
            views++;
            continue;
        }
        int src = x->g->nodes[p].inputs[0];
        /* (exec_view_source needs the sizes of a run that went node by node: a replayed CUDA
         * graph has none, so the plan's own record is checked.) */
        if (src < 0 || x->plan.bytes[src] < 0 || x->plan.offsets[v] != x->plan.offsets[src] ||
            x->plan.bytes[v] != x->plan.bytes[src] ||
            x->node_on_dev[p] != x->node_on_dev[x->g->values[src].producer])
            return -1;
        views++;
    }
    return views;
}

/* Run three times (learn the plan, run from it, once more) and keep every output's bytes. */
static int run_outputs(loaded *l, char **out, size_t *bytes, int max) {
    for (int r = 0; r < 3; r++)
        if (graft_model_run(l->m, l->in, l->n_in) != GRAFT_OK) return -1;
    int n = graft_model_output_count(l->m);
    for (int o = 0; o < n && o < max; o++) {
        const graft_tensor *t;
        if (graft_model_output(l->m, o, &t) != GRAFT_OK) return -1;
        bytes[o] = (size_t)graft_tensor_numel(t) * graft_dtype_size(t->dtype);
        out[o] = malloc(bytes[o] + 1);
        if (!out[o]) return -1;
        memcpy(out[o], t->data, bytes[o]);
    }
    return n < max ? n : max;
}

/* The planned offset of the output of the node named `node`; -1 when unplanned. */
static int64_t offset_of(const executor *x, const char *node) {
    for (int i = 0; i < x->g->n_nodes; i++) {
        const ir_node *n = &x->g->nodes[i];
        if (n->name && strcmp(n->name, node) == 0 && n->n_out > 0 && n->outputs[0] >= 0)
            return x->plan.bytes[n->outputs[0]] >= 0 ? x->plan.offsets[n->outputs[0]] : -1;
    }
    return -1;
}

/* residual_inplace (tools/make_models.py): the groups written over their residual, and those
 * that must not be (the residual read by the group's Conv, read again later, or by a view read
 * later). */
static void check_residual_inplace(const char *test, const executor *x, bool fused) {
    static const char *const pairs[][3] = {
        {"/d/Relu", "/b/Relu", "y"}, {"/f/Relu", "/b/Relu", "y"}, {"/k/Add", "/h/Relu", "y"},
        {"/b/Relu", "/a/Relu", "n"}, {"/e/Relu", "/f/Relu", "n"}, {"/h/Relu", "/e2/Mul", "n"},
    };
    char sub[300];
    snprintf(sub, sizeof sub, "%s_inplace", test);
    int bad = 0;
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        int64_t a = offset_of(x, pairs[i][0]), b = offset_of(x, pairs[i][1]);
        bool want = fused && pairs[i][2][0] == 'y';
        if (a < 0 || b < 0 || (a == b) != want) {
            printf("  %s: %s at %lld, %s at %lld (%s)\n", sub, pairs[i][0], (long long)a,
                   pairs[i][1], (long long)b, want ? "should share" : "should not share");
            bad++;
        }
    }
    CHECK(sub, bad == 0, "%d of the residual groups planned wrongly", bad);
}

static int open_on(loaded *l, const char *gen, const char *name, const char *device) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", gen, name);
    return loaded_open_on(l, path, gen, name, device);
}

static void check_model(const char *gen, const char *name, const char *device) {
    char test[256];
    snprintf(test, sizeof test, "exec_views_%s%s%s", name, device ? "_" : "", device ? device : "");
    loaded with, without;
    char *a[8] = {0}, *b[8] = {0};
    size_t na[8], nb[8];
    int ok_open = open_on(&with, gen, name, device) == 0;
    int ok_open2 = open_on(&without, gen, name, device) == 0;
    if (!ok_open || !ok_open2) {
        CHECK(test, 0, "loading failed: %s", with.ctx ? graft_last_error(with.ctx) : "no context");
        goto done;
    }
    without.m->exec.plan_views = false;
    int n = run_outputs(&with, a, na, 8), n2 = run_outputs(&without, b, nb, 8);
    if (n < 0 || n2 != n) {
        CHECK(test, 0, "running failed: %s / %s", graft_last_error(with.ctx),
              graft_last_error(without.ctx));
        goto done;
    }
    int views = checked_views(&with.m->exec), none = checked_views(&without.m->exec);
    char sub[300];
    snprintf(sub, sizeof sub, "%s_planned", test);
    CHECK(sub, views > 0 && none == 0 && with.m->exec.plan.valid,
          "%d views in the plan (-1: one not at its source's offset), %d without views", views,
          none);
    printf("  %s: %d values planned as views (reshapes, groups in place)\n", test, views);
    if (strcmp(name, "residual_inplace") == 0)
        check_residual_inplace(test, &with.m->exec, !device && GRAFT_HAVE_DNNL);
    int same = 1;
    for (int o = 0; o < n; o++) same &= na[o] == nb[o] && memcmp(a[o], b[o], na[o]) == 0;
    snprintf(sub, sizeof sub, "%s_same_outputs", test);
    CHECK(sub, same, "outputs differ from the run planned without views");
done:
    for (int o = 0; o < 8; o++) free(a[o]), free(b[o]);
    loaded_close(&with);
    loaded_close(&without);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s GEN_DIR [--device DEVICE] MODEL...\n", argv[0]);
        return 2;
    }
    const char *device = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            device = argv[++i];
            if (gpu_test_skip_without_gpu("exec_views_device", device)) return 0;
            continue;
        }
        check_model(argv[1], argv[i], device);
    }
    return test_failures ? 1 : 0;
}
