/* norm.h: what InstanceNormalization and GroupNormalization derive from a node, shared by shape
 * inference and the kernels. */
#ifndef GRAFT_OPS_NORM_H
#define GRAFT_OPS_NORM_H

#include "shape_plan.h"

/* GroupNormalization's num_groups (checked against `channels`, -1: unknown) and whether scale
 * and bias are per channel (opset 21) or per group (opset 18). */
graft_status group_norm_params(const ir_node *node, int64_t channels, int64_t *groups,
                               bool *per_channel, graft_err *e);

#endif
