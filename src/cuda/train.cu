// train.cu: the TrainLoss op's kernels on the GPU (src/cuda/cuda_train_loss.c): softmax
// cross-entropy with label smoothing and class weights, BCE with logits, MSE, with their
// gradients; the formulas of src/train/loss.c, in double like it.
#include <math.h>

#include "train_common.cuh"

using namespace train;

namespace {

constexpr int kRowThreads = 128; // one block per row of logits

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
