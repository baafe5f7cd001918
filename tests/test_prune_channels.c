/* test_prune_channels.c: structured channel pruning on generated CNNs: the pruned model equals the
 * dense model with the same channels zeroed (filters and biases of every group member), residual,
 * Concat and depthwise groups stay consistent, parameters, FLOPs and the exported file shrink, and
 * the export loads in graft with the same outputs; the inner scope and BN-scale importance.
 * Usage: test_prune_channels GEN OUTDIR [models]; a model given as DIR/NAME is read from
 * GEN/DIR (tools/make_prune_models.py writes GEN/prune/concat_block). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../src/cli/npy.h"
#include "../src/graph/model.h"
#include "../src/onnx/onnx_io.h"
#include "../src/prune/channel_groups.h"
#include "test_model.h"
#include "test_util.h"

static const char *gen, *outdir;

/* name: a model in gen, or DIR/NAME for one in gen/DIR. */
static int load(loaded *l, const char *model_path, const char *name) {
    static char dir[1024]; /* static: the compiler cannot bound it against loaded_open's paths */
    const char *slash = strrchr(name, '/');
    if (!slash) return loaded_open(l, model_path, gen, name);
    snprintf(dir, sizeof dir, "%s/%.*s", gen, (int)(slash - name), name);
    return loaded_open(l, model_path, dir, slash + 1);
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
    model_release_state(m);
    exec_init(&m->exec, g, &m->backend, model_device(m), &m->ctx->err);
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

/* A test case: the model (NAME in gen, or DIR/NAME), the options and the tag naming its tests. */
typedef struct pcase {
    const char *model, *tag;
    graft_prune_options o;
} pcase;

static void check_export(const pcase *c, loaded *pruned, const float *want, int64_t n,
                         const char *dense_path) {
    char path[1024], test[256];
    snprintf(path, sizeof path, "%s/%s.pruned.onnx", outdir, c->tag);
    snprintf(test, sizeof test, "channels_%s_export", c->tag);
    graft_status st = graft_model_export(pruned->m, path, NULL);
    long dense = file_size(dense_path), small = file_size(path);
    CHECK(test, st == GRAFT_OK && small > 0 && small < dense, "status %d, %ld vs %ld bytes: %s", st,
          small, dense, graft_last_error(pruned->ctx));
    printf("INFO %s: file %ld -> %ld bytes\n", c->tag, dense, small);
    /* Inputs and graft's output next to the export, for tools/check_export.py (ONNX Runtime). */
    char err[512], npy[1024];
    for (int i = 0; i < pruned->n_in; i++) {
        snprintf(npy, sizeof npy, "%s/%s.pruned.in.%s.npy", outdir, c->tag, pruned->in[i].name);
        npy_write(npy, &pruned->in[i].tensor, err, sizeof err);
    }
    graft_value_info info;
    const graft_tensor *t;
    graft_model_output_info(pruned->m, 0, &info);
    graft_model_output(pruned->m, 0, &t);
    graft_tensor out = *t;
    out.data = (void *)want;
    snprintf(npy, sizeof npy, "%s/%s.pruned.graft.%s.npy", outdir, c->tag, info.name);
    npy_write(npy, &out, err, sizeof err);
    loaded back = {0};
    snprintf(test, sizeof test, "channels_%s_export_reloads", c->tag);
    if (load(&back, path, c->model) != 0) {
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

static void model_path(const char *model, char *path, size_t size) {
    snprintf(path, size, "%s/%s.onnx", gen, model);
}

/* Prune, compare with the dense model with the plan's channels zeroed, export. */
static void check_case(const pcase *c) {
    char path[1024], dense_path[1024], test[256];
    model_path(c->model, path, sizeof path);
    loaded pruned = {0}, ref = {0};
    if (load(&pruned, path, c->model) != 0 || load(&ref, path, c->model) != 0) {
        snprintf(test, sizeof test, "channels_%s", c->tag);
        MISSING(test, "model not generated");
        loaded_close(&pruned);
        loaded_close(&ref);
        return;
    }
    snprintf(dense_path, sizeof dense_path, "%s/dense", outdir);
    mkdir(dense_path, 0755);
    snprintf(dense_path, sizeof dense_path, "%s/dense/%s.onnx", outdir, c->tag);
    graft_model_export(ref.m, dense_path, NULL);
    chan_plan plan;
    graft_status st = chan_plan_build(&ref.m->g, &c->o, &plan, &ref.ctx->err);
    snprintf(test, sizeof test, "channels_%s_plan", c->tag);
    CHECK(test, st == GRAFT_OK && plan.channels_removed > 0 && plan.groups_excluded > 0,
          "status %d, %lld channels, %d excluded groups: %s", st, (long long)plan.channels_removed,
          plan.groups_excluded, graft_last_error(ref.ctx));
    if (st != GRAFT_OK) {
        loaded_close(&pruned);
        loaded_close(&ref);
        return;
    }
    printf("INFO %s: %d groups: %d pruned, %d unprunable, %d excluded, %d out of scope; widest "
           "pruned group %d convs\n",
           c->tag, plan.groups_total, plan.groups_pruned, plan.groups_unprunable,
           plan.groups_excluded, plan.groups_out_of_scope, widest_pruned_group(&plan));
    int64_t n0 = 0;
    float *dense = loaded_run_copy(&ref, 0, &n0);
    int64_t zeroed = zero_removed(ref.m, &plan);
    /* Remember a depthwise conv's group count to see it shrink. */
    char dw_name[256] = "";
    int dw_group = first_pruned_depthwise(&plan, &ref.m->g, dw_name, sizeof dw_name);
    graft_prune_report r;
    st = graft_model_prune(pruned.m, &c->o, &r);
    snprintf(test, sizeof test, "channels_%s_prune", c->tag);
    CHECK(test,
          st == GRAFT_OK && r.units_removed == plan.channels_removed &&
              r.params_after < r.params_before && r.flops_after < r.flops_before,
          "status %d: %s; removed %lld (plan %lld), params %lld -> %lld, flops %.3g -> %.3g", st,
          graft_last_error(pruned.ctx), (long long)r.units_removed,
          (long long)plan.channels_removed, (long long)r.params_before, (long long)r.params_after,
          r.flops_before, r.flops_after);
    printf("INFO %s: %lld channels removed (%lld member filters), params %lld -> %lld, "
           "FLOPs %.4g -> %.4g, sparsity %.4f\n",
           c->tag, (long long)r.units_removed, (long long)zeroed, (long long)r.params_before,
           (long long)r.params_after, r.flops_before, r.flops_after, r.sparsity);
    if (dw_name[0]) {
        snprintf(test, sizeof test, "channels_%s_depthwise_group", c->tag);
        int gr = conv_group(&pruned.m->g, dw_name);
        CHECK(test, gr == dw_group, "'%s' has group %d, want %d", dw_name, gr, dw_group);
    }
    int64_t n1 = 0, n2 = 0;
    float *want = st == GRAFT_OK ? loaded_run_copy(&ref, 0, &n1) : NULL;
    float *got = want ? loaded_run_copy(&pruned, 0, &n2) : NULL;
    double rel = got && n1 == n2 ? max_rel(got, want, n1) : 1e9;
    snprintf(test, sizeof test, "channels_%s_equals_zeroed", c->tag);
    CHECK(test, rel <= 1e-5, "max relative error %.3g (%lld vs %lld values): %s", rel,
          (long long)n2, (long long)n1, graft_last_error(pruned.ctx));
    /* The comparison means something only if zeroing the channels changed the output. */
    double moved = dense && want && n0 == n1 ? max_rel(dense, want, n1) : 0;
    snprintf(test, sizeof test, "channels_%s_zeroing_changes_output", c->tag);
    CHECK(test, moved > 1e-3, "zeroed output differs from dense by only %.3g", moved);
    free(dense);
    if (got) check_export(c, &pruned, got, n2, dense_path);
    free(want), free(got);
    chan_plan_free(&plan);
    loaded_close(&pruned);
    loaded_close(&ref);
}

static graft_prune_options channel_options(double sparsity, graft_importance importance,
                                           graft_prune_scope scope) {
    graft_prune_options o = GRAFT_PRUNE_OPTIONS_INIT;
    o.method = GRAFT_PRUNE_CHANNELS;
    o.sparsity = sparsity;
    o.importance = importance;
    o.scope = scope;
    return o;
}

static void check_model(const char *name) {
    const char *slash = strrchr(name, '/');
    pcase c = {name, slash ? slash + 1 : name,
               channel_options(0.5, GRAFT_IMPORTANCE_L1, GRAFT_PRUNE_SCOPE_ALL)};
    check_case(&c);
}

/* A cut model's features are a graph output: the group producing them keeps its channels, the
 * rest is pruned and the feature width stays. */
static void check_cut(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/resnet18.onnx", gen);
    loaded l = {0};
    if (load(&l, path, "resnet18") != 0) {
        MISSING("channels_cut_features_kept", "resnet18 not generated");
        loaded_close(&l);
        return;
    }
    graft_status st = graft_model_cut(l.m, "auto", GRAFT_POOLING_AUTO);
    graft_prune_options o = channel_options(0.25, GRAFT_IMPORTANCE_L2, GRAFT_PRUNE_SCOPE_ALL);
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

/* The channels of root r that a plan keeps, NULL when it keeps them all. */
static const bool *root_keep(const chan_plan *p, const ir_graph *g, int node) {
    const chan_segs *s = &p->segs[g->nodes[node].outputs[0]];
    return s->n == 1 && s->s[0].group >= 0 ? p->keep[chan_group_root(p, s->s[0].group)] : NULL;
}

/* ResNet-50, inner scope: exactly the outputs of each bottleneck's conv1 and conv2 are pruned
 * (32 groups, one convolution each); the four residual groups (a stage's conv3s and downsample)
 * keep every channel. */
static void check_scope_inner(void) {
    char path[1024];
    model_path("resnet50", path, sizeof path);
    loaded l = {0};
    if (load(&l, path, "resnet50") != 0) {
        MISSING("channels_scope_inner_resnet50", "resnet50 not generated");
        loaded_close(&l);
        return;
    }
    graft_prune_options o = channel_options(0.5, GRAFT_IMPORTANCE_L1, GRAFT_PRUNE_SCOPE_INNER);
    chan_plan p;
    graft_status st = chan_plan_build(&l.m->g, &o, &p, &l.ctx->err);
    int wrong = 0, sources = 0;
    char first_wrong[256] = "";
    for (int i = 0; st == GRAFT_OK && i < p.n_nodes; i++) {
        if (!(p.roles[i].roles & CHAN_SOURCE)) continue;
        const char *name = l.m->g.nodes[i].name;
        bool inner = !strncmp(name, "/layer", 6) &&
                     (strstr(name, "/conv1/") != NULL || strstr(name, "/conv2/") != NULL);
        const bool *keep = root_keep(&p, &l.m->g, i);
        int64_t c = l.m->g.values[l.m->g.nodes[i].inputs[1]].data.dims[0], kept = 0;
        for (int64_t k = 0; keep && k < c; k++) kept += keep[k];
        bool ok = inner ? keep && kept == c - llround(0.5 * (double)c) : keep == NULL;
        sources++;
        if (!ok && !wrong++) snprintf(first_wrong, sizeof first_wrong, "%s", name);
    }
    CHECK("channels_scope_inner_resnet50",
          st == GRAFT_OK && wrong == 0 && sources == 53 && p.groups_pruned == 32 &&
              p.groups_out_of_scope == 4 && widest_pruned_group(&p) == 1,
          "status %d: %s; %d of %d convs wrong (first '%s'), %d pruned groups, %d out of scope", st,
          graft_last_error(l.ctx), wrong, sources, first_wrong, p.groups_pruned,
          p.groups_out_of_scope);
    if (st == GRAFT_OK) chan_plan_free(&p);
    loaded_close(&l);
}

/* gamma of the BatchNormalization right after Conv `conv` in the file's own graph (not folded). */
static const float *file_gamma(const ir_graph *raw, const char *conv) {
    for (int i = 0; i < raw->n_nodes; i++) {
        const ir_node *bn = &raw->nodes[i];
        if (strcmp(bn->op_type, "BatchNormalization") || bn->n_in != 5) continue;
        for (int j = 0; j < raw->n_nodes; j++)
            if (!strcmp(raw->nodes[j].op_type, "Conv") && !strcmp(raw->nodes[j].name, conv) &&
                raw->nodes[j].outputs[0] == bn->inputs[0])
                return raw->values[bn->inputs[1]].data.data;
    }
    return NULL;
}

/* Whether the plan's choice for root r is the round(0.5 * C) smallest |gamma| summed over the
 * group's convolutions, with gammas read from the file (ties: the lower index goes). */
static bool bn_choice_ok(const chan_plan *p, const ir_graph *g, const ir_graph *raw, int r) {
    int64_t c = p->size[r];
    double *sum = calloc((size_t)c, sizeof(double));
    bool ok = sum != NULL;
    for (int i = 0; ok && i < p->n_nodes; i++) {
        if (!(p->roles[i].roles & (CHAN_SOURCE | CHAN_DEPTHWISE))) continue;
        const chan_segs *s = &p->segs[g->nodes[i].outputs[0]];
        const float *gamma = file_gamma(raw, g->nodes[i].name);
        int64_t off = 0;
        for (int k = 0; ok && k < s->n; off += s->s[k].len, k++) {
            if (s->s[k].group < 0 || chan_group_root(p, s->s[k].group) != r) continue;
            ok = gamma != NULL;
            for (int64_t ch = 0; ok && ch < s->s[k].len; ch++) sum[ch] += fabs(gamma[off + ch]);
        }
    }
    int64_t drop = llround(0.5 * (double)c), dropped = 0;
    for (int64_t ch = 0; ok && ch < c; ch++) {
        int64_t below = 0; /* channels that go before ch */
        for (int64_t o = 0; o < c; o++) below += sum[o] < sum[ch] || (sum[o] == sum[ch] && o < ch);
        ok = p->keep[r] && p->keep[r][ch] == (below >= drop);
        dropped += !p->keep[r][ch];
    }
    free(sum);
    return ok && dropped == drop;
}

/* Importance bn: the channels removed are those of smallest |gamma| (summed over a residual
 * group), gamma read from the model file itself. */
static void check_bn_ranking(const char *model) {
    char path[1024], test[256], err_text[256] = "";
    const char *slash = strrchr(model, '/');
    snprintf(test, sizeof test, "channels_bn_ranking_%s", slash ? slash + 1 : model);
    model_path(model, path, sizeof path);
    loaded l = {0};
    void *bytes = NULL;
    size_t size = 0;
    ir_graph raw;
    ir_graph_init(&raw);
    graft_err e;
    memset(&e, 0, sizeof e);
    if (load(&l, path, model) != 0 || read_file(path, &bytes, &size, &e) != GRAFT_OK ||
        onnx_parse_model(bytes, size, NULL, path, &raw, &e) != GRAFT_OK) {
        MISSING(test, "model not generated");
    } else {
        graft_prune_options o = channel_options(0.5, GRAFT_IMPORTANCE_BN, GRAFT_PRUNE_SCOPE_ALL);
        chan_plan p;
        graft_status st = chan_plan_build(&l.m->g, &o, &p, &l.ctx->err);
        int checked = 0, wrong = 0, widest = 0;
        for (int r = 0; st == GRAFT_OK && r < p.n_groups; r++) {
            if (chan_group_root(&p, r) != r || !p.keep[r]) continue;
            checked++;
            wrong += !bn_choice_ok(&p, &l.m->g, &raw, r);
        }
        if (st == GRAFT_OK) widest = widest_pruned_group(&p);
        snprintf(err_text, sizeof err_text, "%s", graft_last_error(l.ctx));
        CHECK(test, st == GRAFT_OK && checked > 0 && wrong == 0,
              "status %d: %s; %d of %d pruned groups not the smallest |gamma|", st, err_text, wrong,
              checked);
        printf("INFO %s: %d groups checked, widest %d convs\n", test, checked, widest);
        if (st == GRAFT_OK) chan_plan_free(&p);
    }
    ir_graph_free(&raw);
    free(bytes);
    loaded_close(&l);
}

/* A model whose file has BN folded already (mobilenet_tiny): importance bn names a Conv. */
static void check_bn_missing(void) {
    char path[1024];
    model_path("mobilenet_tiny", path, sizeof path);
    loaded l = {0};
    if (load(&l, path, "mobilenet_tiny") != 0) {
        MISSING("channels_bn_missing_names_conv", "mobilenet_tiny not generated");
        loaded_close(&l);
        return;
    }
    graft_prune_options o = channel_options(0.5, GRAFT_IMPORTANCE_BN, GRAFT_PRUNE_SCOPE_ALL);
    graft_prune_report r;
    graft_status st = graft_model_prune(l.m, &o, &r);
    const char *msg = graft_last_error(l.ctx);
    CHECK("channels_bn_missing_names_conv",
          st == GRAFT_E_INVALID_ARGUMENT && strstr(msg, "Conv '/features/") &&
              strstr(msg, "BatchNormalization"),
          "status %d: '%s'", st, msg);
    loaded_close(&l);
}

/* concat_block: the Concat's consumers read the kept channels at the right offsets: the depthwise
 * Conv over Concat(a, b) keeps a's kept channels then b's, and /mix's filters are the dense
 * ones' columns at exactly those offsets; /down reads /mix's kept channels then all the stem's. */
static void check_concat_offsets(void) {
    char path[1024];
    model_path("prune/concat_block", path, sizeof path);
    loaded dense = {0}, pruned = {0};
    if (load(&dense, path, "prune/concat_block") != 0 ||
        load(&pruned, path, "prune/concat_block") != 0) {
        MISSING("channels_concat_offsets", "prune/concat_block not generated");
        loaded_close(&dense);
        loaded_close(&pruned);
        return;
    }
    /* The dense model first: graft's output equals ONNX Runtime's recorded one. */
    char npy[1024], err[256];
    graft_tensor ort;
    memset(&ort, 0, sizeof ort);
    snprintf(npy, sizeof npy, "%s/prune/concat_block.out.logits.npy", gen);
    int64_t n = 0;
    float *y = loaded_run_copy(&dense, 0, &n);
    bool read = npy_read(npy, &ort, err, sizeof err) == 0;
    double rel = y && read && graft_tensor_numel(&ort) == n ? max_rel(y, ort.data, n) : 1e9;
    CHECK("channels_concat_block_dense_equals_ort", rel <= 1e-5, "max relative error %.3g %s", rel,
          read ? "" : err);
    free(y);
    free(ort.data);
    graft_prune_options o = channel_options(0.5, GRAFT_IMPORTANCE_L1, GRAFT_PRUNE_SCOPE_ALL);
    chan_plan p;
    const ir_graph *g = &dense.m->g;
    graft_status st = chan_plan_build(g, &o, &p, &dense.ctx->err);
    graft_prune_report r;
    if (st == GRAFT_OK) st = graft_model_prune(pruned.m, &o, &r);
    int a = -1, b = -1, mix = -1, down = -1, stem = -1, pmix = -1, pdown = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const char *n = g->nodes[i].name;
        a = !strcmp(n, "/branch_a/Conv") ? i : a, b = !strcmp(n, "/branch_b/Conv") ? i : b;
        mix = !strcmp(n, "/mix/Conv") ? i : mix, down = !strcmp(n, "/down/Conv") ? i : down;
        stem = !strcmp(n, "/stem/Conv") ? i : stem;
    }
    for (int i = 0; i < pruned.m->g.n_nodes; i++) {
        pmix = !strcmp(pruned.m->g.nodes[i].name, "/mix/Conv") ? i : pmix;
        pdown = !strcmp(pruned.m->g.nodes[i].name, "/down/Conv") ? i : pdown;
    }
    bool found = a >= 0 && b >= 0 && mix >= 0 && down >= 0 && stem >= 0 && pmix >= 0 && pdown >= 0;
    /* The expected input channels of /mix: a's 12 then b's 10; of /down: mix's 16, stem's 8. */
    bool want_mix[22], want_down[24];
    const bool *ka = found ? root_keep(&p, g, a) : NULL, *kb = found ? root_keep(&p, g, b) : NULL;
    const bool *km = found ? root_keep(&p, g, mix) : NULL;
    bool stem_kept = found && root_keep(&p, g, stem) == NULL;
    for (int k = 0; k < 22 && ka && kb; k++) want_mix[k] = k < 12 ? ka[k] : kb[k - 12];
    for (int k = 0; k < 24 && km; k++) want_down[k] = k < 16 ? km[k] : true;
    bool ok = st == GRAFT_OK && found && ka && kb && km && stem_kept;
    const int nodes[2][2] = {{mix, pmix}, {down, pdown}};
    for (int t = 0; t < 2 && ok; t++) {
        const tensor *W = &g->values[g->nodes[nodes[t][0]].inputs[1]].data;
        const tensor *P = &pruned.m->g.values[pruned.m->g.nodes[nodes[t][1]].inputs[1]].data;
        const bool *want = t == 0 ? want_mix : want_down;
        const bool *out = t == 0 ? km : root_keep(&p, g, down);
        int64_t cin = W->dims[1], kk = W->dims[2] * W->dims[3], pin = P->dims[1], pout = 0;
        for (int64_t oc = 0, j = 0; ok && oc < W->dims[0]; oc++) {
            if (out && !out[oc]) continue;
            for (int64_t ic = 0, jc = 0; ok && ic < cin; ic++) {
                if (!want[ic]) continue;
                ok = jc < pin && !memcmp((const float *)W->data + (oc * cin + ic) * kk,
                                         (const float *)P->data + (j * pin + jc) * kk,
                                         sizeof(float) * (size_t)kk);
                jc++;
            }
            j++, pout = j;
        }
        ok = ok && pout == P->dims[0];
    }
    CHECK("channels_concat_offsets", ok, "status %d: %s; nodes found %d", st,
          graft_last_error(pruned.ctx), found);
    if (st == GRAFT_OK || p.n_nodes) chan_plan_free(&p);
    loaded_close(&dense);
    loaded_close(&pruned);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s GEN_DIR OUT_DIR [model...]\n", argv[0]);
        return 2;
    }
    gen = argv[1];
    outdir = argv[2];
    mkdir(outdir, 0755);
    /* Given models: those and the cheap checks (the sanitizer build); none: everything. */
    bool full = argc == 3;
    const char *all[] = {"resnet18", "resnet50", "mobilenet_tiny", "prune/concat_block"};
    if (!full)
        for (int i = 3; i < argc; i++) check_model(argv[i]);
    else
        for (int i = 0; i < 4; i++) check_model(all[i]);
    pcase cases[] = {
        {"prune/concat_block", "concat_block_bn",
         channel_options(0.5, GRAFT_IMPORTANCE_BN, GRAFT_PRUNE_SCOPE_ALL)},
        {"resnet18", "resnet18_inner",
         channel_options(0.5, GRAFT_IMPORTANCE_L1, GRAFT_PRUNE_SCOPE_INNER)},
        {"resnet18", "resnet18_bn",
         channel_options(0.5, GRAFT_IMPORTANCE_BN, GRAFT_PRUNE_SCOPE_ALL)},
    };
    for (int i = 0; i < (full ? 3 : 1); i++) check_case(&cases[i]);
    check_cut();
    check_bn_missing();
    check_bn_ranking("prune/concat_block");
    check_concat_offsets();
    if (full) {
        check_bn_ranking("resnet18");
        check_scope_inner();
    }
    return test_failures ? 1 : 0;
}
