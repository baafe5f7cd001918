// train.cu: the head's forward and backward on the GPU: batch gathers, rounding to the compute
// precision, activations with dropout, bias gradients, and the losses (softmax cross-entropy with
// label smoothing and class weights, BCE with logits, MSE) with their gradients. The formulas
// are those of src/train/head.c, src/ops/grad_rules.c and src/train/loss.c: forward activations
// in fp32 like the CPU reference kernels, slopes and losses in double like the grad rules.
#include <math.h>

#include "train_common.cuh"

using namespace train;

namespace {

constexpr int kRowThreads = 128; // one block per row of logits

__global__ void gather_rows_kernel(float *__restrict__ dst, const float *__restrict__ src,
                                   const int64_t *__restrict__ idx, int64_t cols, int64_t total,
                                   int round) {
    for (int64_t i = global_thread(); i < total; i += grid_threads()) {
        int64_t r = i / cols, j = i - r * cols;
        dst[i] = round_to(src[idx[r] * cols + j], round);
    }
}

__global__ void gather_i64_kernel(int64_t *__restrict__ dst, const int64_t *__restrict__ src,
                                  const int64_t *__restrict__ idx, int64_t m) {
    for (int64_t i = global_thread(); i < m; i += grid_threads()) dst[i] = src[idx[i]];
}

__global__ void round_kernel(float *dst, const float *src, int64_t n, int round) {
    for (int64_t i = global_thread(); i < n; i += grid_threads()) dst[i] = round_to(src[i], round);
}

// splitmix64 of the element's counter: a dropout mask that needs no state and that the backward
// pass regenerates instead of storing.
__device__ inline bool dropout_keep(uint64_t seed, int64_t i, float p) {
    uint64_t z = seed + (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    double u = (double)(z >> 11) * (1.0 / 9007199254740992.0);
    return u >= (double)p;
}

// The CPU reference kernels' fp32 formulas (src/cpu/ref/elementwise.c); the explicit roundings
// keep nvcc from fusing multiply-adds that the CPU rounds separately.
__device__ inline float act_value(int act, float v) {
    switch (act) {
    case TRAIN_ACT_GELU:
        return __fmul_rn(__fmul_rn(0.5f, v),
                         __fadd_rn(1.0f, erff(__fmul_rn(v, 0.7071067811865476f))));
    case TRAIN_ACT_TANH:
        return tanhf(v);
    default:
        return v < 0.0f ? 0.0f : v;
    }
}

// d(act)/dz in double, as src/ops/grad_rules.c's unary_slope.
__device__ inline double act_slope(int act, double x) {
    switch (act) {
    case TRAIN_ACT_GELU: {
        double cdf = 0.5 * (1.0 + erf(x / sqrt(2.0)));
        double pdf = exp(-0.5 * x * x) / sqrt(2.0 * 3.14159265358979323846);
        return cdf + x * pdf;
    }
    case TRAIN_ACT_TANH: {
        double t = tanh(x);
        return 1.0 - t * t;
    }
    default:
        return x > 0.0 ? 1.0 : 0.0;
    }
}

__global__ void act_forward_kernel(float *__restrict__ y, float *__restrict__ z, int64_t n, int act,
                                   float p, uint64_t seed, int round) {
    float scale = 1.0f / (1.0f - p);
    for (int64_t i = global_thread(); i < n; i += grid_threads()) {
        float zv = round_to(z[i], round);
        z[i] = zv;
        float a = round_to(act_value(act, zv), round);
        // The CPU rounds the dropped-out values as the next layer's input: the same here.
        if (p > 0.0f) a = round_to(dropout_keep(seed, i, p) ? __fmul_rn(a, scale) : 0.0f, round);
        y[i] = a;
    }
}

__global__ void act_backward_kernel(float *__restrict__ g, const float *__restrict__ z, int64_t n,
                                    int act, float p, uint64_t seed, int round) {
    float scale = 1.0f / (1.0f - p);
    for (int64_t i = global_thread(); i < n; i += grid_threads()) {
        float d = g[i];
        if (p > 0.0f) d = dropout_keep(seed, i, p) ? __fmul_rn(d, scale) : 0.0f;
        g[i] = round_to((float)((double)d * act_slope(act, (double)z[i])), round);
    }
}

// One thread per column: the rows are summed in order, in double (as grad_Gemm's reduction).
__global__ void colsum_add_kernel(float *__restrict__ acc, const float *__restrict__ g, int64_t m,
                                  int64_t cols, int round) {
    for (int64_t j = global_thread(); j < cols; j += grid_threads()) {
        double s = 0.0;
        for (int64_t r = 0; r < m; r++) s += (double)g[r * cols + j];
        acc[j] = __fadd_rn(acc[j], round_to((float)s, round));
    }
}

__global__ void add_rounded_kernel(float *__restrict__ acc, const float *__restrict__ v, int64_t n,
                                   int round) {
    for (int64_t i = global_thread(); i < n; i += grid_threads())
        acc[i] = __fadd_rn(acc[i], round_to(v[i], round));
}

__device__ inline double softplus(double z) {
    return (z > 0.0 ? z : 0.0) + log1p(exp(-fabs(z)));
}

__device__ inline double sigmoid(double z) {
    return z >= 0.0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z));
}

// Scratch layout of the loss: per row lse, loss term, target weight, correct (0/1).
struct loss_rows {
    double *lse, *loss, *weight, *correct;
    __device__ loss_rows(double *s, int64_t m)
        : lse(s), loss(s + m), weight(s + 2 * m), correct(s + 3 * m) {}
};

// Cross-entropy terms of row i: log-sum-exp, (1-eps) w_y (lse - x_y) + eps/C sum_k w_k (lse -
// x_k), and whether the first maximum is the target (count_correct's argmax).
__device__ void ce_row(const float *xi, int64_t i, const train_loss_args &a, loss_rows r) {
    int64_t c = a.c;
    const float *w = a.class_weight;
    float mx = -INFINITY;
    for (int64_t k = threadIdx.x; k < c; k += blockDim.x) mx = fmaxf(mx, xi[k]);
    mx = block_max(mx);
    int64_t best = c;
    for (int64_t k = threadIdx.x; k < c; k += blockDim.x)
        if (xi[k] == mx && k < best) best = k;
    best = block_min_i64(best);
    double se = 0.0;
    for (int64_t k = threadIdx.x; k < c; k += blockDim.x) se += exp((double)xi[k] - (double)mx);
    se = block_sum(se);
    __shared__ double lse_shared;
    if (threadIdx.x == 0) lse_shared = (double)mx + log(se);
    __syncthreads();
    double lse = lse_shared, smooth = 0.0;
    for (int64_t k = threadIdx.x; k < c; k += blockDim.x)
        smooth += (w ? (double)w[k] : 1.0) * (lse - (double)xi[k]);
    smooth = block_sum(smooth);
    if (threadIdx.x != 0) return;
    int64_t y = ((const int64_t *)a.targets)[i];
    bool valid = y >= 0 && y < c; // the host checked the labels; never read out of range
    double wy = valid ? (w ? (double)w[y] : 1.0) : NAN;
    double eps = a.smoothing;
    r.loss[i] = (1.0 - eps) * wy * (lse - (valid ? (double)xi[y] : 0.0)) + eps / (double)c * smooth;
    r.weight[i] = wy;
    r.lse[i] = lse;
    r.correct[i] = best == y ? 1.0 : 0.0;
}

__global__ void loss_rows_kernel(const float *__restrict__ x, train_loss_args a, double *scratch) {
    int64_t i = blockIdx.x;
    const float *xi = x + i * a.c;
    loss_rows r(scratch, a.m);
    if (a.kind == TRAIN_LOSS_CE) {
        ce_row(xi, i, a, r);
        return;
    }
    const float *t = (const float *)a.targets + i * a.c;
    double s = 0.0;
    for (int64_t k = threadIdx.x; k < a.c; k += blockDim.x) {
        double xv = xi[k], tv = t[k];
        if (a.kind == TRAIN_LOSS_BCE) {
            double pw = a.pos_weight ? (double)a.pos_weight[k] : 1.0;
            s += pw * tv * softplus(-xv) + (1.0 - tv) * softplus(xv);
        } else {
            double d = xv - tv;
            s += d * d;
        }
    }
    s = block_sum(s);
    if (threadIdx.x == 0) {
        r.loss[i] = s;
        r.weight[i] = 0.0;
        r.correct[i] = 0.0;
    }
}

// The batch's mean loss (and the CE divisor), added to the epoch's sums.
__global__ void loss_reduce_kernel(train_loss_args a, double *scratch, train_state *st) {
    loss_rows r(scratch, a.m);
    double total = 0.0, wsum = 0.0, correct = 0.0;
    for (int64_t i = threadIdx.x; i < a.m; i += blockDim.x) {
        total += r.loss[i];
        wsum += r.weight[i];
        correct += r.correct[i];
    }
    total = block_sum(total);
    wsum = block_sum(wsum);
    correct = block_sum(correct);
    if (threadIdx.x != 0) return;
    double loss;
    if (a.kind == TRAIN_LOSS_CE) {
        if (!(wsum != 0.0)) st->bad_batches++;
        loss = total / wsum;
        st->wsum = wsum;
    } else {
        loss = total * (1.0 / ((double)a.m * (double)a.c));
    }
    st->step_loss = loss;
    st->epoch_loss += loss * (double)a.m;
    st->step_correct = (int64_t)correct;
    st->epoch_correct += (int64_t)correct;
}

__global__ void loss_grad_kernel(const float *__restrict__ x, float *__restrict__ dl,
                                 train_loss_args a, const double *scratch, const train_state *st) {
    int64_t total = a.m * a.c;
    double mult = a.grad_mult * (a.scale_grad ? (double)st->scale : 1.0);
    double inv = 1.0 / ((double)a.m * (double)a.c);
    const double *lse = scratch;
    for (int64_t idx = global_thread(); idx < total; idx += grid_threads()) {
        int64_t i = idx / a.c, k = idx - i * a.c;
        double xv = x[idx];
        float g;
        if (a.kind == TRAIN_LOSS_CE) {
            const float *w = a.class_weight;
            int64_t y = ((const int64_t *)a.targets)[i];
            double p = exp(xv - lse[i]), wk = w ? (double)w[k] : 1.0;
            double wy = (y >= 0 && y < a.c) ? (w ? (double)w[y] : 1.0) : NAN;
            double eps = a.smoothing;
            double d = (1.0 - eps) * wy * (p - (k == y ? 1.0 : 0.0)) +
                       eps / (double)a.c * (a.wsum_c * p - wk);
            g = (float)(d / st->wsum);
        } else if (a.kind == TRAIN_LOSS_BCE) {
            double tv = ((const float *)a.targets)[idx];
            double pw = a.pos_weight ? (double)a.pos_weight[k] : 1.0, sg = sigmoid(xv);
            g = (float)((pw * tv * (sg - 1.0) + (1.0 - tv) * sg) * inv);
        } else {
            double d = xv - (double)((const float *)a.targets)[idx];
            g = (float)(2.0 * d * inv);
        }
        dl[idx] = round_to((float)((double)g * mult), a.round);
    }
}

} // namespace

extern "C" cudaError_t train_gather_rows(float *dst, const float *src, const int64_t *idx,
                                         int64_t m, int64_t cols, int round, cudaStream_t stream) {
    int64_t total = m * cols;
    if (total <= 0) return cudaSuccess;
    gather_rows_kernel<<<blocks_for(total), kThreads, 0, stream>>>(dst, src, idx, cols, total,
                                                                   round);
    return cudaGetLastError();
}

extern "C" cudaError_t train_gather_i64(int64_t *dst, const int64_t *src, const int64_t *idx,
                                        int64_t m, cudaStream_t stream) {
    if (m <= 0) return cudaSuccess;
    gather_i64_kernel<<<blocks_for(m), kThreads, 0, stream>>>(dst, src, idx, m);
    return cudaGetLastError();
}

extern "C" cudaError_t train_round(float *dst, const float *src, int64_t n, int round,
                                   cudaStream_t stream) {
    if (n <= 0 || (round == TRAIN_ROUND_NONE && dst == src)) return cudaSuccess;
    round_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dst, src, n, round);
    return cudaGetLastError();
}

extern "C" cudaError_t train_act_forward(float *y, float *z, int64_t m, int64_t cols, int act,
                                         float p, uint64_t seed, int round, cudaStream_t stream) {
    int64_t n = m * cols;
    if (n <= 0) return cudaSuccess;
    act_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, z, n, act, p, seed, round);
    return cudaGetLastError();
}

extern "C" cudaError_t train_act_backward(float *g, const float *z, int64_t m, int64_t cols,
                                          int act, float p, uint64_t seed, int round,
                                          cudaStream_t stream) {
    int64_t n = m * cols;
    if (n <= 0) return cudaSuccess;
    act_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, z, n, act, p, seed, round);
    return cudaGetLastError();
}

extern "C" cudaError_t train_colsum_add(float *acc, const float *g, int64_t m, int64_t cols,
                                        int round, cudaStream_t stream) {
    if (cols <= 0) return cudaSuccess;
    colsum_add_kernel<<<blocks_for(cols), kThreads, 0, stream>>>(acc, g, m, cols, round);
    return cudaGetLastError();
}

extern "C" cudaError_t train_add_rounded(float *acc, const float *v, int64_t n, int round,
                                         cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    add_rounded_kernel<<<blocks_for(n), kThreads, 0, stream>>>(acc, v, n, round);
    return cudaGetLastError();
}

extern "C" cudaError_t train_loss(const float *logits, float *dlogits, const train_loss_args *a,
                                  double *scratch, train_state *st, cudaStream_t stream) {
    if (a->m <= 0 || a->c <= 0) return cudaSuccess;
    if (a->m > 2147483647) return cudaErrorInvalidValue; // one block per row
    loss_rows_kernel<<<(unsigned)a->m, kRowThreads, 0, stream>>>(logits, *a, scratch);
    loss_reduce_kernel<<<1, kThreads, 0, stream>>>(*a, scratch, st);
    if (dlogits)
        loss_grad_kernel<<<blocks_for(a->m * a->c), kThreads, 0, stream>>>(logits, dlogits, *a,
                                                                           scratch, st);
    return cudaGetLastError();
}
