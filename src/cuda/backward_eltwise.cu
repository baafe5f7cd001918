// backward_eltwise.cu: CUDA kernels of the element-wise backward rules (sums over broadcast axes,
// strided gathers, activation slopes, broadcast binary partials, Where, Softmax, LayerNorm).
#include <string.h>

#include "backward_eltwise_launch.h"
#include "reduce_common.cuh"

namespace {

constexpr int THREADS = 256;
constexpr int COL_X = 32, COL_Y = 8;   // column sums: 32 outputs by 8 lanes along the sum
constexpr int64_t WARP_SUM_MAX = 1024; // row sums up to this long: one warp each
constexpr int64_t MIN_PER_LANE = 16;   // fewest summed elements per lane worth a split
constexpr int64_t MAX_SPLITS = 1024;
constexpr int64_t MAX_GRID = 1 << 20;

// Element offset of dense index i over dims (outermost first) with the given strides.
__device__ __forceinline__ int64_t offset_of(int64_t i, int nd, const int64_t *dims,
                                             const int64_t *strides) {
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        int64_t q = i / dims[d];
        off += (i - q * dims[d]) * strides[d];
        i = q;
    }
    return off;
}

// ---- sums over broadcast axes ---------------------------------------------------------------

// Lanes per sum when the innermost src axis is summed: a warp for short sums, else the block.
inline int rows_lanes(const bw_reduce_plan *p) {
    return p->n_sum <= WARP_SUM_MAX ? 32 : THREADS;
}

// Sums along a summed innermost axis: groups of L lanes per output, piece blockIdx.y of each
// sum (its elements r = piece * L + lane, stepping L * splits).
template <int L>
__global__ void __launch_bounds__(THREADS)
    reduce_rows_kernel(const float *src, float *dst, double *partial, bw_reduce_plan p) {
    constexpr int GROUPS = THREADS / L;
    __shared__ double buf[32];
    int lane = threadIdx.x % L, group = threadIdx.x / L;
    int64_t piece = blockIdx.y, step = (int64_t)L * p.splits;
    for (int64_t j0 = (int64_t)blockIdx.x * GROUPS; j0 < p.n_dst;
         j0 += (int64_t)gridDim.x * GROUPS) {
        int64_t j = j0 + group;
        double acc = 0.0;
        if (j < p.n_dst) {
            int64_t base = offset_of(j, p.n_kept, p.kept_dims, p.kept_strides);
            for (int64_t r = piece * L + lane; r < p.n_sum; r += step)
                acc += src[base + offset_of(r, p.n_red, p.red_dims, p.red_strides)];
        }
        if constexpr (L == 32)
            acc = warp_sum(acc);
        else
            acc = block_sum(acc, buf);
        if (lane == 0 && j < p.n_dst) {
            if (p.splits > 1)
                partial[piece * p.n_dst + j] = acc;
            else
                dst[j] = (float)((double)p.scale * acc);
        }
    }
}

// Sums along outer axes (the innermost src axis is kept): 32 outputs side by side, 8 lanes
// down each sum, piece blockIdx.y of it.
__global__ void __launch_bounds__(COL_X *COL_Y)
    reduce_cols_kernel(const float *src, float *dst, double *partial, bw_reduce_plan p) {
    __shared__ double buf[COL_Y][COL_X + 1];
    int tx = threadIdx.x % COL_X, ty = threadIdx.x / COL_X;
    int64_t piece = blockIdx.y, step = (int64_t)COL_Y * p.splits;
    for (int64_t j0 = (int64_t)blockIdx.x * COL_X; j0 < p.n_dst; j0 += (int64_t)gridDim.x * COL_X) {
        int64_t j = j0 + tx;
        double acc = 0.0;
        if (j < p.n_dst) {
            int64_t base = offset_of(j, p.n_kept, p.kept_dims, p.kept_strides);
            for (int64_t r = piece * COL_Y + ty; r < p.n_sum; r += step)
                acc += src[base + offset_of(r, p.n_red, p.red_dims, p.red_strides)];
        }
        buf[ty][tx] = acc;
        __syncthreads();
        if (ty == 0 && j < p.n_dst) {
            double s = 0.0;
            for (int k = 0; k < COL_Y; k++) s += buf[k][tx];
            if (p.splits > 1)
                partial[piece * p.n_dst + j] = s;
            else
                dst[j] = (float)((double)p.scale * s);
        }
        __syncthreads();
    }
}

// dst[j] = scale * the sum of the splits pieces' partials of output j.
__global__ void reduce_finish_kernel(const double *partial, float *dst, int64_t n_dst,
                                     int64_t splits, double scale) {
    for (int64_t j = global_thread(); j < n_dst; j += grid_threads()) {
        double s = 0.0;
        for (int64_t k = 0; k < splits; k++) s += partial[k * n_dst + j];
        dst[j] = (float)(scale * s);
    }
}

// ---- gathers --------------------------------------------------------------------------------

__global__ void gather_kernel(const float *src, float *dst, bw_view v, int64_t n, double scale) {
    for (int64_t i = global_thread(); i < n; i += grid_threads())
        dst[i] = (float)(scale * (double)src[offset_of(i, v.ndim, v.dims, v.strides)]);
}

// ---- one-input activations ------------------------------------------------------------------

__device__ __forceinline__ double sigmoid_d(double x) {
    return x >= 0.0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}

// f'(x), with the CPU reference's choices at the kinks (src/ops/grad_rules.c).
__device__ double unary_slope(bw_unary_op op, double x, double alpha, double beta) {
    switch (op) {
    case BW_RELU:
        return x > 0.0 ? 1.0 : 0.0;
    case BW_GELU: {
        double cdf = 0.5 * (1.0 + erf(x * 0.70710678118654752440));
        double pdf = exp(-0.5 * x * x) * 0.39894228040143267794; // 1 / sqrt(2 pi)
        return cdf + x * pdf;
    }
    case BW_GELU_TANH: {
        const double k0 = 0.79788456080286535588, k1 = 0.044715; // sqrt(2 / pi)
        double t = tanh(k0 * (x + k1 * x * x * x));
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k0 * (1.0 + 3.0 * k1 * x * x);
    }
    case BW_TANH: {
        double t = tanh(x);
        return 1.0 - t * t;
    }
    case BW_SIGMOID: {
        double s = sigmoid_d(x);
        return s * (1.0 - s);
    }
    case BW_HARD_SIGMOID: {
        double t = alpha * x + beta;
        return t > 0.0 && t < 1.0 ? alpha : 0.0;
    }
    case BW_HARD_SWISH:
        return x < -3.0 ? 0.0 : x > 3.0 ? 1.0 : x / 3.0 + 0.5;
    case BW_ELU:
        return x > 0.0 ? 1.0 : alpha * exp(x);
    case BW_SOFTPLUS:
        return sigmoid_d(x);
    case BW_SQRT:
        return 0.5 / sqrt(x);
    case BW_ERF:
        return 1.12837916709551257390 * exp(-x * x); // 2 / sqrt(pi)
    case BW_NEG:
        return -1.0;
    case BW_EXP:
        return exp(x);
    case BW_CLIP:
        return 0.0; // clip_kernel
    }
    return 0.0;
}

__global__ void unary_kernel(bw_unary_op op, const float *x, const float *dy, float *dx, int64_t n,
                             double alpha, double beta) {
    for (int64_t i = global_thread(); i < n; i += grid_threads())
        dx[i] = (float)((double)dy[i] * unary_slope(op, (double)x[i], alpha, beta));
}

// PyTorch's clamp: dy passes where lo <= x <= hi (the bounds included), else 0.
__global__ void clip_kernel(const float *x, const float *dy, float *dx, int64_t n,
                            bw_clip_bounds c) {
    float lo = c.lo_dev ? *c.lo_dev : c.lo, hi = c.hi_dev ? *c.hi_dev : c.hi;
    for (int64_t i = global_thread(); i < n; i += grid_threads()) {
        float v = x[i];
        dx[i] = v >= lo && v <= hi ? dy[i] : 0.0f;
    }
}

// ---- two-input ops --------------------------------------------------------------------------

__device__ __forceinline__ double load_as_double(const void *b, graft_dtype dt, int64_t i) {
    switch (dt) {
    case GRAFT_DTYPE_F64:
        return ((const double *)b)[i];
    case GRAFT_DTYPE_I32:
        return (double)((const int32_t *)b)[i];
    case GRAFT_DTYPE_I64:
        return (double)((const int64_t *)b)[i];
    default:
        return (double)((const float *)b)[i];
    }
}

__global__ void binary_kernel(bw_binary_op op, const float *a, const void *b, graft_dtype b_dt,
                              const float *dy, float *ga, float *gb, bw_bcast p) {
    for (int64_t i = global_thread(); i < p.n; i += grid_threads()) {
        int64_t oa = 0, ob = 0, rest = i;
        for (int d = p.ndim - 1; d >= 0; d--) {
            int64_t q = rest / p.dims[d], idx = rest - q * p.dims[d];
            oa += idx * p.strides[0][d];
            ob += idx * p.strides[1][d];
            rest = q;
        }
        double av = a[oa], bv = load_as_double(b, b_dt, ob), g = dy[i], pa = 0.0, pb = 0.0;
        switch (op) {
        case BW_MUL:
            pa = g * bv;
            pb = g * av;
            break;
        case BW_DIV:
            pa = g / bv;
            pb = -g * av / (bv * bv);
            break;
        case BW_POW:
            pa = bv == 0.0 ? 0.0 : g * bv * pow(av, bv - 1.0);
            if (gb) pb = av == 0.0 && bv >= 0.0 ? 0.0 : g * pow(av, bv) * log(av);
            break;
        case BW_PRELU:
            pa = av < 0.0 ? g * bv : g;
            pb = av < 0.0 ? g * av : 0.0;
            break;
        }
        if (ga) ga[i] = (float)pa;
        if (gb) gb[i] = (float)pb;
    }
}

__global__ void where_kernel(const uint8_t *cond, const float *dy, float *gx, float *gy,
                             bw_bcast p) {
    for (int64_t i = global_thread(); i < p.n; i += grid_threads()) {
        bool c = cond[offset_of(i, p.ndim, p.dims, p.strides[0])] != 0;
        float g = dy[i];
        if (gx) gx[i] = c ? g : 0.0f;
        if (gy) gy[i] = c ? 0.0f : g;
    }
}

// ---- Softmax --------------------------------------------------------------------------------

// Contiguous rows of n <= WARP_SUM_MAX: one warp each.
__global__ void softmax_rows_warp_kernel(const float *y, const float *dy, float *dx, int64_t rows,
                                         int64_t n) {
    int lane = threadIdx.x & 31;
    for (int64_t r = global_thread() >> 5; r < rows; r += grid_threads() >> 5) {
        const float *yr = y + r * n, *gr = dy + r * n;
        double dot = 0.0;
        for (int64_t j = lane; j < n; j += 32) dot += (double)gr[j] * (double)yr[j];
        dot = warp_sum(dot);
        for (int64_t j = lane; j < n; j += 32)
            dx[r * n + j] = (float)((double)yr[j] * ((double)gr[j] - dot));
    }
}

// Longer contiguous rows: one block each.
__global__ void __launch_bounds__(THREADS)
    softmax_rows_block_kernel(const float *y, const float *dy, float *dx, int64_t rows, int64_t n) {
    __shared__ double buf[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *yr = y + r * n, *gr = dy + r * n;
        double dot = 0.0;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dot += (double)gr[j] * (double)yr[j];
        dot = block_sum(dot, buf);
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
            dx[r * n + j] = (float)((double)yr[j] * ((double)gr[j] - dot));
    }
}

// A strided axis (inner > 1): one thread per (outer, inner) column.
__global__ void softmax_cols_kernel(const float *y, const float *dy, float *dx, int64_t outer,
                                    int64_t n, int64_t inner) {
    for (int64_t t = global_thread(); t < outer * inner; t += grid_threads()) {
        int64_t o = t / inner, base = o * n * inner + (t - o * inner);
        double dot = 0.0;
        for (int64_t j = 0; j < n; j++)
            dot += (double)dy[base + j * inner] * (double)y[base + j * inner];
        for (int64_t j = 0; j < n; j++) {
            int64_t at = base + j * inner;
            dx[at] = (float)((double)y[at] * ((double)dy[at] - dot));
        }
    }
}

// ---- LayerNormalization ---------------------------------------------------------------------

// One block per row: mean and variance (two passes), then the means of dy * scale and of
// dy * scale * xhat, then dx = rstd * (dy * scale - m1 - xhat * m2) and dy * xhat.
__global__ void __launch_bounds__(THREADS)
    layernorm_bwd_kernel(const float *x, const float *dy, const float *scale, int64_t rows,
                         int64_t n, double eps, float *dx, float *dyxhat) {
    __shared__ double buf[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * n, *gr = dy + r * n;
        double s = 0.0;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += xr[j];
        double mean = block_sum(s, buf) / (double)n, v = 0.0;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            double d = (double)xr[j] - mean;
            v += d * d;
        }
        double rstd = 1.0 / sqrt(block_sum(v, buf) / (double)n + eps), m1 = 0.0, m2 = 0.0;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            double xhat = ((double)xr[j] - mean) * rstd, g = (double)gr[j] * (double)scale[j];
            m1 += g;
            m2 += g * xhat;
        }
        m1 = block_sum(m1, buf) / (double)n;
        m2 = block_sum(m2, buf) / (double)n;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            double xhat = ((double)xr[j] - mean) * rstd, g = (double)gr[j];
            if (dx) dx[r * n + j] = (float)(rstd * (g * (double)scale[j] - m1 - xhat * m2));
            if (dyxhat) dyxhat[r * n + j] = (float)(g * xhat);
        }
    }
}

} // namespace

// ---- launchers ------------------------------------------------------------------------------

extern "C" bool bw_reduce_plan_make(int ndim, const int64_t *dims, int sndim, const int64_t *sdims,
                                    float scale, int sm_count, bw_reduce_plan *p) {
    memset(p, 0, sizeof *p);
    p->scale = scale;
    p->n_dst = p->n_sum = p->splits = 1;
    if (ndim < 0 || ndim > GRAFT_MAX_DIMS || sndim < 0 || sndim > ndim) return false;
    int64_t stride[GRAFT_MAX_DIMS], s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        stride[d] = s;
        s *= dims[d];
    }
    int last = -1; // the kind of the last run: 0 kept, 1 summed
    for (int d = 0; d < ndim; d++) {
        int sd = d - (ndim - sndim);
        int64_t small = sd >= 0 ? sdims[sd] : 1;
        if (small != dims[d] && small != 1) return false;
        if (dims[d] == 1) continue;
        int summed = small != dims[d];
        int64_t *run_dims = summed ? p->red_dims : p->kept_dims;
        int64_t *run_strides = summed ? p->red_strides : p->kept_strides;
        int *count = summed ? &p->n_red : &p->n_kept;
        if (last == summed) { // adjacent to the previous run of its kind: merge
            run_dims[*count - 1] *= dims[d];
            run_strides[*count - 1] = stride[d];
        } else {
            run_dims[*count] = dims[d];
            run_strides[*count] = stride[d];
            (*count)++;
        }
        last = summed;
        if (summed)
            p->n_sum *= dims[d];
        else
            p->n_dst *= dims[d];
    }
    p->rows = last == 1;
    int64_t per_block = p->rows ? THREADS / rows_lanes(p) : COL_X;
    int64_t lanes = p->rows ? rows_lanes(p) : COL_Y;
    int64_t blocks = (p->n_dst + per_block - 1) / per_block, target = 4 * (int64_t)sm_count;
    if (blocks > 0 && blocks < target) {
        int64_t want = (target + blocks - 1) / blocks, most = p->n_sum / (lanes * MIN_PER_LANE);
        int64_t splits = want < most ? want : most;
        p->splits = splits < 1 ? 1 : splits > MAX_SPLITS ? MAX_SPLITS : splits;
    }
    return true;
}

extern "C" size_t bw_reduce_scratch_bytes(const bw_reduce_plan *p) {
    return p->splits > 1 ? (size_t)(p->splits * p->n_dst) * sizeof(double) : 0;
}

extern "C" cudaError_t bw_reduce_to(const float *src, float *dst, void *scratch,
                                    const bw_reduce_plan *p, cudaStream_t stream) {
    if (p->n_dst <= 0) return cudaSuccess;
    if (p->splits > 1 && !scratch) return cudaErrorInvalidValue;
    double *partial = p->splits > 1 ? (double *)scratch : nullptr;
    int64_t per_block = p->rows ? THREADS / rows_lanes(p) : COL_X;
    dim3 grid(grid_size(p->n_dst, per_block, MAX_GRID), (unsigned)p->splits);
    if (!p->rows)
        reduce_cols_kernel<<<grid, COL_X * COL_Y, 0, stream>>>(src, dst, partial, *p);
    else if (rows_lanes(p) == 32)
        reduce_rows_kernel<32><<<grid, THREADS, 0, stream>>>(src, dst, partial, *p);
    else
        reduce_rows_kernel<THREADS><<<grid, THREADS, 0, stream>>>(src, dst, partial, *p);
    if (p->splits > 1)
        reduce_finish_kernel<<<grid_size(p->n_dst, THREADS, MAX_GRID), THREADS, 0, stream>>>(
            partial, dst, p->n_dst, p->splits, (double)p->scale);
    return cudaGetLastError();
}

extern "C" cudaError_t bw_gather(const float *src, float *dst, const bw_view *v, float scale,
                                 cudaStream_t stream) {
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= v->dims[d];
    if (n <= 0) return cudaSuccess;
    gather_kernel<<<grid_size(n, THREADS, MAX_GRID), THREADS, 0, stream>>>(src, dst, *v, n,
                                                                           (double)scale);
    return cudaGetLastError();
}

extern "C" cudaError_t bw_unary(bw_unary_op op, const float *x, const float *dy, float *dx,
                                int64_t n, double alpha, double beta, const bw_clip_bounds *clip,
                                cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    unsigned grid = grid_size(n, THREADS, MAX_GRID);
    if (op == BW_CLIP) {
        if (!clip) return cudaErrorInvalidValue;
        clip_kernel<<<grid, THREADS, 0, stream>>>(x, dy, dx, n, *clip);
    } else {
        unary_kernel<<<grid, THREADS, 0, stream>>>(op, x, dy, dx, n, alpha, beta);
    }
    return cudaGetLastError();
}

extern "C" cudaError_t bw_binary(bw_binary_op op, const float *a, const void *b, graft_dtype b_dt,
                                 const float *dy, float *ga, float *gb, const bw_bcast *plan,
                                 cudaStream_t stream) {
    if (plan->n <= 0 || (!ga && !gb)) return cudaSuccess;
    if (b_dt != GRAFT_DTYPE_F32 &&
        !(op == BW_POW &&
          (b_dt == GRAFT_DTYPE_F64 || b_dt == GRAFT_DTYPE_I32 || b_dt == GRAFT_DTYPE_I64)))
        return cudaErrorInvalidValue;
    binary_kernel<<<grid_size(plan->n, THREADS, MAX_GRID), THREADS, 0, stream>>>(op, a, b, b_dt, dy,
                                                                                 ga, gb, *plan);
    return cudaGetLastError();
}

extern "C" cudaError_t bw_where(const uint8_t *cond, const float *dy, float *gx, float *gy,
                                const bw_bcast *plan, cudaStream_t stream) {
    if (plan->n <= 0 || (!gx && !gy)) return cudaSuccess;
    where_kernel<<<grid_size(plan->n, THREADS, MAX_GRID), THREADS, 0, stream>>>(cond, dy, gx, gy,
                                                                                *plan);
    return cudaGetLastError();
}

extern "C" cudaError_t bw_softmax(const float *y, const float *dy, float *dx, int64_t outer,
                                  int64_t n, int64_t inner, cudaStream_t stream) {
    if (outer <= 0 || n <= 0 || inner <= 0) return cudaSuccess;
    if (inner > 1)
        softmax_cols_kernel<<<grid_size(outer * inner, THREADS, MAX_GRID), THREADS, 0, stream>>>(
            y, dy, dx, outer, n, inner);
    else if (n <= WARP_SUM_MAX)
        softmax_rows_warp_kernel<<<grid_size(outer, THREADS / 32, MAX_GRID), THREADS, 0, stream>>>(
            y, dy, dx, outer, n);
    else
        softmax_rows_block_kernel<<<grid_size(outer, 1, MAX_GRID), THREADS, 0, stream>>>(y, dy, dx,
                                                                                         outer, n);
    return cudaGetLastError();
}

extern "C" cudaError_t bw_layernorm(const float *x, const float *dy, const float *scale,
                                    int64_t rows, int64_t n, double eps, float *dx, float *dyxhat,
                                    cudaStream_t stream) {
    if (rows <= 0 || n <= 0 || (!dx && !dyxhat)) return cudaSuccess;
    layernorm_bwd_kernel<<<grid_size(rows, 1, MAX_GRID), THREADS, 0, stream>>>(x, dy, scale, rows,
                                                                               n, eps, dx, dyxhat);
    return cudaGetLastError();
}
