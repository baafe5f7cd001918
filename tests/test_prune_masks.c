/* test_prune_masks.c: magnitude and 2:4 pruning on generated models: exact sparsity per layer and
 * globally, excluded layers and ends untouched, the 2:4 pattern, report counts, gradual rounds,
 * masks kept through a head fit, and the pruned export reloading with equal outputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/npy.h"
#include "../src/graph/model.h"
#include "../src/prune/prune.h"
#include "test_model.h"
#include "test_util.h"

static const char *gen, *out_dir;

static int load_path(loaded *l, const char *path, const char *inputs_of) {
    return loaded_open(l, path, gen, inputs_of);
}

static int load(loaded *l, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", gen, name);
    return load_path(l, path, name);
}

/* ---- snapshots of the weights before pruning ------------------------------------------------ */

typedef struct wsnap {
    char *value, *node, *op;
    int64_t n, dims[GRAFT_MAX_DIMS];
    int ndim, transb;
    float *orig;
} wsnap;

typedef struct snapshot {
    wsnap *w;
    int n;
    char *first_conv, *classifier; /* node names of the ends (NULL: none) */
} snapshot;

static snapshot take(const ir_graph *g) {
    snapshot s = {calloc((size_t)g->n_nodes + 1, sizeof(wsnap)), 0, NULL, NULL};
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *nd = &g->nodes[i];
        bool weighted = nd->n_in >= 2 && nd->inputs[1] >= 0 && g->values[nd->inputs[1]].is_const &&
                        g->values[nd->inputs[1]].data.dtype == GRAFT_DTYPE_F32;
        bool conv = !strcmp(nd->op_type, "Conv"), gemm = !strcmp(nd->op_type, "Gemm");
        if (!weighted || (!conv && !gemm && strcmp(nd->op_type, "MatMul"))) continue;
        const tensor *t = &g->values[nd->inputs[1]].data;
        if (!conv && t->ndim < 2) continue;
        if (conv && !s.first_conv) s.first_conv = strdup(nd->name);
        if (gemm || !strcmp(nd->op_type, "MatMul")) {
            free(s.classifier);
            s.classifier = strdup(nd->name);
        }
        wsnap *w = &s.w[s.n++];
        w->value = strdup(g->values[nd->inputs[1]].name);
        w->node = strdup(nd->name);
        w->op = strdup(nd->op_type);
        w->n = graft_tensor_numel(t);
        w->ndim = t->ndim;
        memcpy(w->dims, t->dims, sizeof w->dims);
        w->transb = (int)attr_i(nd, "transB", 0);
        w->orig = malloc(sizeof(float) * (size_t)w->n);
        memcpy(w->orig, t->data, sizeof(float) * (size_t)w->n);
    }
    /* A classifier only when the graph ends in one 2-D output (as prune_excluded reads it). */
    if (!(g->n_outputs == 1 && g->values[g->outputs[0]].ndim == 2)) {
        free(s.classifier);
        s.classifier = NULL;
    }
    return s;
}

static void drop(snapshot *s) {
    for (int i = 0; i < s->n; i++)
        free(s->w[i].value), free(s->w[i].node), free(s->w[i].op), free(s->w[i].orig);
    free(s->w), free(s->first_conv), free(s->classifier);
}

static const float *now(const ir_graph *g, const wsnap *w) {
    int v = ir_find_value(g, w->value);
    return v < 0 ? NULL : g->values[v].data.data;
}

static int64_t zeros(const float *p, int64_t n) {
    int64_t z = 0;
    for (int64_t k = 0; k < n; k++) z += p[k] == 0.0f;
    return z;
}

static bool is_end(const snapshot *s, const wsnap *w) {
    return (s->first_conv && !strcmp(w->node, s->first_conv)) ||
           (s->classifier && !strcmp(w->node, s->classifier));
}

/* Whether w's node is excluded by name or op type. */
static bool in_list(const wsnap *w, const char *const *list, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(list[i], w->node) || !strcmp(list[i], w->op)) return true;
    return false;
}

/* Every weight of w either kept bit for bit or zeroed; the zeroed ones no larger in |orig| than
 * the kept ones. Writes the largest pruned and smallest kept |orig|. */
static bool kept_or_zero(const float *p, const wsnap *w, float *max_pruned, float *min_kept) {
    for (int64_t k = 0; k < w->n; k++) {
        float a = fabsf(w->orig[k]);
        if (p[k] == 0.0f) {
            if (a > *max_pruned) *max_pruned = a;
        } else if (memcmp(&p[k], &w->orig[k], sizeof(float)) != 0)
            return false;
        else if (a < *min_kept)
            *min_kept = a;
    }
    return true;
}

/* Per-layer magnitude: each pruned layer has exactly max(round(s n), zeros before) zeros, the
 * smallest; excluded layers (names, ends) are bit for bit as before. */
static void check_per_layer(const char *test, const ir_graph *g, const snapshot *s, double sp,
                            const char *const *excl, int n_excl, int keep_ends) {
    int bad = 0, pruned = 0, untouched = 0;
    char why[512] = "";
    for (int i = 0; i < s->n; i++) {
        const wsnap *w = &s->w[i];
        const float *p = now(g, w);
        if (!p) {
            snprintf(why, sizeof why, "weight '%s' gone", w->value), bad++;
            continue;
        }
        if ((keep_ends && is_end(s, w)) || in_list(w, excl, n_excl)) {
            untouched++;
            if (memcmp(p, w->orig, sizeof(float) * (size_t)w->n) != 0)
                snprintf(why, sizeof why, "excluded '%s' changed", w->node), bad++;
            continue;
        }
        pruned++;
        int64_t want = llround(sp * (double)w->n), z0 = zeros(w->orig, w->n), z = zeros(p, w->n);
        if (z0 > want) want = z0;
        float maxp = 0, mink = INFINITY;
        if (z != want)
            snprintf(why, sizeof why, "'%s': %lld zeros of %lld, want %lld", w->node, (long long)z,
                     (long long)w->n, (long long)want),
                bad++;
        else if (!kept_or_zero(p, w, &maxp, &mink) || maxp > mink)
            snprintf(why, sizeof why, "'%s': kept weights changed or a larger one pruned (%g > %g)",
                     w->node, maxp, mink),
                bad++;
    }
    CHECK(test, bad == 0 && pruned > 0 && untouched >= n_excl, "%d bad (%s), %d pruned, %d kept",
          bad, why, pruned, untouched);
}

static void check_report(const char *test, const graft_prune_report *r, const snapshot *s,
                         const ir_graph *g) {
    int64_t params = 0, nz_before = 0, nz_after = 0;
    for (int i = 0; i < s->n; i++) {
        const float *p = now(g, &s->w[i]);
        params += s->w[i].n;
        nz_before += s->w[i].n - zeros(s->w[i].orig, s->w[i].n);
        nz_after += p ? s->w[i].n - zeros(p, s->w[i].n) : 0;
    }
    CHECK(test,
          r->params_before == params && r->params_after == params &&
              r->nonzero_before == nz_before && r->nonzero_after == nz_after &&
              r->units_removed == 0 && r->flops_before > 0 && r->flops_after == r->flops_before,
          "params %lld/%lld (want %lld), nonzero %lld/%lld (want %lld/%lld), units %lld",
          (long long)r->params_before, (long long)r->params_after, (long long)params,
          (long long)r->nonzero_before, (long long)r->nonzero_after, (long long)nz_before,
          (long long)nz_after, (long long)r->units_removed);
}

static bool all_finite(const float *x, int64_t n) {
    for (int64_t k = 0; k < n; k++)
        if (!isfinite(x[k])) return false;
    return true;
}

/* The model still runs on its recorded inputs: every output finite. */
static void check_runs(const char *test, loaded *l) {
    int ok = 1;
    for (int o = 0; o < graft_model_output_count(l->m) && ok; o++) {
        int64_t n = 0;
        float *y = loaded_run_copy(l, o, &n);
        ok = y && n > 0 && all_finite(y, n);
        free(y);
    }
    CHECK(test, ok, "%s", graft_last_error(l->ctx));
}

static graft_status prune(loaded *l, graft_prune_method method, double sp, int global,
                          const char *const *excl, int n_excl, int keep_ends,
                          graft_prune_report *r) {
    graft_prune_options o = GRAFT_PRUNE_OPTIONS_INIT;
    o.method = method, o.sparsity = sp, o.global = global;
    o.exclude = excl, o.n_exclude = n_excl, o.keep_ends = keep_ends;
    return graft_model_prune(l->m, &o, r);
}

/* Load the model, or say the test (named t) is skipped and return false. */
static bool load_or_skip(loaded *l, const char *name, const char *t) {
    if (load(l, name) == 0) return true;
    MISSING(t, "model not generated");
    loaded_close(l);
    return false;
}

/* ---- the tests ------------------------------------------------------------------------------ */

static void magnitude_per_layer(const char *name) {
    char t[128];
    loaded l = {0};
    snprintf(t, sizeof t, "magnitude_%s_per_layer", name);
    if (!load_or_skip(&l, name, t)) return;
    snapshot s = take(&l.m->g);
    graft_prune_report r;
    graft_status st = prune(&l, GRAFT_PRUNE_MAGNITUDE, 0.5, 0, NULL, 0, 1, &r);
    CHECK(t, st == GRAFT_OK, "%s", graft_last_error(l.ctx));
    if (st == GRAFT_OK) {
        snprintf(t, sizeof t, "magnitude_%s_exact_per_layer_ends_dense", name);
        check_per_layer(t, &l.m->g, &s, 0.5, NULL, 0, 1);
        snprintf(t, sizeof t, "magnitude_%s_report", name);
        check_report(t, &r, &s, &l.m->g);
        snprintf(t, sizeof t, "magnitude_%s_runs", name);
        check_runs(t, &l);
    }
    drop(&s);
    loaded_close(&l);
}

/* Excluded by name and by op type, ends not kept: the first conv is pruned too. */
static void magnitude_exclude(void) {
    loaded l = {0};
    if (load(&l, "resnet18") != 0) {
        MISSING("magnitude_exclude", "resnet18 not generated");
        loaded_close(&l);
        return;
    }
    snapshot s = take(&l.m->g);
    const char *excl[2] = {s.n > 3 ? s.w[3].node : "none", "Gemm"};
    graft_status st = prune(&l, GRAFT_PRUNE_MAGNITUDE, 0.4, 0, excl, 2, 0, NULL);
    CHECK("magnitude_exclude", st == GRAFT_OK, "%s", graft_last_error(l.ctx));
    if (st == GRAFT_OK) {
        check_per_layer("magnitude_exclude_exact", &l.m->g, &s, 0.4, excl, 2, 0);
        const float *first = now(&l.m->g, &s.w[0]);
        CHECK("magnitude_no_keep_ends_prunes_first_conv",
              first && zeros(first, s.w[0].n) == llround(0.4 * (double)s.w[0].n),
              "first conv '%s' not pruned", s.w[0].node);
    }
    drop(&s);
    loaded_close(&l);
}

/* One threshold over every layer: exactly round(s N) zeros in all, the pruned never larger than
 * the kept anywhere, and layers end at different sparsities. */
static void magnitude_global(void) {
    loaded l = {0};
    if (load(&l, "resnet18") != 0) {
        MISSING("magnitude_global", "resnet18 not generated");
        loaded_close(&l);
        return;
    }
    snapshot s = take(&l.m->g);
    graft_status st = prune(&l, GRAFT_PRUNE_MAGNITUDE, 0.7, 1, NULL, 0, 1, NULL);
    CHECK("magnitude_global", st == GRAFT_OK, "%s", graft_last_error(l.ctx));
    int64_t total = 0, z = 0, z0 = 0;
    float maxp = 0, mink = INFINITY, lo = 1, hi = 0;
    int intact = 1, ends = 1;
    for (int i = 0; i < s.n && st == GRAFT_OK; i++) {
        const wsnap *w = &s.w[i];
        const float *p = now(&l.m->g, w);
        if (!p) continue;
        if (is_end(&s, w)) {
            ends &= memcmp(p, w->orig, sizeof(float) * (size_t)w->n) == 0;
            continue;
        }
        int64_t zi = zeros(p, w->n);
        total += w->n, z += zi, z0 += zeros(w->orig, w->n);
        float frac = (float)zi / (float)w->n;
        lo = frac < lo ? frac : lo, hi = frac > hi ? frac : hi;
        intact &= kept_or_zero(p, w, &maxp, &mink);
    }
    if (st == GRAFT_OK) {
        int64_t want = llround(0.7 * (double)total);
        want = z0 > want ? z0 : want;
        CHECK("magnitude_global_exact", z == want, "%lld zeros of %lld, want %lld", (long long)z,
              (long long)total, (long long)want);
        CHECK("magnitude_global_one_threshold", intact && maxp <= mink && hi - lo > 0.05f,
              "intact %d, pruned %g kept %g, layer sparsity %.3f..%.3f", intact, maxp, mink, lo,
              hi);
        CHECK("magnitude_global_ends_dense", ends, "an end layer changed");
        check_runs("magnitude_global_runs", &l);
    }
    drop(&s);
    loaded_close(&l);
}

/* Gradual: 0.3, then 0.6: the second round's zeros include the first's, and the count is exact. */
static void magnitude_gradual(void) {
    loaded l = {0};
    if (load(&l, "resnet18") != 0) {
        MISSING("magnitude_gradual", "resnet18 not generated");
        loaded_close(&l);
        return;
    }
    snapshot s0 = take(&l.m->g);
    graft_status st = prune(&l, GRAFT_PRUNE_MAGNITUDE, 0.3, 0, NULL, 0, 1, NULL);
    snapshot s1 = take(&l.m->g);
    if (st == GRAFT_OK) st = prune(&l, GRAFT_PRUNE_MAGNITUDE, 0.6, 0, NULL, 0, 1, NULL);
    CHECK("magnitude_gradual", st == GRAFT_OK, "%s", graft_last_error(l.ctx));
    if (st == GRAFT_OK) {
        check_per_layer("magnitude_gradual_exact", &l.m->g, &s0, 0.6, NULL, 0, 1);
        int64_t revived = 0;
        for (int i = 0; i < s1.n; i++) {
            const float *p = now(&l.m->g, &s1.w[i]);
            for (int64_t k = 0; p && k < s1.w[i].n; k++)
                revived += s1.w[i].orig[k] == 0.0f && p[k] != 0.0f;
        }
        CHECK("magnitude_gradual_zeros_kept", revived == 0, "%lld weights revived",
              (long long)revived);
    }
    drop(&s0), drop(&s1);
    loaded_close(&l);
}

/* One group of up to four weights (stride apart) of w: at least half zero (a group of 3 loses
 * one, shorter ones none), the kept ones unchanged and the largest |orig| of the group. */
static bool group_ok(const float *p, const float *o, int64_t stride, int len) {
    int z = 0;
    float maxp = 0, mink = INFINITY;
    for (int i = 0; i < len; i++) {
        float a = fabsf(o[i * stride]), v = p[i * stride];
        if (v == 0.0f) {
            z++;
            maxp = a > maxp ? a : maxp;
        } else if (memcmp(&v, &o[i * stride], sizeof v) != 0)
            return false;
        else
            mink = a < mink ? a : mink;
    }
    int want = len == 4 ? 2 : len == 3 ? 1 : 0;
    return z >= want && maxp <= mink;
}

/* The 2:4 pattern along the GEMM's reduction dimension: Gemm transB=1 rows, transB=0 columns,
 * MatMul (K, N) columns, Conv (O, C, k...) four input channels at one kernel position. */
static bool nm_ok(const float *p, const wsnap *w, int64_t *groups) {
    int64_t A, K, B = 1;
    if (!strcmp(w->op, "Conv")) {
        A = w->dims[0], K = w->dims[1];
        for (int d = 2; d < w->ndim; d++) B *= w->dims[d];
    } else if (!strcmp(w->op, "Gemm") && w->transb) {
        A = w->dims[0], K = w->dims[1];
    } else {
        A = 1, K = w->dims[w->ndim - 2], B = w->dims[w->ndim - 1];
        for (int d = 0; d < w->ndim - 2; d++) A *= w->dims[d];
    }
    for (int64_t a = 0; a < A; a++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t k = 0; k < K; k += 4) {
                int64_t at = a * K * B + k * B + b;
                (*groups)++;
                if (!group_ok(p + at, w->orig + at, B, (int)(K - k < 4 ? K - k : 4))) return false;
            }
    return true;
}

static void nm_2_4(const char *name) {
    char t[128];
    loaded l = {0};
    snprintf(t, sizeof t, "2_4_%s", name);
    if (!load_or_skip(&l, name, t)) return;
    snapshot s = take(&l.m->g);
    graft_prune_report r;
    graft_status st = prune(&l, GRAFT_PRUNE_2_4, 0.0, 0, NULL, 0, 1, &r);
    CHECK(t, st == GRAFT_OK, "%s", graft_last_error(l.ctx));
    int bad = 0, ends = 1;
    int64_t groups = 0;
    char why[256] = "";
    for (int i = 0; i < s.n && st == GRAFT_OK; i++) {
        const float *p = now(&l.m->g, &s.w[i]);
        if (p && is_end(&s, &s.w[i]))
            ends &= memcmp(p, s.w[i].orig, sizeof(float) * (size_t)s.w[i].n) == 0;
        else if (!p || !nm_ok(p, &s.w[i], &groups))
            snprintf(why, sizeof why, "'%s' (%s)", s.w[i].node, s.w[i].op), bad++;
    }
    if (st == GRAFT_OK) {
        snprintf(t, sizeof t, "2_4_%s_pattern_largest_kept", name);
        CHECK(t, bad == 0 && groups > 0, "%d layers wrong, e.g. %s; %lld groups", bad, why,
              (long long)groups);
        snprintf(t, sizeof t, "2_4_%s_ends_dense", name);
        CHECK(t, ends, "an end layer changed");
        snprintf(t, sizeof t, "2_4_%s_report", name);
        check_report(t, &r, &s, &l.m->g);
        snprintf(t, sizeof t, "2_4_%s_about_half", name);
        CHECK(t, r.nonzero_after < r.nonzero_before * 0.6, "nonzero %lld -> %lld",
              (long long)r.nonzero_before, (long long)r.nonzero_after);
        snprintf(t, sizeof t, "2_4_%s_runs", name);
        check_runs(t, &l);
    }
    drop(&s);
    loaded_close(&l);
}

static double max_rel(const float *a, const float *b, int64_t n) {
    double d = 0, ref = 1e-12;
    for (int64_t i = 0; i < n; i++) {
        d = fabs((double)a[i] - b[i]) > d ? fabs((double)a[i] - b[i]) : d;
        ref = fabs((double)b[i]) > ref ? fabs((double)b[i]) : ref;
    }
    return d / ref;
}

static int64_t nonzero_weights(const ir_graph *g) {
    int64_t params, nz;
    prune_count(g, &params, &nz);
    return nz;
}

/* Save the inputs and graft's output 0 next to the export (stem.in.X.npy, stem.graft.Y.npy) for
 * tools/check_export.py to run it in ONNX Runtime. */
static void save_io(loaded *l, const char *stem, const float *y, int64_t n) {
    char path[1200], err[256];
    for (int i = 0; i < l->n_in; i++) {
        snprintf(path, sizeof path, "%s.in.%s.npy", stem, l->in[i].name);
        npy_write(path, &l->in[i].tensor, err, sizeof err);
    }
    graft_value_info info;
    const graft_tensor *t;
    if (graft_model_output_info(l->m, 0, &info) != GRAFT_OK ||
        graft_model_output(l->m, 0, &t) != GRAFT_OK || graft_tensor_numel(t) != n)
        return;
    graft_tensor copy = *t;
    copy.data = (void *)y;
    snprintf(path, sizeof path, "%s.graft.%s.npy", stem, info.name);
    npy_write(path, &copy, err, sizeof err);
}

/* Export the pruned model; graft reloads it with the same zeros and equal outputs. */
static void export_reload(const char *name, graft_prune_method method) {
    char t[128], path[1100];
    loaded l = {0}, back = {0};
    snprintf(t, sizeof t, "export_%s_%s", method == GRAFT_PRUNE_2_4 ? "2_4" : "magnitude", name);
    if (!load_or_skip(&l, name, t)) return;
    char stem[1024];
    snprintf(stem, sizeof stem, "%s/pruned_%s_%s", out_dir, name,
             method == GRAFT_PRUNE_2_4 ? "2_4" : "magnitude");
    snprintf(path, sizeof path, "%s.onnx", stem);
    int64_t n = 0, nb = 0;
    float *want = NULL, *got = NULL;
    graft_status st = prune(&l, method, 0.5, 0, NULL, 0, 1, NULL);
    if (st == GRAFT_OK) want = loaded_run_copy(&l, 0, &n);
    if (want) st = graft_model_export(l.m, path, NULL);
    if (want && st == GRAFT_OK) save_io(&l, stem, want, n);
    CHECK(t, st == GRAFT_OK && want, "%s", graft_last_error(l.ctx));
    int loaded_back = st == GRAFT_OK && want ? load_path(&back, path, name) == 0 : -1;
    if (loaded_back == 1) {
        got = loaded_run_copy(&back, 0, &nb);
        double rel = got && nb == n ? max_rel(got, want, n) : 1.0;
        snprintf(t, sizeof t, "export_%s_%s_reload_equal",
                 method == GRAFT_PRUNE_2_4 ? "2_4" : "magnitude", name);
        CHECK(t,
              got && nb == n && rel <= 1e-5 &&
                  nonzero_weights(&back.m->g) == nonzero_weights(&l.m->g),
              "rel %.3g, nonzero %lld vs %lld", rel, (long long)nonzero_weights(&back.m->g),
              (long long)nonzero_weights(&l.m->g));
    } else if (loaded_back == 0)
        CHECK(t, 0, "reload of '%s' failed: %s", path, back.ctx ? graft_last_error(back.ctx) : "");
    if (loaded_back >= 0) loaded_close(&back);
    free(want), free(got);
    loaded_close(&l);
}

/* A head trained on the cut, pruned model leaves every backbone constant as it was. */
static void head_keeps_masks(void) {
    loaded l = {0};
    if (load(&l, "resnet18") != 0) {
        MISSING("head_fit_keeps_masks", "resnet18 not generated");
        loaded_close(&l);
        return;
    }
    graft_status st = graft_model_cut(l.m, "auto", GRAFT_POOLING_AUTO);
    graft_prune_report r;
    if (st == GRAFT_OK) st = prune(&l, GRAFT_PRUNE_MAGNITUDE, 0.5, 0, NULL, 0, 1, &r);
    CHECK("prune_cut_model", st == GRAFT_OK && r.nonzero_after < r.nonzero_before, "%s",
          graft_last_error(l.ctx));
    const ir_graph *g = &l.m->g;
    int nc = 0;
    tensor *copies = calloc((size_t)g->n_values + 1, sizeof(tensor));
    for (int v = 0; v < g->n_values && st == GRAFT_OK; v++)
        if (g->values[v].is_const && g->values[v].data.data)
            tensor_clone(&copies[v], &g->values[v].data, NULL), nc++;
    int64_t batch = l.in[0].tensor.dims[0];
    int64_t labels_data[64] = {0};
    for (int64_t i = 0; i < batch && i < 64; i++) labels_data[i] = i % 2;
    graft_tensor labels = {GRAFT_DTYPE_I64, 1, {batch}, labels_data};
    graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
    ho.n_outputs = 2;
    graft_train_options to = GRAFT_TRAIN_OPTIONS_INIT;
    to.epochs = 1, to.batch_size = 2, to.lr = 0.1;
    graft_trainer *tr = NULL;
    if (st == GRAFT_OK) st = graft_trainer_create(l.m, &ho, &to, &tr);
    if (st == GRAFT_OK) st = graft_trainer_fit(tr, l.in, l.n_in, &labels, NULL, 0, NULL);
    CHECK("head_fit_on_pruned", st == GRAFT_OK, "%s", graft_last_error(l.ctx));
    int changed = 0;
    for (int v = 0; v < g->n_values && v < g->n_values; v++)
        if (copies[v].data) {
            const tensor *t = &g->values[v].data;
            changed += !t->data || tensor_nbytes(t) != tensor_nbytes(&copies[v]) ||
                       memcmp(t->data, copies[v].data, (size_t)tensor_nbytes(t)) != 0;
        }
    CHECK("head_fit_keeps_masks", st == GRAFT_OK && nc > 0 && changed == 0,
          "%d of %d backbone constants changed", changed, nc);
    for (int v = 0; v < g->n_values; v++) tensor_release(&copies[v]);
    free(copies);
    graft_trainer_free(tr);
    loaded_close(&l);
}

/* argv: gen_dir [out_dir] [--quick: the BERT-tiny cases only, for sanitizer builds] */
int main(int argc, char **argv) {
    gen = argc > 1 ? argv[1] : "tests/data/gen";
    out_dir = argc > 2 ? argv[2] : ".";
    int quick = argc > 3 && !strcmp(argv[3], "--quick");
    magnitude_per_layer("bert_tiny_decomposed");
    nm_2_4("bert_tiny_decomposed");
    export_reload("bert_tiny_decomposed", GRAFT_PRUNE_2_4);
    if (quick) return test_failures ? 1 : 0;
    magnitude_per_layer("resnet18");
    magnitude_exclude();
    magnitude_global();
    magnitude_gradual();
    nm_2_4("resnet18");
    export_reload("resnet18", GRAFT_PRUNE_MAGNITUDE);
    export_reload("resnet18", GRAFT_PRUNE_2_4);
    head_keeps_masks();
    return test_failures ? 1 : 0;
}
