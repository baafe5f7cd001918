/* fusion_groups.c: fused groups for any backend: finding them once per placement (the fusion
 * tables' match functions) and, at run time, holding back the calls of a group's members until
 * its last member, then running the group as one (or member by member when it declines). */
#include "fusion_groups.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUP_IO 16

typedef struct recorded {
    const tensor *in_p[GROUP_IO];
    tensor *out_p[GROUP_IO];
    tensor in[GROUP_IO], out[GROUP_IO];
    op_call call;
} recorded;

typedef struct group {
    const fusion_rule *fusion;
    int n;
    int members[FUSION_GROUP_MAX];
    recorded rec[FUSION_GROUP_MAX];
    void *state;
    bool announced;
} group;

struct fusion_groups {
    int n_nodes;
    int *group_of; /* per node: group index or -1 */
    int *position; /* per node: its place in the group */
    group *groups;
    int n_groups;
};

void fusion_groups_free(fusion_groups *gs) {
    if (!gs) return;
    for (int i = 0; i < gs->n_groups; i++)
        if (gs->groups[i].state && gs->groups[i].fusion->free_state)
            gs->groups[i].fusion->free_state(gs->groups[i].state);
    free(gs->group_of);
    free(gs->position);
    free(gs->groups);
    free(gs);
}

void fusion_groups_release_state(fusion_groups *gs) {
    if (!gs) return;
    for (int i = 0; i < gs->n_groups; i++) {
        if (gs->groups[i].state && gs->groups[i].fusion->free_state)
            gs->groups[i].fusion->free_state(gs->groups[i].state);
        gs->groups[i].state = NULL;
    }
}

bool fusion_is_op(const ir_node *n, const char *op) {
    bool onnx_domain = !n->domain || !n->domain[0] || strcmp(n->domain, "ai.onnx") == 0;
    return onnx_domain && !n->dead && strcmp(n->op_type, op) == 0;
}

int fusion_sole_reader(const ir_graph *g, int v, int producer, const unsigned char *on_be,
                       const int *readers, const char *op) {
    if (v < 0 || readers[v] != 1) return -1;
    for (int i = producer + 1; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->inputs[k] == v) return on_be[i] && fusion_is_op(n, op) ? i : -1;
    }
    return -1;
}

int fusion_after_conv(const ir_graph *g, int first, const unsigned char *on_be, const int *readers,
                      const char *op) {
    const ir_node *c = &g->nodes[first];
    if (!fusion_is_op(c, "Conv") || !on_be[first] || c->n_in < 2 || c->n_out != 1) return -1;
    int r = fusion_sole_reader(g, c->outputs[0], first, on_be, readers, op);
    if (r < 0) return -1;
    const ir_node *n = &g->nodes[r];
    if (n->n_out != 1 || n->outputs[0] < 0) return -1;
    if (strcmp(op, "Add") == 0 && (n->n_in != 2 || n->inputs[0] < 0 || n->inputs[1] < 0)) return -1;
    return r;
}

static bool is_member(const int *m, int n, int node) {
    for (int k = 0; k < n; k++)
        if (m[k] == node) return true;
    return false;
}

/* What an earlier member writes exists only once the last member has run: a node outside the
 * group may read it only after that. */
static bool outside_readers_wait(const ir_graph *g, const int *m, int n) {
    for (int k = 0; k < n - 1; k++) {
        const ir_node *member = &g->nodes[m[k]];
        for (int o = 0; o < member->n_out; o++) {
            int v = member->outputs[o];
            if (v < 0) continue;
            for (int j = m[0] + 1; j < m[n - 1]; j++) {
                if (is_member(m, n, j)) continue;
                for (int i = 0; i < g->nodes[j].n_in; i++)
                    if (g->nodes[j].inputs[i] == v) return false;
            }
        }
    }
    return true;
}

static bool acceptable(const fusion_groups *gs, const ir_graph *g, const unsigned char *on_be,
                       int first, const int *m, int n) {
    if (n < 2 || n > FUSION_GROUP_MAX || m[0] != first) return false;
    for (int k = 0; k < n; k++) {
        if (m[k] < 0 || m[k] >= gs->n_nodes || !on_be[m[k]] || gs->group_of[m[k]] >= 0)
            return false;
        if (k && m[k] <= m[k - 1]) return false;
    }
    return outside_readers_wait(g, m, n);
}

static void try_match(fusion_groups *gs, const ir_graph *g, int i, const unsigned char *on_be,
                      const int *readers, int *group_end, const fusion_rule *const *tables,
                      int n_tables) {
    int m[FUSION_GROUP_MAX];
    for (int t = 0; t < n_tables; t++)
        for (const fusion_rule *f = tables[t]; f->name; f++) {
            int n = f->match(g, i, on_be, readers, m, FUSION_GROUP_MAX);
            if (!acceptable(gs, g, on_be, i, m, n)) continue;
            group *gr = &gs->groups[gs->n_groups];
            memset(gr, 0, sizeof *gr);
            gr->fusion = f;
            gr->n = n;
            for (int k = 0; k < n; k++) {
                gr->members[k] = m[k];
                gs->group_of[m[k]] = gs->n_groups;
                gs->position[m[k]] = k;
                group_end[m[k]] = m[n - 1];
            }
            gs->n_groups++;
            return;
        }
}

fusion_groups *fusion_groups_plan(const ir_graph *g, const unsigned char *on_backend,
                                  const int *readers, int *group_end,
                                  const fusion_rule *const *tables, int n_tables) {
    fusion_groups *gs = calloc(1, sizeof *gs);
    if (!gs) return NULL;
    gs->n_nodes = g->n_nodes;
    gs->group_of = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    gs->position = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    gs->groups = calloc((size_t)g->n_nodes / 2 + 1, sizeof(group));
    if (!gs->group_of || !gs->position || !gs->groups) {
        fusion_groups_free(gs);
        return NULL;
    }
    for (int i = 0; i < g->n_nodes; i++) gs->group_of[i] = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (on_backend[i] && gs->group_of[i] < 0 && gs->n_groups < g->n_nodes / 2)
            try_match(gs, g, i, on_backend, readers, group_end, tables, n_tables);
    return gs;
}

static graft_status record(recorded *r, const op_call *c) {
    if (c->n_in > GROUP_IO || c->n_out > GROUP_IO)
        return op_error(c->node, c->err, GRAFT_E_INTERNAL, "too many inputs for a fused group");
    for (int k = 0; k < c->n_in; k++) {
        if (c->in[k]) r->in[k] = *c->in[k];
        r->in_p[k] = c->in[k] ? &r->in[k] : NULL;
    }
    for (int k = 0; k < c->n_out; k++) {
        if (c->out[k]) r->out[k] = *c->out[k];
        r->out_p[k] = c->out[k] ? &r->out[k] : NULL;
    }
    r->call = (op_call){c->node, r->in_p, c->n_in, r->out_p, c->n_out, c->err};
    return GRAFT_OK;
}

static void announce(group *gr, fusion_log_fn log, void *log_user) {
    if (gr->announced || !log) return;
    gr->announced = true;
    char msg[256];
    snprintf(msg, sizeof msg, "fused group %s: %d nodes, '%s' .. '%s'", gr->fusion->name, gr->n,
             gr->rec[0].call.node->name ? gr->rec[0].call.node->name : "",
             gr->rec[gr->n - 1].call.node->name ? gr->rec[gr->n - 1].call.node->name : "");
    log(log_user, GRAFT_LOG_DEBUG, msg);
}

bool fusion_in_group(const fusion_groups *gs, int node_index) {
    return gs && node_index >= 0 && node_index < gs->n_nodes && gs->group_of[node_index] >= 0;
}

const char *fusion_group_name(const fusion_groups *gs, int node_index) {
    if (!fusion_in_group(gs, node_index)) return NULL;
    const group *gr = &gs->groups[gs->group_of[node_index]];
    return gr->members[gr->n - 1] == node_index ? gr->fusion->name : NULL;
}

int fusion_group_members(const fusion_groups *gs, int node_index, const int **members) {
    if (!fusion_in_group(gs, node_index)) return 0;
    const group *gr = &gs->groups[gs->group_of[node_index]];
    if (gr->members[gr->n - 1] != node_index) return 0;
    *members = gr->members;
    return gr->n;
}

graft_status fusion_group_step(fusion_groups *gs, void *backend, int node_index,
                               const op_call *call, fusion_run_node_fn run_node, fusion_log_fn log,
                               void *log_user) {
    group *gr = &gs->groups[gs->group_of[node_index]];
    int k = gs->position[node_index];
    TRY(record(&gr->rec[k], call));
    if (k < gr->n - 1) return GRAFT_OK; /* held back until the last member */
    op_call calls[FUSION_GROUP_MAX];
    for (int j = 0; j < gr->n; j++) calls[j] = gr->rec[j].call;
    bool handled = false;
    TRY(gr->fusion->run(backend, calls, gr->n, &gr->state, &handled));
    if (handled) {
        announce(gr, log, log_user);
        return GRAFT_OK;
    }
    for (int j = 0; j < gr->n; j++) TRY(run_node(backend, gr->members[j], &calls[j]));
    return GRAFT_OK;
}
