/* dist.c: the launch read from the environment, the backend chosen, and the collectives'
 * one-process shortcuts and chunking over the transport (MPI: dist_mpi.c or dist_none.c; a
 * device's collectives: dist_device.c). */
#include "dist_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Pieces of at most this many elements per transport call (MPI counts are ints). */
#define DIST_CHUNK (1 << 28)

/* *out from the variable name (absent: *found false); a value that is not a whole number in
 * [lo, hi] is an error naming the variable. */
static graft_status env_int(const char *name, int lo, int hi, int *out, bool *found, graft_err *e) {
    const char *v = getenv(name);
    *found = v && *v;
    if (!*found) return GRAFT_OK;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < lo || x > hi)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "distributed launch: %s=%s is not a whole number in [%d, %d]", name, v, lo,
                       hi);
    *out = (int)x;
    return GRAFT_OK;
}

/* The three variables of one launcher: all or none (else an error naming the missing one). */
static graft_status env_triple(const char *const names[3], dist_env *env, bool *found,
                               graft_err *e) {
    bool have[3];
    for (int i = 0; i < 3; i++) have[i] = getenv(names[i]) && *getenv(names[i]);
    *found = have[0] || have[1];
    if (!*found) return GRAFT_OK;
    if (!have[0] || !have[1])
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "distributed launch: %s is set but %s is not (both or neither)",
                       have[0] ? names[0] : names[1], have[0] ? names[1] : names[0]);
    int world = 1;
    TRY(env_int(names[1], 1, 1 << 20, &world, &have[1], e));
    TRY(env_int(names[0], 0, world - 1, &env->rank, &have[0], e));
    TRY(env_int(names[2], 0, world - 1, &env->local_rank, &have[2], e));
    env->world_size = world;
    if (!have[2]) env->local_rank = env->rank;
    return GRAFT_OK;
}

graft_status dist_env_detect(dist_env *env, graft_err *e) {
    static const char *const ompi[3] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                        "OMPI_COMM_WORLD_LOCAL_RANK"};
    static const char *const torch[3] = {"RANK", "WORLD_SIZE", "LOCAL_RANK"};
    memset(env, 0, sizeof *env);
    env->world_size = 1;
    bool found;
    TRY(env_triple(ompi, env, &found, e));
    if (found) { /* mpirun's names win: torchrun-style variables may be left over in a shell */
        env->launcher = DIST_MPIRUN;
        return GRAFT_OK;
    }
    TRY(env_triple(torch, env, &found, e));
    if (found) env->launcher = DIST_TORCHRUN;
    return GRAFT_OK;
}

/* GRAFT_DIST_BACKEND: "mpi" or "nccl" (*chosen true), else the launcher's own: MPI for mpirun,
 * NCCL (a device's collectives) for torchrun. */
static graft_status backend_choice(const dist_env *env, bool *device, bool *chosen, graft_err *e) {
    const char *b = getenv("GRAFT_DIST_BACKEND");
    *chosen = b && *b;
    *device = env->launcher == DIST_TORCHRUN;
    if (!*chosen) return GRAFT_OK;
    if (strcmp(b, "mpi") && strcmp(b, "nccl"))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "GRAFT_DIST_BACKEND=%s: the backends are mpi and nccl", b);
    *device = !strcmp(b, "nccl");
    if (!*device && env->launcher == DIST_TORCHRUN)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "GRAFT_DIST_BACKEND=mpi, but this process was started by torchrun (RANK, "
                       "WORLD_SIZE): MPI's ranks come from mpirun; use nccl, or launch with "
                       "mpirun -np N");
    return GRAFT_OK;
}

static graft_status read_timeout(double *out, graft_err *e) {
    *out = 1800.0;
    const char *t = getenv("GRAFT_DIST_TIMEOUT");
    if (!t || !*t) return GRAFT_OK;
    char *end;
    double s = strtod(t, &end);
    if (*end || !(s > 0.0))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "GRAFT_DIST_TIMEOUT=%s is not a positive number of seconds", t);
    *out = s;
    return GRAFT_OK;
}

graft_status dist_create(dist **out, graft_err *e) {
    *out = NULL;
    dist_env env;
    TRY(dist_env_detect(&env, e));
    bool device = false, chosen = false;
    TRY(backend_choice(&env, &device, &chosen, e));
    /* One process is a group only when a backend was asked for (to check that path alone). */
    if (env.world_size == 1 && !chosen) return GRAFT_OK;
    double timeout = 0;
    TRY(read_timeout(&timeout, e));
    dist *d = calloc(1, sizeof *d);
    if (!d) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    d->env = env;
    d->timeout_s = timeout;
    graft_status st = device ? dist_device_start(d, e) : dist_transport_start(d, e);
    if (st != GRAFT_OK) {
        d->broken = true;
        dist_leave(d, true);
        free(d);
        return st;
    }
    *out = d;
    return GRAFT_OK;
}

void dist_leave(dist *d, bool failed) {
    if (!d || d->left) return;
    if (failed) d->broken = true;
    if (d->dev) d->coll->close(d->dev, d->broken);
    d->dev = NULL;
    dist_transport_stop(d);
    d->left = true;
}

void dist_free(dist *d) {
    if (!d) return;
    dist_leave(d, false);
    free(d);
}

int dist_rank(const dist *d) {
    return d ? d->env.rank : 0;
}

int dist_world_size(const dist *d) {
    return d ? d->env.world_size : 1;
}

int dist_local_rank(const dist *d) {
    return d ? d->env.local_rank : 0;
}

double dist_timeout(const dist *d) {
    return d ? d->timeout_s : 0.0;
}

/* A group that was left, or broken by a failed collective, runs no more collectives. */
static graft_status usable(const dist *d, graft_err *e) {
    if (d->left || d->broken)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "rank %d of %d: the process group was %s",
                       d->env.rank, d->env.world_size,
                       d->left ? "left" : "broken by an earlier failure");
    return GRAFT_OK;
}

/* A device collective's failure breaks the group, as MPI's does. */
static graft_status device_result(dist *d, graft_status st) {
    if (st != GRAFT_OK) d->broken = true;
    return st;
}

static graft_status allreduce(dist *d, void *buf, size_t elem, int64_t n, dist_op op,
                              graft_err *e) {
    if (!d || n <= 0) return GRAFT_OK;
    TRY(usable(d, e));
    if (d->dev) return device_result(d, d->coll->allreduce(d->dev, buf, n, op == DIST_SUM_F64, e));
    for (int64_t at = 0; at < n; at += DIST_CHUNK) {
        int64_t m = n - at < DIST_CHUNK ? n - at : DIST_CHUNK;
        TRY(dist_transport_allreduce(d, (char *)buf + (size_t)at * elem, (int)m, op, e));
    }
    return GRAFT_OK;
}

graft_status dist_allreduce_f32(dist *d, float *buf, int64_t n, graft_err *e) {
    return allreduce(d, buf, sizeof(float), n, DIST_SUM_F32, e);
}

graft_status dist_allreduce_f64(dist *d, double *buf, int64_t n, graft_err *e) {
    return allreduce(d, buf, sizeof(double), n, DIST_SUM_F64, e);
}

graft_status dist_allreduce_device(dist *d, void *const *bufs, const int64_t *numels, int n,
                                   graft_err *e) {
    if (!d || n <= 0) return GRAFT_OK;
    TRY(usable(d, e));
    if (!d->dev)
        return err_set(
            e, GRAFT_E_UNSUPPORTED,
            "an all-reduce of device memory needs the NCCL backend (this group is MPI's)");
    return device_result(d, d->coll->allreduce_device(d->dev, bufs, numels, n, e));
}

graft_status dist_broadcast(dist *d, void *buf, size_t bytes, int root, graft_err *e) {
    if (!d) return GRAFT_OK;
    TRY(usable(d, e));
    if (root < 0 || root >= d->env.world_size)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "broadcast from rank %d of %d", root,
                       d->env.world_size);
    if (d->dev) return device_result(d, d->coll->broadcast(d->dev, buf, bytes, root, e));
    for (size_t at = 0; at < bytes; at += DIST_CHUNK) {
        size_t m = bytes - at < DIST_CHUNK ? bytes - at : DIST_CHUNK;
        TRY(dist_transport_bcast(d, (char *)buf + at, (int)m, root, e));
    }
    return GRAFT_OK;
}

graft_status dist_barrier(dist *d, graft_err *e) {
    if (!d) return GRAFT_OK;
    TRY(usable(d, e));
    if (d->dev) {
        float one = 1.0f;
        return device_result(d, d->coll->allreduce(d->dev, &one, 1, false, e));
    }
    return dist_transport_barrier(d, e);
}

graft_status dist_allgather_i64(dist *d, int64_t mine, int64_t *all, graft_err *e) {
    int w = dist_world_size(d), r = dist_rank(d);
    /* A sum of zeros and one value per slot: exact in double up to 2^53. */
    double *v = calloc((size_t)w, sizeof *v);
    if (!v) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    v[r] = (double)mine;
    graft_status st = dist_allreduce_f64(d, v, w, e);
    for (int i = 0; st == GRAFT_OK && i < w; i++) all[i] = (int64_t)v[i];
    free(v);
    return st;
}

graft_status dist_allgatherv(dist *d, const void *mine, void *all, const size_t *bytes,
                             graft_err *e) {
    int w = dist_world_size(d), r = dist_rank(d);
    size_t at = 0;
    for (int i = 0; i < w; i++) {
        if (i == r && bytes[i]) memmove((char *)all + at, mine, bytes[i]);
        TRY(dist_broadcast(d, (char *)all + at, bytes[i], i, e));
        at += bytes[i];
    }
    return GRAFT_OK;
}
