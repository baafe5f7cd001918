/* dist.h: data-parallel process groups: who this process is (rank, world size, local rank, from
 * the launcher's environment) and the collectives training needs, over MPI on the CPU. */
#ifndef GRAFT_DIST_DIST_H
#define GRAFT_DIST_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/error.h"

/* How this process was launched: alone, by mpirun (OMPI_COMM_WORLD_*), or by torchrun (RANK,
 * WORLD_SIZE, LOCAL_RANK; MASTER_ADDR, MASTER_PORT for the NCCL backend's rendezvous). */
typedef enum dist_launcher { DIST_ALONE = 0, DIST_MPIRUN, DIST_TORCHRUN } dist_launcher;

typedef struct dist_env {
    dist_launcher launcher;
    int rank, world_size, local_rank;
} dist_env;

/* A process group. NULL stands for one process alone: every call below then does the
 * one-process thing (a reduction leaves the buffer as it is, a gather copies). */
typedef struct dist dist;

/* The launch read from the environment; a malformed variable (not a number, rank outside the
 * world) is an error naming it. Nothing set: alone (rank 0 of 1). */
graft_status dist_env_detect(dist_env *env, graft_err *e);
/* Join the launch's group: *out NULL when alone (unless GRAFT_DIST_BACKEND asks for a group of
 * one); under mpirun with more than one rank, MPI starts (MPI_Init_thread once per process,
 * errors returned rather than aborting); under torchrun, or with GRAFT_DIST_BACKEND=nccl, NCCL
 * on the local rank's GPU (dist_device.c). A launch the build cannot serve (mpirun without MPI
 * built in, torchrun without NCCL) is an error. */
graft_status dist_create(dist **out, graft_err *e);
/* Leave the group (MPI_Finalize when dist_create started MPI). NULL: nothing. */
void dist_free(dist *d);
/* Leave the group now (dist_free then only frees): failed, without MPI_Finalize (which would
 * wait for ranks that may never come); else with it. */
void dist_leave(dist *d, bool failed);

int dist_rank(const dist *d);       /* 0 when NULL */
int dist_world_size(const dist *d); /* 1 when NULL */
int dist_local_rank(const dist *d); /* 0 when NULL */
/* Seconds a collective waits for the other ranks before it fails (GRAFT_DIST_TIMEOUT, default
 * 1800): a rank that hangs or died unseen then ends the run with an error, not a silent hang. */
double dist_timeout(const dist *d);
/* What the collectives go through: "MPI", "NCCL 2.x.y", or "none" when NULL. */
const char *dist_backend_name(const dist *d);
/* The device index the device collectives run on (the rank's GPU); -1 over MPI or alone. */
int dist_device_index(const dist *d);

/* Sum over ranks, in place, every rank getting the same result. */
graft_status dist_allreduce_f32(dist *d, float *buf, int64_t n, graft_err *e);
graft_status dist_allreduce_f64(dist *d, double *buf, int64_t n, graft_err *e);
/* Sum n buffers of device memory (numels[i] floats each, on dist_device_index's device) across
 * ranks in place, as one fused call: only over a device's collectives (NCCL); otherwise
 * GRAFT_E_UNSUPPORTED (the caller sums host copies). */
graft_status dist_allreduce_device(dist *d, void *const *bufs, const int64_t *numels, int n,
                                   graft_err *e);
/* Root's bytes into every rank's buf. */
graft_status dist_broadcast(dist *d, void *buf, size_t bytes, int root, graft_err *e);
graft_status dist_barrier(dist *d, graft_err *e);
/* Every rank's value into all (world size), in rank order. */
graft_status dist_allgather_i64(dist *d, int64_t mine, int64_t *all, graft_err *e);
/* Every rank's block of bytes[r] bytes (its own from mine) into all, in rank order (all holds
 * their sum). Any size: large blocks go in pieces. */
graft_status dist_allgatherv(dist *d, const void *mine, void *all, const size_t *bytes,
                             graft_err *e);

#endif
