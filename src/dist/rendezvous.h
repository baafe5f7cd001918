/* rendezvous.h: the small TCP meeting at MASTER_ADDR:MASTER_PORT that torchrun-style launches
 * use to hand every rank the group's id (NCCL's unique id) made by rank 0. */
#ifndef GRAFT_DIST_RENDEZVOUS_H
#define GRAFT_DIST_RENDEZVOUS_H

#include <stddef.h>

#include "../core/error.h"

/* Rank 0 listens on port (every interface); ranks 1..world-1 connect to addr:port (a host name or
 * an address; retried until rank 0 listens) and say who they are; once all world-1 have come,
 * with distinct ranks and the same world size, rank 0 sends each the payload's bytes (rank 0
 * fills payload before the call, the others receive it) and waits for each to confirm. Any rank
 * not done within timeout_s fails with an error naming what it waited for; a rank that says
 * another world size or a rank already seen is refused, and the meeting fails on rank 0. */
graft_status dist_rendezvous(const char *addr, int port, int rank, int world, void *payload,
                             size_t bytes, double timeout_s, graft_err *e);

/* The port of the meeting from the environment: GRAFT_RENDEZVOUS_PORT when set; else
 * MASTER_PORT, plus one under torchrun (TORCHELASTIC_USE_AGENT_STORE: its agent's store already
 * listens on MASTER_PORT on rank 0's host). An error names a missing or malformed variable. */
graft_status rendezvous_port_from_env(int *port, graft_err *e);

#endif
