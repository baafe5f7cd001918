/* norm.cu: CUDA kernels of InstanceNormalization and GroupNormalization: one block per (sample,
 * group), exact two-pass mean and variance over global memory, then the per-channel affine. */
#include "norm_launch.h"
#include "reduce_common.cuh"

namespace {

constexpr int NORM_THREADS = 512;

template <typename T> struct gn_params {
    const T *x, *scale, *bias;
    T *y;
    int64_t rows; /* n * groups */
    int64_t groups, chans_per_group, spatial;
    bool per_group;
    float eps;
};

template <typename T>
__global__ void __launch_bounds__(NORM_THREADS) group_norm_kernel(gn_params<T> p) {
    __shared__ float buf[32];
    int64_t m = p.chans_per_group * p.spatial;
    for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
        const T *xr = p.x + r * m;
        T *yr = p.y + r * m;
        int64_t g = r % p.groups;
        float sum = 0.0f;
        for (int64_t j = threadIdx.x; j < m; j += blockDim.x) sum += to_float(xr[j]);
        float mean = block_sum(sum, buf) / (float)m;
        float sq = 0.0f;
        for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
            float d = to_float(xr[j]) - mean;
            sq += d * d;
        }
        float inv = rsqrtf(block_sum(sq, buf) / (float)m + p.eps);
        for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
            int64_t c = p.per_group ? g : g * p.chans_per_group + j / p.spatial;
            float v = (to_float(xr[j]) - mean) * inv;
            yr[j] = from_float<T>(v * to_float(p.scale[c]) + to_float(p.bias[c]));
        }
    }
}

} // namespace

extern "C" cudaError_t cuda_group_norm(const void *x, const void *scale, const void *bias, void *y,
                                       int64_t n, int64_t groups, int64_t chans_per_group,
                                       int64_t spatial, bool per_group, float eps, graft_dtype dt,
                                       cudaStream_t stream) {
    int64_t rows = n * groups;
    if (rows <= 0 || chans_per_group * spatial <= 0) return cudaSuccess;
    if (dt != GRAFT_DTYPE_F32 && dt != GRAFT_DTYPE_F16 && dt != GRAFT_DTYPE_BF16)
        return cudaErrorInvalidValue;
    FLOAT_DTYPE_DISPATCH(dt, T, {
        gn_params<T> p = {static_cast<const T *>(x),
                          static_cast<const T *>(scale),
                          static_cast<const T *>(bias),
                          static_cast<T *>(y),
                          rows,
                          groups,
                          chans_per_group,
                          spatial,
                          per_group,
                          eps};
        group_norm_kernel<T><<<grid_for(rows, 1), NORM_THREADS, 0, stream>>>(p);
    });
    return cudaGetLastError();
}

/* ---- Resize: one axis a pass ---------------------------------------------------------------- */

namespace {

/* resize_coord's values (src/ops/resize.h) */
enum {
    HALF_PIXEL,
    HALF_PIXEL_SYMMETRIC,
    PYTORCH_HALF_PIXEL,
    ALIGN_CORNERS,
    ASYMMETRIC,
    TF_HALF_PIXEL_FOR_NN,
    TF_CROP_AND_RESIZE
};

__device__ double source_coordinate(const cuda_resize_axis &a, int64_t o) {
    double in = (double)a.in, s = a.scale, x = (double)o, w = s * in;
    switch (a.coord) {
    case HALF_PIXEL:
        return (x + 0.5) / s - 0.5;
    case HALF_PIXEL_SYMMETRIC:
        return in / 2.0 * (1.0 - (double)a.out / w) + (x + 0.5) / s - 0.5;
    case PYTORCH_HALF_PIXEL:
        return w == 1.0 ? -0.5 : (x + 0.5) / s - 0.5;
    case ALIGN_CORNERS:
        return w == 1.0 ? 0.0 : x * (in - 1.0) / (w - 1.0);
    case ASYMMETRIC:
        return x / s;
    case TF_HALF_PIXEL_FOR_NN:
        return (x + 0.5) / s;
    default: {
        double r0 = a.roi_start, r1 = a.roi_end;
        double at =
            w == 1.0 ? (r1 - r0) * (in - 1.0) / 2.0 : x * (r1 - r0) * (in - 1.0) / (w - 1.0);
        return at + r0 * (in - 1.0);
    }
    }
}

__device__ double cubic_weight(double a, double x) {
    x = fabs(x);
    if (x <= 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    return 0.0;
}

__device__ __forceinline__ int64_t clamp_at(int64_t i, int64_t n) {
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}

template <typename TI, typename TO>
__global__ void resize_pass_kernel(const TI *x, TO *y, cuda_resize_axis a) {
    int64_t total = a.outer * a.out * a.inner;
    for (int64_t t = global_thread(); t < total; t += grid_threads()) {
        int64_t i = t % a.inner, o = (t / a.inner) % a.out, b = t / (a.inner * a.out);
        const TI *src = x + b * a.in * a.inner + i;
        double c = source_coordinate(a, o);
        if (a.coord == TF_CROP_AND_RESIZE && (c < 0.0 || c > (double)(a.in - 1))) {
            y[t] = from_float<TO>((float)a.extrapolation);
            continue;
        }
        double base = floor(c), r = c - base;
        if (a.mode == 0) {
            bool up = r > 0.0 && (a.rounding == 3 || (a.rounding == 0 && r > 0.5) ||
                                  (a.rounding == 1 && r >= 0.5));
            y[t] = from_float<TO>(to_float(src[clamp_at((int64_t)base + up, a.in) * a.inner]));
            continue;
        }
        int start = a.mode == 1 ? 0 : -1, count = a.mode == 1 ? 2 : 4;
        double acc = 0.0, sum = 0.0;
        for (int j = 0; j < count; j++) {
            int64_t at = (int64_t)base + start + j;
            double arg = (double)(start + j) - r;
            double w = a.mode == 1 ? fmax(0.0, 1.0 - fabs(arg)) : cubic_weight(a.cubic_a, arg);
            if (a.exclude_outside && (at < 0 || at >= a.in)) w = 0.0;
            acc += w * (double)to_float(src[clamp_at(at, a.in) * a.inner]);
            sum += w;
        }
        if (a.exclude_outside && sum != 0.0) acc /= sum;
        y[t] = from_float<TO>((float)acc);
    }
}

template <typename TI>
cudaError_t launch_resize(const TI *x, void *y, graft_dtype y_dt, const cuda_resize_axis &a,
                          cudaStream_t s) {
    unsigned grid = grid_for(a.outer * a.out * a.inner, 256);
    FLOAT_DTYPE_DISPATCH(
        y_dt, TO, resize_pass_kernel<TI, TO><<<grid, 256, 0, s>>>(x, static_cast<TO *>(y), a));
    return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t cuda_resize_pass(const void *x, graft_dtype x_dt, void *y, graft_dtype y_dt,
                                        const cuda_resize_axis *a, cudaStream_t stream) {
    if (a->outer * a->out * a->inner <= 0) return cudaSuccess;
    if (a->in <= 0) return cudaErrorInvalidValue;
    FLOAT_DTYPE_DISPATCH(x_dt, TI,
                         return launch_resize<TI>(static_cast<const TI *>(x), y, y_dt, *a, stream));
    return cudaGetLastError();
}
