/* dist_none.c: the transport of a build without MPI: a launch of several ranks is refused. */
#include "dist_impl.h"

graft_status dist_transport_start(dist *d, graft_err *e) {
    return err_set(e, GRAFT_E_UNSUPPORTED,
                   "launched as rank %d of %d by mpirun (OMPI_COMM_WORLD_*), but this graft was "
                   "built without MPI: install libopenmpi-dev and rebuild (meson -Dmpi=enabled)",
                   d->env.rank, d->env.world_size);
}

void dist_transport_stop(dist *d) {
    (void)d;
}

static graft_status none(graft_err *e) {
    return err_set(e, GRAFT_E_UNSUPPORTED, "this graft was built without MPI");
}

graft_status dist_transport_allreduce(dist *d, void *buf, int n, dist_op op, graft_err *e) {
    (void)d, (void)buf, (void)n, (void)op;
    return none(e);
}

graft_status dist_transport_bcast(dist *d, void *buf, int n, int root, graft_err *e) {
    (void)d, (void)buf, (void)n, (void)root;
    return none(e);
}

graft_status dist_transport_barrier(dist *d, graft_err *e) {
    (void)d;
    return none(e);
}
