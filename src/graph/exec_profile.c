/* exec_profile.c: time per op type when profiling is on: each device node's device time (between
 * marks in the device's queue) or host node's wall time, summed by op type over runs. A fused
 * group's time lands on its last member and is listed under the group's name (e.g. conv_add_act);
 * its other members show only their bookkeeping. Profiling runs node by node (no CUDA graph
 * replay). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec_internal.h"

double exec_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *exec_profile_label(const executor *x, int node_index) {
    const graft_backend *be = x->node_on_dev && x->node_on_dev[node_index] ? x->device : x->be;
    const char *group = be && be->group_name ? be->group_name(be->impl, node_index) : NULL;
    return group ? group : x->g->nodes[node_index].op->name;
}

/* The entry of label op (made when new); NULL when the table is full. */
static graft_op_time *profile_entry(exec_profile *p, const char *op) {
    int i = 0;
    while (i < p->n && strcmp(p->ops[i].op, op) != 0) i++;
    if (i == p->n) {
        if (p->n == EXEC_PROFILE_MAX) return NULL;
        p->ops[p->n++] = (graft_op_time){op, 0, 0.0, 0.0};
    }
    return &p->ops[i];
}

void exec_profile_add(executor *x, const char *op, double seconds) {
    graft_op_time *t = profile_entry(&x->profile, op);
    if (!t) return;
    t->count++;
    t->seconds += seconds;
}

void exec_profile_add_flops(executor *x, int node_index, double flops) {
    int end = x->group_end ? x->group_end[node_index] : node_index;
    graft_op_time *t = profile_entry(&x->profile, exec_profile_label(x, end));
    if (t) t->flops += flops;
}

static int by_time_desc(const void *a, const void *b) {
    const graft_op_time *x = a, *y = b;
    return (x->seconds < y->seconds) - (x->seconds > y->seconds);
}

int exec_profile_get(const executor *x, graft_op_time *out, int max) {
    const exec_profile *p = &x->profile;
    graft_op_time sorted[EXEC_PROFILE_MAX];
    memcpy(sorted, p->ops, sizeof(graft_op_time) * (size_t)p->n);
    qsort(sorted, (size_t)p->n, sizeof *sorted, by_time_desc);
    int n = p->n < max ? p->n : max;
    if (out) memcpy(out, sorted, sizeof(graft_op_time) * (size_t)n);
    return p->n;
}
