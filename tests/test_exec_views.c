/* test_exec_views.c: reshapes planned as views: after the plan is learned every Reshape-like
 * output that can share its input's bytes does (same offset, same arena), and the outputs are
 * bit for bit those of the same model planned without views (GRAFT_PLAN_VIEWS=0's path).
 * Usage: test_exec_views GEN_DIR [--device cuda:0] MODEL... */
#include <stdlib.h>
#include <string.h>

#include "../src/graph/model.h"
#include "gpu_test_util.h"
#include "test_model.h"
#include "test_util.h"

/* How many values the plan holds as views; -1 when one is at another offset than its source. */
static int checked_views(const executor *x) {
    int views = 0;
    for (int v = 0; v < x->g->n_values; v++) {
        if (!x->plan.view[v]) continue;
        int p = x->g->values[v].producer;
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
    printf("  %s: %d reshapes planned as views\n", test, views);
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
