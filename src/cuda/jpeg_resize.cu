/* jpeg_resize.cu: decoded RGB images to model inputs: Pillow's two-pass fixed-point resize of
 * only the cropped region, center crop, normalisation and layout, one thread per output pixel. */
#include "jpeg_resize_launch.h"

namespace {

constexpr int FIX = 22; /* RESAMPLE_FIX_BITS (src/data/transforms.h) */
constexpr int THREADS = 256;

__device__ __forceinline__ int32_t to_byte(int32_t acc) {
    int32_t v = acc >> FIX;
    return v < 0 ? 0 : v > 255 ? 255 : v;
}

/* The three bytes of output pixel (ox, oy) of one image, as transform_resize computes them:
 * each pass sums in int32 from half a unit and rounds to a byte, in the CPU's pass order. */
__device__ void resized_pixel(const jpeg_item &it, const int32_t *t, int crop, int ox, int oy,
                              int32_t out[3]) {
    const int32_t *hfirst = t, *hcount = t + crop, *hw = t + 2 * crop;
    const int32_t *vt = hw + (int64_t)crop * it.taps_h;
    const int32_t *vfirst = vt, *vcount = vt + crop, *vw = vt + 2 * crop;
    int hn = hcount[ox], vn = vcount[oy];
    if (hn == 0 || vn == 0) {
        out[0] = out[1] = out[2] = 0;
        return;
    }
    const int32_t *wx = hw + (int64_t)ox * it.taps_h, *wy = vw + (int64_t)oy * it.taps_v;
    int x0 = hfirst[ox], y0 = vfirst[oy];
    size_t stride = (size_t)it.width * 3;
    int32_t a[3] = {1 << (FIX - 1), 1 << (FIX - 1), 1 << (FIX - 1)};
    if (it.vertical_first) {
        for (int k = 0; k < hn; k++) {
            const uint8_t *col = it.src + (size_t)y0 * stride + (size_t)(x0 + k) * 3;
            int32_t b[3] = {1 << (FIX - 1), 1 << (FIX - 1), 1 << (FIX - 1)};
            for (int j = 0; j < vn; j++)
                for (int c = 0; c < 3; c++) b[c] += col[(size_t)j * stride + c] * wy[j];
            for (int c = 0; c < 3; c++) a[c] += to_byte(b[c]) * wx[k];
        }
    } else {
        for (int j = 0; j < vn; j++) {
            const uint8_t *row = it.src + (size_t)(y0 + j) * stride + (size_t)x0 * 3;
            int32_t b[3] = {1 << (FIX - 1), 1 << (FIX - 1), 1 << (FIX - 1)};
            for (int k = 0; k < hn; k++)
                for (int c = 0; c < 3; c++) b[c] += row[3 * k + c] * wx[k];
            for (int c = 0; c < 3; c++) a[c] += to_byte(b[c]) * wy[j];
        }
    }
    for (int c = 0; c < 3; c++) out[c] = to_byte(a[c]);
}

/* grid (pixel blocks, images): each thread one pixel of one image, all three channels. */
__global__ void __launch_bounds__(THREADS)
    jpeg_resize_kernel(const jpeg_item *items, const int32_t *coefs, const uint32_t *lut, void *dst,
                       int kind, int nhwc, int crop) {
    const jpeg_item it = items[blockIdx.y];
    int64_t plane = (int64_t)crop * crop;
    int64_t p = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (p >= plane) return;
    int ox = (int)(p % crop), oy = (int)(p / crop);
    int32_t v[3];
    resized_pixel(it, coefs + it.coef, crop, ox, oy, v);
    int64_t base = it.slot * plane * 3;
    for (int c = 0; c < 3; c++) {
        int64_t at = base + (nhwc ? p * 3 + c : c * plane + p);
        if (kind == JPEG_OUT_U8)
            ((uint8_t *)dst)[at] = (uint8_t)v[c];
        else if (kind == JPEG_OUT_F16)
            ((uint16_t *)dst)[at] = (uint16_t)lut[c * 256 + v[c]];
        else
            ((uint32_t *)dst)[at] = lut[c * 256 + v[c]];
    }
}

} // namespace

extern "C" cudaError_t cuda_jpeg_resize(const jpeg_item *items, int n, const int32_t *coefs,
                                        const uint32_t *lut, void *dst, int kind, int nhwc,
                                        int crop, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    int64_t plane = (int64_t)crop * crop;
    dim3 grid((unsigned)((plane + THREADS - 1) / THREADS), (unsigned)n);
    jpeg_resize_kernel<<<grid, THREADS, 0, stream>>>(items, coefs, lut, dst, kind, nhwc, crop);
    return cudaGetLastError();
}
