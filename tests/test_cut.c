/* test_cut.c: graft_model_cut on generated models: the features of the cut model agree with the
 * uncut model (ResNet: the classifier applied to the features gives the logits; BERT: CLS, pooler
 * and masked mean equal what the full model's outputs give), bad cuts are clear errors, and the
 * `auto` cut of each family's head (tools/make_cut_models.py) takes the tensor its rule names,
 * pooled as the rule says, equal to ONNX Runtime's value of it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/npy.h"
#include "../src/graph/model.h"
#include "test_model.h"
#include "test_util.h"

static const char *gen;

static int load(loaded *l, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", gen, name);
    return loaded_open(l, path, gen, name);
}

/* Copy output `name` of a run of l's model. */
static float *run_output(loaded *l, int index, graft_tensor *shape) {
    if (graft_model_run(l->m, l->in, l->n_in) != GRAFT_OK) return NULL;
    const graft_tensor *t;
    graft_model_output(l->m, index, &t);
    *shape = *t;
    size_t n = (size_t)graft_tensor_numel(t);
    float *copy = malloc(n * sizeof(float));
    memcpy(copy, t->data, n * sizeof(float));
    shape->data = copy;
    return copy;
}

static double max_rel(const float *a, const double *b, int64_t n) {
    double d = 0, ref = 1e-12;
    for (int64_t i = 0; i < n; i++) {
        if (fabs(a[i] - b[i]) > d) d = fabs(a[i] - b[i]);
        if (fabs(b[i]) > ref) ref = fabs(b[i]);
    }
    return d / ref;
}

static void resnet_features(void) {
    loaded l = {0};
    if (load(&l, "resnet18") != 0) {
        MISSING("cut_resnet18", "resnet18 not generated");
        loaded_close(&l);
        return;
    }
    graft_tensor logits;
    float *want = run_output(&l, 0, &logits);
    /* The classifier: the last Gemm, y = x W^T + b. */
    const ir_graph *g = &l.m->g;
    const ir_node *gemm = &g->nodes[g->n_nodes - 1];
    const tensor *w = &g->values[gemm->inputs[1]].data, *b = &g->values[gemm->inputs[2]].data;
    int64_t classes = w->dims[0], feat = w->dims[1];
    float *wd = malloc(sizeof(float) * (size_t)(classes * feat));
    float *bd = malloc(sizeof(float) * (size_t)classes);
    memcpy(wd, w->data, sizeof(float) * (size_t)(classes * feat));
    memcpy(bd, b->data, sizeof(float) * (size_t)classes);
    graft_status st = graft_model_cut(l.m, "auto", GRAFT_POOLING_AUTO);
    CHECK("cut_resnet18_auto", st == GRAFT_OK, "%s", graft_last_error(l.ctx));
    graft_value_info info;
    graft_model_output_info(l.m, 0, &info);
    CHECK("cut_resnet18_output",
          graft_model_output_count(l.m) == 1 && !strcmp(info.name, "features") && info.ndim == 2 &&
              info.dims[1] == feat,
          "%d outputs, '%s' rank %d", graft_model_output_count(l.m), info.name, info.ndim);
    graft_tensor ft;
    float *f = st == GRAFT_OK ? run_output(&l, 0, &ft) : NULL;
    if (f && want) {
        int64_t batch = ft.dims[0];
        double *y = malloc(sizeof(double) * (size_t)(batch * classes));
        for (int64_t i = 0; i < batch; i++)
            for (int64_t c = 0; c < classes; c++) {
                double s = bd[c];
                for (int64_t k = 0; k < feat; k++) s += (double)f[i * feat + k] * wd[c * feat + k];
                y[i * classes + c] = s;
            }
        double rel = max_rel(want, y, batch * classes);
        CHECK("cut_resnet18_features_give_logits", rel < 1e-5, "max relative error %.3g", rel);
        free(y);
    } else
        CHECK("cut_resnet18_run", 0, "%s", graft_last_error(l.ctx));
    int no_gemm = 1;
    for (int i = 0; i < l.m->g.n_nodes; i++)
        no_gemm &= strcmp(l.m->g.nodes[i].op_type, "Gemm") != 0;
    CHECK("cut_resnet18_classifier_dropped", no_gemm, "a Gemm is left");
    free(f), free(want), free(wd), free(bd);
    loaded_close(&l);
}

/* pooling: CLS, POOLER or MEAN, checked against the uncut model's outputs. */
static void bert_pooling(graft_pooling pooling, const char *test) {
    loaded l = {0};
    if (load(&l, "bert_tiny_decomposed") != 0) {
        MISSING(test, "bert_tiny_decomposed not generated");
        loaded_close(&l);
        return;
    }
    graft_tensor hs, po, ft;
    float *h = run_output(&l, 0, &hs), *p = run_output(&l, 1, &po);
    graft_status st = graft_model_cut(l.m, "auto", pooling);
    float *f = st == GRAFT_OK ? run_output(&l, 0, &ft) : NULL;
    if (!h || !p || !f) {
        CHECK(test, 0, "%s", graft_last_error(l.ctx));
        free(h), free(p), free(f);
        loaded_close(&l);
        return;
    }
    int64_t B = hs.dims[0], S = hs.dims[1], H = hs.dims[2];
    double *want = calloc((size_t)(B * H), sizeof(double));
    const int64_t *mask = NULL;
    for (int i = 0; i < l.n_in; i++)
        if (strstr(l.in[i].name, "mask")) mask = l.in[i].tensor.data;
    for (int64_t b = 0; b < B; b++) {
        double count = 0;
        for (int64_t s = 0; s < S; s++) {
            double m = pooling == GRAFT_POOLING_MEAN ? (double)mask[b * S + s] : (s == 0);
            count += m;
            for (int64_t k = 0; k < H; k++) want[b * H + k] += m * h[(b * S + s) * H + k];
        }
        for (int64_t k = 0; k < H; k++) {
            want[b * H + k] /= count;
            if (pooling == GRAFT_POOLING_POOLER) want[b * H + k] = p[b * H + k];
        }
    }
    CHECK(test,
          ft.ndim == 2 && ft.dims[0] == B && ft.dims[1] == H && max_rel(f, want, B * H) < 1e-5,
          "features rank %d, max relative error %.3g", ft.ndim, max_rel(f, want, B * H));
    free(want), free(h), free(p), free(f);
    loaded_close(&l);
}

static void bad_cuts(void) {
    loaded l = {0};
    if (load(&l, "resnet18") != 0) {
        MISSING("cut_errors", "resnet18 not generated");
        loaded_close(&l);
        return;
    }
    graft_status st = graft_model_cut(l.m, "no_such_tensor", GRAFT_POOLING_AUTO);
    CHECK("cut_unknown_tensor",
          st == GRAFT_E_NOT_FOUND && strstr(graft_last_error(l.ctx), "no_such_tensor"),
          "status %d: %s", st, graft_last_error(l.ctx));
    st = graft_model_cut(l.m, "input", GRAFT_POOLING_AUTO);
    CHECK("cut_at_input", st == GRAFT_E_INVALID_ARGUMENT, "status %d: %s", st,
          graft_last_error(l.ctx));
    st = graft_model_cut(l.m, "auto", GRAFT_POOLING_POOLER);
    CHECK("cut_pooler_on_cnn", st == GRAFT_E_NOT_FOUND, "status %d: %s", st,
          graft_last_error(l.ctx));
    graft_tensor out;
    float *y = run_output(&l, 0, &out);
    CHECK("cut_errors_lose_nothing", y && out.ndim == 2 && out.dims[1] == 1000, "%s",
          graft_last_error(l.ctx));
    free(y);
    /* An explicit intermediate tensor: the global-pool output, (batch, 512, 1, 1). */
    const char *gap = NULL;
    for (int i = 0; i < l.m->g.n_nodes; i++)
        if (!strcmp(l.m->g.nodes[i].op_type, "GlobalAveragePool"))
            gap = l.m->g.values[l.m->g.nodes[i].outputs[0]].name;
    char name[256];
    snprintf(name, sizeof name, "%s", gap ? gap : "?");
    st = graft_model_cut(l.m, name, GRAFT_POOLING_AUTO);
    y = st == GRAFT_OK ? run_output(&l, 0, &out) : NULL;
    CHECK("cut_named_tensor", y && out.ndim == 4 && out.dims[1] == 512, "status %d: %s", st,
          graft_last_error(l.ctx));
    free(y);
    loaded_close(&l);
}

static graft_pooling pooling_of(const char *name) {
    return !strcmp(name, "spatial") ? GRAFT_POOLING_SPATIAL
           : !strcmp(name, "cls")   ? GRAFT_POOLING_CLS
                                    : GRAFT_POOLING_NONE;
}

/* One family's head: the auto cut's tensor, pooling and feature size, then the cut model's
 * features against ONNX Runtime's (NAME.want.npy). want_tensor "-": no cut point. */
static void family_cut(const char *dir, const char *name, const char *want_tensor,
                       const char *want_pooling, long long want_features) {
    char path[1024], test[160], err[256];
    loaded l = {0};
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    snprintf(test, sizeof test, "%s_auto", name);
    if (loaded_open(&l, path, dir, name) != 0) {
        MISSING(test, path);
        loaded_close(&l);
        return;
    }
    graft_auto_cut_info info;
    graft_status st = graft_model_auto_cut_info(l.m, &info);
    if (!strcmp(want_tensor, "-")) {
        CHECK(test, st == GRAFT_E_NOT_FOUND && strstr(graft_last_error(l.ctx), "no cut point"),
              "status %d, tensor '%s'", st, st == GRAFT_OK ? info.tensor : graft_last_error(l.ctx));
        st = graft_model_cut(l.m, "auto", GRAFT_POOLING_AUTO);
        snprintf(test, sizeof test, "%s_cut_refused", name);
        CHECK(test, st == GRAFT_E_NOT_FOUND, "status %d", st);
        loaded_close(&l);
        return;
    }
    CHECK(test,
          st == GRAFT_OK && !strcmp(info.tensor, want_tensor) &&
              info.pooling == pooling_of(want_pooling) && info.features == want_features,
          "status %d: tensor '%s' (want '%s'), pooling %d (want %s), %lld features (want %lld): %s",
          st, st == GRAFT_OK ? info.tensor : "", want_tensor,
          st == GRAFT_OK ? (int)info.pooling : -1, want_pooling,
          st == GRAFT_OK ? (long long)info.features : -1, want_features,
          st == GRAFT_OK ? info.why : graft_last_error(l.ctx));
    graft_tensor want = {0}, got;
    snprintf(path, sizeof path, "%s/%s.want.npy", dir, name);
    snprintf(test, sizeof test, "%s_features_match_ort", name);
    if (npy_read(path, &want, err, sizeof err) != 0) {
        MISSING(test, err);
        loaded_close(&l);
        return;
    }
    st = graft_model_cut(l.m, "auto", GRAFT_POOLING_AUTO);
    float *f = st == GRAFT_OK ? run_output(&l, 0, &got) : NULL;
    if (f) {
        int same_shape =
            got.ndim == want.ndim && got.dims[0] == want.dims[0] && got.dims[1] == want.dims[1];
        double rel = same_shape ? test_rel_error(&got, &want) : INFINITY;
        CHECK(test, same_shape && rel < 1e-5,
              "features rank %d (%lld, %lld), want (%lld, %lld); max relative error %.3g", got.ndim,
              (long long)got.dims[0], (long long)(got.ndim > 1 ? got.dims[1] : 0),
              (long long)want.dims[0], (long long)want.dims[1], rel);
    } else {
        CHECK(test, 0, "%s", graft_last_error(l.ctx));
    }
    free(f);
    free(want.data);
    loaded_close(&l);
}

/* Every model tools/make_cut_models.py listed in DIR/cut_models.txt. */
static void family_cuts(const char *dir) {
    char path[1024], name[128], tensor[128], pooling[32];
    long long features;
    snprintf(path, sizeof path, "%s/cut_models.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        MISSING("cut_families", path);
        return;
    }
    int n = 0;
    while (fscanf(f, "%127s %127s %31s %lld", name, tensor, pooling, &features) == 4) {
        family_cut(dir, name, tensor, pooling, features);
        n++;
    }
    fclose(f);
    CHECK("cut_families_listed", n >= 10, "%d models in %s", n, path);
}

int main(int argc, char **argv) {
    gen = argc > 1 ? argv[1] : "tests/data/gen";
    const char *families = argc > 2 ? argv[2] : "build/test-logs/cut_models";
    resnet_features();
    bert_pooling(GRAFT_POOLING_AUTO, "cut_bert_cls");
    bert_pooling(GRAFT_POOLING_POOLER, "cut_bert_pooler");
    bert_pooling(GRAFT_POOLING_MEAN, "cut_bert_mean");
    bad_cuts();
    family_cuts(families);
    return test_failures ? 1 : 0;
}
