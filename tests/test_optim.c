/* test_optim.c: optimizers, schedulers, loss scaling and clipping against PyTorch's numbers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "train/loss_scale.h"
#include "train/optim.h"
#include "train/schedule.h"

#define N_PARAMS 3
#define N_STEPS 20
static const int64_t param_numel[N_PARAMS] = {7, 15, 4};
#define TOTAL_NUMEL 26

static char *fixture_text;

/* The numbers of key `name` in the fixture (a flat JSON object of number lists); *n = count.
 * Returns a malloc'd array or NULL. */
static double *fx_get(const char *name, int *n) {
    *n = 0;
    char pat[160];
    snprintf(pat, sizeof pat, "\"%s\": [", name);
    const char *s = fixture_text ? strstr(fixture_text, pat) : NULL;
    if (!s) return NULL;
    s += strlen(pat);
    int cap = 64;
    double *v = malloc(sizeof *v * (size_t)cap);
    while (v && *s && *s != ']') {
        char *end;
        double x = strtod(s, &end);
        if (end == s) break;
        if (*n == cap) {
            cap *= 2;
            double *nv = realloc(v, sizeof *v * (size_t)cap);
            if (!nv) {
                free(v);
                return NULL;
            }
            v = nv;
        }
        v[(*n)++] = x;
        s = end;
        while (*s == ',' || *s == ' ') s++;
    }
    return v;
}

static bool close_rel(double got, double want, double rtol, double atol) {
    return fabs(got - want) <= rtol * fabs(want) + atol;
}

static optim_config config_from(const double *c) {
    optim_config cfg = optim_config_default((optim_kind)(int)c[0]);
    cfg.momentum = (float)c[1];
    cfg.dampening = (float)c[2];
    cfg.nesterov = c[3] != 0.0;
    cfg.weight_decay = (float)c[4];
    cfg.beta1 = (float)c[5];
    cfg.beta2 = (float)c[6];
    cfg.eps = (float)c[7];
    cfg.amsgrad = c[8] != 0.0;
    return cfg;
}

typedef struct run_state {
    float w[TOTAL_NUMEL];
    float g[TOTAL_NUMEL];
    optim_param params[N_PARAMS];
} run_state;

static void run_state_init(run_state *rs, const double *initial, const double *flags) {
    int64_t off = 0;
    for (int i = 0; i < TOTAL_NUMEL; i++) rs->w[i] = (float)initial[i];
    for (int i = 0; i < N_PARAMS; i++) {
        rs->params[i] = (optim_param){.data = rs->w + off,
                                      .grad = rs->g + off,
                                      .numel = param_numel[i],
                                      .decay = flags[i] != 0.0};
        off += param_numel[i];
    }
}

static void load_grads(run_state *rs, const double *grads, int step) {
    for (int i = 0; i < TOTAL_NUMEL; i++) rs->g[i] = (float)grads[step * TOTAL_NUMEL + i];
}

/* Weights: rtol 1e-5, plus atol 1e-6 for weights that cancel to near zero from O(0.5) values
 * (fp32 rounding of the inputs is ~3e-8 there, and PyTorch's kernels may fuse multiply-adds). */
static void test_optim_case(const char *name, const double *initial, const double *grads) {
    char key[128], tname[160];
    int nc, nl, nw;
    snprintf(key, sizeof key, "%s.config", name);
    double *c = fx_get(key, &nc);
    snprintf(key, sizeof key, "%s.lrs", name);
    double *lrs = fx_get(key, &nl);
    snprintf(key, sizeof key, "%s.weights", name);
    double *want = fx_get(key, &nw);
    snprintf(tname, sizeof tname, "optim_%s", name);
    if (!c || nc != 12 || nl != N_STEPS || nw != N_STEPS * TOTAL_NUMEL) {
        CHECK(tname, 0, "fixture entries missing or malformed");
        goto done;
    }
    run_state rs;
    run_state_init(&rs, initial, c + 9);
    optim_config cfg = config_from(c);
    optim *opt = NULL;
    graft_err err = {0};
    if (optim_create(&opt, &cfg, rs.params, N_PARAMS, &err) != GRAFT_OK) {
        CHECK(tname, 0, "optim_create: %s", err.msg);
        goto done;
    }
    double worst = 0.0;
    int bad_step = -1, bad_i = -1;
    for (int t = 0; t < N_STEPS && bad_step < 0; t++) {
        load_grads(&rs, grads, t);
        optim_step(opt, (float)lrs[t], &err);
        for (int i = 0; i < TOTAL_NUMEL; i++) {
            double w = want[t * TOTAL_NUMEL + i];
            double rel = fabs(rs.w[i] - w) / fmax(fabs(w), 1e-3);
            if (rel > worst) worst = rel;
            if (!close_rel(rs.w[i], w, 1e-5, 1e-6) && bad_step < 0) bad_step = t, bad_i = i;
        }
    }
    CHECK(tname, bad_step < 0, "step %d weight %d: got %.9g want %.9g (worst rel %.3g)", bad_step,
          bad_i, bad_step >= 0 ? rs.w[bad_i] : 0.0,
          bad_step >= 0 ? want[bad_step * TOTAL_NUMEL + bad_i] : 0.0, worst);
    optim_free(opt);
done:
    free(c);
    free(lrs);
    free(want);
}

/* Stop after 10 steps, copy the state into a fresh optimizer, continue: bit-identical. */
static void test_checkpoint_resume(const char *name, const double *initial, const double *grads) {
    char key[128], tname[160];
    int nc;
    snprintf(key, sizeof key, "%s.config", name);
    double *c = fx_get(key, &nc);
    snprintf(tname, sizeof tname, "optim_resume_%s", name);
    if (!c || nc != 12) {
        CHECK(tname, 0, "fixture config missing");
        free(c);
        return;
    }
    optim_config cfg = config_from(c);
    run_state a, b;
    run_state_init(&a, initial, c + 9);
    run_state_init(&b, initial, c + 9);
    optim *oa = NULL, *ob = NULL, *oc = NULL;
    optim_create(&oa, &cfg, a.params, N_PARAMS, NULL);
    optim_create(&ob, &cfg, b.params, N_PARAMS, NULL);
    bool ok = oa && ob;
    for (int t = 0; ok && t < N_STEPS; t++) {
        load_grads(&a, grads, t);
        optim_step(oa, 0.01f, NULL);
        load_grads(&b, grads, t);
        optim_step(ob, 0.01f, NULL);
        if (t != 9) continue;
        /* "checkpoint" ob after 10 steps and restore it into a fresh oc */
        optim_create(&oc, &cfg, b.params, N_PARAMS, NULL);
        ok = oc && optim_state_count(oc) == optim_state_count(ob) && optim_state_count(ob) > 0;
        for (int k = 0; ok && k < optim_state_count(ob); k++) {
            optim_state_buf sb, sc;
            ok = optim_state_get(&sb, ob, k, NULL) == GRAFT_OK &&
                 optim_state_get(&sc, oc, k, NULL) == GRAFT_OK && sb.numel == sc.numel &&
                 strcmp(sb.name, sc.name) == 0;
            if (ok) memcpy(sc.data, sb.data, sizeof(float) * (size_t)sb.numel);
        }
        if (oc) optim_set_step_count(oc, optim_step_count(ob));
        optim_free(ob);
        ob = oc;
    }
    CHECK(tname, ok && memcmp(a.w, b.w, sizeof a.w) == 0, "resumed run differs");
    optim_free(oa);
    optim_free(ob);
    free(c);
}

static void test_state_names(void) {
    float w[4] = {0}, g[4] = {0};
    optim_param ps[2] = {{.data = w, .grad = g, .numel = 3, .decay = true, .name = "fc.weight"},
                         {.data = w + 3, .grad = g + 3, .numel = 1}};
    optim_config cfg = optim_config_default(OPTIM_ADAM);
    cfg.amsgrad = true;
    optim *o = NULL;
    optim_create(&o, &cfg, ps, 2, NULL);
    optim_state_buf sb;
    bool ok = o && optim_state_count(o) == 6;
    ok = ok && optim_state_get(&sb, o, 0, NULL) == GRAFT_OK &&
         !strcmp(sb.name, "fc.weight.exp_avg") && sb.numel == 3;
    ok =
        ok && optim_state_get(&sb, o, 5, NULL) == GRAFT_OK && !strcmp(sb.name, "p1.max_exp_avg_sq");
    graft_err err = {0};
    ok = ok && optim_state_get(&sb, o, 6, &err) == GRAFT_E_NOT_FOUND;
    CHECK("optim_state_names", ok, "unexpected state enumeration (last name %s)", sb.name);
    optim_free(o);
    cfg = optim_config_default(OPTIM_SGD);
    optim_create(&o, &cfg, ps, 2, NULL);
    CHECK("optim_state_sgd_plain_empty", o && optim_state_count(o) == 0,
          "SGD without momentum has state");
    optim_free(o);
}

static void test_bad_configs(void) {
    float w[1] = {0}, g[1] = {0};
    optim_param p = {.data = w, .grad = g, .numel = 1};
    optim_config cfg = optim_config_default(OPTIM_SGD);
    cfg.nesterov = true;
    optim *o = NULL;
    graft_err err = {0};
    CHECK("optim_rejects_nesterov_without_momentum",
          optim_create(&o, &cfg, &p, 1, &err) == GRAFT_E_INVALID_ARGUMENT && !o && err.msg[0],
          "accepted");
    cfg = optim_config_default(OPTIM_ADAM);
    cfg.beta2 = 1.0f;
    CHECK("optim_rejects_beta_1", optim_create(&o, &cfg, &p, 1, NULL) == GRAFT_E_INVALID_ARGUMENT,
          "accepted");
    p.grad = NULL;
    cfg = optim_config_default(OPTIM_ADAM);
    CHECK("optim_rejects_missing_grad",
          optim_create(&o, &cfg, &p, 1, NULL) == GRAFT_E_INVALID_ARGUMENT, "accepted");
    p.grad = g;
    optim_create(&o, &cfg, &p, 1, NULL);
    CHECK("optim_rejects_nan_lr", o && optim_step(o, NAN, NULL) == GRAFT_E_INVALID_ARGUMENT,
          "accepted");
    optim_free(o);
}

/* Compare lr(t) for t = 0..n-1 with want[0..n). */
static void check_lrs(const char *tname, const sched_config *c, const double *want, int n,
                      bool momentum) {
    graft_err err = {0};
    if (sched_check(c, &err) != GRAFT_OK) {
        CHECK(tname, 0, "sched_check: %s", err.msg);
        return;
    }
    for (int t = 0; t < n; t++) {
        double got = momentum ? sched_momentum(c, t) : sched_lr(c, t);
        if (!close_rel(got, want[t], 1e-6, 1e-12)) {
            CHECK(tname, 0, "step %d: got %.12g want %.12g", t, got, want[t]);
            return;
        }
    }
    CHECK(tname, 1, " ");
}

static void test_schedulers(void) {
    int n;
    double *v = fx_get("sched.step", &n);
    if (v && n == 103) {
        sched_config c = sched_config_default(SCHED_STEP, v[0]);
        c.step_size = (int64_t)v[1];
        c.gamma = v[2];
        check_lrs("sched_step", &c, v + 3, 100, false);
    } else
        CHECK("sched_step", 0, "fixture missing");
    free(v);
    v = fx_get("sched.cosine_warmup", &n);
    if (v && n > 5 && n == 5 + (int)v[2] + 1) {
        sched_config c = sched_config_default(SCHED_COSINE_WARMUP, v[0]);
        c.warmup_steps = (int64_t)v[1];
        c.total_steps = (int64_t)v[2];
        c.start_factor = v[3];
        c.eta_min = v[4];
        check_lrs("sched_cosine_warmup", &c, v + 5, n - 5, false);
        CHECK("sched_cosine_after_end", sched_lr(&c, c.total_steps + 7) == c.eta_min,
              "not eta_min");
    } else
        CHECK("sched_cosine_warmup", 0, "fixture missing");
    free(v);
    const char *oc[2] = {"sched.one_cycle", "sched.one_cycle_odd"};
    for (int k = 0; k < 2; k++) {
        v = fx_get(oc[k], &n);
        char tname[64];
        snprintf(tname, sizeof tname, "sched_%s", oc[k] + 6);
        if (v && n > 2 && n == 2 + 2 * (int)v[1]) {
            sched_config c = sched_config_default(SCHED_ONE_CYCLE, v[0]);
            c.total_steps = (int64_t)v[1];
            check_lrs(tname, &c, v + 2, (int)c.total_steps, false);
            strcat(tname, "_momentum");
            check_lrs(tname, &c, v + 2 + c.total_steps, (int)c.total_steps, true);
        } else
            CHECK(tname, 0, "fixture missing");
        free(v);
    }
    sched_config c = sched_config_default(SCHED_CONSTANT, 0.25);
    CHECK("sched_constant", sched_lr(&c, 0) == 0.25 && sched_lr(&c, 12345) == 0.25, "not constant");
    c = sched_config_default(SCHED_COSINE_WARMUP, 0.1);
    c.warmup_steps = 10;
    c.total_steps = 10;
    CHECK("sched_rejects_empty_cosine", sched_check(&c, NULL) == GRAFT_E_INVALID_ARGUMENT,
          "accepted");
}

static void test_plateau(const char *key) {
    int n;
    double *v = fx_get(key, &n);
    char tname[64];
    snprintf(tname, sizeof tname, "sched_%s", key + 6);
    if (!v || n < 7 || (n - 7) % 2) {
        CHECK(tname, 0, "fixture missing");
        free(v);
        return;
    }
    int steps = (n - 7) / 2;
    plateau p;
    plateau_init(&p, v[6], NULL);
    p.mode_max = v[0] != 0.0;
    p.factor = v[1];
    p.patience = (int64_t)v[2];
    p.threshold = v[3];
    p.cooldown = (int64_t)v[4];
    p.min_lr = v[5];
    graft_err err = {0};
    if (plateau_reset(&p, &err) != GRAFT_OK) CHECK(tname, 0, "%s", err.msg);
    int bad = -1, reductions = 0;
    double prev = p.lr;
    for (int t = 0; t < steps && bad < 0; t++) {
        double lr = plateau_step(&p, v[7 + t]);
        if (lr < prev) reductions++;
        prev = lr;
        if (!close_rel(lr, v[7 + steps + t], 1e-6, 1e-12)) bad = t;
    }
    CHECK(tname, bad < 0 && reductions >= 2, "step %d: got %.12g want %.12g (%d reductions)", bad,
          p.lr, bad >= 0 ? v[7 + steps + bad] : 0.0, reductions);
    free(v);
}

static void test_scaler(void) {
    const char *keys[2] = {"scaler.interval3", "scaler.default"};
    for (int k = 0; k < 2; k++) {
        int n;
        double *v = fx_get(keys[k], &n);
        char tname[64];
        snprintf(tname, sizeof tname, "loss_scale_%s", keys[k] + 7);
        if (!v || n < 3 || (n - 1) % 2) {
            CHECK(tname, 0, "fixture missing");
            free(v);
            continue;
        }
        int steps = (n - 1) / 2, bad = -1;
        loss_scaler s = loss_scaler_default();
        s.growth_interval = (int64_t)v[0];
        for (int t = 0; t < steps && bad < 0; t++) {
            loss_scale_update(&s, v[1 + t] != 0.0);
            if ((double)s.scale != v[1 + steps + t]) bad = t;
        }
        CHECK(tname, bad < 0, "step %d: scale %g want %g", bad, s.scale,
              bad >= 0 ? v[1 + steps + bad] : 0.0);
        free(v);
    }
    int n;
    double *v = fx_get("scaler.unscale", &n);
    if (v && n == 21) {
        float g[10];
        for (int i = 0; i < 10; i++) g[i] = (float)v[1 + i];
        loss_scaler s = loss_scaler_default();
        s.scale = (float)v[0];
        float *gp = g;
        int64_t numel = 10;
        bool found = true;
        loss_scale_unscale(&found, &gp, &numel, 1, &s, NULL);
        bool ok = !found;
        for (int i = 0; i < 10; i++) ok = ok && g[i] == (float)v[11 + i];
        CHECK("loss_scale_unscale", ok, "unscaled grads differ from GradScaler's");
        g[3] = NAN;
        loss_scale_unscale(&found, &gp, &numel, 1, &s, NULL);
        bool found_nan = found;
        g[3] = 1.0f;
        g[7] = -INFINITY;
        loss_scale_unscale(&found, &gp, &numel, 1, &s, NULL);
        CHECK("loss_scale_finds_inf_nan", found_nan && found, "missed a NaN or inf");
    } else
        CHECK("loss_scale_unscale", 0, "fixture missing");
    free(v);
    loss_scaler s = loss_scaler_default();
    s.scale = 3e38f;
    s.growth_interval = 1;
    loss_scale_update(&s, false);
    CHECK("loss_scale_no_overflow", s.scale == 3e38f && s.growth_tracker == 0, "scale %g", s.scale);
}

static void test_clip(void) {
    int ng;
    double *g = fx_get("clip.grads", &ng);
    const char *keys[2] = {"clip.small", "clip.large"};
    for (int k = 0; k < 2; k++) {
        int n;
        double *v = fx_get(keys[k], &n);
        char tname[64];
        snprintf(tname, sizeof tname, "clip_grad_norm_%s", keys[k] + 5);
        if (!g || ng != TOTAL_NUMEL || !v || n != 2 + TOTAL_NUMEL) {
            CHECK(tname, 0, "fixture missing");
            free(v);
            continue;
        }
        float buf[TOTAL_NUMEL];
        for (int i = 0; i < TOTAL_NUMEL; i++) buf[i] = (float)g[i];
        float *ptrs[N_PARAMS] = {buf, buf + 7, buf + 22};
        float total = 0.0f;
        clip_grad_norm(&total, ptrs, param_numel, N_PARAMS, (float)v[0], NULL);
        bool ok = close_rel(total, v[1], 1e-6, 0.0);
        for (int i = 0; i < TOTAL_NUMEL; i++) ok = ok && close_rel(buf[i], v[2 + i], 1e-6, 1e-9);
        CHECK(tname, ok, "total %.9g want %.9g, or clipped grads differ", total, v[1]);
        free(v);
    }
    free(g);
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = size >= 0 ? malloc((size_t)size + 1) : NULL;
    if (s && fread(s, 1, (size_t)size, f) != (size_t)size) {
        free(s);
        s = NULL;
    }
    if (s) s[size] = 0;
    fclose(f);
    return s;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tests/data/optim_fixtures.json";
    fixture_text = read_file(path);
    if (!fixture_text) {
        printf("FAIL fixtures: cannot read %s\n", path);
        return 1;
    }
    int ni, ng;
    double *initial = fx_get("optim.initial", &ni);
    double *grads = fx_get("optim.grads", &ng);
    static const char *const cases[] = {
        "sgd_plain", "sgd_momentum_wd", "sgd_nesterov", "adam",       "adam_amsgrad_wd",
        "adamw",     "adamw_amsgrad",   "lamb",         "lamb_wd_all"};
    if (initial && grads && ni == TOTAL_NUMEL && ng == N_STEPS * TOTAL_NUMEL) {
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            test_optim_case(cases[i], initial, grads);
        }
        test_checkpoint_resume("sgd_momentum_wd", initial, grads);
        test_checkpoint_resume("adamw_amsgrad", initial, grads);
        test_checkpoint_resume("lamb", initial, grads);
    } else
        CHECK("optim_fixture", 0, "optim.initial / optim.grads missing");
    test_state_names();
    test_bad_configs();
    test_schedulers();
    test_plateau("sched.plateau_min");
    test_plateau("sched.plateau_max");
    test_scaler();
    test_clip();
    free(initial);
    free(grads);
    free(fixture_text);
    return test_failures ? 1 : 0;
}
