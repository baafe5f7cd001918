/* test_gpu_jpeg.c: graft_jpeg_decode_batch (nvJPEG on the GPU) against the CPU: the resize, crop
 * and normalisation bit-exact given the GPU's decoded pixels, graft_image_load's output within
 * decoder tolerance for every JPEG in the image folder and generated ones, bad files left to the
 * CPU, the errors, and the throughput of both paths (INFO). Args: MODEL.onnx IMAGE_DIR */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <jpeglib.h> /* after stdio.h */

#include "data/transforms.h"
#include "gpu_test_util.h"
#include "test_util.h"

#define MAX_FILES 128
#define BENCH_BATCH 256
/* nvJPEG's IDCT and chroma upsampling against libjpeg-turbo's (ISLOW, fancy upsampling): a few
 * units in smooth areas; at a saturated colour edge the chroma upsamplers (interpolating vs
 * not) differ by up to a quarter of the edge's chroma step, which the resize's averaging
 * halves: 48 (3/16 of full scale) bounds that, and the mean must stay <= 1. */
#define MAX_DIFF 48
#define MEAN_DIFF 1.0
/* The committed fixtures (tests/data/images) are synthetic: flat saturated colours with sharp
 * edges, 4:2:0, small, where the upsamplers' difference covers much of the image. Measured on an
 * H200 (nvJPEG 13.0, hardware and GPU backends alike): mean 1.4-4.9, max 28-84 pixel units;
 * torchvision.io.decode_jpeg on the GPU differs from PIL on them alike (docs/cuda.md). */
#define FIXTURE_MAX_DIFF 96
#define FIXTURE_MEAN_DIFF 6.0

typedef struct file_bytes {
    char path[512];
    unsigned char *data;
    size_t size;
} file_bytes;

static int read_file(const char *path, file_bytes *f) {
    snprintf(f->path, sizeof f->path, "%s", path);
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    f->data = malloc(n > 0 ? (size_t)n : 1);
    f->size = f->data ? fread(f->data, 1, (size_t)n, fp) : 0;
    fclose(fp);
    return f->data ? 0 : -1;
}

static int write_file(const char *path, const unsigned char *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    size_t w = fwrite(p, 1, n, fp);
    fclose(fp);
    return w == n ? 0 : -1;
}

/* A w x h photo-like JPEG (smooth colour gradients, soft blobs and mild noise) written with
 * libjpeg: quality 90, 4:2:0 unless full_chroma, progressive if asked. */
static int make_jpeg(const char *path, int w, int h, int seed, int full_chroma, int progressive) {
    unsigned char *rgb = malloc((size_t)w * h * 3);
    if (!rgb) return -1;
    uint32_t r = (uint32_t)seed * 2654435761u + 1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            r = r * 1103515245u + 12345u;
            int noise = (int)((r >> 16) % 9) - 4;
            double fx = (double)x / w, fy = (double)y / h;
            double blob = 60.0 * sin(fx * (7 + seed % 5)) * cos(fy * (5 + seed % 3));
            int v[3] = {(int)(40 + 150 * fx + blob), (int)(60 + 120 * fy - blob / 2),
                        (int)(90 + 80 * (1 - fx) * fy + blob / 3)};
            for (int c = 0; c < 3; c++) {
                int q = v[c] + noise;
                rgb[((size_t)y * w + x) * 3 + c] = (unsigned char)(q < 0 ? 0 : q > 255 ? 255 : q);
            }
        }
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        free(rgb);
        return -1;
    }
    jpeg_stdio_dest(&ci, fp);
    ci.image_width = (JDIMENSION)w, ci.image_height = (JDIMENSION)h;
    ci.input_components = 3, ci.in_color_space = JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, 90, TRUE);
    if (full_chroma) ci.comp_info[0].h_samp_factor = ci.comp_info[0].v_samp_factor = 1;
    if (progressive) jpeg_simple_progression(&ci);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = rgb + (size_t)ci.next_scanline * w * 3;
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    fclose(fp);
    free(rgb);
    return 0;
}

/* The byte a normalised value came from (the inverse of transform_to_tensor's table), or -1. */
static int to_byte(float v, int c, const graft_image_options *o) {
    for (int b = 0; b < 256; b++)
        if (((float)b / 255.0f - o->mean[c]) / o->std[c] == v) return b;
    return -1;
}

/* out (crop, crop, 3) bytes of an output slot in the options' dtype and layout; -1 when a float
 * is not one of the normalisation's values. */
static int slot_bytes(const void *slot, const graft_image_options *o, unsigned char *out) {
    int64_t plane = (int64_t)o->crop * o->crop;
    for (int64_t p = 0; p < plane; p++)
        for (int c = 0; c < 3; c++) {
            int64_t at = o->nhwc ? p * 3 + c : c * plane + p;
            int b = o->dtype == GRAFT_DTYPE_U8 ? ((const unsigned char *)slot)[at]
                                               : to_byte(((const float *)slot)[at], c, o);
            if (b < 0) return -1;
            out[p * 3 + c] = (unsigned char)b;
        }
    return 0;
}

/* The decoder's message when it has one, else the context's. */
static const char *last_error(graft_ctx *ctx, const graft_jpeg_decoder *d) {
    const char *msg = d ? graft_jpeg_decoder_error(d) : "";
    return msg[0] ? msg : graft_last_error(ctx);
}

/* One GPU batch of files into host memory (n slots of `slot` bytes). */
static graft_status gpu_batch(graft_model *m, graft_jpeg_decoder *d, const file_bytes *f, int n,
                              size_t slot, void *host, unsigned char *decoded) {
    const unsigned char *ptr[MAX_FILES];
    size_t len[MAX_FILES];
    for (int i = 0; i < n; i++) ptr[i] = f[i].data, len[i] = f[i].size;
    void *dev = NULL;
    graft_status st = graft_model_device_alloc(m, slot * (size_t)n, &dev);
    if (st == GRAFT_OK) st = graft_jpeg_decode_batch(d, ptr, len, n, dev, decoded);
    if (st == GRAFT_OK)
        st = graft_model_copy(m, host, dev, slot * (size_t)n, GRAFT_COPY_DEVICE_TO_HOST);
    graft_model_device_free(m, dev);
    return st;
}

static size_t slot_size(const graft_image_options *o) {
    return (size_t)3 * o->crop * o->crop * graft_dtype_size(o->dtype);
}

/* Given the GPU's own decoded pixels (U8, no resize, a crop covering the image), the CPU's
 * resize + crop + to_tensor of them must equal the GPU's output bit for bit. */
static void exactness(graft_ctx *ctx, graft_model *m, const file_bytes *f, int w, int h) {
    char name[600];
    snprintf(name, sizeof name, "exact_resize %.500s (%dx%d)", strrchr(f->path, '/') + 1, w, h);
    int side = w > h ? w : h;
    graft_image_options raw_o = GRAFT_IMAGE_OPTIONS_INIT;
    raw_o.resize = 0, raw_o.crop = side, raw_o.nhwc = 1, raw_o.dtype = GRAFT_DTYPE_U8;
    graft_jpeg_decoder *d = NULL;
    unsigned char ok = 0;
    unsigned char *raw = malloc(slot_size(&raw_o));
    image_u8 img = {w, h, malloc((size_t)w * h * 3)}, a = {0}, b = {0};
    graft_status st = graft_jpeg_decoder_create(m, &raw_o, 1, &d);
    if (st == GRAFT_OK) st = gpu_batch(m, d, f, 1, slot_size(&raw_o), raw, &ok);
    if (st != GRAFT_OK || !ok) {
        CHECK(name, 0, "raw decode: status %d decoded %d: %s", st, ok, last_error(ctx, d));
        graft_jpeg_decoder_free(d);
        goto done;
    }
    graft_jpeg_decoder_free(d);
    int ox = transform_center_offset(w, side), oy = transform_center_offset(h, side);
    for (int y = 0; y < h; y++)
        memcpy(img.pixels + (size_t)y * w * 3, raw + ((size_t)(y - oy) * side - ox) * 3,
               (size_t)w * 3);
    graft_image_options o = GRAFT_IMAGE_OPTIONS_INIT;
    transform_resize_shorter(&a, &img, o.resize, NULL);
    transform_center_crop(&b, &a, o.crop, o.crop, NULL);
    for (int layout = 0; layout < 2; layout++) {
        o.nhwc = layout;
        size_t bytes = slot_size(&o);
        float *cpu = malloc(bytes), *gpu = malloc(bytes);
        st = transform_to_tensor(cpu, GRAFT_DTYPE_F32, layout, &b, o.mean, o.std, NULL);
        if (st == GRAFT_OK) st = graft_jpeg_decoder_create(m, &o, 1, &d);
        if (st == GRAFT_OK) st = gpu_batch(m, d, f, 1, bytes, gpu, &ok);
        graft_jpeg_decoder_free(d);
        int64_t bad = 0;
        for (size_t i = 0; st == GRAFT_OK && i < bytes / 4; i++) bad += cpu[i] != gpu[i];
        char sub[700];
        snprintf(sub, sizeof sub, "%.600s %s", name, layout ? "nhwc" : "nchw");
        CHECK(sub, st == GRAFT_OK && ok && bad == 0, "status %d decoded %d, %lld values differ", st,
              ok, (long long)bad);
        free(cpu), free(gpu);
    }
done:
    free(raw), image_free(&img), image_free(&a), image_free(&b);
}

/* Every file in one batch against graft_image_load with options o: decoded ones within the
 * tolerance, files the CPU refuses not decoded; `must` (n) marks files the GPU has to decode.
 * With beside CPU threads next to nvJPEG, the images they decode (decoded 2) are
 * graft_image_load's exactly, and both sides take some. */
static void against_cpu(graft_ctx *ctx, graft_model *m, const file_bytes *f, const int *must, int n,
                        graft_image_options o, const char *what, int beside) {
    graft_image_options cpu_o = o;
    cpu_o.dtype = GRAFT_DTYPE_F32; /* the CPU's U8 path may not exist yet: compare bytes */
    size_t slot = slot_size(&o), cpu_slot = slot_size(&cpu_o);
    unsigned char *host = malloc(slot * (size_t)n), decoded[MAX_FILES] = {0};
    unsigned char *gb = malloc(cpu_slot), *cb = malloc(cpu_slot);
    float *cpu = malloc(cpu_slot);
    graft_jpeg_decoder *d = NULL;
    char name[700];
    graft_status st = graft_jpeg_decoder_create(m, &o, n, &d);
    if (st == GRAFT_OK && beside) st = graft_jpeg_decoder_set_cpu_threads(d, beside);
    if (st == GRAFT_OK) {
        printf("# %s: backend %s\n", what, graft_jpeg_decoder_backend(d));
        st = gpu_batch(m, d, f, n, slot, host, decoded);
    }
    snprintf(name, sizeof name, "%s batch", what);
    CHECK(name, st == GRAFT_OK, "status %d: %s", st, last_error(ctx, d));
    graft_jpeg_decoder_free(d);
    for (int i = 0; st == GRAFT_OK && i < n; i++) {
        const char *base = strrchr(f[i].path, '/') ? strrchr(f[i].path, '/') + 1 : f[i].path;
        snprintf(name, sizeof name, "%.100s %.500s", what, base);
        graft_status cs = graft_image_load(ctx, f[i].path, &cpu_o, cpu, cpu_slot);
        if (cs != GRAFT_OK || !decoded[i]) {
            if (cs != GRAFT_OK || must[i])
                CHECK(name, !decoded[i] && !must[i], "CPU status %d, GPU decoded %d (must %d)", cs,
                      decoded[i], must[i]);
            else
                printf("# %s: left to the CPU (decoded 0)\n", name);
            continue;
        }
        graft_image_options byte_o = cpu_o;
        if (slot_bytes(cpu, &byte_o, cb) || slot_bytes(host + slot * (size_t)i, &o, gb)) {
            CHECK(name, 0, "an output value is not one of the normalisation's");
            continue;
        }
        double sum = 0;
        int mx = 0;
        for (size_t k = 0; k < cpu_slot / 4; k++) {
            int dd = abs((int)cb[k] - (int)gb[k]);
            sum += dd, mx = dd > mx ? dd : mx;
        }
        double mean = sum / (double)(cpu_slot / 4);
        printf("# %s: mean |gpu - cpu| %.3f, max %d (pixel units)\n", name, mean, mx);
        double mean_max = must[i] ? MEAN_DIFF : FIXTURE_MEAN_DIFF;
        int max_max = must[i] ? MAX_DIFF : FIXTURE_MAX_DIFF;
        if (decoded[i] == 2)
            CHECK(name, mx == 0, "decoded on the CPU threads: mean %.3f, max %d (must be 0)", mean,
                  mx);
        else
            CHECK(name, decoded[i] == 1 && mean <= mean_max && mx <= max_max,
                  "decoded %d, mean %.3f (<= %.1f), max %d (<= %d)", decoded[i], mean, mean_max, mx,
                  max_max);
    }
    int by[3] = {0};
    for (int i = 0; st == GRAFT_OK && i < n; i++) by[decoded[i] < 3 ? decoded[i] : 0]++;
    printf("# %s: %d by nvJPEG, %d by CPU threads beside it, %d left\n", what, by[1], by[2], by[0]);
    snprintf(name, sizeof name, "%s split", what);
    if (beside)
        CHECK(name, by[1] > 0 && by[2] > 0, "nvJPEG %d, CPU threads %d", by[1], by[2]);
    else
        CHECK(name, by[2] == 0, "%d decoded by CPU threads that were not asked for", by[2]);
    free(host), free(gb), free(cb), free(cpu);
}

static void errors(graft_ctx *ctx, graft_model *m, graft_model *cpu_model, const file_bytes *f) {
    graft_image_options o = GRAFT_IMAGE_OPTIONS_INIT;
    graft_jpeg_decoder *d = NULL;
    graft_status st = graft_jpeg_decoder_create(cpu_model, &o, 4, &d);
    CHECK("error cpu_model", st == GRAFT_E_UNSUPPORTED && !d, "status %d", st);
    o.augment = 1;
    st = graft_jpeg_decoder_create(m, &o, 4, &d);
    CHECK("error augment", st == GRAFT_E_UNSUPPORTED && !d, "status %d", st);
    o.augment = 0;
    st = graft_jpeg_decoder_create(m, &o, 0, &d);
    CHECK("error max_batch_0", st == GRAFT_E_INVALID_ARGUMENT && !d, "status %d", st);
    st = graft_jpeg_decoder_create(m, &o, 2, &d);
    CHECK("create", st == GRAFT_OK, "status %d: %s", st, graft_last_error(ctx));
    if (st != GRAFT_OK) return;
    const unsigned char *ptr[3] = {f[0].data, f[0].data, f[0].data};
    size_t len[3] = {f[0].size, f[0].size, f[0].size};
    unsigned char dec[3];
    void *dev = NULL;
    st = graft_model_device_alloc(m, slot_size(&o) * 3, &dev);
    if (st == GRAFT_OK) st = graft_jpeg_decode_batch(d, ptr, len, 3, dev, dec);
    CHECK("error n_over_max_batch",
          st == GRAFT_E_INVALID_ARGUMENT && strstr(graft_jpeg_decoder_error(d), "max_batch"),
          "status %d: %s", st, graft_jpeg_decoder_error(d));
    st = graft_jpeg_decode_batch(d, ptr, len, 2, dev, dec);
    CHECK("batch_of_2", st == GRAFT_OK && dec[0] && dec[1], "status %d", st);
    graft_model_device_free(m, dev);
    graft_jpeg_decoder_free(d);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* images/s of a decoder at batch BENCH_BATCH (with `beside` CPU threads next to nvJPEG), after
 * `warm` batches (the split between both sides settles); *backend its backend. */
static double gpu_rate(graft_ctx *ctx, graft_model *m, const file_bytes *f, int nf, int beside,
                       int warm, const char **backend) {
    graft_image_options o = GRAFT_IMAGE_OPTIONS_INIT;
    const unsigned char *ptr[BENCH_BATCH];
    size_t len[BENCH_BATCH];
    unsigned char dec[BENCH_BATCH], one;
    for (int i = 0; i < BENCH_BATCH; i++) ptr[i] = f[i % nf].data, len[i] = f[i % nf].size;
    graft_jpeg_decoder *d = NULL;
    void *dev = NULL;
    graft_status st = graft_jpeg_decoder_create(m, &o, BENCH_BATCH, &d);
    if (st == GRAFT_OK && beside) st = graft_jpeg_decoder_set_cpu_threads(d, beside);
    if (st == GRAFT_OK) st = graft_model_device_alloc(m, slot_size(&o) * BENCH_BATCH, &dev);
    double t0 = 0;
    const int reps = 5;
    for (int r = -warm; st == GRAFT_OK && r < reps; r++) {
        if (r == 0) t0 = now_s();
        st = graft_jpeg_decode_batch(d, ptr, len, BENCH_BATCH, dev, dec);
    }
    if (st == GRAFT_OK) st = graft_model_copy(m, &one, dev, 1, GRAFT_COPY_DEVICE_TO_HOST);
    double rate = st == GRAFT_OK ? reps * BENCH_BATCH / (now_s() - t0) : 0;
    char name[64];
    snprintf(name, sizeof name, "throughput gpu run (%d CPU threads beside)", beside);
    CHECK(name, st == GRAFT_OK, "status %d: %s", st, last_error(ctx, d));
    *backend = d ? graft_jpeg_decoder_backend(d) : "none";
    graft_model_device_free(m, dev);
    graft_jpeg_decoder_free(d);
    return rate;
}

/* images/s at batch 256 of 500x375 JPEGs: the GPU decoder alone, with CPU threads beside it, and
 * graft_image_load on every core. */
static void throughput(graft_ctx *ctx, graft_model *m, const file_bytes *f, int nf) {
    graft_image_options o = GRAFT_IMAGE_OPTIONS_INIT;
    const char *backend;
    double gpu = gpu_rate(ctx, m, f, nf, 0, 1, &backend);
#ifdef _OPENMP
    int beside = omp_get_max_threads() - 1;
#else
    int beside = 1;
#endif
    if (beside < 1) beside = 1;
    double both = gpu_rate(ctx, m, f, nf, beside, 4, &backend);
    int threads = 1;
    size_t slot = slot_size(&o);
    int failed = 0;
    double t0 = now_s();
#pragma omp parallel reduction(+ : failed)
    {
#ifdef _OPENMP
#pragma omp master
        threads = omp_get_num_threads();
#endif
        graft_ctx *tc = NULL;
        graft_ctx_options co = GRAFT_CTX_OPTIONS_INIT;
        float *buf = malloc(slot);
        failed += graft_ctx_create(&co, &tc) != GRAFT_OK || !buf;
#pragma omp for schedule(dynamic, 4)
        for (int i = 0; i < BENCH_BATCH; i++)
            failed += !tc || !buf || graft_image_load(tc, f[i % nf].path, &o, buf, slot) != 0;
        free(buf);
        graft_ctx_free(tc);
    }
    double cpu = BENCH_BATCH / (now_s() - t0);
    printf("INFO gpu_jpeg throughput (500x375 JPEGs, resize 256, crop 224, F32 NCHW, batch %d): "
           "GPU (nvJPEG %s) %.0f images/s, with %d CPU threads beside it %.0f images/s, CPU "
           "graft_image_load on %d threads %.0f images/s (GPU alone %.1fx the CPU)\n",
           BENCH_BATCH, backend, gpu, beside, both, threads, cpu, cpu > 0 ? gpu / cpu : 0);
    CHECK("throughput cpu run", failed == 0, "%d CPU loads failed", failed);
}

/* The generated JPEGs (tmp folder): size, 4:4:4, progressive. The 300x1000 one makes the CPU run
 * its vertical pass first; 200x150 is enlarged. */
static const struct {
    int w, h, full_chroma, progressive;
} made[] = {{500, 375, 0, 0},  {375, 500, 0, 0}, {500, 375, 1, 0},
            {300, 1000, 0, 0}, {200, 150, 0, 0}, {500, 375, 0, 1}};
#define N_MADE ((int)(sizeof made / sizeof made[0]))

/* The image folder's .jpg files (sorted by readdir order is fine: each is checked alone). */
static int folder_jpegs(const char *dir, file_bytes *f, int cap) {
    DIR *dp = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (dp && (de = readdir(dp)) && n < cap) {
        size_t l = strlen(de->d_name);
        if (l < 4 || strcmp(de->d_name + l - 4, ".jpg") != 0) continue;
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (read_file(p, &f[n]) == 0) n++;
    }
    if (dp) closedir(dp);
    return n;
}

/* A corrupt JPEG (its frame header's height zeroed) and a truncated one, from a good one. */
static void make_bad(const char *tmp, const file_bytes *good, file_bytes *corrupt,
                     file_bytes *truncated) {
    snprintf(corrupt->path, sizeof corrupt->path, "%s/corrupt.jpg", tmp);
    snprintf(truncated->path, sizeof truncated->path, "%s/truncated.jpg", tmp);
    corrupt->data = malloc(good->size), corrupt->size = good->size;
    memcpy(corrupt->data, good->data, good->size);
    for (size_t i = 2; i + 9 < good->size; i++)
        if (corrupt->data[i] == 0xFF && corrupt->data[i + 1] == 0xC0) {
            corrupt->data[i + 5] = corrupt->data[i + 6] = 0; /* SOF0 height */
            break;
        }
    truncated->size = good->size / 2;
    truncated->data = malloc(truncated->size);
    memcpy(truncated->data, good->data, truncated->size);
    write_file(corrupt->path, corrupt->data, corrupt->size);
    write_file(truncated->path, truncated->data, truncated->size);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.onnx IMAGE_DIR\n", argv[0]);
        return 2;
    }
    const char *device = gpu_test_device(NULL);
    if (gpu_test_skip_without_gpu("gpu_jpeg", device)) return 0;
    gpu_test_describe(device);
    graft_ctx_options co = GRAFT_CTX_OPTIONS_INIT, cpu_co = GRAFT_CTX_OPTIONS_INIT;
    co.device = device, cpu_co.device = "cpu";
    graft_ctx *ctx = NULL, *cpu_ctx = NULL;
    graft_model *m = NULL, *cpu_m = NULL;
    if (graft_ctx_create(&co, &ctx) || graft_model_load(ctx, argv[1], &m) ||
        graft_ctx_create(&cpu_co, &cpu_ctx) || graft_model_load(cpu_ctx, argv[1], &cpu_m)) {
        printf("FAIL gpu_jpeg setup: %s\n", ctx ? graft_last_error(ctx) : "no context");
        return 1;
    }
    graft_jpeg_decoder *probe = NULL;
    graft_image_options o = GRAFT_IMAGE_OPTIONS_INIT;
    if (graft_jpeg_decoder_create(m, &o, 1, &probe) == GRAFT_E_UNSUPPORTED && !graft_cuda_built()) {
        SKIP("gpu_jpeg", graft_last_error(ctx));
        return 0;
    }
    graft_jpeg_decoder_free(probe);
    char tmp[] = "/tmp/graft_gpu_jpeg_XXXXXX";
    if (!mkdtemp(tmp)) return 1;
    static file_bytes f[MAX_FILES];
    int must[MAX_FILES] = {0}, n = 0;
    for (int i = 0; i < N_MADE; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/made%d_%dx%d%s%s.jpg", tmp, i, made[i].w, made[i].h,
                 made[i].full_chroma ? "_444" : "", made[i].progressive ? "_progressive" : "");
        if (make_jpeg(p, made[i].w, made[i].h, i, made[i].full_chroma, made[i].progressive) ||
            read_file(p, &f[n])) {
            printf("FAIL gpu_jpeg setup: cannot write %s\n", p);
            return 1;
        }
        must[n++] = 1;
    }
    for (int i = 0; i < N_MADE; i++) exactness(ctx, m, &f[i], made[i].w, made[i].h);
    make_bad(tmp, &f[0], &f[n], &f[n + 1]);
    n += 2;
    char png[600];
    snprintf(png, sizeof png, "%s/gray.png", argv[2]);
    if (read_file(png, &f[n]) == 0) n++;
    n += folder_jpegs(argv[2], f + n, MAX_FILES - n);
    printf("# %d files in the batch (%d generated, corrupt, truncated, a PNG, %s/*.jpg)\n", n,
           N_MADE, argv[2]);
    graft_image_options nchw = GRAFT_IMAGE_OPTIONS_INIT, nhwc = nchw, u8 = nchw;
    nhwc.nhwc = 1;
    u8.dtype = GRAFT_DTYPE_U8;
    against_cpu(ctx, m, f, must, n, nchw, "f32_nchw", 0);
    against_cpu(ctx, m, f, must, n, nhwc, "f32_nhwc", 0);
    against_cpu(ctx, m, f, must, n, u8, "u8_nchw", 0);
    against_cpu(ctx, m, f, must, n, nchw, "f32_nchw_cpu_beside", 3);
    u8.nhwc = 1;
    against_cpu(ctx, m, f, must, n, u8, "u8_nhwc_cpu_beside", 2);
    errors(ctx, m, cpu_m, f);
    /* Throughput on 500x375 files: the generated ones and more made like them. */
    static file_bytes bench[16];
    int nb = 0;
    for (int i = 0; i < 16; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/bench%d.jpg", tmp, i);
        if (make_jpeg(p, 500, 375, 100 + i, 0, 0) == 0 && read_file(p, &bench[nb]) == 0) nb++;
    }
    if (nb) throughput(ctx, m, bench, nb);
    for (int i = 0; i < n; i++) {
        if (strncmp(f[i].path, tmp, strlen(tmp)) == 0) unlink(f[i].path);
        free(f[i].data);
    }
    for (int i = 0; i < nb; i++) unlink(bench[i].path), free(bench[i].data);
    rmdir(tmp);
    graft_model_free(m), graft_model_free(cpu_m);
    graft_ctx_free(ctx), graft_ctx_free(cpu_ctx);
    printf("# gpu_jpeg: %d failures\n", test_failures);
    return test_failures ? 1 : 0;
}
