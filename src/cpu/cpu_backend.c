/* cpu_backend.c: the CPU backend: dispatches each node to a fast kernel (oneDNN) when one covers
 * the case, else to the op's reference kernel; keeps the fast kernels' per-node state. */
#include "cpu_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graft_config.h"

static const cpu_fast_kernel fast_kernels[] = {
#if GRAFT_HAVE_DNNL
    {"Conv", dnnl_run_Conv, dnnl_free_state},
    {"MatMul", dnnl_run_MatMul, dnnl_free_state},
    {"Gemm", dnnl_run_Gemm, dnnl_free_state},
    {"MaxPool", dnnl_run_MaxPool, dnnl_free_state},
    {"AveragePool", dnnl_run_AveragePool, dnnl_free_state},
    {"Sigmoid", dnnl_run_Eltwise, dnnl_free_state},
    {"Tanh", dnnl_run_Eltwise, dnnl_free_state},
    {"Elu", dnnl_run_Eltwise, dnnl_free_state},
    {"HardSwish", dnnl_run_Eltwise, dnnl_free_state},
    {"Mish", dnnl_run_Eltwise, dnnl_free_state},
    {"Log", dnnl_run_Eltwise, dnnl_free_state},
    {"Sqrt", dnnl_run_Eltwise, dnnl_free_state},
    {"Gelu", dnnl_run_Eltwise, dnnl_free_state},
    {"Backward", dnnl_run_Backward, NULL}, /* f32 Gemm, MatMul, Conv; half Casts */
#endif
    {NULL, NULL, NULL},
};

const cpu_fast_kernel *cpu_fast_kernel_find(const char *op_type) {
    for (const cpu_fast_kernel *k = fast_kernels; k->op; k++)
        if (strcmp(k->op, op_type) == 0) return k;
    return NULL;
}

static graft_status cpu_alloc(void *impl, size_t bytes, void **out, graft_err *e) {
    (void)impl;
    *out = calloc(1, bytes ? bytes : 1);
    if (!*out)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of host memory allocating %zu bytes", bytes);
    return GRAFT_OK;
}

static void cpu_free(void *impl, void *ptr) {
    (void)impl;
    free(ptr);
}

static bool cpu_supports(void *impl, const ir_node *node) {
    (void)impl;
    return op_find(node->op_type) != NULL; /* the CPU backend runs every op graft knows */
}

static graft_status grow_state(cpu_backend *be, int node_index, graft_err *e) {
    if (node_index < be->n_node_state) return GRAFT_OK;
    int n = node_index + 64;
    void **s = realloc(be->node_state, sizeof(void *) * (size_t)n);
    if (!s) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for kernel state");
    be->node_state = s;
    const cpu_fast_kernel **o = realloc(be->node_state_owner, sizeof(*o) * (size_t)n);
    if (!o) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for kernel state");
    be->node_state_owner = o;
    for (int i = be->n_node_state; i < n; i++) {
        be->node_state[i] = NULL;
        be->node_state_owner[i] = NULL;
    }
    be->n_node_state = n;
    return GRAFT_OK;
}

graft_status cpu_try_fast(cpu_backend *be, int node_index, const op_call *call, bool *handled) {
    *handled = false;
    if (be->reference_only) return GRAFT_OK;
    const cpu_fast_kernel *k = cpu_fast_kernel_find(call->node->op_type);
    if (!k) return GRAFT_OK;
    TRY(grow_state(be, node_index, call->err));
    TRY(k->run(be, call, &be->node_state[node_index], handled));
    if (be->node_state[node_index]) be->node_state_owner[node_index] = k;
    return GRAFT_OK;
}

graft_status cpu_run_plain(cpu_backend *be, int node_index, const op_call *call) {
    bool handled = false;
    TRY(cpu_try_fast(be, node_index, call, &handled));
    return handled ? GRAFT_OK : call->node->op->reference(call);
}

/* One node through its fast kernel, else its reference kernel (on NCHW copies where needed). */
static graft_status cpu_run_node(void *impl, int node_index, const op_call *call) {
    return cpu_run_layout(impl, node_index, call);
}

static graft_status cpu_run(void *impl, int node_index, const op_call *call) {
    cpu_backend *be = impl;
    if (fusion_in_group(be->groups, node_index))
        return fusion_group_step(be->groups, be, node_index, call, cpu_run_node, be->log,
                                 be->log_user);
    return cpu_run_node(be, node_index, call);
}

static const char *cpu_group_name(void *impl, int node_index) {
    return fusion_group_name(((cpu_backend *)impl)->groups, node_index);
}

/* graft_backend.group_inplace_input: a Conv -> Add [-> activation] group's residual, which the
 * convolution then adds where it lies (dnnl_conv_run copies nothing), when no other member reads
 * it. */
static int cpu_group_inplace_input(void *impl, const ir_graph *g, int node_index) {
    cpu_backend *be = impl;
    const char *name = fusion_group_name(be->groups, node_index);
    const int *m = NULL;
    int n = fusion_group_members(be->groups, node_index, &m);
    if (!name || strncmp(name, "conv_add", 8) != 0 || n < 2) return -1;
    const ir_node *add = &g->nodes[m[1]];
    int y = g->nodes[m[0]].outputs[0];
    if (add->n_in != 2 || y < 0) return -1;
    int r = add->inputs[0] == y ? add->inputs[1] : add->inputs[1] == y ? add->inputs[0] : -1;
    for (int k = 0; k < n && r >= 0; k++)
        for (int i = 0; i < g->nodes[m[k]].n_in; i++)
            if (k != 1 && g->nodes[m[k]].inputs[i] == r) return -1;
    return r;
}

/* graft_backend.plan_groups: the oneDNN fused groups, BERT's linear layers and Conv's (none with
 * reference kernels only). */
static void cpu_plan_groups(void *impl, const ir_graph *g, const unsigned char *on_host,
                            const int *readers, int *group_end) {
    cpu_backend *be = impl;
    fusion_groups_free(be->groups);
    be->groups = NULL;
#if GRAFT_HAVE_DNNL
    static const fusion_rule *const tables[] = {dnnl_bert_fusions, dnnl_conv_fusions};
    cpu_plan_layouts(be, g, on_host);
    if (be->reference_only || !be->dnnl_engine) return;
    be->groups = fusion_groups_plan(g, on_host, readers, group_end, tables,
                                    (int)(sizeof tables / sizeof *tables));
#else
    (void)g;
    (void)on_host;
    (void)readers;
    (void)group_end;
#endif
}

void cpu_backend_set_log(graft_backend *b, fusion_log_fn log, void *user) {
    cpu_backend *be = b->impl;
    be->log = log;
    be->log_user = user;
}

static void cpu_release_state(void *impl) {
    cpu_backend *be = impl;
    for (int i = 0; i < be->n_node_state; i++) {
        if (be->node_state[i] && be->node_state_owner[i] && be->node_state_owner[i]->free_state)
            be->node_state_owner[i]->free_state(be->node_state[i]);
        be->node_state[i] = NULL;
        be->node_state_owner[i] = NULL;
    }
    fusion_groups_release_state(be->groups);
}

static graft_status cpu_synchronize(void *impl, graft_err *e) {
    (void)impl;
    (void)e;
    return GRAFT_OK;
}

static void cpu_destroy(void *impl) {
    cpu_backend *be = impl;
    if (!be) return;
    cpu_release_state(be);
    fusion_groups_free(be->groups);
    layout_state_free(&be->layout);
    free(be->node_state);
    free(be->node_state_owner);
#if GRAFT_HAVE_DNNL
    dnnl_backend_fini(be);
#endif
    free(be);
}

bool cpu_backend_bf16_capable(char *why, size_t size) {
#if GRAFT_HAVE_DNNL
    if (dnnl_bf16_capable()) return true;
    snprintf(why, size,
             "this CPU has neither AVX512_BF16 nor AMX (graft list their use as "
             "`graft devices` features)");
#else
    snprintf(why, size, "this graft was built without oneDNN");
#endif
    return false;
}

graft_status cpu_backend_set_bf16(graft_backend *b, bool on, graft_err *e) {
    cpu_backend *be = b->impl;
    char why[160];
    if (on && (be->reference_only || !cpu_backend_bf16_capable(why, sizeof why)))
        return err_set(e, GRAFT_E_UNSUPPORTED, "bfloat16 inference on the CPU: %s; it runs in fp32",
                       be->reference_only ? "the reference kernels compute in fp32" : why);
    if (be->bf16_products == on) return GRAFT_OK;
    be->bf16_products = on;
    cpu_release_state(be);
    return GRAFT_OK;
}

graft_status cpu_backend_create(int num_threads, bool reference_only, graft_backend *out,
                                graft_err *e) {
    cpu_backend *be = calloc(1, sizeof *be);
    if (!be) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory creating the CPU backend");
    be->num_threads = num_threads;
    be->reference_only = reference_only;
    const char *pack = getenv("GRAFT_CPU_PACK");
    be->pack_matmul_weights = !(pack && strcmp(pack, "0") == 0);
    const char *layout = getenv("GRAFT_CPU_LAYOUT");
    be->nchw_only = layout && strcmp(layout, "nchw") == 0;
#if GRAFT_HAVE_DNNL
    if (!reference_only) {
        graft_status st = dnnl_backend_init(be, e);
        if (st != GRAFT_OK) {
            free(be);
            return st;
        }
    }
#endif
    *out = (graft_backend){.name = "cpu",
                           .impl = be,
                           .is_device = false,
                           .alloc = cpu_alloc,
                           .free = cpu_free,
                           .supports = cpu_supports,
                           .run = cpu_run,
                           .release_state = cpu_release_state,
                           .synchronize = cpu_synchronize,
                           .plan_groups = cpu_plan_groups,
                           .group_name = cpu_group_name,
                           .group_inplace_input = cpu_group_inplace_input,
                           .destroy = cpu_destroy};
    return GRAFT_OK;
}
