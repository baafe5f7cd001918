/* test_prune_schedule.c: gradual pruning: the cubic schedule's sparsities, magnitude rounds exact
 * per layer with zeros never revived, channel rounds that end exactly where one-shot pruning does
 * (the same channels with BN-scale importance) and only ever remove channels.
 * Usage: test_prune_schedule GEN DIGITS_MODEL [--quick]. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/graph/model.h"
#include "../src/prune/channel_groups.h"
#include "test_model.h"
#include "test_util.h"

static void check_formula(void) {
    const double S = 0.8;
    const int N = 4;
    double worst = 0, prev = 0;
    bool rising = true;
    for (int k = 1; k <= N; k++) {
        double got = graft_prune_schedule(S, k, N), left = 1.0 - (double)k / N;
        double want = S * (1.0 - left * left * left);
        worst = fmax(worst, fabs(got - want));
        rising &= got > prev;
        prev = got;
    }
    CHECK("schedule_cubic", worst < 1e-15 && rising, "off by %.3g, rising %d", worst, rising);
    CHECK("schedule_ends_exact",
          graft_prune_schedule(S, N, N) == S && graft_prune_schedule(0.5, 3, 3) == 0.5 &&
              graft_prune_schedule(S, 0, N) == 0 && graft_prune_schedule(0.3, 1, 1) == 0.3,
          "end %.17g", graft_prune_schedule(S, N, N));
    CHECK("schedule_bad_arguments",
          graft_prune_schedule(1.0, 1, 2) == -1 && graft_prune_schedule(0.5, 3, 2) == -1 &&
              graft_prune_schedule(0.5, 1, 0) == -1 && graft_prune_schedule(-0.1, 1, 2) == -1,
          "an out-of-range argument was accepted");
}

/* The weights magnitude pruning may change (not the first conv or the classifier): their data,
 * in node order. */
typedef struct layers {
    int n;
    const float *w[64];
    int64_t size[64];
} layers;

static layers prunable(const ir_graph *g, const graft_prune_options *o) {
    layers L = {0};
    for (int i = 0; i < g->n_nodes && L.n < 64; i++) {
        if (!prune_is_weight(g, i, 1) || prune_excluded(g, i, o)) continue;
        const tensor *t = &g->values[g->nodes[i].inputs[1]].data;
        L.w[L.n] = t->data;
        L.size[L.n++] = tensor_numel(t);
    }
    return L;
}

/* Magnitude in 3 rounds to 0.75 on the digits CNN: after each round every pruned layer has
 * exactly round(s_k * n) zeros, the report's sparsity is their share, and no zero comes back. */
static void check_magnitude_rounds(const char *digits) {
    loaded l = {0};
    graft_ctx_create(NULL, &l.ctx);
    l.m = NULL;
    if (graft_model_load(l.ctx, digits, &l.m) != GRAFT_OK) {
        CHECK("schedule_magnitude_load", 0, "%s", graft_last_error(l.ctx));
        graft_ctx_free(l.ctx);
        return;
    }
    graft_prune_options o = GRAFT_PRUNE_OPTIONS_INIT;
    o.method = GRAFT_PRUNE_MAGNITUDE;
    unsigned char *was_zero[64] = {0};
    int exact = 1, revived = 0, reported = 1, n_layers = 0;
    for (int k = 1; k <= 3; k++) {
        o.sparsity = graft_prune_schedule(0.75, k, 3);
        graft_prune_report r;
        if (graft_model_prune(l.m, &o, &r) != GRAFT_OK) {
            CHECK("schedule_magnitude_rounds", 0, "round %d: %s", k, graft_last_error(l.ctx));
            break;
        }
        layers L = prunable(&l.m->g, &o);
        int64_t zeros_all = 0, total = 0;
        n_layers = L.n;
        for (int i = 0; i < L.n; i++) {
            int64_t zeros = 0;
            if (!was_zero[i]) was_zero[i] = calloc((size_t)L.size[i], 1);
            for (int64_t j = 0; was_zero[i] && j < L.size[i]; j++) {
                bool z = L.w[i][j] == 0.0f;
                zeros += z;
                revived += was_zero[i][j] && !z;
                was_zero[i][j] = z;
            }
            exact &= zeros == llround(o.sparsity * (double)L.size[i]);
            zeros_all += zeros, total += L.size[i];
        }
        reported &= fabs(r.sparsity - (double)zeros_all / (double)total) < 1e-12;
        printf("INFO magnitude round %d: schedule %.4f, reached %.4f\n", k, o.sparsity, r.sparsity);
    }
    CHECK("schedule_magnitude_exact_per_round", exact && n_layers > 1, "%d layers", n_layers);
    CHECK("schedule_magnitude_report", reported, "the report's sparsity is not the zeros' share");
    CHECK("schedule_magnitude_never_revives", revived == 0, "%d weights revived", revived);
    for (int i = 0; i < 64; i++) free(was_zero[i]);
    graft_model_free(l.m);
    graft_ctx_free(l.ctx);
}

static int find_node(const ir_graph *g, const char *name) {
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, name)) return i;
    return -1;
}

/* Per Conv of the dense graph: its name, output channels, whether its group is prunable and
 * whether it is the group's first Conv (a residual group counts once in the sparsity). */
typedef struct conv_info {
    const char *name;
    int64_t loaded;
    bool prunable, first;
    float *gamma; /* after the last round, to check the next round only removes */
    int64_t n_gamma;
} conv_info;

static int dense_convs(const ir_graph *g, const graft_prune_options *o, conv_info *c, int cap,
                       graft_err *e) {
    chan_plan p;
    if (chan_plan_build(g, o, &p, e) != GRAFT_OK) return -1;
    int n = 0;
    for (int i = 0; i < p.n_nodes && n < cap; i++) {
        if (!(p.roles[i].roles & CHAN_SOURCE)) continue;
        int grp = p.segs[g->nodes[i].outputs[0]].s[0].group, root = chan_group_root(&p, grp);
        c[n++] = (conv_info){g->nodes[i].name, p.size[grp], !p.bad[root], grp == root, NULL, 0};
    }
    chan_plan_free(&p);
    return n;
}

/* Whether gamma b (the kept channels) is a subsequence of a (the channels before). */
static bool subsequence(const float *b, int64_t nb, const float *a, int64_t na) {
    int64_t j = 0;
    for (int64_t i = 0; i < na && j < nb; i++) j += a[i] == b[j];
    return j == nb;
}

/* After a round at sparsity s: every Conv of a prunable group has L - round(s L) channels; the
 * channels kept are among those the round before kept (their BN gammas a subsequence). */
static void round_counts(const ir_graph *g, conv_info *c, int n, double s, int *wrong, int *revived,
                         double *want_sparsity) {
    int64_t loaded = 0, gone = 0;
    for (int k = 0; k < n; k++) {
        int i = find_node(g, c[k].name);
        if (i < 0 || !g->nodes[i].bn_gamma) {
            (*wrong)++;
            continue;
        }
        int64_t have = g->values[g->nodes[i].inputs[1]].data.dims[0], want = c[k].loaded;
        if (c[k].prunable) {
            int64_t drop = llround(s * (double)c[k].loaded);
            want -= drop > c[k].loaded - 1 ? c[k].loaded - 1 : drop;
        }
        *wrong += have != want;
        if (c[k].gamma && !subsequence(g->nodes[i].bn_gamma, have, c[k].gamma, c[k].n_gamma))
            (*revived)++;
        free(c[k].gamma);
        c[k].gamma = malloc(sizeof(float) * (size_t)have);
        if (c[k].gamma) memcpy(c[k].gamma, g->nodes[i].bn_gamma, sizeof(float) * (size_t)have);
        c[k].n_gamma = have;
        loaded += c[k].prunable && c[k].first ? c[k].loaded : 0;
        gone += c[k].prunable && c[k].first ? c[k].loaded - have : 0;
    }
    *want_sparsity = loaded ? (double)gone / (double)loaded : 0;
}

/* Conv weights of a and b equal, bit for bit, name by name. */
static bool same_convs(const ir_graph *a, const ir_graph *b) {
    int n = 0;
    for (int i = 0; i < a->n_nodes; i++) {
        if (strcmp(a->nodes[i].op_type, "Conv")) continue;
        int j = find_node(b, a->nodes[i].name);
        if (j < 0) return false;
        const tensor *x = &a->values[a->nodes[i].inputs[1]].data;
        const tensor *y = &b->values[b->nodes[j].inputs[1]].data;
        if (tensor_numel(x) != tensor_numel(y) ||
            memcmp(x->data, y->data, sizeof(float) * (size_t)tensor_numel(x)))
            return false;
        n++;
    }
    return n > 0;
}

/* Load a model with a batch of 2 seeded inputs (every input float, symbolic dims 2). */
static int open_model(loaded *l, const char *path) {
    memset(l, 0, sizeof *l);
    graft_ctx_create(NULL, &l->ctx);
    if (graft_model_load(l->ctx, path, &l->m) != GRAFT_OK) return -1;
    l->n_in = graft_model_input_count(l->m) < 8 ? graft_model_input_count(l->m) : 8;
    for (int i = 0; i < l->n_in; i++) {
        graft_value_info v;
        graft_model_input_info(l->m, i, &v);
        l->in[i].name = strdup(v.name);
        l->in[i].tensor = (graft_tensor){GRAFT_DTYPE_F32, v.ndim, {0}, NULL};
        for (int d = 0; d < v.ndim; d++) l->in[i].tensor.dims[d] = v.dims[d] >= 0 ? v.dims[d] : 2;
        int64_t n = graft_tensor_numel(&l->in[i].tensor);
        float *x = malloc(sizeof(float) * (size_t)n);
        if (!x || v.dtype != GRAFT_DTYPE_F32) return free(x), -1;
        for (int64_t k = 0; k < n; k++) x[k] = (float)sin(0.37 * (double)k);
        l->in[i].tensor.data = x;
    }
    return 0;
}

/* Channels in rounds (to 0.7 in 3) with importance `imp`: exact counts per round, nothing
 * revived, and the end equals one-shot pruning at 0.7 (the same weights and outputs with bn,
 * whose ranking does not depend on other layers; the same counts with l1). */
static void check_channel_rounds(const char *path, graft_importance imp, const char *tag) {
    char test[128];
    loaded l = {0}, once = {0};
    if (open_model(&l, path) || open_model(&once, path)) {
        snprintf(test, sizeof test, "schedule_channels_%s", tag);
        MISSING(test, "model not generated");
        loaded_close(&l), loaded_close(&once);
        return;
    }
    graft_prune_options o = GRAFT_PRUNE_OPTIONS_INIT;
    o.method = GRAFT_PRUNE_CHANNELS, o.importance = imp, o.sparsity = 0.7;
    conv_info c[64];
    int n = dense_convs(&l.m->g, &o, c, 64, &l.ctx->err);
    int wrong = 0, revived = 0, reported = 1;
    graft_status st = n > 0 ? GRAFT_OK : GRAFT_E_INTERNAL;
    for (int k = 1; k <= 3 && st == GRAFT_OK; k++) {
        o.sparsity = graft_prune_schedule(0.7, k, 3);
        graft_prune_report r;
        double want = 0;
        st = graft_model_prune(l.m, &o, &r);
        if (st == GRAFT_OK) round_counts(&l.m->g, c, n, o.sparsity, &wrong, &revived, &want);
        reported &= st == GRAFT_OK && fabs(r.sparsity - want) < 1e-12;
        printf("INFO channels (%s) round %d: schedule %.4f, reached %.4f\n", tag, k, o.sparsity,
               r.sparsity);
    }
    snprintf(test, sizeof test, "schedule_channels_%s_exact_per_round", tag);
    CHECK(test, st == GRAFT_OK && wrong == 0, "status %d: %s; %d convs off", st,
          graft_last_error(l.ctx), wrong);
    snprintf(test, sizeof test, "schedule_channels_%s_report", tag);
    CHECK(test, reported, "the report's sparsity is not the removed share");
    snprintf(test, sizeof test, "schedule_channels_%s_only_removes", tag);
    CHECK(test, st == GRAFT_OK && revived == 0, "%d convs kept a channel a round removed", revived);
    /* One shot at 0.7: the same shapes; with bn the same weights and outputs. */
    o.sparsity = 0.7;
    graft_prune_report r;
    graft_status st1 = graft_model_prune(once.m, &o, &r);
    int64_t n1 = 0, n2 = 0;
    float *a = st == GRAFT_OK ? loaded_run_copy(&l, 0, &n1) : NULL;
    float *b = st1 == GRAFT_OK ? loaded_run_copy(&once, 0, &n2) : NULL;
    double diff = 0;
    for (int64_t i = 0; a && b && n1 == n2 && i < n1; i++) diff = fmax(diff, fabs(a[i] - b[i]));
    int w1 = 0, r1 = 0;
    double ignored;
    for (int k = 0; k < n; k++) free(c[k].gamma), c[k].gamma = NULL;
    if (st1 == GRAFT_OK) round_counts(&once.m->g, c, n, 0.7, &w1, &r1, &ignored);
    bool same = imp == GRAFT_IMPORTANCE_BN ? same_convs(&l.m->g, &once.m->g) && diff == 0 : true;
    snprintf(test, sizeof test, "schedule_channels_%s_ends_at_one_shot", tag);
    CHECK(test, st1 == GRAFT_OK && w1 == 0 && a && b && n1 == n2 && same,
          "status %d: %s; %d convs off, same weights %d, output diff %.3g", st1,
          graft_last_error(once.ctx), w1, same, diff);
    free(a), free(b);
    for (int k = 0; k < n; k++) free(c[k].gamma);
    loaded_close(&l);
    loaded_close(&once);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s GEN_DIR DIGITS_MODEL [--quick]\n", argv[0]);
        return 2;
    }
    /* --quick (the sanitizer build): channel rounds on the digits CNN instead of ResNet-18's
     * residual groups. */
    bool quick = argc > 3 && !strcmp(argv[3], "--quick");
    char resnet[1024];
    snprintf(resnet, sizeof resnet, "%s/resnet18.onnx", argv[1]);
    const char *model = quick ? argv[2] : resnet;
    check_formula();
    check_magnitude_rounds(argv[2]);
    check_channel_rounds(model, GRAFT_IMPORTANCE_BN, "bn");
    check_channel_rounds(model, GRAFT_IMPORTANCE_L1, "l1");
    return test_failures ? 1 : 0;
}
