/* cpu_backend.h: the CPU backend: fast kernels (oneDNN, OpenMP) where present, reference
 * kernels for everything else. */
#ifndef GRAFT_CPU_BACKEND_H
#define GRAFT_CPU_BACKEND_H

#include <stdbool.h>

#include "../core/backend.h"
#include "../graph/fusion_groups.h"
#include "../graph/layout_plan.h"
#include "graft_config.h"

typedef struct cpu_backend {
    int num_threads;
    bool reference_only;
    void *dnnl_engine;        /* dnnl_engine_t, NULL without oneDNN */
    void *dnnl_stream;        /* dnnl_stream_t */
    bool pack_matmul_weights; /* MatMul's 2-D B packed once (GRAFT_CPU_PACK=0: not; diagnostic) */
    void **node_state;        /* per node index, owned by the fast kernel that made it */
    const struct cpu_fast_kernel **node_state_owner;
    int n_node_state;
    fusion_groups *groups; /* fused groups of the current placement (dnnl_fuse.c's rules) */
    fusion_log_fn log;     /* the "fused group" debug lines; NULL: none */
    void *log_user;
    layout_state layout; /* channels-last values of the placement (cpu_layout.c) */
    bool nchw_only;      /* GRAFT_CPU_LAYOUT=nchw: no channels-last activations (diagnostic) */
    /* MatMul's and Gemm's B may change in place between runs (a training graph's parameters):
     * their packed copy is made again on every run (the primitives are kept). Conv does not
     * follow it (its weights are checked by address and a sampled fingerprint). */
    bool weights_vary;
    /* bf16 inference (graft_model_set_precision): Conv computes with bf16 inputs and weights
     * (AVX512_BF16 or AMX kernels), float32 accumulation and outputs; the graph stays float32. */
    bool bf16_products;
} cpu_backend;

/* A fast kernel. It sets *handled = false (and returns GRAFT_OK) for cases it does not cover
 * (a dtype, an attribute combination), and the reference kernel runs instead. It may keep
 * per-node state in *state (created on first use, checked against the shapes on later calls). */
typedef graft_status (*cpu_fast_fn)(cpu_backend *be, const op_call *call, void **state,
                                    bool *handled);
typedef struct cpu_fast_kernel {
    const char *op;
    cpu_fast_fn run;
    void (*free_state)(void *state);
} cpu_fast_kernel;

const cpu_fast_kernel *cpu_fast_kernel_find(const char *op_type);

/* Channels-last f32 activations (cpu_layout.c): the plan for a placement; whether input k /
 * output k of a call is channels-last (logical dims (N, C, H, W), data (N, H, W, C)); one node
 * through its kernel when it takes its tensors' layouts, else on NCHW copies of them. */
void cpu_plan_layouts(cpu_backend *be, const ir_graph *g, const unsigned char *on_host);
bool cpu_in_nhwc(const cpu_backend *be, const op_call *c, int k);
bool cpu_out_nhwc(const cpu_backend *be, const op_call *c, int k);
graft_status cpu_run_layout(cpu_backend *be, int node_index, const op_call *call);
/* One node's fast kernel (*handled = false when it has none or declines), and one node through
 * its fast kernel or else its reference kernel, tensors taken as they are (cpu_backend.c). */
graft_status cpu_try_fast(cpu_backend *be, int node_index, const op_call *call, bool *handled);
graft_status cpu_run_plain(cpu_backend *be, int node_index, const op_call *call);

graft_status cpu_backend_create(int num_threads, bool reference_only, graft_backend *out,
                                graft_err *e);
/* Whether this CPU (and build) computes bf16 products fast: AVX512_BF16 or AMX through oneDNN.
 * why (size bytes) says what is missing when not. */
bool cpu_backend_bf16_capable(char *why, size_t size);
/* bf16 products on (cpu_backend.bf16_products) or off; kernel state is dropped so every Conv
 * rebuilds. An error when on and not cpu_backend_bf16_capable. */
graft_status cpu_backend_set_bf16(graft_backend *b, bool on, graft_err *e);
/* Where the backend's debug lines go (the fused groups it runs); NULL: nowhere. */
void cpu_backend_set_log(graft_backend *b, fusion_log_fn log, void *user);

#if GRAFT_HAVE_DNNL
/* oneDNN fast kernels (src/cpu/dnnl_*.c). */
graft_status dnnl_backend_init(cpu_backend *be, graft_err *e);
/* oneDNN's ISA on this CPU has bf16 products (AVX512_BF16 or AMX). */
bool dnnl_bf16_capable(void);
void dnnl_backend_fini(cpu_backend *be);
graft_status dnnl_run_Conv(cpu_backend *be, const op_call *call, void **state, bool *handled);
/* The f32 activations through oneDNN's eltwise primitive (dnnl_eltwise.c). */
graft_status dnnl_run_Eltwise(cpu_backend *be, const op_call *call, void **state, bool *handled);
/* What a fused Conv group adds after the convolution (dnnl_fuse.c): + a residual of Y's shape,
 * then an activation (act: a oneDNN eltwise algorithm, dnnl_alg_kind_t; 0: none). */
typedef struct dnnl_conv_post {
    bool add;
    int act;
    float alpha, beta; /* the activation's parameters, as oneDNN's eltwise takes them */
} dnnl_conv_post;
/* oneDNN's eltwise algorithm (as an int) and parameters for an activation call (Relu, Clip,
 * Sigmoid, HardSwish, ...; dnnl_eltwise.c); false when it has none computing what ONNX says. */
bool dnnl_eltwise_alg(const op_call *call, int *alg, float *alpha, float *beta);
/* Whether dnnl_conv_run takes this Conv call at all (f32, 1-D to 3-D, oneDNN present); it may
 * still decline the case (*handled = false) when oneDNN has no fast kernel for it. */
bool dnnl_conv_covers(const cpu_backend *be, const op_call *call);
/* Conv with post-ops: out[0] of `call` receives conv(X, W) + B [+ residual] [then ReLU]. */
graft_status dnnl_conv_run(cpu_backend *be, const op_call *call, const dnnl_conv_post *post,
                           const tensor *residual, void **state, bool *handled);
/* The CPU's fused Conv groups (dnnl_fuse.c), ending with a rule whose name is NULL. */
extern const fusion_rule dnnl_conv_fusions[];
/* BERT's MatMul -> Add(bias) [-> GELU] as one oneDNN matmul (src/cpu/dnnl_fuse_bert.c). */
extern const fusion_rule dnnl_bert_fusions[];

/* What follows a linear layer's bias in its product (a post-op). */
typedef enum dnnl_linear_act {
    DNNL_ACT_NONE,
    DNNL_ACT_GELU_ERF,
    DNNL_ACT_GELU_TANH
} dnnl_linear_act;
/* y = act(A B + bias) for the MatMul call c (A (..., K), 2-D constant B (K, N), bias (N) or
 * NULL) as oneDNN's matmul with B packed once; y has the MatMul output's size. *handled
 * = false for what it does not cover (dtypes, shapes, no oneDNN). state: the caller's slot. */
graft_status dnnl_run_linear(cpu_backend *be, const op_call *c, const tensor *bias,
                             dnnl_linear_act act, tensor *y, void **state, bool *handled);
graft_status dnnl_run_MatMul(cpu_backend *be, const op_call *call, void **state, bool *handled);
graft_status dnnl_run_Gemm(cpu_backend *be, const op_call *call, void **state, bool *handled);
graft_status dnnl_run_MaxPool(cpu_backend *be, const op_call *call, void **state, bool *handled);
graft_status dnnl_run_AveragePool(cpu_backend *be, const op_call *call, void **state,
                                  bool *handled);
/* The Backward node's f32 gradients of Gemm, MatMul and Conv through oneDNN's sgemm
 * (dnnl_backward.c); *handled = false for other forward ops and dtypes. No state. */
graft_status dnnl_run_Backward(cpu_backend *be, const op_call *call, void **state, bool *handled);
void dnnl_free_state(void *state);
#endif

#endif
