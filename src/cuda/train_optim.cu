// train_optim.cu: the optimizer step on the GPU: gradient norms and the inf/NaN check, the step's
// scalars (loss-scale update, clipping coefficient, bias corrections in double), and one fused
// kernel per parameter tensor for SGD, Adam/AdamW and LAMB, with the formulas of
// src/train/optim.c, src/train/loss_scale.c and clip_grad_norm. Element-wise math is fp32 with
// explicit roundings (no fused multiply-adds the CPU would not make); reductions are in double,
// in a fixed order.
#include <math.h>

#include "train_common.cuh"

using namespace train;

namespace {

// The gradient the update uses: unscaled (fp16), then clipped, in that order as on the CPU.
struct grad_view {
    float inv_scale, clip_coef;
    bool unscale, clip;
    __device__ grad_view(const train_state *st, int fp16)
        : inv_scale(st->inv_scale), clip_coef(st->clip_coef), unscale(fp16 != 0),
          clip(st->clip_apply != 0) {}
    __device__ float operator()(float g) const {
        if (unscale) g = __fmul_rn(g, inv_scale);
        if (clip) g = __fmul_rn(g, clip_coef);
        return g;
    }
};

__global__ void grad_check_kernel(const float *__restrict__ g, int64_t n, int fp16,
                                  double *partials, train_state *st) {
    float inv = fp16 ? (float)(1.0 / (double)st->scale) : 1.0f;
    double s = 0.0;
    int bad = 0;
    for (int64_t j = global_thread(); j < n; j += grid_threads()) {
        float v = g[j];
        if (fp16) {
            if (!isfinite(v)) bad = 1;
            v = __fmul_rn(v, inv);
        }
        s += (double)v * (double)v;
    }
    s = block_sum(s);
    if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr(&st->found_inf, 1);
    if (threadIdx.x == 0) partials[blockIdx.x] = s;
    if (blockIdx.x == 0)
        for (unsigned k = gridDim.x + threadIdx.x; k < TRAIN_PARTIALS; k += blockDim.x)
            partials[k] = 0.0;
}

// GradScaler's update (src/train/loss_scale.c), in fp32 like PyTorch.
__device__ void scaler_update(train_state *st, bool found_inf) {
    if (found_inf) {
        st->scale = st->scale * st->backoff_factor;
        st->growth_tracker = 0;
        return;
    }
    int64_t good = st->growth_tracker + 1;
    if (good >= st->growth_interval) {
        float grown = st->scale * st->growth_factor;
        if (isfinite(grown)) st->scale = grown;
        st->growth_tracker = 0;
    } else {
        st->growth_tracker = good;
    }
}

// clip_grad_norm: each tensor's norm in fp32, then the norm of the norms.
__device__ void clip_scalars(train_state *st, const double *norm2, int n_params, float max_norm) {
    double sum = 0.0;
    for (int p = 0; p < n_params; p++) {
        float norm_p = (float)sqrt(norm2[p * TRAIN_PARTIALS]);
        sum += (double)norm_p * (double)norm_p;
    }
    float total = (float)sqrt(sum);
    float coef = max_norm / (total + 1e-6f);
    st->total_norm = total;
    st->clip_apply = !(coef >= 1.0f); // a NaN total spreads to the gradients, as in PyTorch
    st->clip_coef = st->clip_apply ? coef : 1.0f;
}

// The warps sum the parameters' partials (parameter p's total into partials[p * TRAIN_PARTIALS]);
// thread 0 then settles the step.
__global__ void finalize_kernel(train_state *st, double *partials, train_step_args a) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    for (int p = warp; a.clip && p < a.n_params; p += warps) {
        double s = 0.0;
        for (int k = lane; k < TRAIN_PARTIALS; k += 32) s += partials[p * TRAIN_PARTIALS + k];
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
        __syncwarp();
        if (lane == 0) partials[p * TRAIN_PARTIALS] = s;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    st->inv_scale = (float)(1.0 / (double)st->scale); // before the update, as unscale uses it
    bool skip = a.fp16 && st->found_inf != 0;
    if (a.fp16) scaler_update(st, skip);
    st->found_inf = 0;
    st->skip = skip;
    st->clip_apply = 0;
    st->clip_coef = 1.0f;
    if (skip) {
        st->skipped++;
        return;
    }
    if (a.clip) clip_scalars(st, partials, a.n_params, a.max_norm);
    st->opt_steps++;
    double t = (double)st->opt_steps;
    st->first = st->opt_steps == 1;
    double bc1 = 1.0 - pow((double)a.beta1, t), bc2 = 1.0 - pow((double)a.beta2, t);
    st->step_size = (float)((double)a.lr / bc1);
    st->bias1 = bc1;
    st->bc2_sqrt = (float)sqrt(bc2);
    st->bc1 = (float)bc1;
    st->bc2 = (float)bc2;
}

__global__ void zero_kernel(float *g, int64_t n) {
    for (int64_t j = global_thread(); j < n; j += grid_threads()) g[j] = 0.0f;
}

__global__ void sgd_kernel(float *__restrict__ w, float *__restrict__ g, float *__restrict__ buf,
                           int64_t n, train_optim_args a, const train_state *st) {
    if (st->skip) {
        for (int64_t j = global_thread(); j < n; j += grid_threads()) g[j] = 0.0f;
        return;
    }
    grad_view view(st, a.fp16);
    bool first = st->first != 0;
    float keep = 1.0f - a.dampening;
    for (int64_t j = global_thread(); j < n; j += grid_threads()) {
        float d = view(g[j]);
        g[j] = 0.0f;
        if (a.weight_decay != 0.0f) d = __fadd_rn(d, __fmul_rn(a.weight_decay, w[j]));
        if (buf) {
            float b = first ? d : __fadd_rn(__fmul_rn(buf[j], a.momentum), __fmul_rn(keep, d));
            buf[j] = b;
            d = a.nesterov ? __fadd_rn(d, __fmul_rn(a.momentum, b)) : b;
        }
        w[j] = __fadd_rn(w[j], __fmul_rn(-a.lr, d));
    }
}

// torch.lerp: start + w*(end-start), from the nearer end for w >= 0.5.
__device__ inline float lerp_f(float start, float end, float w) {
    float diff = __fsub_rn(end, start);
    return w < 0.5f ? __fadd_rn(start, __fmul_rn(w, diff))
                    : __fsub_rn(end, __fmul_rn(diff, __fsub_rn(1.0f, w)));
}

// Scalars of the Adam family the host computes in double: 1 - beta1, 1 - beta2, 1 - lr*wd.
struct adam_consts {
    float w1, w2, decay_mul;
};

__global__ void adam_kernel(float *__restrict__ w, float *__restrict__ g, float *__restrict__ m,
                            float *__restrict__ v, float *__restrict__ vmax, int64_t n,
                            train_optim_args a, adam_consts k, const train_state *st) {
    if (st->skip) {
        for (int64_t j = global_thread(); j < n; j += grid_threads()) g[j] = 0.0f;
        return;
    }
    grad_view view(st, a.fp16);
    // the parameter's own rate over 1 - beta1^t, as optim.c rounds it
    float step_size = (float)((double)a.lr / st->bias1), bc2_sqrt = st->bc2_sqrt;
    bool decoupled = a.kind == TRAIN_OPT_ADAMW;
    for (int64_t j = global_thread(); j < n; j += grid_threads()) {
        float gj = view(g[j]), wj = w[j];
        g[j] = 0.0f;
        if (a.weight_decay != 0.0f) {
            if (decoupled)
                wj = __fmul_rn(wj, k.decay_mul);
            else
                gj = __fadd_rn(gj, __fmul_rn(a.weight_decay, wj));
        }
        float mj = lerp_f(m[j], gj, k.w1);
        float vj = __fadd_rn(__fmul_rn(v[j], a.beta2), __fmul_rn(k.w2, __fmul_rn(gj, gj)));
        m[j] = mj;
        v[j] = vj;
        float vv = vj;
        if (vmax) {
            float mx = vmax[j];
            if (vv > mx) mx = vv;
            vmax[j] = mx;
            vv = mx;
        }
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vv), bc2_sqrt), a.eps);
        w[j] = __fadd_rn(wj, __fmul_rn(-step_size, __fdiv_rn(mj, denom)));
    }
}

// LAMB's update direction: (m / bc1) / (sqrt(v / bc2) + eps) + wd * w.
__device__ inline float lamb_u(float mj, float vj, float wj, float bc1, float bc2, float eps,
                               float wd) {
    float r = __fdiv_rn(__fdiv_rn(mj, bc1), __fadd_rn(__fsqrt_rn(__fdiv_rn(vj, bc2)), eps));
    return __fadd_rn(r, __fmul_rn(wd, wj));
}

// First pass: the moments, and partial sums of ||w||^2 and ||u||^2 (w before the update).
__global__ void lamb_moments_kernel(const float *__restrict__ w, const float *__restrict__ g,
                                    float *__restrict__ m, float *__restrict__ v, int64_t n,
                                    train_optim_args a, adam_consts k, double *partials,
                                    const train_state *st) {
    if (st->skip) return;
    grad_view view(st, a.fp16);
    float bc1 = st->bc1, bc2 = st->bc2;
    double wn = 0.0, un = 0.0;
    for (int64_t j = global_thread(); j < n; j += grid_threads()) {
        float gj = view(g[j]);
        float mj = __fadd_rn(__fmul_rn(a.beta1, m[j]), __fmul_rn(k.w1, gj));
        float vj = __fadd_rn(__fmul_rn(a.beta2, v[j]), __fmul_rn(k.w2, __fmul_rn(gj, gj)));
        m[j] = mj;
        v[j] = vj;
        float u = lamb_u(mj, vj, w[j], bc1, bc2, a.eps, a.weight_decay);
        wn += (double)w[j] * (double)w[j];
        un += (double)u * (double)u;
    }
    wn = block_sum(wn);
    un = block_sum(un);
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = wn;
        partials[TRAIN_PARTIALS + blockIdx.x] = un;
    }
    if (blockIdx.x == 0)
        for (unsigned b = gridDim.x + threadIdx.x; b < TRAIN_PARTIALS; b += blockDim.x) {
            partials[b] = 0.0;
            partials[TRAIN_PARTIALS + b] = 0.0;
        }
}

// Second pass: the trust ratio ||w|| / ||u|| (1 when either is 0), then w -= lr * ratio * u.
__global__ void lamb_update_kernel(float *__restrict__ w, float *__restrict__ g,
                                   const float *__restrict__ m, const float *__restrict__ v,
                                   int64_t n, train_optim_args a, const double *partials,
                                   const train_state *st) {
    if (st->skip) {
        for (int64_t j = global_thread(); j < n; j += grid_threads()) g[j] = 0.0f;
        return;
    }
    __shared__ float scale_shared;
    double wn = threadIdx.x < TRAIN_PARTIALS ? partials[threadIdx.x] : 0.0;
    double un = threadIdx.x < TRAIN_PARTIALS ? partials[TRAIN_PARTIALS + threadIdx.x] : 0.0;
    wn = block_sum(wn);
    un = block_sum(un);
    if (threadIdx.x == 0) {
        float ratio = 1.0f;
        if (wn > 0.0 && un > 0.0) ratio = (float)(sqrt(wn) / sqrt(un));
        scale_shared = __fmul_rn(a.lr, ratio);
    }
    __syncthreads();
    float scale = scale_shared, bc1 = st->bc1, bc2 = st->bc2;
    for (int64_t j = global_thread(); j < n; j += grid_threads()) {
        float u = lamb_u(m[j], v[j], w[j], bc1, bc2, a.eps, a.weight_decay);
        w[j] = __fsub_rn(w[j], __fmul_rn(scale, u));
        g[j] = 0.0f;
    }
}

} // namespace

extern "C" cudaError_t train_grad_check(const float *g, int64_t n, int fp16, double *partials,
                                        train_state *st, cudaStream_t stream) {
    grad_check_kernel<<<blocks_for(n, TRAIN_PARTIALS), kThreads, 0, stream>>>(g, n, fp16, partials,
                                                                              st);
    return cudaGetLastError();
}

extern "C" cudaError_t train_step_finalize(train_state *st, double *partials, train_step_args a,
                                           cudaStream_t stream) {
    if (a.n_params < 0) return cudaErrorInvalidValue;
    int warps = a.n_params < 1 ? 1 : a.n_params > 32 ? 32 : a.n_params;
    finalize_kernel<<<1, 32u * (unsigned)warps, 0, stream>>>(st, partials, a);
    return cudaGetLastError();
}

__global__ void result_kernel(float *out, const train_state *st, int clip) {
    out[0] = st->skip ? 1.0f : 0.0f;
    out[1] = clip && !st->skip ? st->total_norm : 0.0f;
}

extern "C" cudaError_t train_step_result(float *out, const train_state *st, int clip,
                                         cudaStream_t stream) {
    result_kernel<<<1, 1, 0, stream>>>(out, st, clip);
    return cudaGetLastError();
}

extern "C" cudaError_t train_optim_update(float *w, float *g, float *s0, float *s1, float *s2,
                                          int64_t n, train_optim_args a, double *partials,
                                          const train_state *st, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    adam_consts k;
    k.w1 = (float)(1.0 - (double)a.beta1);
    k.w2 = (float)(1.0 - (double)a.beta2);
    k.decay_mul = (float)(1.0 - (double)a.lr * (double)a.weight_decay);
    switch (a.kind) {
    case TRAIN_OPT_SGD:
        sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, g, s0, n, a, st);
        break;
    case TRAIN_OPT_ADAM:
    case TRAIN_OPT_ADAMW:
        adam_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, g, s0, s1, s2, n, a, k, st);
        break;
    case TRAIN_OPT_LAMB:
        lamb_moments_kernel<<<blocks_for(n, TRAIN_PARTIALS), kThreads, 0, stream>>>(
            w, g, s0, s1, n, a, k, partials, st);
        lamb_update_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, g, s0, s1, n, a, partials,
                                                                   st);
        break;
    default:
        zero_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, n);
        return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}
