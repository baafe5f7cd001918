/* cuda_jpeg.c: batched JPEG decoding with nvJPEG into model inputs on the model's GPU. */
#include <nvjpeg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../data/image_internal.h"
#include "../data/transforms.h"
#include "../graph/model.h"
#include "core/half.h"
#include "cuda_internal.h"
#include "cuda_jpeg_cpu.h"
#include "jpeg_resize_launch.h"
#include "../core/clock.h"

#define MAX_BATCH 4096
#define DEFAULT_MAX_PIXELS 178956970

/* The resize of image (w, h): its resized size and both axes' weights (NULL when unchanged). */
typedef struct image_plan {
    int rw, rh;
    resample_coeffs ch, cv;
    bool do_h, do_v;
} image_plan;

#define PLAN_MEMO 32 /* image sizes whose resize weights are kept (a data set has few sizes) */

/* Where a decoder's time went, logged at debug level when it is freed. */
typedef struct jpeg_times {
    double create, hw_engine, gpu_engine, parse, decode, plan, resize;
    int64_t batches, images;
} jpeg_times;

/* A decoder's batched state on one nvJPEG handle. */
typedef struct jpeg_engine {
    nvjpegHandle_t h;
    nvjpegJpegState_t state;
    int init_n; /* batch size of the last nvjpegDecodeBatchedInitialize, -1: none */
} jpeg_engine;

struct graft_jpeg_decoder {
    graft_model *m;
    cuda_backend *be;
    cudaStream_t stream; /* the decoder's own: it may decode while the model runs */
    graft_err err;       /* graft_jpeg_decode_batch's errors (graft_jpeg_decoder_error) */
    graft_image_options o;
    int max_batch, kind;
    bool have_hw;
    jpeg_engine hw, gpu;         /* hw.h NULL without JPEG engines; gpu.h opened when needed */
    bool gpu_failed;             /* gpu could not be opened */
    nvjpegJpegState_t one_state; /* single-image decodes on gpu.h (after a failed batch) */
    nvjpegJpegStream_t parsed;   /* header parses for nvjpegDecodeBatchedSupported */
    uint32_t *lut;               /* (3, 256) device: output bits per channel and byte */
    uint8_t *scratch;            /* device: the batch's decoded images */
    size_t scratch_bytes;
    void *pinned; /* host, pinned: items then tables, uploaded per batch */
    size_t pinned_bytes;
    void *tables; /* device copy of pinned */
    size_t tables_bytes;
    int *width, *height, *group; /* (max_batch): decoded size; 0 skip, 1 hw, 2 gpu */
    size_t *offset;              /* (max_batch): the image's place in scratch */
    const unsigned char **ptrs;  /* (max_batch) */
    size_t *lens;                /* (max_batch) */
    int *index;                  /* (max_batch) */
    jpeg_cpu_part cpu;           /* CPU threads taking a share of each batch */
    unsigned char *cpu_ok;       /* (max_batch): decoded by them */
    size_t slot_bytes;           /* one image in dst */
    image_plan memo[PLAN_MEMO];  /* resize weights of the first PLAN_MEMO sizes seen */
    int memo_w[PLAN_MEMO], memo_h[PLAN_MEMO], n_memo;
    jpeg_times times;
};

static graft_status nvjpeg_fail(graft_err *e, nvjpegStatus_t s, const char *what) {
    return err_set(e, GRAFT_E_UNSUPPORTED, "nvJPEG: %s failed (status %d)", what, (int)s);
}
#define NVJ_TRY(e, expr, what)                                                                     \
    do {                                                                                           \
        nvjpegStatus_t nvj_ = (expr);                                                              \
        if (nvj_ != NVJPEG_STATUS_SUCCESS) return nvjpeg_fail((e), nvj_, (what));                  \
    } while (0)

/* Device memory in the decoder's stream order (the memory is used on that stream only). */
static graft_status dec_alloc(graft_jpeg_decoder *d, size_t bytes, void **out, graft_err *e) {
    *out = NULL;
    cudaError_t err = cudaMallocAsync(out, bytes ? bytes : 1, d->stream);
    if (err == cudaSuccess) return GRAFT_OK;
    cudaGetLastError();
    *out = NULL;
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return err_set(e, GRAFT_E_OUT_OF_MEMORY,
                   "nvJPEG decoding: out of GPU memory on cuda:%d: %.1f MiB needed, %.1f MiB free "
                   "of %.1f MiB",
                   d->be->device, (double)bytes / 1048576.0, (double)free_b / 1048576.0,
                   (double)total_b / 1048576.0);
}

static void dec_free(graft_jpeg_decoder *d, void *p) {
    if (p) cudaFreeAsync(p, d->stream);
}

static graft_status check_options(const graft_image_options *o, int max_batch, graft_err *e) {
    if (max_batch < 1 || max_batch > MAX_BATCH)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "graft_jpeg_decoder_create: max_batch %d is not in 1..%d", max_batch,
                       MAX_BATCH);
    if (o->crop < 1 || o->resize < 0 || o->crop > 16384 || o->resize > 16384)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "graft_jpeg_decoder_create: crop must be 1..16384 and resize 0..16384 "
                       "(got crop %d, resize %d)",
                       o->crop, o->resize);
    if (o->augment)
        return err_set(e, GRAFT_E_UNSUPPORTED,
                       "graft_jpeg_decoder_create: augmentation (random-resized-crop, flip) is "
                       "not done on the GPU; decode training images with augment on the CPU");
    if (o->grayscale)
        return err_set(e, GRAFT_E_UNSUPPORTED,
                       "graft_jpeg_decoder_create: grayscale output is not done on the GPU yet");
    if (o->dtype != GRAFT_DTYPE_F32 && o->dtype != GRAFT_DTYPE_F16 && o->dtype != GRAFT_DTYPE_U8)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "graft_jpeg_decoder_create: dtype must be F32, F16 or U8 (got %d)",
                       (int)o->dtype);
    for (int c = 0; c < 3; c++)
        if (!(o->std[c] > 0.0f))
            return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                           "graft_jpeg_decoder_create: std[%d] is %g, must be > 0", c,
                           (double)o->std[c]);
    return GRAFT_OK;
}

/* The output bits per channel and byte, as transform_to_tensor computes them. */
static graft_status upload_lut(graft_jpeg_decoder *d, graft_err *e) {
    uint32_t lut[3 * 256];
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++) {
            float f = ((float)v / 255.0f - d->o.mean[c]) / d->o.std[c];
            uint32_t bits;
            memcpy(&bits, &f, sizeof bits);
            lut[c * 256 + v] = d->kind == JPEG_OUT_F16 ? f32_to_f16(f) : bits;
        }
    TRY(dec_alloc(d, sizeof lut, (void **)&d->lut, e));
    CUDA_TRY(e, cudaMemcpyAsync(d->lut, lut, sizeof lut, cudaMemcpyHostToDevice, d->stream),
             "uploading the JPEG decoder's tables");
    CUDA_TRY(e, cudaStreamSynchronize(d->stream), "uploading the JPEG decoder's tables");
    return GRAFT_OK;
}

static graft_status engine_open(jpeg_engine *g, nvjpegBackend_t backend, graft_err *e) {
    g->init_n = -1;
    NVJ_TRY(e, nvjpegCreateEx(backend, NULL, NULL, 0, &g->h), "creating a handle");
    NVJ_TRY(e, nvjpegJpegStateCreate(g->h, &g->state), "creating a decoder state");
    return GRAFT_OK;
}

static void engine_close(jpeg_engine *g) {
    if (g->state) nvjpegJpegStateDestroy(g->state);
    if (g->h) nvjpegDestroy(g->h);
    memset(g, 0, sizeof *g);
}

static graft_status decoder_open(graft_jpeg_decoder *d, graft_err *e) {
    CUDA_TRY(e, cudaSetDevice(d->be->device), "selecting the model's GPU");
    CUDA_TRY(e, cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking),
             "creating the JPEG decoder's stream");
    size_t n = (size_t)d->max_batch;
    d->width = calloc(n, sizeof *d->width);
    d->height = calloc(n, sizeof *d->height);
    d->group = calloc(n, sizeof *d->group);
    d->offset = calloc(n, sizeof *d->offset);
    d->ptrs = calloc(n, sizeof *d->ptrs);
    d->lens = calloc(n, sizeof *d->lens);
    d->index = calloc(n, sizeof *d->index);
    d->cpu_ok = calloc(n, 1);
    if (!d->width || !d->height || !d->group || !d->offset || !d->ptrs || !d->lens || !d->index ||
        !d->cpu_ok)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "graft_jpeg_decoder_create: out of memory");
    /* The JPEG engines where the GPU has them (nvJPEG's GPU decoder then opens when an image
     * needs it); else the GPU decoder now. */
    double t0 = clock_seconds();
    d->have_hw = engine_open(&d->hw, NVJPEG_BACKEND_HARDWARE, e) == GRAFT_OK;
    if (!d->have_hw) engine_close(&d->hw);
    err_clear(e);
    d->times.hw_engine = clock_seconds() - t0;
    if (!d->have_hw) {
        TRY(engine_open(&d->gpu, NVJPEG_BACKEND_DEFAULT, e));
        NVJ_TRY(e, nvjpegJpegStateCreate(d->gpu.h, &d->one_state), "creating a decoder state");
    }
    NVJ_TRY(e, nvjpegJpegStreamCreate(d->have_hw ? d->hw.h : d->gpu.h, &d->parsed),
            "creating a stream parser");
    return upload_lut(d, e);
}

/* nvJPEG's GPU decoder (the images the engines do not take), opened when first needed; false
 * when it cannot be (those images then go to the CPU). */
static bool gpu_engine(graft_jpeg_decoder *d) {
    if (d->gpu.h && d->one_state) return true;
    if (d->gpu_failed) return false;
    graft_err e;
    err_clear(&e);
    double t0 = clock_seconds();
    bool ok = engine_open(&d->gpu, NVJPEG_BACKEND_DEFAULT, &e) == GRAFT_OK &&
              nvjpegJpegStateCreate(d->gpu.h, &d->one_state) == NVJPEG_STATUS_SUCCESS;
    d->times.gpu_engine += clock_seconds() - t0;
    if (!ok) {
        if (d->one_state) nvjpegJpegStateDestroy(d->one_state);
        d->one_state = NULL;
        engine_close(&d->gpu);
        d->gpu_failed = true;
    }
    return ok;
}

/* A decoder for model's GPU, its errors into e (graft_jpeg_decoder_create: the model's context;
 * graft_jpeg_decoder_open: the caller's buffer). */
static graft_status decoder_create(graft_model *model, const graft_image_options *options,
                                   int max_batch, graft_jpeg_decoder **out, graft_err *e) {
    if (!model->have_device || strcmp(model->device.name, "cuda") != 0)
        return err_set(e, GRAFT_E_UNSUPPORTED,
                       "graft_jpeg_decoder_create: the model runs on the CPU (load it with a GPU "
                       "device to decode JPEGs on the GPU)");
    graft_image_options defaults = GRAFT_IMAGE_OPTIONS_INIT;
    graft_image_options o = options ? *options : defaults;
    TRY(check_options(&o, max_batch, e));
    if (!o.max_pixels) o.max_pixels = DEFAULT_MAX_PIXELS;
    o.input_name = NULL;
    graft_jpeg_decoder *d = calloc(1, sizeof *d);
    if (!d) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "graft_jpeg_decoder_create: out of memory");
    d->m = model;
    d->be = model->device.impl;
    d->o = o;
    d->max_batch = max_batch;
    d->kind = o.dtype == GRAFT_DTYPE_U8    ? JPEG_OUT_U8
              : o.dtype == GRAFT_DTYPE_F16 ? JPEG_OUT_F16
                                           : JPEG_OUT_F32;
    d->slot_bytes = (size_t)3 * (size_t)o.crop * (size_t)o.crop * graft_dtype_size(o.dtype);
    double t0 = clock_seconds();
    graft_status st = decoder_open(d, e);
    d->times.create = clock_seconds() - t0;
    if (st != GRAFT_OK) {
        graft_jpeg_decoder_free(d); /* touches no error state */
        return st;
    }
    *out = d;
    return GRAFT_OK;
}

graft_status graft_jpeg_decoder_create(graft_model *model, const graft_image_options *options,
                                       int max_batch, graft_jpeg_decoder **out) {
    if (!out) return GRAFT_E_INVALID_ARGUMENT;
    *out = NULL;
    if (!model) return GRAFT_E_INVALID_ARGUMENT;
    err_clear(&model->ctx->err);
    return decoder_create(model, options, max_batch, out, &model->ctx->err);
}

graft_status graft_jpeg_decoder_open(graft_model *model, const graft_image_options *options,
                                     int max_batch, char *error, size_t error_size,
                                     graft_jpeg_decoder **out) {
    if (error && error_size) error[0] = 0;
    if (!out) return GRAFT_E_INVALID_ARGUMENT;
    *out = NULL;
    if (!model) return GRAFT_E_INVALID_ARGUMENT;
    graft_err e;
    err_clear(&e);
    graft_status st = decoder_create(model, options, max_batch, out, &e);
    if (st != GRAFT_OK && error && error_size) snprintf(error, error_size, "%s", e.msg);
    return st;
}

void graft_jpeg_decoder_free(graft_jpeg_decoder *d) {
    if (!d) return;
    const jpeg_times *t = &d->times;
    if (t->batches)
        ctx_log(
            d->m->ctx, GRAFT_LOG_DEBUG,
            "nvJPEG decoder (%s): created in %.3fs (hardware engines %.3fs); %lld batches, %lld "
            "images: headers %.3fs, decode calls %.3fs (the GPU decoder's start %.3fs), resize "
            "plans %.3fs, resize and wait %.3fs",
            graft_jpeg_decoder_backend(d), t->create, t->hw_engine, (long long)t->batches,
            (long long)t->images, t->parse, t->decode, t->gpu_engine, t->plan, t->resize);
    if (d->cpu.images)
        ctx_log(d->m->ctx, GRAFT_LOG_DEBUG,
                "JPEG decoding on %d CPU threads beside nvJPEG: %lld images in %.3fs of their "
                "time (%.0f images/s a thread); rates at the end: nvJPEG %.0f, CPU %.0f images/s",
                d->cpu.threads, (long long)d->cpu.images, d->cpu.busy_seconds,
                d->cpu.busy_seconds > 0 ? (double)d->cpu.images / d->cpu.busy_seconds : 0.0,
                d->cpu.gpu_rate, d->cpu.cpu_rate);
    for (int k = 0; k < d->n_memo; k++)
        resample_coeffs_free(&d->memo[k].ch), resample_coeffs_free(&d->memo[k].cv);
    cudaSetDevice(d->be->device);
    if (d->stream) cudaStreamSynchronize(d->stream);
    if (d->parsed) nvjpegJpegStreamDestroy(d->parsed);
    if (d->one_state) nvjpegJpegStateDestroy(d->one_state);
    engine_close(&d->hw);
    engine_close(&d->gpu);
    if (d->stream) {
        dec_free(d, d->lut), dec_free(d, d->scratch), dec_free(d, d->tables);
        cudaStreamSynchronize(d->stream);
        cudaStreamDestroy(d->stream);
    }
    if (d->pinned) cudaFreeHost(d->pinned);
    jpeg_cpu_free(&d->cpu);
    free(d->cpu_ok);
    free(d->width), free(d->height), free(d->group), free(d->offset);
    free(d->ptrs), free(d->lens), free(d->index);
    free(d);
}

const char *graft_jpeg_decoder_error(const graft_jpeg_decoder *d) {
    return d ? d->err.msg : "no decoder";
}

const char *graft_jpeg_decoder_backend(const graft_jpeg_decoder *d) {
    return d && d->have_hw ? "hardware" : "gpu";
}

/* The EXIF (first APP1 "Exif") or else XMP orientation of a JPEG, 0 when it has neither; the
 * markers before the first scan are walked as the CPU decoder reads them. */
static int jpeg_orientation(const uint8_t *p, size_t n) {
    static const char xmp_id[] = "http://ns.adobe.com/xap/1.0/";
    int exif = 0, xmp = 0;
    bool seen_exif = false;
    size_t at = 2;
    while (at + 4 <= n && p[at] == 0xFF) {
        int marker = p[at + 1];
        if (marker == 0xFF) {
            at++;
            continue;
        }
        if (marker == 0xDA || marker == 0xD9) break;
        size_t len = (size_t)p[at + 2] << 8 | p[at + 3];
        if (len < 2 || at + 2 + len > n) break;
        const uint8_t *seg = p + at + 4;
        size_t seg_n = len - 2;
        if (marker == 0xE1 && seg_n >= 6 && memcmp(seg, "Exif\0\0", 6) == 0 && !seen_exif) {
            seen_exif = true;
            exif = image_exif_orientation(seg, seg_n);
        } else if (marker == 0xE1 && seg_n > sizeof xmp_id &&
                   memcmp(seg, xmp_id, sizeof xmp_id) == 0) {
            if (!xmp) xmp = image_xmp_orientation(seg, seg_n);
        }
        at += 2 + len;
    }
    return exif ? exif : xmp;
}

/* Which engine decodes image i (0: none, the caller's CPU does), and its size. Anything in
 * doubt is left to the CPU: not a JPEG, no EOI at the end (truncated), a turned image, not 1 or
 * 3 components, over max_pixels, a header nvJPEG cannot parse. */
static int classify(graft_jpeg_decoder *d, const uint8_t *p, size_t n, int *w, int *h) {
    if (!p || n < 4 || p[0] != 0xFF || p[1] != 0xD8 || p[2] != 0xFF) return 0;
    if (p[n - 2] != 0xFF || p[n - 1] != 0xD9) return 0;
    int o = jpeg_orientation(p, n);
    if (o > 1) return 0;
    int comps = 0, ws[NVJPEG_MAX_COMPONENT] = {0}, hs[NVJPEG_MAX_COMPONENT] = {0};
    nvjpegChromaSubsampling_t css;
    /* One header parse: the hardware's stream parser (which also says whether the engines take
     * the image) where there are engines, else the GPU decoder's image info. */
    bool parsed = false;
    if (d->have_hw) {
        unsigned cw = 0, ch = 0, nc = 0;
        parsed = nvjpegJpegStreamParseHeader(d->hw.h, p, n, d->parsed) == NVJPEG_STATUS_SUCCESS &&
                 nvjpegJpegStreamGetFrameDimensions(d->parsed, &cw, &ch) == NVJPEG_STATUS_SUCCESS &&
                 nvjpegJpegStreamGetComponentsNum(d->parsed, &nc) == NVJPEG_STATUS_SUCCESS &&
                 nvjpegJpegStreamGetChromaSubsampling(d->parsed, &css) == NVJPEG_STATUS_SUCCESS;
        comps = (int)nc, ws[0] = (int)cw, hs[0] = (int)ch;
    }
    if (!parsed) {
        if (nvjpegGetImageInfo(d->have_hw ? d->hw.h : d->gpu.h, p, n, &comps, &css, ws, hs) !=
            NVJPEG_STATUS_SUCCESS)
            return 0;
    }
    if ((comps != 1 && comps != 3) || css == NVJPEG_CSS_UNKNOWN || ws[0] <= 0 || hs[0] <= 0)
        return 0;
    if ((int64_t)ws[0] * hs[0] > d->o.max_pixels) return 0;
    /* A resize the CPU refuses (over its pixel limit) is the CPU's to report. */
    int rw = ws[0], rh = hs[0];
    if (d->o.resize > 0 && transform_shorter_size(ws[0], hs[0], d->o.resize, &rw, &rh, NULL))
        return 0;
    if ((int64_t)rw * rh > IMAGE_MAX_PIXELS) return 0;
    *w = ws[0], *h = hs[0];
    if (!parsed) return 2;
    int unsupported = 1;
    if (nvjpegDecodeBatchedSupported(d->hw.h, d->parsed, &unsupported) != NVJPEG_STATUS_SUCCESS)
        return 2;
    return unsupported == 0 ? 1 : 2;
}

/* Place the images to decode in scratch (grown on the stream when too small). */
static graft_status place(graft_jpeg_decoder *d, int n, graft_err *e) {
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (!d->group[i]) continue;
        d->offset[i] = total;
        total += ((size_t)d->width[i] * d->height[i] * 3 + 255) & ~(size_t)255;
    }
    if (total > d->scratch_bytes) {
        dec_free(d, d->scratch);
        d->scratch = NULL, d->scratch_bytes = 0;
        TRY(dec_alloc(d, total, (void **)&d->scratch, e));
        d->scratch_bytes = total;
    }
    return GRAFT_OK;
}

/* Images of one group through nvJPEG's batched decoder; when the batch fails, each alone on the
 * GPU decoder, those that still fail left to the CPU (group 0). */
static void decode_group(graft_jpeg_decoder *d, jpeg_engine *g, int which, int n,
                         const unsigned char *const *data, const size_t *lengths) {
    int k = 0;
    nvjpegImage_t dest[1];
    for (int i = 0; i < n; i++) {
        if (d->group[i] != which) continue;
        d->ptrs[k] = data[i], d->lens[k] = lengths[i], d->index[k] = i;
        k++;
    }
    if (k == 0) return;
    if (g == &d->gpu && !gpu_engine(d)) {
        for (int j = 0; j < k; j++) d->group[d->index[j]] = 0;
        return;
    }
    nvjpegImage_t *gathered = malloc((size_t)k * sizeof *gathered);
    bool ok = gathered != NULL;
    for (int j = 0; ok && j < k; j++) {
        memset(&gathered[j], 0, sizeof gathered[j]);
        gathered[j].channel[0] = d->scratch + d->offset[d->index[j]];
        gathered[j].pitch[0] = (size_t)d->width[d->index[j]] * 3;
    }
    if (ok && g->init_n != k) {
        ok = nvjpegDecodeBatchedInitialize(g->h, g->state, k, 1, NVJPEG_OUTPUT_RGBI) ==
             NVJPEG_STATUS_SUCCESS;
        g->init_n = ok ? k : -1;
    }
    if (ok)
        ok = nvjpegDecodeBatched(g->h, g->state, d->ptrs, d->lens, gathered, d->stream) ==
             NVJPEG_STATUS_SUCCESS;
    if (!ok) {
        g->init_n = -1; /* a failed batch needs a new initialisation */
        bool one = gpu_engine(d);
        for (int j = 0; j < k; j++) {
            int i = d->index[j];
            if (!one) {
                d->group[i] = 0;
                continue;
            }
            memset(dest, 0, sizeof dest);
            dest[0].channel[0] = d->scratch + d->offset[i];
            dest[0].pitch[0] = (size_t)d->width[i] * 3;
            if (nvjpegDecode(d->gpu.h, d->one_state, data[i], lengths[i], NVJPEG_OUTPUT_RGBI, dest,
                             d->stream) != NVJPEG_STATUS_SUCCESS)
                d->group[i] = 0;
        }
    }
    free(gathered);
}

/* One axis of one image's tables: for the crop's n positions from `offset` in the resized axis
 * (resized long), first/count/weights; `c` NULL: the axis keeps its size (identity weights). */
static void axis_tables(int32_t *first, int32_t *count, int32_t *w, int taps, int n, int offset,
                        int resized, const resample_coeffs *c) {
    memset(w, 0, sizeof *w * (size_t)n * (size_t)taps);
    for (int o = 0; o < n; o++) {
        int r = offset + o;
        first[o] = 0, count[o] = 0;
        if (r < 0 || r >= resized) continue;
        if (!c) {
            first[o] = r, count[o] = 1, w[(size_t)o * taps] = 1 << RESAMPLE_FIX_BITS;
            continue;
        }
        first[o] = c->first[r], count[o] = c->count[r];
        memcpy(w + (size_t)o * taps, c->w + (size_t)r * c->taps, sizeof *w * (size_t)c->count[r]);
    }
}

static graft_status plan_image(const graft_image_options *o, int w, int h, image_plan *p,
                               graft_err *e) {
    memset(p, 0, sizeof *p);
    p->rw = w, p->rh = h;
    if (o->resize > 0) TRY(transform_shorter_size(w, h, o->resize, &p->rw, &p->rh, e));
    p->do_h = p->rw != w, p->do_v = p->rh != h;
    if (p->do_h) TRY(resample_coeffs_make(&p->ch, w, p->rw, e));
    if (p->do_v) TRY(resample_coeffs_make(&p->cv, h, p->rh, e));
    return GRAFT_OK;
}

/* The plan for (w, h): a kept one, else made into *own (kept too while there is room). NULL
 * when it cannot be made (e says why). */
static const image_plan *plan_for(graft_jpeg_decoder *d, int w, int h, image_plan *own,
                                  graft_err *e) {
    for (int k = 0; k < d->n_memo; k++)
        if (d->memo_w[k] == w && d->memo_h[k] == h) return &d->memo[k];
    if (plan_image(&d->o, w, h, own, e) != GRAFT_OK) {
        resample_coeffs_free(&own->ch), resample_coeffs_free(&own->cv);
        return NULL;
    }
    if (d->n_memo == PLAN_MEMO) return own;
    int k = d->n_memo++;
    d->memo[k] = *own, d->memo_w[k] = w, d->memo_h[k] = h;
    memset(own, 0, sizeof *own);
    return &d->memo[k];
}

static size_t plan_ints(const image_plan *p, int crop) {
    int th = p->do_h ? p->ch.taps : 1, tv = p->do_v ? p->cv.taps : 1;
    return (size_t)crop * (size_t)(4 + th + tv);
}

/* Grow a pinned or device buffer to `bytes` (the old contents are not kept). */
static graft_status grow_pinned(graft_jpeg_decoder *d, size_t bytes, graft_err *e) {
    if (bytes <= d->pinned_bytes) return GRAFT_OK;
    if (d->pinned) cudaFreeHost(d->pinned);
    d->pinned = NULL, d->pinned_bytes = 0;
    CUDA_TRY(e, cudaHostAlloc(&d->pinned, bytes, cudaHostAllocDefault),
             "allocating pinned memory for the resize tables");
    d->pinned_bytes = bytes;
    if (bytes > d->tables_bytes) {
        dec_free(d, d->tables);
        d->tables = NULL, d->tables_bytes = 0;
        TRY(dec_alloc(d, bytes, &d->tables, e));
        d->tables_bytes = bytes;
    }
    return GRAFT_OK;
}

/* Write items and tables of the decoded images into pinned memory, upload them and launch the
 * kernel. plans: (n) of the images, valid where group != 0. */
static graft_status resize_batch(graft_jpeg_decoder *d, int n, const image_plan *const *plans,
                                 void *dst, graft_err *e) {
    int crop = d->o.crop, ok = 0;
    size_t ints = 0;
    for (int i = 0; i < n; i++)
        if (d->group[i]) ok++, ints += plan_ints(plans[i], crop);
    if (!ok) return GRAFT_OK;
    size_t items_bytes = ((size_t)ok * sizeof(jpeg_item) + 255) & ~(size_t)255;
    size_t bytes = items_bytes + ints * sizeof(int32_t);
    TRY(grow_pinned(d, bytes, e)); /* the last batch's upload ended with its call */
    jpeg_item *items = d->pinned;
    int32_t *t = (int32_t *)((char *)d->pinned + items_bytes);
    int64_t at = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!d->group[i]) continue;
        const image_plan *p = plans[i];
        int th = p->do_h ? p->ch.taps : 1, tv = p->do_v ? p->cv.taps : 1;
        int cx = transform_center_offset(p->rw, crop), cy = transform_center_offset(p->rh, crop);
        int32_t *h = t + at, *v = h + (size_t)crop * (2 + th);
        axis_tables(h, h + crop, h + 2 * crop, th, crop, cx, p->rw, p->do_h ? &p->ch : NULL);
        axis_tables(v, v + crop, v + 2 * crop, tv, crop, cy, p->rh, p->do_v ? &p->cv : NULL);
        items[k++] = (jpeg_item){
            .src = d->scratch + d->offset[i],
            .width = d->width[i],
            .height = d->height[i],
            .vertical_first = p->do_h && p->do_v &&
                              resample_vertical_first(d->width[i], d->height[i], p->rw, p->rh),
            .taps_h = th,
            .taps_v = tv,
            .coef = at,
            .slot = i,
        };
        at += (int64_t)plan_ints(p, crop);
    }
    cudaStream_t s = d->stream;
    CUDA_TRY(e, cudaMemcpyAsync(d->tables, d->pinned, bytes, cudaMemcpyHostToDevice, s),
             "uploading the resize tables");
    CUDA_TRY(e,
             cuda_jpeg_resize(d->tables, ok, (const int32_t *)((char *)d->tables + items_bytes),
                              d->lut, dst, d->kind, d->o.nhwc != 0, crop, s),
             "the JPEG resize kernel");
    return GRAFT_OK;
}

/* nvJPEG's share of a batch: images [0, g) that classify gave a group. */
typedef struct gpu_share_args {
    graft_jpeg_decoder *d;
    const unsigned char *const *data;
    const size_t *lengths;
} gpu_share_args;

static graft_status gpu_share(void *arg, int g) {
    gpu_share_args *a = arg;
    TRY(place(a->d, g, &a->d->err));
    if (a->d->have_hw) decode_group(a->d, &a->d->hw, 1, g, a->data, a->lengths);
    decode_group(a->d, &a->d->gpu, 2, g, a->data, a->lengths);
    return GRAFT_OK;
}

/* The CPU threads' images [g, n) from the pinned staging into dst, a run of slots a copy (the
 * slots of images they could not decode are left untouched). */
static graft_status upload_cpu_share(graft_jpeg_decoder *d, int g, int n, void *dst, graft_err *e) {
    size_t slot = d->slot_bytes;
    for (int i = g; i < n;) {
        if (!d->cpu_ok[i]) {
            i++;
            continue;
        }
        int end = i;
        while (end < n && d->cpu_ok[end]) end++;
        CUDA_TRY(e,
                 cudaMemcpyAsync((char *)dst + (size_t)i * slot,
                                 (char *)d->cpu.staging + (size_t)i * slot,
                                 (size_t)(end - i) * slot, cudaMemcpyHostToDevice, d->stream),
                 "uploading the images decoded on the CPU");
        i = end;
    }
    return GRAFT_OK;
}

graft_status graft_jpeg_decoder_set_cpu_threads(graft_jpeg_decoder *d, int threads) {
    if (!d) return GRAFT_E_INVALID_ARGUMENT;
    if (threads < 0 || threads > 1024)
        return err_set(&d->err, GRAFT_E_INVALID_ARGUMENT,
                       "graft_jpeg_decoder_set_cpu_threads: %d threads is not in 0..1024", threads);
    jpeg_cpu_set_threads(&d->cpu, threads);
    return GRAFT_OK;
}

graft_status graft_jpeg_decode_batch(graft_jpeg_decoder *d, const unsigned char *const *data,
                                     const size_t *lengths, int n, void *dst,
                                     unsigned char *decoded) {
    if (!d) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &d->err;
    err_clear(e);
    if (n < 0 || n > d->max_batch)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "graft_jpeg_decode_batch: %d images, the decoder takes 0..%d (max_batch)", n,
                       d->max_batch);
    if (n == 0) return GRAFT_OK;
    if (!data || !lengths || !dst || !decoded)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "graft_jpeg_decode_batch: NULL data, lengths, dst or decoded");
    CUDA_TRY(e, cudaSetDevice(d->be->device), "selecting the model's GPU");
    jpeg_times *tm = &d->times;
    double t0 = clock_seconds();
    int g = jpeg_cpu_split(&d->cpu, n); /* nvJPEG takes [0, g), the CPU threads the rest */
    for (int i = 0; i < n; i++) {
        decoded[i] = 0;
        d->group[i] = i < g ? classify(d, data[i], lengths[i], &d->width[i], &d->height[i]) : 0;
    }
    double t1 = clock_seconds();
    gpu_share_args share = {d, data, lengths};
    TRY(jpeg_cpu_run(&d->cpu, &d->o, d->slot_bytes, data, lengths, g, n, d->cpu_ok, gpu_share,
                     &share, e));
    double t2 = clock_seconds();
    const image_plan **plans = calloc((size_t)n, sizeof *plans);
    image_plan *own = calloc((size_t)n, sizeof *own);
    graft_status st =
        plans && own ? GRAFT_OK
                     : err_set(e, GRAFT_E_OUT_OF_MEMORY, "graft_jpeg_decode_batch: out of memory");
    for (int i = 0; i < n && st == GRAFT_OK; i++)
        if (d->group[i] && !(plans[i] = plan_for(d, d->width[i], d->height[i], &own[i], e))) {
            d->group[i] = 0; /* no weights for it: the CPU's error to give */
            if (e->status == GRAFT_E_OUT_OF_MEMORY)
                st = e->status;
            else
                err_clear(e);
        }
    double t3 = clock_seconds();
    if (st == GRAFT_OK) st = resize_batch(d, n, plans, dst, e);
    if (st == GRAFT_OK && g < n) st = upload_cpu_share(d, g, n, dst, e);
    if (st == GRAFT_OK) {
        cudaError_t done = cudaStreamSynchronize(d->stream);
        if (done != cudaSuccess) st = cuda_fail(e, done, "decoding a batch of JPEGs");
    }
    for (int i = 0; own && i < n; i++) {
        resample_coeffs_free(&own[i].ch), resample_coeffs_free(&own[i].cv);
        if (st == GRAFT_OK) decoded[i] = d->group[i] ? 1 : i >= g && d->cpu_ok[i] ? 2 : 0;
    }
    free(plans), free(own);
    tm->parse += t1 - t0, tm->decode += t2 - t1, tm->plan += t3 - t2,
        tm->resize += clock_seconds() - t3;
    tm->batches++, tm->images += n;
    return st;
}
