/* exec_plans.c: the executor's memory plans, one per input-shape signature: the current one and a
 * cache of others (each with its CUDA-graph recording), and the arenas they all share. */
#include <stdlib.h>
#include <string.h>

#include "exec_internal.h"

int exec_signature_of(const ir_graph *g, const tensor *inputs, int64_t *sig) {
    int n = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        if (sig) sig[n] = inputs[i].ndim;
        n++;
        for (int d = 0; d < inputs[i].ndim; d++, n++)
            if (sig) sig[n] = inputs[i].dims[d];
    }
    return n;
}

static bool signature_matches(const executor *x, const exec_plan *p, const tensor *inputs) {
    if (!p->valid || x->g->n_inputs > 64) return false;
    int64_t sig[GRAFT_MAX_DIMS * 64 + 64];
    int n = exec_signature_of(x->g, inputs, sig);
    return n == p->signature_len && memcmp(sig, p->signature, sizeof(int64_t) * (size_t)n) == 0;
}

void exec_plan_free(executor *x, exec_plan *p) {
    exec_plan_graph_free(x, p);
    free(p->signature);
    free(p->offsets);
    free(p->bytes);
    free(p->view);
    memset(p, 0, sizeof *p);
}

/* Move the current plan into the cache (its recording's device copies of host inputs with it),
 * in a free slot or in place of the least recently run plan. Leaves no current plan. */
static void stash_current(executor *x) {
    exec_plan *cur = &x->plan;
    if (!cur->valid || x->plan_cache <= 0) {
        exec_plan_free(x, cur);
        return;
    }
    int slot = 0;
    for (int k = 0; k < x->plan_cache; k++) {
        if (!x->cached[k].valid) {
            slot = k;
            break;
        }
        if (x->cached[k].last_run < x->cached[slot].last_run) slot = k;
    }
    exec_plan_free(x, &x->cached[slot]);
    const ir_graph *g = x->g;
    if (cur->graph) {
        cur->input_copy = calloc((size_t)g->n_inputs + 1, sizeof *cur->input_copy);
        if (!cur->input_copy) exec_plan_graph_free(x, cur); /* keep the plan, not the recording */
    }
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        if (!x->copy_kept[v] || !x->copy[v]) continue;
        if (!cur->input_copy) { /* no recording reads it */
            exec_free_copy(x, v, true);
            continue;
        }
        cur->input_copy[i] = x->copy[v];
        x->copy[v] = NULL;
        x->copy_kept[v] = 0;
    }
    x->cached[slot] = *cur;
    memset(cur, 0, sizeof *cur);
}

bool exec_plan_select(executor *x, const tensor *inputs) {
    x->runs++;
    if (signature_matches(x, &x->plan, inputs)) {
        x->plan.last_run = x->runs;
        return true;
    }
    int found = -1;
    for (int k = 0; k < x->plan_cache && found < 0; k++)
        if (signature_matches(x, &x->cached[k], inputs)) found = k;
    if (found < 0) {
        stash_current(x); /* a new plan is learned from this run */
        return false;
    }
    exec_plan p = x->cached[found];
    memset(&x->cached[found], 0, sizeof x->cached[found]);
    stash_current(x);
    const ir_graph *g = x->g;
    for (int i = 0; p.input_copy && i < g->n_inputs; i++) {
        int v = g->inputs[i];
        if (!p.input_copy[i]) continue;
        exec_free_copy(x, v, true);
        x->copy[v] = p.input_copy[i];
        x->copy_kept[v] = 1;
    }
    free(p.input_copy);
    p.input_copy = NULL;
    p.last_run = x->runs;
    x->plan = p;
    x->plan_hits++;
    return true;
}

void exec_graphs_free_all(executor *x) {
    exec_plan_graph_free(x, &x->plan);
    for (int k = 0; k < EXEC_PLAN_CACHE; k++) exec_plan_graph_free(x, &x->cached[k]);
}

void exec_plans_free_all(executor *x) {
    exec_plan_free(x, &x->plan);
    for (int k = 0; k < EXEC_PLAN_CACHE; k++) exec_plan_free(x, &x->cached[k]);
    free(x->arena);
    if (x->device_arena) exec_buffer_free(x, true, x->device_arena);
    x->arena = x->device_arena = NULL;
    x->arena_cap = x->device_arena_cap = 0;
}

bool exec_arenas_ensure(executor *x) {
    const exec_plan *p = &x->plan;
    if (p->arena_bytes > x->arena_cap) {
        free(x->arena);
        x->arena = host_alloc_aligned((size_t)p->arena_bytes);
        x->arena_cap = x->arena ? p->arena_bytes : 0;
        if (!x->arena) return false;
    }
    if (x->device && p->device_arena_bytes > x->device_arena_cap) {
        exec_graphs_free_all(x); /* recordings point into the old arena */
        if (x->device_arena) exec_buffer_free(x, true, x->device_arena);
        x->device_arena = NULL;
        x->device_arena_cap = 0;
        if (exec_buffer_alloc(x, true, (size_t)p->device_arena_bytes, &x->device_arena, NULL) !=
            GRAFT_OK) {
            x->device_arena = NULL;
            return false; /* run from the heap, which may still fit */
        }
        x->device_arena_cap = p->device_arena_bytes;
    }
    return true;
}
