/* launch.h: `graft finetune --nproc N`: re-launch under mpirun, and each rank's side of it (its
 * output and files left to rank 0). */
#ifndef GRAFT_CLI_LAUNCH_H
#define GRAFT_CLI_LAUNCH_H

#include <stdbool.h>

#include "graft.h"

/* With --nproc N > 1 in a process no launcher started: run `mpirun -np N <this graft> argv...`
 * (argv[0] the subcommand; --nproc dropped), wait for it and return 1 with its exit status in
 * *rc (a clear message when mpirun is missing or a rank failed). Under a launcher, --nproc must
 * match its world size (else *rc = 2 and 1). 0: run here. */
int launch_relaunch(int nproc, int argc, char **argv, int *rc);
/* Join the launch's ranks on ctx (graft_ctx_distribute); a rank other than 0 then sends its
 * stdout to /dev/null (rank 0 alone talks; errors still go to stderr). 0, or 1 after printing the
 * error. */
int launch_join(const char *cmd, graft_ctx *ctx);
/* Whether this process writes the run's files (checkpoints, report, export): rank 0. */
bool launch_writes(const graft_ctx *ctx);

#endif
