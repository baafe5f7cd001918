/* test_ridge.c: ridge regression warm start: exact recovery, NumPy parity, chunking, errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "train/ridge.h"

/* Deterministic values in [-1, 1). */
static double lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) / (double)(1ULL << 52) - 1.0;
}

static double max_abs_diff(const float *a, const double *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* Noiseless Y = X A^T + c: a tiny lambda recovers A and c. */
static void test_recover(void) {
    enum { N = 200, D = 12, C = 4 };
    static float x[N * D], y[N * C], w[C * D], b[C];
    static double a[C * D], c[C];
    uint64_t s = 7;
    for (int i = 0; i < C * D; i++) a[i] = lcg(&s);
    for (int i = 0; i < C; i++) c[i] = 3 * lcg(&s);
    for (int i = 0; i < N * D; i++) x[i] = (float)(lcg(&s) * 4 + 10); /* offset features */
    for (int n = 0; n < N; n++)
        for (int o = 0; o < C; o++) {
            double v = c[o];
            for (int j = 0; j < D; j++) v += a[o * D + j] * x[n * D + j];
            y[n * C + o] = (float)v;
        }
    ridge *r = NULL;
    graft_err err = {0};
    graft_status st = ridge_create(&r, D, C, &err);
    if (st == GRAFT_OK) st = ridge_accumulate(r, x, y, N, &err);
    if (st == GRAFT_OK) st = ridge_solve(w, b, r, 1e-9, &err);
    double ew = st == GRAFT_OK ? max_abs_diff(w, a, C * D) : -1;
    double eb = st == GRAFT_OK ? max_abs_diff(b, c, C) : -1;
    CHECK("recover_linear_map", st == GRAFT_OK && ew < 1e-4 && eb < 1e-3,
          "status %d (%s), max |W - A| %g, max |b - c| %g", (int)st, err.msg, ew, eb);
    ridge_free(r);
}

static char *fixture;

/* Array `name` of the fixture ("name count v..."); returns malloc'd doubles, sets *n. */
static double *fx(const char *name, int64_t *n) {
    char pat[64];
    snprintf(pat, sizeof pat, "\n%s ", name);
    const char *p = strstr(fixture, pat);
    *n = 0;
    if (!p) return NULL;
    p += strlen(pat);
    char *end;
    long cnt = strtol(p, &end, 10);
    double *v = malloc(sizeof *v * (size_t)(cnt > 0 ? cnt : 1));
    for (long i = 0; v && i < cnt; i++) v[i] = strtod(end, &end);
    *n = cnt;
    return v;
}

/* The same problem with f32 targets and with labels, against NumPy; whole and in chunks. */
static void test_numpy(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        printf("FAIL numpy_fixture: cannot open %s\n", path);
        test_failures++;
        return;
    }
    fixture = calloc(1, 1 << 20);
    fixture[0] = '\n';
    size_t got = fread(fixture + 1, 1, (1 << 20) - 2, fp);
    fclose(fp);
    (void)got;
    int64_t k, nx, ny, nl, nwy, nby, nwl, nbl, n1, n2;
    double *dims = fx("dims", &k), *lam_y = fx("lambda_y", &n1), *lam_l = fx("lambda_l", &n2);
    double *X = fx("X", &nx), *Y = fx("Y", &ny), *L = fx("labels", &nl);
    double *Wy = fx("W_y", &nwy), *by = fx("b_y", &nby), *Wl = fx("W_l", &nwl),
           *bl = fx("b_l", &nbl);
    if (!dims || !X || !Y || !L || !Wy || !by || !Wl || !bl || !lam_y || !lam_l) {
        printf("FAIL numpy_fixture: %s lacks an array\n", path);
        test_failures++;
        return;
    }
    const int64_t N = (int64_t)dims[0], D = (int64_t)dims[1], C = (int64_t)dims[2];
    float *x = malloc(sizeof *x * (size_t)(N * D)), *y = malloc(sizeof *y * (size_t)(N * C));
    int64_t *lab = malloc(sizeof *lab * (size_t)N);
    float *w = malloc(sizeof *w * (size_t)(C * D)), *b = malloc(sizeof *b * (size_t)C);
    float *w2 = malloc(sizeof *w2 * (size_t)(C * D)), *b2 = malloc(sizeof *b2 * (size_t)C);
    for (int64_t i = 0; i < N * D; i++) x[i] = (float)X[i];
    for (int64_t i = 0; i < N * C; i++) y[i] = (float)Y[i];
    for (int64_t i = 0; i < N; i++) lab[i] = (int64_t)L[i];
    graft_err err = {0};
    ridge *r = NULL, *r2 = NULL;
    /* f32 targets, one call */
    graft_status st = ridge_create(&r, D, C, &err);
    if (st == GRAFT_OK) st = ridge_accumulate(r, x, y, N, &err);
    if (st == GRAFT_OK) st = ridge_solve(w, b, r, lam_y[0], &err);
    double e1 = fmax(max_abs_diff(w, Wy, C * D), max_abs_diff(b, by, C));
    CHECK("numpy_targets", st == GRAFT_OK && e1 < 1e-5, "status %d (%s), max diff %g", (int)st,
          err.msg, e1);
    /* the same in uneven chunks: bit-for-bit equal */
    st = ridge_create(&r2, D, C, &err);
    for (int64_t at = 0, step = 1; st == GRAFT_OK && at < N; at += step, step = step * 2 + 1) {
        int64_t m = at + step > N ? N - at : step;
        st = ridge_accumulate(r2, x + at * D, y + at * C, m, &err);
    }
    if (st == GRAFT_OK) st = ridge_solve(w2, b2, r2, lam_y[0], &err);
    CHECK("chunked_equals_one_pass", st == GRAFT_OK && ridge_rows(r2) == N &&
          memcmp(w, w2, sizeof *w * (size_t)(C * D)) == 0 && memcmp(b, b2, sizeof *b * C) == 0,
          "status %d (%s) or results differ", (int)st, err.msg);
    ridge_free(r), ridge_free(r2);
    r = NULL;
    /* labels -> one-hot, in two chunks */
    st = ridge_create(&r, D, C, &err);
    if (st == GRAFT_OK) st = ridge_accumulate_labels(r, x, lab, 17, &err);
    if (st == GRAFT_OK) st = ridge_accumulate_labels(r, x + 17 * D, lab + 17, N - 17, &err);
    if (st == GRAFT_OK) st = ridge_solve(w, b, r, lam_l[0], &err);
    double e2 = fmax(max_abs_diff(w, Wl, C * D), max_abs_diff(b, bl, C));
    CHECK("numpy_labels", st == GRAFT_OK && e2 < 1e-5, "status %d (%s), max diff %g", (int)st,
          err.msg, e2);
    int64_t badlab[1] = {C};
    st = ridge_accumulate_labels(r, x, badlab, 1, &err);
    CHECK("label_out_of_range", st == GRAFT_E_INVALID_ARGUMENT && strstr(err.msg, "outside"),
          "status %d (%s)", (int)st, err.msg);
    ridge_free(r);
    free(x), free(y), free(lab), free(w), free(b), free(w2), free(b2);
    free(dims), free(lam_y), free(lam_l), free(X), free(Y), free(L);
    free(Wy), free(by), free(Wl), free(bl), free(fixture);
}

/* A duplicated feature column: lambda 0 fails with advice, lambda > 0 works. */
static void test_rank_deficient(void) {
    enum { N = 30, D = 5, C = 2 };
    float x[N * D], y[N * C], w[C * D], b[C];
    uint64_t s = 99;
    for (int n = 0; n < N; n++) {
        for (int j = 0; j < D - 1; j++) x[n * D + j] = (float)lcg(&s);
        x[n * D + D - 1] = x[n * D + 1]; /* a copy of column 1 */
        for (int o = 0; o < C; o++) y[n * C + o] = (float)lcg(&s);
    }
    ridge *r = NULL;
    graft_err err = {0};
    graft_status st = ridge_create(&r, D, C, &err);
    if (st == GRAFT_OK) st = ridge_accumulate(r, x, y, N, &err);
    graft_status st0 = ridge_solve(w, b, r, 0.0, &err);
    CHECK("rank_deficient_lambda0", st0 == GRAFT_E_INVALID_ARGUMENT &&
          strstr(err.msg, "larger lambda"), "status %d (%s)", (int)st0, err.msg);
    graft_status st1 = ridge_solve(w, b, r, 0.1, &err);
    CHECK("rank_deficient_lambda", st1 == GRAFT_OK && fabsf(w[1] - w[D - 1]) < 1e-6f,
          "status %d (%s), w %g vs %g", (int)st1, err.msg, w[1], w[D - 1]);
    ridge_free(r);
    /* too few rows for D features, no rows, bad arguments */
    r = NULL;
    st = ridge_create(&r, D, C, &err);
    if (st == GRAFT_OK) st = ridge_accumulate(r, x, y, 3, &err);
    st = ridge_solve(w, b, r, 0.0, &err);
    CHECK("too_few_rows", st == GRAFT_E_INVALID_ARGUMENT, "status %d", (int)st);
    ridge_free(r);
    r = NULL;
    ridge_create(&r, D, C, &err);
    st = ridge_solve(w, b, r, 1.0, &err);
    CHECK("no_rows", st == GRAFT_E_INVALID_ARGUMENT, "status %d", (int)st);
    st = ridge_solve(w, b, r, -1.0, &err);
    CHECK("negative_lambda", st == GRAFT_E_INVALID_ARGUMENT, "status %d", (int)st);
    ridge_free(r);
    r = NULL;
    st = ridge_create(&r, 0, C, &err);
    CHECK("bad_dims", st == GRAFT_E_INVALID_ARGUMENT && !r, "status %d", (int)st);
}

int main(int argc, char **argv) {
    test_recover();
    test_numpy(argc > 1 ? argv[1] : "tests/data/ridge_fixture.txt");
    test_rank_deficient();
    return test_failures ? 1 : 0;
}
