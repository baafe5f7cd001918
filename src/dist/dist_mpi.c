/* dist_mpi.c: the process group over MPI: started once per process, errors returned
 * (MPI_ERRORS_RETURN), every collective non-blocking and waited for under dist's timeout. */
#include <mpi.h>
#include <stdlib.h>
#include <time.h>

#include "dist_impl.h"
#include "../core/clock.h"

static graft_status mpi_fail(dist *d, int rc, const char *what, graft_err *e) {
    d->broken = true;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
    text[len] = 0;
    return err_set(e, GRAFT_E_INTERNAL, "rank %d of %d: %s failed: %s (MPI error %d)", d->env.rank,
                   d->env.world_size, what, len ? text : "no description", rc);
}

graft_status dist_transport_start(dist *d, graft_err *e) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "distributed: MPI was already finalized in this process (one process "
                       "group per process)");
    if (!inited) {
        int provided = 0;
        /* Only the calling thread talks to MPI; OpenMP's workers never do. */
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return err_set(e, GRAFT_E_INTERNAL,
                           "distributed: MPI_Init_thread failed (rank %d of %d from "
                           "OMPI_COMM_WORLD_*: was this process started by mpirun?)",
                           d->env.rank, d->env.world_size);
        d->started_mpi = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm *comm = malloc(sizeof *comm);
    if (!comm) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, comm);
    if (rc != MPI_SUCCESS) {
        free(comm);
        return mpi_fail(d, rc, "MPI_Comm_dup", e);
    }
    MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
    int rank = -1, size = 0;
    MPI_Comm_rank(*comm, &rank);
    MPI_Comm_size(*comm, &size);
    d->comm = comm;
    if (rank != d->env.rank || size != d->env.world_size)
        return err_set(e, GRAFT_E_INTERNAL,
                       "distributed: the environment says rank %d of %d, MPI says %d of %d",
                       d->env.rank, d->env.world_size, rank, size);
    return GRAFT_OK;
}

void dist_transport_stop(dist *d) {
    if (d->broken) { /* the others may never arrive: MPI_Finalize would wait for them */
        free(d->comm);
        d->comm = NULL;
        d->started_mpi = false;
        return;
    }
    if (d->comm) {
        MPI_Comm_free((MPI_Comm *)d->comm);
        free(d->comm);
        d->comm = NULL;
    }
    if (d->started_mpi) MPI_Finalize();
    d->started_mpi = false;
}

/* Wait for a request under the timeout: spin briefly, then sleep between tests so idle ranks
 * (waiting for a slower one's backbone phase) leave the cores to it. */
static graft_status wait_request(dist *d, MPI_Request *req, const char *what, graft_err *e) {
    double start = clock_seconds();
    for (long polls = 0;; polls++) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(d, rc, what, e);
        if (done) return GRAFT_OK;
        if (polls < 20000) continue;
        if (clock_seconds() - start > d->timeout_s) {
            d->broken = true;
            return err_set(e, GRAFT_E_INTERNAL,
                           "rank %d of %d: %s: the other ranks did not arrive within %.0f s "
                           "(GRAFT_DIST_TIMEOUT): a rank died, hangs or is far slower; stopping",
                           d->env.rank, d->env.world_size, what, d->timeout_s);
        }
        struct timespec pause = {0, polls < 40000 ? 20000 : 1000000};
        nanosleep(&pause, NULL);
    }
}

graft_status dist_transport_allreduce(dist *d, void *buf, int n, dist_op op, graft_err *e) {
    MPI_Request req;
    MPI_Datatype type = op == DIST_SUM_F64 ? MPI_DOUBLE : MPI_FLOAT;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, n, type, MPI_SUM, *(MPI_Comm *)d->comm, &req);
    if (rc != MPI_SUCCESS) return mpi_fail(d, rc, "all-reduce", e);
    return wait_request(d, &req, "all-reduce", e);
}

graft_status dist_transport_bcast(dist *d, void *buf, int n, int root, graft_err *e) {
    MPI_Request req;
    int rc = MPI_Ibcast(buf, n, MPI_BYTE, root, *(MPI_Comm *)d->comm, &req);
    if (rc != MPI_SUCCESS) return mpi_fail(d, rc, "broadcast", e);
    return wait_request(d, &req, "broadcast", e);
}

graft_status dist_transport_barrier(dist *d, graft_err *e) {
    MPI_Request req;
    int rc = MPI_Ibarrier(*(MPI_Comm *)d->comm, &req);
    if (rc != MPI_SUCCESS) return mpi_fail(d, rc, "barrier", e);
    return wait_request(d, &req, "barrier", e);
}
