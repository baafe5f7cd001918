/* cuda_groups.c: fused groups on the GPU: the CUDA backend's fusion tables given to the generic
 * planning and deferred running of src/graph/fusion_groups.c. */
#include "cuda_groups.h"

static const cuda_fusion *const tables[] = {cuda_attention_fusions, cuda_bert_fusions,
                                            cuda_conv_fusions};

void cuda_groups_free(cuda_groups *gs) {
    fusion_groups_free(gs);
}

void cuda_plan_groups(void *impl, const ir_graph *g, const unsigned char *on_dev,
                      const int *readers, int *group_end) {
    cuda_backend *be = impl;
    cuda_groups_free(be->groups);
    cuda_plan_layouts(be, g, on_dev);
    /* NULL (out of memory): no groups, every node runs on its own */
    be->groups = fusion_groups_plan(g, on_dev, readers, group_end, tables,
                                    (int)(sizeof tables / sizeof *tables));
}

const char *cuda_group_name(void *impl, int node_index) {
    return fusion_group_name(((cuda_backend *)impl)->groups, node_index);
}

bool cuda_in_group(const cuda_backend *be, int node_index) {
    return fusion_in_group(be->groups, node_index);
}

static graft_status run_member(void *impl, int node_index, const op_call *call) {
    return cuda_run_node(impl, node_index, call);
}

graft_status cuda_group_step(cuda_backend *be, int node_index, const op_call *call) {
    return fusion_group_step(be->groups, be, node_index, call, run_member, be->log, be->log_user);
}
