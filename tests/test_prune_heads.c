/* test_prune_heads.c: head and neuron pruning of BERT encoders: the pruned model computes what the
 * unpruned model computes with the removed units zeroed (V columns and bias of a head, the down
 * projection's row of a neuron); selection, exclusion, non-matching models and export. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../src/cli/npy.h"
#include "../src/graph/model.h"
#include "../src/prune/heads.h"
#include "test_model.h"
#include "test_util.h"

static const char *gen, *out_dir;

static int load(loaded *l, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", gen, name);
    return loaded_open(l, path, gen, name);
}

/* Run l's model on l's inputs (or m's when given) and copy every output. */
static int run_all(graft_model *m, loaded *l, graft_tensor *outs, int *n_out) {
    if (graft_model_run(m, l->in, l->n_in) != GRAFT_OK) return -1;
    *n_out = graft_model_output_count(m);
    for (int i = 0; i < *n_out && i < 4; i++) {
        const graft_tensor *t;
        graft_model_output(m, i, &t);
        outs[i] = *t;
        size_t n = (size_t)graft_tensor_numel(t) * sizeof(float);
        outs[i].data = malloc(n);
        memcpy(outs[i].data, t->data, n);
    }
    return 0;
}

static void free_outs(graft_tensor *outs, int n) {
    for (int i = 0; i < n; i++) free(outs[i].data);
}

/* max |a - b| over max |b|; -1 when the shapes differ. */
static double max_rel(const graft_tensor *a, const graft_tensor *b) {
    if (a->ndim != b->ndim || memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim))
        return -1;
    const float *x = a->data, *y = b->data;
    double d = 0, ref = 1e-12;
    for (int64_t i = 0; i < graft_tensor_numel(b); i++) {
        if (fabs(x[i] - y[i]) > d) d = fabs(x[i] - y[i]);
        if (fabs(y[i]) > ref) ref = fabs(y[i]);
    }
    return d / ref;
}

static void select_units(void) {
    const double imp[6] = {3, 1, 2, 0.5, 1, 9};
    bool keep[6];
    int kept = heads_select(imp, 6, 0.5, keep);
    CHECK("heads_select_lowest",
          kept == 3 && !keep[3] && !keep[1] && !keep[4] && keep[0] && keep[2] && keep[5],
          "kept %d: %d%d%d%d%d%d", kept, keep[0], keep[1], keep[2], keep[3], keep[4], keep[5]);
    kept = heads_select(imp, 6, 0.99, keep);
    CHECK("heads_select_keeps_one", kept == 1 && keep[5], "kept %d", kept);
    kept = heads_select(imp, 6, 0.0, keep);
    CHECK("heads_select_none", kept == 6, "kept %d", kept);
    const double tie[4] = {1, 1, 1, 1};
    kept = heads_select(tie, 4, 0.25, keep);
    CHECK("heads_select_ties_lower_index", kept == 3 && !keep[0], "kept %d", kept);
}

static void zero_cols(ir_value *v, const bool *keep, int group) {
    tensor *t = &v->data;
    int64_t rows = t->ndim == 2 ? t->dims[0] : 1, cols = t->dims[t->ndim - 1];
    float *w = t->data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            if (!keep[c / group]) w[r * cols + c] = 0;
}

/* The reference: the plan's removed units zeroed so that they contribute nothing. */
static int zero_removed(graft_model *m, const heads_plan *p) {
    ir_graph *g = &m->g;
    for (int i = 0; i < p->n_attn; i++) {
        const heads_attn *a = &p->attn[i];
        zero_cols(&g->values[g->nodes[a->proj[2]].inputs[1]], a->keep, a->head_dim);
        if (a->bias[2] >= 0) zero_cols(&g->values[a->bias[2]], a->keep, a->head_dim);
    }
    for (int i = 0; i < p->n_ffn; i++) {
        const tensor *w = &g->values[g->nodes[p->ffn[i].down].inputs[1]].data;
        float *d = w->data;
        for (int64_t r = 0; r < w->dims[0]; r++)
            if (!p->ffn[i].keep[r])
                memset(d + r * w->dims[1], 0, sizeof(float) * (size_t)w->dims[1]);
    }
    exec_free(&m->exec);
    model_release_state(m);
    return exec_init(&m->exec, g, &m->backend, model_device(m), &m->ctx->err) == GRAFT_OK ? 0 : -1;
}

static bool same_plan(const heads_plan *a, const heads_plan *b) {
    if (a->n_attn != b->n_attn || a->n_ffn != b->n_ffn) return false;
    for (int i = 0; i < a->n_attn; i++)
        if (a->attn[i].n_heads != b->attn[i].n_heads ||
            memcmp(a->attn[i].keep, b->attn[i].keep, sizeof(bool) * (size_t)a->attn[i].n_heads))
            return false;
    for (int i = 0; i < a->n_ffn; i++)
        if (a->ffn[i].n != b->ffn[i].n ||
            memcmp(a->ffn[i].keep, b->ffn[i].keep, sizeof(bool) * (size_t)a->ffn[i].n))
            return false;
    return true;
}

static int64_t removed_units(const heads_plan *p) {
    int64_t n = 0;
    for (int i = 0; i < p->n_attn; i++) n += p->attn[i].n_heads - p->attn[i].n_kept;
    for (int i = 0; i < p->n_ffn; i++) n += p->ffn[i].n - p->ffn[i].n_kept;
    return n;
}

/* Export the pruned model, reload it and check it computes the same outputs. */
static void export_reload(const char *name, loaded *l, const graft_tensor *want, int n_out) {
    char path[1024], test[256];
    snprintf(path, sizeof path, "%s/%s_pruned.onnx", out_dir, name);
    snprintf(test, sizeof test, "prune_heads_%s_export_reload", name);
    if (graft_model_export(l->m, path, NULL) != GRAFT_OK) {
        CHECK(test, 0, "export: %s", graft_last_error(l->ctx));
        return;
    }
    struct stat st, orig, data;
    char opath[1024];
    snprintf(opath, sizeof opath, "%s/%s.onnx", gen, name);
    stat(path, &st);
    stat(opath, &orig);
    long long original = (long long)orig.st_size;
    strncat(opath, ".data", sizeof opath - strlen(opath) - 1);
    if (stat(opath, &data) == 0) original += (long long)data.st_size; /* external weights */
    printf("  %s exported: %lld bytes (original %lld)\n", name, (long long)st.st_size, original);
    graft_model *m2 = NULL;
    graft_tensor got[4];
    int n2 = 0;
    double worst = 0;
    if (graft_model_load(l->ctx, path, &m2) != GRAFT_OK || run_all(m2, l, got, &n2) != 0) {
        CHECK(test, 0, "reload: %s", graft_last_error(l->ctx));
        graft_model_free(m2);
        return;
    }
    for (int i = 0; i < n_out && i < n2; i++) {
        double d = max_rel(&got[i], &want[i]);
        if (d < 0 || d > worst) worst = d < 0 ? 1e9 : d;
    }
    CHECK(test, n2 == n_out && worst <= 1e-6, "%d outputs, max rel diff %g", n2, worst);
    free_outs(got, n2);
    graft_model_free(m2);
}

/* Prune `name` and compare with the zeroed reference; layers: the encoder's layer count. */
static void check_model(const char *name, int layers, graft_importance how, double sparsity,
                        bool export) {
    char test[256];
    snprintf(test, sizeof test, "prune_heads_%s_%s", name,
             how == GRAFT_IMPORTANCE_L2 ? "l2" : "l1");
    loaded a = {0}, b = {0};
    if (load(&a, name) != 0 || load(&b, name) != 0) {
        MISSING(test, "model not generated");
        loaded_close(&a);
        loaded_close(&b);
        return;
    }
    graft_prune_options o = GRAFT_PRUNE_OPTIONS_INIT;
    o.method = GRAFT_PRUNE_HEADS;
    o.sparsity = sparsity;
    o.importance = how;
    heads_plan pa, pb;
    graft_err e;
    heads_plan_build(&a.m->g, &o, &pa, &e);
    heads_plan_build(&b.m->g, &o, &pb, &e);
    char plan_test[300];
    snprintf(plan_test, sizeof plan_test, "%s_plan", test);
    CHECK(plan_test,
          pa.n_attn == layers && pa.n_ffn == layers && pa.skipped_attn == 0 && same_plan(&pa, &pb),
          "%d attention, %d ffn blocks, %d skipped (want %d)", pa.n_attn, pa.n_ffn, pa.skipped_attn,
          layers);
    graft_tensor want[4], got[4], orig[4];
    int n_want = 0, n_got = 0, n_orig = 0;
    graft_prune_report r;
    if (run_all(b.m, &b, orig, &n_orig) != 0 || zero_removed(b.m, &pb) != 0 ||
        run_all(b.m, &b, want, &n_want) != 0 || graft_model_prune(a.m, &o, &r) != GRAFT_OK ||
        run_all(a.m, &a, got, &n_got) != 0) {
        CHECK(test, 0, "%s / %s", graft_last_error(a.ctx), graft_last_error(b.ctx));
    } else {
        printf("  %s: units removed %lld; params %lld -> %lld; flops/sample %.4g -> %.4g\n", name,
               (long long)r.units_removed, (long long)r.params_before, (long long)r.params_after,
               r.flops_before, r.flops_after);
        double worst = 0;
        for (int i = 0; i < n_want && i < n_got; i++) {
            double d = max_rel(&got[i], &want[i]);
            printf("  %s output %d: max rel diff %.3g\n", name, i, d);
            if (d < 0 || d > worst) worst = d < 0 ? 1e9 : d;
        }
        CHECK(test, n_got == n_want && worst <= 1e-5, "max rel diff %g", worst);
        /* The zeroed units mattered: the reference is not the unpruned model. */
        double moved = max_rel(&want[0], &orig[0]);
        snprintf(plan_test, sizeof plan_test, "%s_units_matter", test);
        CHECK(plan_test, moved > 1e-3, "zeroing changed the output by only %g", moved);
        snprintf(test, sizeof test, "prune_heads_%s_%s_report", name,
                 how == GRAFT_IMPORTANCE_L2 ? "l2" : "l1");
        CHECK(test,
              r.units_removed == removed_units(&pa) && r.units_removed > 0 &&
                  r.params_after < r.params_before && r.flops_after < r.flops_before,
              "removed %lld (plan %lld), params %lld -> %lld, flops %g -> %g",
              (long long)r.units_removed, (long long)removed_units(&pa), (long long)r.params_before,
              (long long)r.params_after, r.flops_before, r.flops_after);
        if (export) export_reload(name, &a, got, n_got);
    }
    free_outs(want, n_want);
    free_outs(got, n_got);
    free_outs(orig, n_orig);
    heads_plan_free(&pa);
    heads_plan_free(&pb);
    loaded_close(&a);
    loaded_close(&b);
}

/* The options' exclusions leave a block dense; a model without attention is left alone. */
static void exclusions_and_others(void) {
    loaded l = {0};
    graft_prune_options o = GRAFT_PRUNE_OPTIONS_INIT;
    o.method = GRAFT_PRUNE_HEADS;
    if (load(&l, "bert_tiny_decomposed") == 0) {
        heads_plan p;
        graft_err e;
        heads_plan_build(&l.m->g, &o, &p, &e);
        const char *names[2] = {p.n_attn ? l.m->g.nodes[p.attn[0].proj[1]].name : "",
                                p.n_ffn ? l.m->g.nodes[p.ffn[1].down].name : ""};
        heads_plan_free(&p);
        o.exclude = names;
        o.n_exclude = 2;
        heads_plan_build(&l.m->g, &o, &p, &e);
        CHECK("prune_heads_exclude",
              p.n_attn == 1 && p.skipped_attn == 1 && p.n_ffn == 1 && p.skipped_ffn == 1,
              "%d/%d attention, %d/%d ffn", p.n_attn, p.skipped_attn, p.n_ffn, p.skipped_ffn);
        heads_plan_free(&p);
        o.exclude = NULL;
        o.n_exclude = 0;
    } else
        MISSING("prune_heads_exclude", "bert_tiny_decomposed not generated");
    loaded_close(&l);
    if (load(&l, "mobilenet_tiny") != 0) {
        MISSING("prune_heads_no_attention", "mobilenet_tiny not generated");
        loaded_close(&l);
        return;
    }
    graft_tensor before[4], after[4];
    int n1 = 0, n2 = 0;
    graft_prune_report r;
    run_all(l.m, &l, before, &n1);
    graft_status st = graft_model_prune(l.m, &o, &r);
    run_all(l.m, &l, after, &n2);
    CHECK("prune_heads_no_attention",
          st == GRAFT_OK && r.units_removed == 0 && n1 == n2 && n1 > 0 &&
              max_rel(&after[0], &before[0]) == 0,
          "status %d, removed %lld", st, (long long)r.units_removed);
    free_outs(before, n1);
    free_outs(after, n2);
    loaded_close(&l);
}

int main(int argc, char **argv) {
    gen = argc > 1 ? argv[1] : "tests/data/gen";
    out_dir = argc > 2 ? argv[2] : "/tmp";
    mkdir(out_dir, 0777); /* may exist */
    select_units();
    exclusions_and_others();
    check_model("bert_tiny_decomposed", 2, GRAFT_IMPORTANCE_L1, 0.5, true);
    check_model("bert_tiny_decomposed", 2, GRAFT_IMPORTANCE_L2, 0.3, false);
#if defined(__OPTIMIZE__) && !defined(__SANITIZE_ADDRESS__)
    check_model("bert_base", 12, GRAFT_IMPORTANCE_L1, 0.5, true);
#else
    SKIP("prune_heads_bert_base", "slow without optimization or under ASan");
#endif
    return test_failures ? 1 : 0;
}
