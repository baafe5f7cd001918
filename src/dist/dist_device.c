/* dist_device.c: the process group over a device kind's collectives (NCCL): the rank's GPU, the
 * group's id made by rank 0 and handed out over MPI or the TCP rendezvous, the communicator. */
#include <stdlib.h>
#include <string.h>

#include "dist_impl.h"
#include "rendezvous.h"

/* The first device kind with collectives (CUDA's NCCL); NULL when this build has none. */
static const device_kind *collective_kind(void) {
    int n = 0;
    const device_kind *const *kinds = device_kinds(&n);
    for (int i = 0; i < n; i++)
        if (kinds[i]->collectives) return kinds[i];
    return NULL;
}

/* Every rank gets rank 0's id: over MPI under mpirun, else the TCP rendezvous. */
static graft_status share_id(dist *d, void *id, size_t bytes, graft_err *e) {
    if (d->env.world_size == 1) return GRAFT_OK;
    if (d->env.launcher == DIST_MPIRUN) {
        TRY(dist_transport_start(d, e));
        return dist_transport_bcast(d, id, (int)bytes, 0, e);
    }
    int port = 0;
    TRY(rendezvous_port_from_env(&port, e));
    const char *addr = getenv("MASTER_ADDR");
    if (d->env.rank != 0 && (!addr || !*addr))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "distributed launch: rank %d of %d needs MASTER_ADDR (rank 0's host)",
                       d->env.rank, d->env.world_size);
    return dist_rendezvous(addr, port, d->env.rank, d->env.world_size, id, bytes, d->timeout_s, e);
}

/* What asked for the device collectives, for messages. */
static const char *asked_by(const dist *d) {
    return d->env.launcher == DIST_TORCHRUN ? "torchrun's RANK, WORLD_SIZE"
                                            : "GRAFT_DIST_BACKEND=nccl";
}

/* The rank's device: its local rank's (one GPU per rank on each host). */
static graft_status rank_device(dist *d, const device_kind *k, graft_err *e) {
    char why[256] = "";
    int count = k->count(why, sizeof why);
    if (count <= 0)
        return err_set(e, GRAFT_E_UNSUPPORTED,
                       "distributed launch over %s (%s): rank %d of %d sees no %s device%s%s",
                       k->collectives->library, asked_by(d), d->env.rank, d->env.world_size,
                       k->name, *why ? ": " : "", why);
    if (d->env.local_rank >= count)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "distributed launch over %s: rank %d is local rank %d, but this host has "
                       "%d %s device%s: start at most one rank per device on each host (or "
                       "GRAFT_DIST_BACKEND=mpi under mpirun, whose ranks may share one)",
                       k->collectives->library, d->env.rank, d->env.local_rank, count, k->name,
                       count == 1 ? "" : "s");
    d->device = d->env.local_rank;
    return GRAFT_OK;
}

graft_status dist_device_start(dist *d, graft_err *e) {
    const device_kind *k = collective_kind();
    if (!k)
        return err_set(e, GRAFT_E_UNSUPPORTED,
                       "distributed launch: rank %d of %d asks for NCCL (%s), but this graft "
                       "was built without GPU collectives (CUDA and NCCL): launch with mpirun "
                       "-np N over MPI, or rebuild with the CUDA toolkit and NCCL",
                       d->env.rank, d->env.world_size, asked_by(d));
    TRY(rank_device(d, k, e));
    const device_collectives *c = k->collectives;
    void *id = calloc(1, c->id_bytes);
    if (!id) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    graft_status st = d->env.rank == 0 ? c->make_id(id, e) : GRAFT_OK;
    if (st == GRAFT_OK) st = share_id(d, id, c->id_bytes, e);
    if (st == GRAFT_OK)
        st = c->open(d->device, id, d->env.rank, d->env.world_size, d->timeout_s, &d->dev, e);
    free(id);
    if (st == GRAFT_OK) d->coll = c;
    return st;
}

const char *dist_backend_name(const dist *d) {
    if (!d) return "none";
    return d->dev ? d->coll->library : "MPI";
}

int dist_device_index(const dist *d) {
    return d && d->dev ? d->device : -1;
}
