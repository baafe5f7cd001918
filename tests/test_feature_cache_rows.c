/* test_feature_cache_rows.c: the feature cache's batch reads and writes (put_rows, get_rows)
 * against row-at-a-time ones, a disk without room (at the open and mid-write), and their speed
 * (printed, not asserted). */
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "core/tensor.h"
#include "test_feature_cache_util.h"

/* put_rows with batches in a scrambled order (runs of consecutive samples and single ones) stores
 * what per-row puts store: the two files are byte-identical, and a memory cache reads it back. */
static const int64_t scrambled[N] = {5,  6,  7,  8,  2,  10, 11, 0,  1,  3,  4,  9,  36,
                                     20, 21, 22, 23, 24, 25, 12, 14, 13, 15, 16, 17, 18,
                                     19, 35, 34, 26, 27, 28, 29, 30, 31, 32, 33};

static bool put_scrambled(feature_cache *fc) {
    float r[N * D];
    for (int j = 0; j < N; j++) row(r + j * D, scrambled[j]);
    graft_err e = {0};
    const int cuts[] = {0, 12, 13, 27, N}; /* four batches */
    for (int b = 0; b < 4; b++)
        if (feature_cache_put_rows(fc, scrambled + cuts[b], cuts[b + 1] - cuts[b], r + cuts[b] * D,
                                   &e) != GRAFT_OK) {
            printf("  put_rows: %s\n", e.msg);
            return false;
        }
    return true;
}

static bool same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    for (int ca = 0, cb = 0; same && ca != EOF; same = ca == cb) ca = fgetc(fa), cb = fgetc(fb);
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

static void test_put_rows(graft_dtype storage, const char *tag, double tol) {
    char one[256], batched[256], name[96];
    tmp_path(one, sizeof one, "rows_one"), tmp_path(batched, sizeof batched, "rows_batched");
    unlink(one), unlink(batched);
    feature_cache_key key = {0x5151, "cut", "prep"};
    feature_cache_reason why;
    feature_cache *a = open_file(one, &key, storage, &why),
                  *b = open_file(batched, &key, storage, &why);
    bool filled = a && b && fill(a, 0, N) && put_scrambled(b) && feature_cache_complete(b);
    feature_cache_close(a, NULL), feature_cache_close(b, NULL);
    snprintf(name, sizeof name, "put_rows_file_as_per_row_%s", tag);
    CHECK(name, filled && same_file(one, batched), "filled %d", filled);
    unlink(one), unlink(batched);
    feature_cache *m = NULL;
    feature_cache_open(&m, NULL, NULL, &key, N, D, storage, NULL);
    double err = m && put_scrambled(m) ? max_rel_err(m, N) : -1;
    snprintf(name, sizeof name, "put_rows_memory_%s", tag);
    CHECK(name, err >= 0 && err <= tol && feature_cache_count(m) == N, "err %g (tol %g)", err, tol);
    feature_cache_close(m, NULL);
}

/* body(path) in a child process (which alone takes its file size limit), then CHECK(name) that
 * it returned true and was not killed by a signal. */
static void in_child(const char *name, const char *tag, bool (*body)(const char *path)) {
    char path[256];
    tmp_path(path, sizeof path, tag);
    unlink(path);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        bool ok = body(path);
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(name, WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
    unlink(path);
}

/* A disk that fills while rows are written (here a file size limit: EFBIG, as ENOSPC would be):
 * an error naming the rows, the rows stored before it kept, no signal. */
static bool full_mid_write(const char *path) {
    feature_cache_key key = {0x6161, "c", "p"};
    feature_cache_reason why;
    feature_cache *fc = open_file(path, &key, GRAFT_DTYPE_F32, &why);
    size_t limit = 4096 + 8 + 10 * D * sizeof(float); /* header, bitmap, 10 rows */
    struct rlimit rl = {limit, limit};
    float r[20 * D] = {0};
    int64_t idx[20];
    for (int j = 0; j < 20; j++) idx[j] = j;
    graft_err e = {0};
    bool ok = fc && setrlimit(RLIMIT_FSIZE, &rl) == 0 &&
              feature_cache_put_rows(fc, idx, 5, r, &e) == GRAFT_OK;
    graft_status st = ok ? feature_cache_put_rows(fc, idx + 5, 15, r, &e) : GRAFT_OK;
    ok = ok && st == GRAFT_E_IO && strstr(e.msg, "rows 5..19") && feature_cache_count(fc) == 5 &&
         feature_cache_close(fc, NULL) == GRAFT_OK;
    if (!ok) printf("  status %d: %s\n", st, e.msg);
    return ok;
}

/* A disk without room for the whole cache: the open fails naming the size, and the file it had
 * begun is left empty (not a sparse file whose rows would fault later). */
static bool no_room_at_open(const char *path) {
    struct rlimit rl = {4096, 4096};
    feature_cache_key key = {0x7171, "c", "p"};
    feature_cache *fc = NULL;
    graft_err e = {0};
    graft_status st = setrlimit(RLIMIT_FSIZE, &rl) == 0
                          ? feature_cache_open(&fc, NULL, path, &key, N, D, GRAFT_DTYPE_F32, &e)
                          : GRAFT_OK;
    struct stat sb;
    bool ok = st == GRAFT_E_IO && !fc && strstr(e.msg, "cannot reserve 6916 bytes") &&
              stat(path, &sb) == 0 && sb.st_size == 0;
    if (!ok) printf("  status %d: %s\n", st, e.msg);
    return ok;
}

/* get_rows reads what per-row gets read: the present rows (hits), the absent ones left as they
 * were (misses), in a batch large enough to go on all threads too. */
static void test_get_rows(graft_dtype storage, const char *tag) {
    enum { M = 2100, DIM = 2000 }; /* M * DIM values: above FC_PARALLEL_VALUES, on all threads */
    feature_cache_key key = {0x8181, "c", "p"};
    feature_cache *fc = NULL;
    float *in = malloc(sizeof(float) * M * DIM), *got = malloc(sizeof(float) * M * DIM);
    float *want = malloc(sizeof(float) * M * DIM);
    int64_t *idx = malloc(sizeof(int64_t) * M), found = -1;
    bool ok = in && got && want && idx &&
              feature_cache_open(&fc, NULL, NULL, &key, M, DIM, storage, NULL) == GRAFT_OK;
    for (int64_t i = 0; ok && i < M; i++) {
        for (int k = 0; k < DIM; k++) in[i * DIM + k] = sinf((float)(i * 7 + k));
        if (i % 3 != 1) ok = feature_cache_put(fc, i, in + i * DIM, NULL) == GRAFT_OK;
    }
    for (int64_t j = 0; ok && j < M; j++) {   /* a permutation: rows out of order */
        idx[j] = j == 1 ? 0 : (j * 1237) % M; /* and row 0 read twice */
        bool present = false;
        for (int k = 0; k < DIM; k++) want[j * DIM + k] = -7.0f;
        ok = feature_cache_get(fc, want + j * DIM, &present, idx[j], NULL) == GRAFT_OK;
    }
    int64_t hits0 = ok ? feature_cache_hits(fc) : 0;
    for (int64_t v = 0; ok && v < M * DIM; v++) got[v] = -7.0f;
    ok = ok && feature_cache_get_rows(fc, got, idx, M, &found, NULL) == GRAFT_OK;
    int64_t present = 0;
    for (int64_t j = 0; j < M; j++) present += idx[j] % 3 != 1;
    char name[64];
    snprintf(name, sizeof name, "get_rows_as_per_row_%s", tag);
    CHECK(name,
          ok && found == present && !memcmp(got, want, sizeof(float) * M * DIM) &&
              feature_cache_hits(fc) - hits0 == present,
          "ok %d, found %lld of %lld", ok, (long long)found, (long long)present);
    feature_cache_close(fc, NULL);
    free(in), free(got), free(want), free(idx);
}

static double seconds_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

enum { ROWS = 20000, DIM = 2048, B = 256 };

/* Rows put into a new file cache, a row at a time or a batch (one pwrite a run of rows). */
static double time_puts(const char *path, const float *f /* (B, DIM) */, bool batched) {
    feature_cache_key key = {9, "c", "p"};
    feature_cache *fc = NULL;
    unlink(path);
    if (feature_cache_open(&fc, NULL, path, &key, ROWS, DIM, GRAFT_DTYPE_BF16, NULL)) return -1;
    int64_t idx[B];
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int64_t at = 0; at < ROWS; at += B) {
        int64_t m = ROWS - at < B ? ROWS - at : B;
        for (int64_t i = 0; i < m; i++) idx[i] = at + i;
        if (batched) feature_cache_put_rows(fc, idx, m, f, NULL);
        for (int64_t i = 0; !batched && i < m; i++)
            feature_cache_put(fc, at + i, f + i * DIM, NULL);
    }
    double s = seconds_since(&t0);
    feature_cache_close(fc, NULL);
    return s;
}

/* The file's rows read back into f (ROWS, DIM): a row at a time (way 0), a batch at a time (1),
 * all at once on all threads (2: a warm rerun's way). */
static double time_gets(const char *path, float *f, int way) {
    feature_cache_key key = {9, "c", "p"};
    feature_cache *fc = NULL;
    feature_cache_reason why;
    if (feature_cache_open(&fc, &why, path, &key, ROWS, DIM, GRAFT_DTYPE_BF16, NULL) ||
        why != FEATURE_CACHE_REUSED)
        return feature_cache_close(fc, NULL), -1;
    static int64_t idx[ROWS];
    int64_t found;
    bool one;
    for (int64_t i = 0; i < ROWS; i++) idx[i] = i;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int64_t at = 0; way < 2 && at < ROWS; at += B) {
        int64_t m = ROWS - at < B ? ROWS - at : B;
        if (way == 1) feature_cache_get_rows(fc, f + at * DIM, idx + at, m, &found, NULL);
        for (int64_t i = 0; way == 0 && i < m; i++)
            feature_cache_get(fc, f + (at + i) * DIM, &one, at + i, NULL);
    }
    if (way == 2) feature_cache_get_rows(fc, f, idx, ROWS, &found, NULL);
    double s = seconds_since(&t0);
    feature_cache_close(fc, NULL);
    return s;
}

/* A measurement, printed, not a pass/fail: ROWS ResNet-50-wide rows in a bf16 file cache put and
 * read back a row at a time and a batch at a time, alternated. */
static void report_speed(void) {
    float *f = host_alloc_large(sizeof(float) * ROWS * DIM); /* as extract.c's: faulted in */
    if (!f) return;
    for (int i = 0; i < B * DIM; i++) f[i] = (float)(i % 977) * 0.01f;
    char path[256];
    tmp_path(path, sizeof path, "speed");
    for (int rep = 0; rep < 2; rep++)
        for (int batched = 0; batched < 2; batched++) {
            double put = time_puts(path, f, batched), get = time_gets(path, f, batched);
            double all = batched ? time_gets(path, f, 2) : 0;
            printf("# %d x %d bf16 rows in a file cache, %s: put %.3f s, read back %.3f s", ROWS,
                   DIM, batched ? "a batch of 256 at a time" : "a row at a time", put, get);
            printf(batched ? " (all at once on all threads: %.3f s)\n" : "\n", all);
        }
    unlink(path);
    free(f);
}

int main(void) {
    test_put_rows(GRAFT_DTYPE_F32, "f32", 0.0);
    test_put_rows(GRAFT_DTYPE_F16, "f16", 1.0 / 1024);
    test_put_rows(GRAFT_DTYPE_BF16, "bf16", 1.0 / 128);
    in_child("put_rows_full_disk_is_an_error", "full", full_mid_write);
    in_child("open_without_room_is_an_error", "noroom", no_room_at_open);
    test_get_rows(GRAFT_DTYPE_F32, "f32");
    test_get_rows(GRAFT_DTYPE_BF16, "bf16");
    test_get_rows(GRAFT_DTYPE_F16, "f16");
    report_speed();
    return test_failures ? 1 : 0;
}
