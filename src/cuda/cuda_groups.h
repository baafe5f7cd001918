/* cuda_groups.h: fused groups of nodes on the GPU (planning and deferred running). */
#ifndef GRAFT_CUDA_GROUPS_H
#define GRAFT_CUDA_GROUPS_H

#include "cuda_internal.h"

/* graft_backend.plan_groups for the CUDA backend. */
void cuda_plan_groups(void *impl, const ir_graph *g, const unsigned char *on_dev,
                      const int *readers, int *group_end);
void cuda_groups_free(cuda_groups *gs);
bool cuda_in_group(const cuda_backend *be, int node_index);
/* graft_backend.group_name for the CUDA backend. */
const char *cuda_group_name(void *impl, int node_index);
/* A member's call: recorded, and at the group's last member the group runs. */
graft_status cuda_group_step(cuda_backend *be, int node_index, const op_call *call);
/* One node through its own kernel (or the CPU fallback): cuda_backend.c. */
graft_status cuda_run_node(cuda_backend *be, int node_index, const op_call *call);

#endif
