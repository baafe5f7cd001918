/* fusion_groups.h: fused groups of nodes, for any backend: finding them once per placement (a
 * backend's fusion tables' match functions) and, at run time, holding back the calls of a
 * group's members until its last member, then running the group as one (or member by member
 * when the fused kernel declines). The CUDA backend (cuda_groups.c) and the CPU backend
 * (src/cpu/dnnl_fuse.c) use it through graft_backend.plan_groups and their run functions. */
#ifndef GRAFT_GRAPH_FUSION_GROUPS_H
#define GRAFT_GRAPH_FUSION_GROUPS_H

#include <stdbool.h>

#include "../ops/op.h"
#include "ir.h"

/* The most members a group may have. */
#define FUSION_GROUP_MAX 12

/* A fused group kind. The executor keeps every buffer a member reads or writes alive until the
 * group's last member has run; the backend records the calls of all but the last member and
 * runs the group at the last one. A value a member writes that only later members read need not
 * be written at all.
 *
 * match: does a group start at node `first` (run by this backend)? Fill members[0..n) with node
 * indices in graph order (members[0] == first), return n >= 2, or 0. Rules: every member runs
 * on this backend (on_backend); a value written by a member and read by a node outside the
 * group (or a graph output: readers counts it) must still be written by run; members need not
 * be consecutive in graph order.
 * run: calls[k] is member k's call; `backend` is the backend's impl. Set *handled = false
 * (GRAFT_OK) to have the members run one by one through their own kernels instead (a dtype or
 * shape the fused kernel lacks). *state is the group's, kept until the groups are freed. */
typedef struct fusion_rule {
    const char *name;
    int (*match)(const ir_graph *g, int first, const unsigned char *on_backend, const int *readers,
                 int *members, int max_members);
    graft_status (*run)(void *backend, const op_call *calls, int n_calls, void **state,
                        bool *handled);
    void (*free_state)(void *state);
} fusion_rule;

typedef struct fusion_groups fusion_groups;

/* Matching helpers the fusion tables share. An ONNX-domain, live node of type op? */
bool fusion_is_op(const ir_node *n, const char *op);
/* The node reading value v when it is v's only reader (one input slot of one node, and not a
 * graph output), run by this backend and of type `op`; else -1. Readers come after producer. */
int fusion_sole_reader(const ir_graph *g, int v, int producer, const unsigned char *on_be,
                       const int *readers, const char *op);
/* The reader of Conv `first`'s output when it is its only reader and of type `op` (an Add with
 * two inputs); else -1. */
int fusion_after_conv(const ir_graph *g, int first, const unsigned char *on_be, const int *readers,
                      const char *op);

/* One node through the backend's own kernel. */
typedef graft_status (*fusion_run_node_fn)(void *backend, int node_index, const op_call *call);
/* The "fused group ..." debug line, the first time a group runs fused; NULL: none. */
typedef void (*fusion_log_fn)(void *user, int level, const char *msg);

/* Find the groups of graph g: tables[0..n_tables) are fusion tables, each ending with a rule
 * whose name is NULL, tried in order at every node (in graph order) that on_backend marks.
 * Sets group_end[i] to the last member of node i's group (leaves it otherwise). NULL when out
 * of memory (then no groups: every node runs on its own). */
fusion_groups *fusion_groups_plan(const ir_graph *g, const unsigned char *on_backend,
                                  const int *readers, int *group_end,
                                  const fusion_rule *const *tables, int n_tables);
void fusion_groups_free(fusion_groups *gs);
/* Free the groups' kernel state (weights changed in place: graft_backend.release_state); the
 * groups stay, their state is made again on the next run. */
void fusion_groups_release_state(fusion_groups *gs);
bool fusion_in_group(const fusion_groups *gs, int node_index);
/* The rule name of the group node_index is the last member of (static storage), else NULL. */
const char *fusion_group_name(const fusion_groups *gs, int node_index);
/* The members (in graph order) of the group node_index is the last member of; 0 when none. */
int fusion_group_members(const fusion_groups *gs, int node_index, const int **members);
/* A member's call: recorded, and at the group's last member the group runs (through its rule,
 * or each member through run_node when the rule declines). */
graft_status fusion_group_step(fusion_groups *gs, void *backend, int node_index,
                               const op_call *call, fusion_run_node_fn run_node, fusion_log_fn log,
                               void *log_user);

#endif
