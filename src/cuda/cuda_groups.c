/* cuda_groups.c: fused groups on the GPU: finding them once per placement (the fusion tables'
 * match functions) and, at run time, holding back the calls of a group's members until its
 * last member, then running the group as one (or member by member when it declines). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_groups.h"

#define GROUP_IO 16
#define GROUP_MAX 12

typedef struct recorded {
    const tensor *in_p[GROUP_IO];
    tensor *out_p[GROUP_IO];
    tensor in[GROUP_IO], out[GROUP_IO];
    op_call call;
} recorded;

typedef struct group {
    const cuda_fusion *fusion;
    int n;
    int members[GROUP_MAX];
    recorded rec[GROUP_MAX];
    void *state;
    bool announced;
} group;

struct cuda_groups {
    int n_nodes;
    int *group_of; /* per node: group index or -1 */
    int *position; /* per node: its place in the group */
    group *groups;
    int n_groups;
};

static const cuda_fusion *const tables[] = {cuda_bert_fusions, cuda_conv_fusions};

void cuda_groups_free(cuda_groups *gs) {
    if (!gs) return;
    for (int i = 0; i < gs->n_groups; i++)
        if (gs->groups[i].state && gs->groups[i].fusion->free_state)
            gs->groups[i].fusion->free_state(gs->groups[i].state);
    free(gs->group_of);
    free(gs->position);
    free(gs->groups);
    free(gs);
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

static bool acceptable(const cuda_groups *gs, const ir_graph *g, const unsigned char *on_dev,
                       int first, const int *m, int n) {
    if (n < 2 || n > GROUP_MAX || m[0] != first) return false;
    for (int k = 0; k < n; k++) {
        if (m[k] < 0 || m[k] >= gs->n_nodes || !on_dev[m[k]] || gs->group_of[m[k]] >= 0)
            return false;
        if (k && m[k] <= m[k - 1]) return false;
    }
    return outside_readers_wait(g, m, n);
}

static void try_match(cuda_groups *gs, const ir_graph *g, int i, const unsigned char *on_dev,
                      const int *readers, int *group_end) {
    int m[GROUP_MAX];
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
        for (const cuda_fusion *f = tables[t]; f->name; f++) {
            int n = f->match(g, i, on_dev, readers, m, GROUP_MAX);
            if (!acceptable(gs, g, on_dev, i, m, n)) continue;
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

void cuda_plan_groups(void *impl, const ir_graph *g, const unsigned char *on_dev,
                      const int *readers, int *group_end) {
    cuda_backend *be = impl;
    cuda_groups_free(be->groups);
    be->groups = NULL;
    cuda_groups *gs = calloc(1, sizeof *gs);
    if (!gs) return; /* no groups: every node runs on its own */
    gs->n_nodes = g->n_nodes;
    gs->group_of = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    gs->position = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    gs->groups = calloc((size_t)g->n_nodes / 2 + 1, sizeof(group));
    if (!gs->group_of || !gs->position || !gs->groups) {
        cuda_groups_free(gs);
        return;
    }
    for (int i = 0; i < g->n_nodes; i++) gs->group_of[i] = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (on_dev[i] && gs->group_of[i] < 0 && gs->n_groups < g->n_nodes / 2)
            try_match(gs, g, i, on_dev, readers, group_end);
    be->groups = gs;
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

static void announce(cuda_backend *be, group *gr) {
    if (gr->announced || !be->log) return;
    gr->announced = true;
    char msg[256];
    snprintf(msg, sizeof msg, "fused group %s: %d nodes, '%s' .. '%s'", gr->fusion->name, gr->n,
             gr->rec[0].call.node->name ? gr->rec[0].call.node->name : "",
             gr->rec[gr->n - 1].call.node->name ? gr->rec[gr->n - 1].call.node->name : "");
    be->log(be->log_user, GRAFT_LOG_DEBUG, msg);
}

bool cuda_in_group(const cuda_backend *be, int node_index) {
    const cuda_groups *gs = be->groups;
    return gs && node_index < gs->n_nodes && gs->group_of[node_index] >= 0;
}

graft_status cuda_group_step(cuda_backend *be, int node_index, const op_call *call) {
    group *gr = &be->groups->groups[be->groups->group_of[node_index]];
    int k = be->groups->position[node_index];
    TRY(record(&gr->rec[k], call));
    if (k < gr->n - 1) return GRAFT_OK; /* held back until the last member */
    op_call calls[GROUP_MAX];
    for (int j = 0; j < gr->n; j++) calls[j] = gr->rec[j].call;
    bool handled = false;
    TRY(gr->fusion->run(be, calls, gr->n, &gr->state, &handled));
    if (handled) {
        announce(be, gr);
        return GRAFT_OK;
    }
    for (int j = 0; j < gr->n; j++) TRY(cuda_run_node(be, gr->members[j], &calls[j]));
    return GRAFT_OK;
}
