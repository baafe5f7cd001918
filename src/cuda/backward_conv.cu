// backward_conv.cu: f32 kernels of the GPU backward rules around cuDNN: MaxPool / AveragePool /
// global pool gradients, Conv's bias gradient and padding crop, BatchNormalization (inference).
#include <math.h>

#include "backward_conv_launch.h"
#include "reduce_common.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16; // grid-stride loops cover the rest

unsigned blocks_for(int64_t total) {
    return grid_size(total, kThreads, kMaxBlocks);
}

__device__ __forceinline__ int64_t ceil_div(int64_t a, int64_t b) { // a >= 0, b > 0
    return (a + b - 1) / b;
}

// The taps of the window at output position o along axis a: those inside the input are
// [*lo, *hi) (0, 0 when none), and *padded of them lie before the end padding's end
// (AveragePool's count_include_pad divisor): grad_pool.c's tap_range in closed form.
__device__ void window_taps(const bwd_pool_geom &g, int a, int64_t o, int64_t *lo, int64_t *hi,
                            int64_t *padded) {
    int64_t start = o * g.stride[a] - g.pad_begin[a], d = g.dilation[a], k = g.kernel[a];
    int64_t l = start >= 0 ? 0 : ceil_div(-start, d);
    int64_t last = g.in[a] - 1 - start; // taps j with j * d <= last are before the input's end
    int64_t h = last < 0 ? 0 : (last / d + 1 < k ? last / d + 1 : k);
    if (h <= l) l = h = 0;
    *lo = l;
    *hi = h;
    int64_t limit = g.in[a] + g.pad_end[a] - 1 - start;
    *padded = limit < 0 ? 0 : (limit / d + 1 < k ? limit / d + 1 : k);
}

// One thread per output point: the first maximum of its window in scan order gets dy.
__global__ void maxpool_bwd_kernel(const float *__restrict__ x, const float *__restrict__ dy,
                                   float *dx, bwd_pool_geom g, bool disjoint, int64_t total) {
    int64_t in_size = g.in[0] * g.in[1] * g.in[2];
    for (int64_t i = global_thread(); i < total; i += grid_threads()) {
        int64_t o[3], rest = i / g.out[2];
        o[2] = i % g.out[2];
        o[1] = rest % g.out[1];
        rest /= g.out[1];
        o[0] = rest % g.out[0];
        int64_t plane = rest / g.out[0], lo[3], hi[3], padded;
        for (int a = 0; a < 3; a++) window_taps(g, a, o[a], &lo[a], &hi[a], &padded);
        const float *xp = x + plane * in_size;
        int64_t best_at = -1;
        float best = 0.0f;
        for (int64_t jd = lo[0]; jd < hi[0]; jd++) {
            int64_t id = o[0] * g.stride[0] - g.pad_begin[0] + jd * g.dilation[0];
            for (int64_t jh = lo[1]; jh < hi[1]; jh++) {
                int64_t ih = o[1] * g.stride[1] - g.pad_begin[1] + jh * g.dilation[1];
                int64_t row = (id * g.in[1] + ih) * g.in[2];
                for (int64_t jw = lo[2]; jw < hi[2]; jw++) {
                    int64_t at = row + o[2] * g.stride[2] - g.pad_begin[2] + jw * g.dilation[2];
                    float v = xp[at];
                    if (best_at < 0 || v > best) {
                        best = v;
                        best_at = at;
                    }
                }
            }
        }
        if (best_at < 0) continue;
        float *dst = dx + plane * in_size + best_at;
        if (disjoint)
            *dst = dy[i];
        else
            atomicAdd(dst, dy[i]);
    }
}

// The output positions [*first, *last] along axis a whose windows may hold input position p (a
// tap lands on p when (p + pad_begin - o * stride) is a multiple of the dilation).
__device__ void covering_outputs(const bwd_pool_geom &g, int a, int64_t p, int64_t *first,
                                 int64_t *last) {
    int64_t q = p + g.pad_begin[a], reach = (g.kernel[a] - 1) * g.dilation[a];
    *first = q - reach <= 0 ? 0 : ceil_div(q - reach, g.stride[a]);
    int64_t l = q / g.stride[a];
    *last = l < g.out[a] - 1 ? l : g.out[a] - 1;
}

// A window's taps counted by AveragePool's divisor along axis a.
__device__ int64_t divisor_taps(const bwd_pool_geom &g, int a, int64_t o, bool include_pad) {
    int64_t lo, hi, padded;
    window_taps(g, a, o, &lo, &hi, &padded);
    return include_pad ? padded : hi - lo;
}

__device__ __forceinline__ bool tap_hits(const bwd_pool_geom &g, int a, int64_t p, int64_t o) {
    return (p + g.pad_begin[a] - o * g.stride[a]) % g.dilation[a] == 0;
}

// One thread per input element: the shares of every window holding it.
__global__ void avgpool_bwd_kernel(const float *__restrict__ dy, float *__restrict__ dx,
                                   bwd_pool_geom g, bool include_pad, int64_t total) {
    int64_t out_size = g.out[0] * g.out[1] * g.out[2];
    for (int64_t i = global_thread(); i < total; i += grid_threads()) {
        int64_t p[3], rest = i / g.in[2];
        p[2] = i % g.in[2];
        p[1] = rest % g.in[1];
        rest /= g.in[1];
        p[0] = rest % g.in[0];
        int64_t plane = rest / g.in[0], first[3], last[3];
        for (int a = 0; a < 3; a++) covering_outputs(g, a, p[a], &first[a], &last[a]);
        const float *dyp = dy + plane * out_size;
        float acc = 0.0f;
        for (int64_t od = first[0]; od <= last[0]; od++) {
            if (!tap_hits(g, 0, p[0], od)) continue;
            int64_t c0 = divisor_taps(g, 0, od, include_pad);
            for (int64_t oh = first[1]; oh <= last[1]; oh++) {
                if (!tap_hits(g, 1, p[1], oh)) continue;
                int64_t c01 = c0 * divisor_taps(g, 1, oh, include_pad);
                for (int64_t ow = first[2]; ow <= last[2]; ow++) {
                    if (!tap_hits(g, 2, p[2], ow)) continue;
                    int64_t divisor = c01 * divisor_taps(g, 2, ow, include_pad);
                    acc += dyp[(od * g.out[1] + oh) * g.out[2] + ow] / (float)divisor;
                }
            }
        }
        dx[i] = acc;
    }
}

__global__ void global_avgpool_bwd_kernel(const float *__restrict__ dy, float *__restrict__ dx,
                                          int64_t size, int64_t total) {
    for (int64_t i = global_thread(); i < total; i += grid_threads())
        dx[i] = dy[i / size] / (float)size;
}

// (value, index) b replaces a: a non-NaN value above a's, or equal to it at a smaller index.
__device__ __forceinline__ bool better(float bv, int64_t bi, float av, int64_t ai) {
    return bi >= 0 && (ai < 0 || bv > av || (bv == av && bi < ai));
}

// One block per plane: the first maximum in memory order (grad_pool.c's scan: element 0 when it
// is NaN, else the first of the largest non-NaN values), then the plane written whole.
__global__ void __launch_bounds__(kThreads)
    global_maxpool_bwd_kernel(const float *__restrict__ x, const float *__restrict__ dy,
                              float *__restrict__ dx, int64_t planes, int64_t size) {
    __shared__ float best_v[kThreads];
    __shared__ int64_t best_i[kThreads];
    int t = threadIdx.x;
    for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
        const float *xp = x + p * size;
        float v = 0.0f;
        int64_t at = -1;
        for (int64_t j = t; j < size; j += blockDim.x) {
            float xv = xp[j];
            if (!isnan(xv) && (at < 0 || xv > v)) {
                v = xv;
                at = j;
            }
        }
        best_v[t] = v;
        best_i[t] = at;
        __syncthreads();
        for (int half = blockDim.x / 2; half > 0; half >>= 1) {
            if (t < half && better(best_v[t + half], best_i[t + half], best_v[t], best_i[t])) {
                best_v[t] = best_v[t + half];
                best_i[t] = best_i[t + half];
            }
            __syncthreads();
        }
        int64_t pick = isnan(xp[0]) ? 0 : best_i[0];
        float g = dy[p];
        for (int64_t j = t; j < size; j += blockDim.x) dx[p * size + j] = j == pick ? g : 0.0f;
        __syncthreads(); // best_i[0] is read before the next plane overwrites it
    }
}

// A block's threads walking the elements j = b * run + r of (n, run), thread t at j = t, t +
// blockDim.x, ...: (b, r) stepped without a 64-bit division per element.
struct run_walk {
    int64_t b, r, step_b, step_r, run;
    __device__ explicit run_walk(int64_t run_)
        : b(threadIdx.x / run_), r(threadIdx.x % run_), step_b(blockDim.x / run_),
          step_r(blockDim.x % run_), run(run_) {}
    __device__ void next() {
        b += step_b;
        r += step_r;
        if (r >= run) {
            r -= run;
            b++;
        }
    }
};

// One block per channel: the sum over n and inner, in double.
__global__ void __launch_bounds__(kThreads)
    channel_sum_kernel(const float *__restrict__ dy, float *__restrict__ db, int64_t n,
                       int64_t channels, int64_t inner) {
    __shared__ double buf[32];
    for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
        double s = 0.0;
        for (run_walk w(inner); w.b < n; w.next()) s += dy[(w.b * channels + c) * inner + w.r];
        s = block_sum(s, buf);
        if (threadIdx.x == 0) db[c] = (float)s;
    }
}

__global__ void crop_kernel(const float *__restrict__ src, float *__restrict__ dst, conv_pad_geom g,
                            int64_t total) {
    for (int64_t i = global_thread(); i < total; i += grid_threads()) {
        int64_t w = i % g.in[2], rest = i / g.in[2];
        int64_t h = rest % g.in[1];
        rest /= g.in[1];
        int64_t d = rest % g.in[0], plane = rest / g.in[0];
        dst[i] =
            src[((plane * g.out[0] + d + g.before[0]) * g.out[1] + h + g.before[1]) * g.out[2] + w +
                g.before[2]];
    }
}

__device__ __forceinline__ double bn_rstd(const bwd_bn_args &a, int64_t g) {
    return 1.0 / sqrt((double)a.var[g] + a.eps);
}

__global__ void bn_dx_kernel(bwd_bn_args a, int64_t total) {
    for (int64_t i = global_thread(); i < total; i += grid_threads()) {
        int64_t g = (i / a.run) % a.groups;
        a.dx[i] = (float)((double)a.scale[g] * bn_rstd(a, g) * (double)a.dy[i]);
    }
}

// One block per group: sum dy and sum dy * (x - mean) over n and run, in double.
__global__ void __launch_bounds__(kThreads) bn_params_kernel(bwd_bn_args a) {
    __shared__ double buf[32];
    for (int64_t g = blockIdx.x; g < a.groups; g += gridDim.x) {
        double mean = a.mean[g], sum = 0.0, sum_xc = 0.0;
        for (run_walk w(a.run > 0 ? a.run : 1); a.run > 0 && w.b < a.n; w.next()) {
            int64_t at = (w.b * a.groups + g) * a.run + w.r;
            double d = a.dy[at];
            sum += d;
            sum_xc += d * ((double)a.x[at] - mean);
        }
        sum = block_sum(sum, buf);
        sum_xc = block_sum(sum_xc, buf);
        if (threadIdx.x == 0) {
            double rstd = bn_rstd(a, g), s = a.scale[g], sum_xhat = sum_xc * rstd;
            if (a.dscale) a.dscale[g] = (float)sum_xhat;
            if (a.dbias) a.dbias[g] = (float)sum;
            if (a.dmean) a.dmean[g] = (float)(-s * rstd * sum);
            if (a.dvar) a.dvar[g] = (float)(-0.5 * s * rstd * rstd * sum_xhat);
        }
    }
}

} // namespace

extern "C" cudaError_t bwd_maxpool_launch(const float *x, const float *dy, float *dx,
                                          bwd_pool_geom g, bool disjoint, cudaStream_t stream) {
    int64_t in_total = g.planes * g.in[0] * g.in[1] * g.in[2];
    int64_t total = g.planes * g.out[0] * g.out[1] * g.out[2];
    if (in_total <= 0) return cudaSuccess;
    cudaError_t err = cudaMemsetAsync(dx, 0, (size_t)in_total * sizeof(float), stream);
    if (err != cudaSuccess || total <= 0) return err;
    maxpool_bwd_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, dy, dx, g, disjoint, total);
    return cudaGetLastError();
}

extern "C" cudaError_t bwd_avgpool_launch(const float *dy, float *dx, bwd_pool_geom g,
                                          bool include_pad, cudaStream_t stream) {
    int64_t total = g.planes * g.in[0] * g.in[1] * g.in[2];
    if (total <= 0) return cudaSuccess;
    avgpool_bwd_kernel<<<blocks_for(total), kThreads, 0, stream>>>(dy, dx, g, include_pad, total);
    return cudaGetLastError();
}

extern "C" cudaError_t bwd_global_pool_launch(const float *x, const float *dy, float *dx,
                                              int64_t planes, int64_t size, bool is_max,
                                              cudaStream_t stream) {
    if (planes <= 0 || size <= 0) return cudaSuccess;
    if (is_max)
        global_maxpool_bwd_kernel<<<grid_for(planes, 1), kThreads, 0, stream>>>(x, dy, dx, planes,
                                                                                size);
    else
        global_avgpool_bwd_kernel<<<blocks_for(planes * size), kThreads, 0, stream>>>(
            dy, dx, size, planes * size);
    return cudaGetLastError();
}

extern "C" cudaError_t bwd_channel_sum_launch(const float *dy, float *db, int64_t n,
                                              int64_t channels, int64_t inner,
                                              cudaStream_t stream) {
    if (channels <= 0) return cudaSuccess;
    if (n * inner <= 0) return cudaMemsetAsync(db, 0, (size_t)channels * sizeof(float), stream);
    channel_sum_kernel<<<grid_for(channels, 1), kThreads, 0, stream>>>(dy, db, n, channels, inner);
    return cudaGetLastError();
}

extern "C" cudaError_t bwd_crop_launch(const float *src, float *dst, conv_pad_geom g,
                                       cudaStream_t stream) {
    int64_t total = g.planes * g.in[0] * g.in[1] * g.in[2];
    if (total <= 0) return cudaSuccess;
    crop_kernel<<<blocks_for(total), kThreads, 0, stream>>>(src, dst, g, total);
    return cudaGetLastError();
}

extern "C" cudaError_t bwd_batchnorm_launch(const bwd_bn_args *a, cudaStream_t stream) {
    int64_t total = a->n * a->groups * a->run;
    if (a->groups <= 0) return cudaSuccess;
    if (a->dx && total > 0) bn_dx_kernel<<<blocks_for(total), kThreads, 0, stream>>>(*a, total);
    if (a->dscale || a->dbias || a->dmean || a->dvar)
        bn_params_kernel<<<grid_for(a->groups, 1), kThreads, 0, stream>>>(*a);
    return cudaGetLastError();
}
