/* test_dist.c: the process group: the launch read from the environment, the one-process
 * shortcuts, batch slices and gradient shares; under mpirun, the collectives themselves. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/dist.h"
#include "dist/dist_train.h"
#include "test_util.h"

static void clear_env(void) {
    const char *names[] = {
        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "RANK",
        "WORLD_SIZE",           "LOCAL_RANK",           "GRAFT_DIST_BACKEND"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) unsetenv(names[i]);
}

static void test_env(void) {
    graft_err e = {0};
    dist_env env;
    clear_env();
    graft_status st = dist_env_detect(&env, &e);
    CHECK("env_alone", st == GRAFT_OK && env.launcher == DIST_ALONE && env.world_size == 1,
          "st %d world %d", st, env.world_size);
    setenv("RANK", "1", 1), setenv("WORLD_SIZE", "4", 1);
    st = dist_env_detect(&env, &e);
    CHECK("env_torchrun",
          st == GRAFT_OK && env.launcher == DIST_TORCHRUN && env.rank == 1 && env.world_size == 4 &&
              env.local_rank == 1,
          "st %d", st);
    dist *d = NULL;
    st = dist_create(&d, &e);
    /* torchrun's ranks meet over NCCL: without it (a CPU build) or without a GPU (here), a
     * clear error, never a lone run */
    CHECK("torchrun_without_gpu_refused",
          st == GRAFT_E_UNSUPPORTED && !d && strstr(e.msg, "torchrun"), "st %d: %s", st, e.msg);
    setenv("GRAFT_DIST_BACKEND", "mpi", 1);
    st = dist_create(&d, &e);
    CHECK("torchrun_with_mpi_refused",
          st == GRAFT_E_INVALID_ARGUMENT && !d && strstr(e.msg, "mpirun"), "st %d: %s", st, e.msg);
    setenv("GRAFT_DIST_BACKEND", "gloo", 1);
    st = dist_create(&d, &e);
    CHECK("unknown_backend", st == GRAFT_E_INVALID_ARGUMENT && strstr(e.msg, "gloo"), "%s", e.msg);
    unsetenv("GRAFT_DIST_BACKEND");
    setenv("RANK", "4", 1);
    st = dist_env_detect(&env, &e);
    CHECK("env_rank_outside_world", st != GRAFT_OK && strstr(e.msg, "RANK=4"), "%s", e.msg);
    setenv("RANK", "1", 1), unsetenv("WORLD_SIZE");
    st = dist_env_detect(&env, &e);
    CHECK("env_half_set", st != GRAFT_OK && strstr(e.msg, "WORLD_SIZE"), "%s", e.msg);
    clear_env();
    setenv("OMPI_COMM_WORLD_SIZE", "x2", 1), setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    st = dist_env_detect(&env, &e);
    CHECK("env_not_a_number", st != GRAFT_OK && strstr(e.msg, "OMPI_COMM_WORLD_SIZE=x2"), "%s",
          e.msg);
    clear_env();
}

static void test_alone(void) {
    graft_err e = {0};
    float f[3] = {1, 2, 3};
    double g[2] = {4, 5};
    int64_t all[1];
    char out[4];
    size_t bytes[1] = {4};
    bool ok = dist_allreduce_f32(NULL, f, 3, &e) == GRAFT_OK && f[2] == 3 &&
              dist_allreduce_f64(NULL, g, 2, &e) == GRAFT_OK && g[1] == 5 &&
              dist_barrier(NULL, &e) == GRAFT_OK &&
              dist_allgather_i64(NULL, 7, all, &e) == GRAFT_OK && all[0] == 7 &&
              dist_allgatherv(NULL, "abc", out, bytes, &e) == GRAFT_OK && !strcmp(out, "abc");
    CHECK("alone_collectives", ok && dist_rank(NULL) == 0 && dist_world_size(NULL) == 1, "%s",
          e.msg);
    int64_t lo, hi;
    dist_batch_slice(NULL, 10, &lo, &hi);
    CHECK("alone_slice", lo == 0 && hi == 10, "[%lld, %lld)", (long long)lo, (long long)hi);
}

/* Shares of a batch sum to 1 over ranks, and weigh rows as the class-weighted mean does. */
static void test_shares(void) {
    int64_t y[5] = {0, 1, 1, 0, 1}, order[5] = {4, 3, 2, 1, 0};
    float w[2] = {1.0f, 3.0f};
    loss_spec s = {.kind = LOSS_SOFTMAX_CE};
    double a = dist_grad_share(&s, y, sizeof(int64_t), order, 5, 0, 2);
    CHECK("share_by_count", fabs(a - 0.4) < 1e-15, "%g", a);
    s.class_weight = w; /* rows 4, 3 weigh 3 + 1 of the total 3+1+3+1+3 = 11 */
    a = dist_grad_share(&s, y, sizeof(int64_t), order, 5, 0, 2);
    double b = dist_grad_share(&s, y, sizeof(int64_t), order, 5, 2, 5);
    CHECK("share_by_class_weight", fabs(a - 4.0 / 11.0) < 1e-15 && fabs(a + b - 1.0) < 1e-15,
          "%g %g", a, b);
}

/* Under mpirun: the collectives across the real ranks (rank 0 prints). */
static void test_ranks(void) {
    graft_err e = {0};
    dist *d = NULL;
    graft_status st = dist_create(&d, &e);
    if (d && dist_rank(d) != 0 && !freopen("/dev/null", "w", stdout)) return;
    CHECK("create", st == GRAFT_OK && d, "%s", e.msg);
    if (!d) return;
    int r = dist_rank(d), w = dist_world_size(d);
    float f[3] = {(float)r, 1.0f, 2.0f * (float)r};
    st = dist_allreduce_f32(d, f, 3, &e);
    float sum = (float)(w * (w - 1) / 2);
    CHECK("allreduce_f32", st == GRAFT_OK && f[0] == sum && f[1] == (float)w && f[2] == 2 * sum,
          "%g %g %g: %s", f[0], f[1], f[2], e.msg);
    double v = 0.5 * r;
    st = dist_allreduce_f64(d, &v, 1, &e);
    CHECK("allreduce_f64", st == GRAFT_OK && v == 0.5 * sum, "%g: %s", v, e.msg);
    char word[8] = "";
    if (r == w - 1) strcpy(word, "last");
    st = dist_broadcast(d, word, sizeof word, w - 1, &e);
    CHECK("broadcast", st == GRAFT_OK && !strcmp(word, "last"), "'%s': %s", word, e.msg);
    int64_t counts[64];
    st = dist_allgather_i64(d, 10 + r, counts, &e);
    bool ok = st == GRAFT_OK;
    for (int i = 0; i < w && i < 64; i++) ok = ok && counts[i] == 10 + i;
    CHECK("allgather_i64", ok, "%s", e.msg);
    /* rank i sends i+1 bytes of value i */
    size_t bytes[64], total = 0;
    for (int i = 0; i < w; i++) total += bytes[i] = (size_t)i + 1;
    unsigned char mine[64], *all = malloc(total);
    memset(mine, r, sizeof mine);
    st = dist_allgatherv(d, mine, all, bytes, &e);
    ok = st == GRAFT_OK;
    for (int i = 0, at = 0; i < w; at += i + 1, i++)
        for (int k = 0; k <= i; k++) ok = ok && all[at + k] == i;
    CHECK("allgatherv", ok, "%s", e.msg);
    free(all);
    CHECK("barrier", dist_barrier(d, &e) == GRAFT_OK, "%s", e.msg);
    int64_t lo, hi, covered = 0;
    dist_batch_slice(d, 5, &lo, &hi);
    double n = (double)(hi - lo);
    dist_allreduce_f64(d, &n, 1, &e);
    covered = (int64_t)n;
    CHECK("slices_cover_the_batch", covered == 5, "%lld", (long long)covered);
    dist_free(d);
}

int main(void) {
    /* under mpirun, or a group of one over a backend asked for (NCCL on the GPU checks) */
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("GRAFT_DIST_BACKEND")) {
        test_ranks();
        return test_failures ? 1 : 0;
    }
    test_env();
    test_alone();
    test_shares();
    return test_failures ? 1 : 0;
}
