/* dist_impl.h: the process group's record and the transport under dist.c (MPI, or a stub that
 * refuses when MPI is not built in). */
#ifndef GRAFT_DIST_DIST_IMPL_H
#define GRAFT_DIST_DIST_IMPL_H

#include <stdbool.h>

#include "../core/device_kind.h"
#include "dist.h"

typedef enum dist_op { DIST_SUM_F32, DIST_SUM_F64, DIST_BYTES } dist_op;

struct dist {
    dist_env env;
    double timeout_s;
    bool started_mpi; /* MPI_Finalize at dist_free */
    bool broken;      /* a collective failed: leave without waiting for the others */
    bool left;        /* dist_leave ran */
    void *comm;       /* the MPI transport's communicator (mpirun; NULL otherwise) */
    /* The device collectives (NCCL) every collective goes through when the backend is a
     * device's; NULL: MPI's. */
    const device_collectives *coll;
    device_comm *dev;
    int device; /* the kind's device index dev runs on */
};

/* Start MPI for d->env (sets comm, started_mpi). */
graft_status dist_transport_start(dist *d, graft_err *e);
/* Start the device collectives (NCCL) on the GPU of d->env's local rank, the group's id sent
 * from rank 0 over MPI (mpirun) or the TCP rendezvous (torchrun: MASTER_ADDR, MASTER_PORT). */
graft_status dist_device_start(dist *d, graft_err *e);
/* Finalize (after a clean run) or just let go (d->broken). */
void dist_transport_stop(dist *d);
/* Sum n values in place (DIST_SUM_*); n fits an int. */
graft_status dist_transport_allreduce(dist *d, void *buf, int n, dist_op op, graft_err *e);
/* n bytes (fits an int) from root to everyone. */
graft_status dist_transport_bcast(dist *d, void *buf, int n, int root, graft_err *e);
graft_status dist_transport_barrier(dist *d, graft_err *e);

#endif
