/* test_transforms.c: the image transforms against torchvision/PIL outputs recorded by
 * tools/make_transform_fixtures.py (argv[1]: tests/data/transforms/fixtures.bin). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "core/rng.h"
#include "data/transforms.h"
#include "test_util.h"

/* One fixture record: (h, w, c) values of kind 0 u8, 1 f32, 2 f64. */
typedef struct record {
    char name[33];
    int kind, h, w, c;
    const void *data;
} record;

static record recs[128];
static int nrecs;
static unsigned char *blob;

static int32_t rd_i32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

static int load_fixtures(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    blob = malloc((size_t)n);
    if (!blob || fread(blob, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        return 0;
    }
    fclose(f);
    static const int elem[3] = {1, 4, 8};
    for (long at = 0; at + 48 <= n && nrecs < 128;) {
        record *r = &recs[nrecs++];
        memcpy(r->name, blob + at, 32);
        r->name[32] = 0;
        r->kind = rd_i32(blob + at + 32);
        r->h = rd_i32(blob + at + 36);
        r->w = rd_i32(blob + at + 40);
        r->c = rd_i32(blob + at + 44);
        r->data = blob + at + 48;
        if (r->kind < 0 || r->kind > 2) return 0;
        at += 48 + (long)r->h * r->w * r->c * elem[r->kind];
        if (at > n) return 0;
    }
    return nrecs > 0;
}

static const record *find(const char *name) {
    for (int i = 0; i < nrecs; i++)
        if (!strcmp(recs[i].name, name)) return &recs[i];
    return NULL;
}

/* The same integer formulas as make_transform_fixtures.py (grad_image, large_image). */
static image_u8 make_grad(int w, int h) {
    image_u8 im = {w, h, malloc((size_t)w * h * 3)};
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = im.pixels + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)(x * 255 / (w - 1));
            p[1] = (uint8_t)(y * 255 / (h - 1));
            p[2] = (uint8_t)((x + y) * 255 / (w + h - 2));
        }
    return im;
}

static image_u8 make_large(int w, int h) {
    image_u8 im = {w, h, malloc((size_t)w * h * 3)};
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = im.pixels + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)(x * 255 / (w - 1));
            p[1] = (uint8_t)(((x * x + 3 * x * y) / 7) % 256);
            p[2] = (uint8_t)(((x / 3) + (y / 5)) % 2 == 0 ? 230 : 20);
        }
    return im;
}

/* Tolerance: PIL's fixed-point arithmetic is reproduced step by step (same double-precision
 * weights, same 22-bit rounding, same pass order), so the bytes must be identical; a pixel off
 * by one would mean a rounding step differs. We require exact equality (max difference 0). */
static void check_u8(const char *name, const image_u8 *got, graft_status st, int step) {
    const record *r = find(name);
    if (!r) {
        CHECK(name, 0, "no fixture record");
        return;
    }
    if (st != GRAFT_OK || !got->pixels) {
        CHECK(name, 0, "transform failed with status %d", (int)st);
        return;
    }
    int eh = (got->height + step - 1) / step, ew = (got->width + step - 1) / step;
    if (r->kind != 0 || r->h != eh || r->w != ew || r->c != 3) {
        CHECK(name, 0, "size %dx%d (step %d), torchvision gives %dx%d", got->width, got->height,
              step, r->w, r->h);
        return;
    }
    const uint8_t *want = r->data;
    int bad = 0, maxd = 0;
    for (int y = 0; y < eh; y++)
        for (int x = 0; x < ew; x++)
            for (int c = 0; c < 3; c++) {
                int a = got->pixels[((size_t)y * step * got->width + (size_t)x * step) * 3 + c];
                int d = abs(a - want[((size_t)y * ew + x) * 3 + c]);
                bad += d != 0;
                if (d > maxd) maxd = d;
            }
    CHECK(name, bad == 0, "%d of %d values differ, max difference %d", bad, eh * ew * 3, maxd);
}

static void run_image_cases(const char *tag, const image_u8 *src, int up) {
    char name[64];
    image_u8 out;
    graft_status st;
#define CASE(suffix, call, step)                                                                   \
    do {                                                                                           \
        snprintf(name, sizeof name, "%s/%s", tag, suffix);                                         \
        st = (call);                                                                               \
        check_u8(name, &out, st, step);                                                            \
        free(out.pixels);                                                                          \
    } while (0)
    CASE("resize32", transform_resize_shorter(&out, src, 32, NULL), 1);
    char upname[32];
    snprintf(upname, sizeof upname, "resize%d", up);
    CASE(upname, transform_resize_shorter(&out, src, up, NULL), 1);
    CASE("resize20x30", transform_resize(&out, src, 30, 20, NULL), 1);
    CASE("resize7x5", transform_resize(&out, src, 5, 7, NULL), 1);
    CASE("resize9x50", transform_resize(&out, src, 50, 9, NULL), 1);
    CASE("cc24", transform_center_crop(&out, src, 24, 24, NULL), 1);
    CASE("cc25x30", transform_center_crop(&out, src, 30, 25, NULL), 1);
    CASE("cc60x70", transform_center_crop(&out, src, 70, 60, NULL), 1);
    CASE("cc30x64", transform_center_crop(&out, src, 64, 30, NULL), 1);
    CASE("rc_5_7_30_40", transform_crop_resize(&out, src, 7, 5, 40, 30, 24, 24, NULL), 1);
    CASE("rc_m3_m4_20_50", transform_crop_resize(&out, src, -4, -3, 50, 20, 12, 16, NULL), 1);
#undef CASE
    image_u8 flip = {src->width, src->height, malloc((size_t)src->width * src->height * 3)};
    memcpy(flip.pixels, src->pixels, (size_t)src->width * src->height * 3);
    transform_hflip(&flip);
    snprintf(name, sizeof name, "%s/hflip", tag);
    check_u8(name, &flip, GRAFT_OK, 1);
    transform_hflip(&flip);
    snprintf(name, sizeof name, "%s/hflip_twice", tag);
    CHECK(name, !memcmp(flip.pixels, src->pixels, (size_t)src->width * src->height * 3),
          "flipping twice does not give the image back");
    free(flip.pixels);
}

static const float MEAN[3] = {0.485f, 0.456f, 0.406f}, STD[3] = {0.229f, 0.224f, 0.225f};

/* ToTensor+Normalize: f32 bit-exact against torch (both divide by 255, subtract, divide in f32),
 * in CHW and HWC; f16 must be the round-to-nearest-even of those f32 values. */
static void test_to_tensor(const image_u8 *src) {
    const record *r = find("noise/tensor_chw"); // stored (H, W, 3)
    if (!r || r->kind != 1 || r->h != src->height || r->w != src->width) {
        CHECK("to_tensor", 0, "no usable fixture record");
        return;
    }
    size_t n = (size_t)src->width * src->height * 3, plane = n / 3;
    float *want = malloc(n * sizeof *want), *chw = malloc(n * 4), *hwc = malloc(n * 4);
    uint16_t *h16 = malloc(n * 2), *c16 = malloc(n * 2);
    memcpy(want, r->data, n * sizeof *want); // little-endian host assumed, as elsewhere
    graft_status s1 = transform_to_tensor(chw, GRAFT_DTYPE_F32, false, src, MEAN, STD, NULL);
    graft_status s2 = transform_to_tensor(hwc, GRAFT_DTYPE_F32, true, src, MEAN, STD, NULL);
    graft_status s3 = transform_to_tensor(c16, GRAFT_DTYPE_F16, false, src, MEAN, STD, NULL);
    graft_status s4 = transform_to_tensor(h16, GRAFT_DTYPE_F16, true, src, MEAN, STD, NULL);
    int bad_c = 0, bad_h = 0, bad_16 = 0;
    double maxd = 0;
    for (size_t i = 0; i < plane; i++)
        for (int c = 0; c < 3; c++) {
            float w = want[i * 3 + c];
            float a = chw[(size_t)c * plane + i], b = hwc[i * 3 + c];
            bad_c += a != w;
            bad_h += b != w;
            if (fabs(a - w) > maxd) maxd = fabs(a - w);
            bad_16 += c16[(size_t)c * plane + i] != f32_to_f16(w) || h16[i * 3 + c] != f32_to_f16(w);
        }
    CHECK("to_tensor_status", s1 == GRAFT_OK && s2 == GRAFT_OK && s3 == GRAFT_OK && s4 == GRAFT_OK,
          "statuses %d %d %d %d", (int)s1, (int)s2, (int)s3, (int)s4);
    CHECK("to_tensor_f32_chw", bad_c == 0, "%d values differ from torch, max %g", bad_c, maxd);
    CHECK("to_tensor_f32_hwc", bad_h == 0, "%d values differ from torch", bad_h);
    CHECK("to_tensor_f16", bad_16 == 0, "%d values differ from f16(torch)", bad_16);
    graft_err e = {0};
    CHECK("to_tensor_bad_dtype",
          transform_to_tensor(chw, GRAFT_DTYPE_I32, false, src, MEAN, STD, &e) == GRAFT_E_DTYPE &&
              strstr(e.msg, "F32"),
          "msg '%s'", e.msg);
    free(want), free(chw), free(hwc), free(h16), free(c16);
}

/* Resize(256) + CenterCrop(224) on the 300x200 image: every other pixel stored exactly, and
 * the normalised tensor's per-channel sums and sums of squares. */
static void test_chain(void) {
    image_u8 large = make_large(300, 200), rs, cc = {0};
    graft_status st = transform_resize_shorter(&rs, &large, 256, NULL);
    if (st == GRAFT_OK) st = transform_center_crop(&cc, &rs, 224, 224, NULL);
    check_u8("large/chain_u8_even", &cc, st, 2);
    const record *r = find("large/chain_stats");
    if (st == GRAFT_OK && r && r->kind == 2 && r->c == 6) {
        float *t = malloc(3 * 224 * 224 * sizeof *t); // (3, 224, 224)
        transform_to_tensor(t, GRAFT_DTYPE_F32, false, &cc, MEAN, STD, NULL);
        double want[6], worst = 0;
        memcpy(want, r->data, sizeof want);
        for (int c = 0; c < 3; c++) {
            double s = 0, s2 = 0;
            for (int i = 0; i < 224 * 224; i++) {
                s += t[c * 224 * 224 + i];
                s2 += (double)t[c * 224 * 224 + i] * t[c * 224 * 224 + i];
            }
            worst = fmax(worst, fabs(s - want[c]) / (1 + fabs(want[c])));
            worst = fmax(worst, fabs(s2 - want[3 + c]) / (1 + fabs(want[3 + c])));
        }
        CHECK("large/chain_tensor_stats", worst < 1e-6, "relative difference %g", worst);
        free(t);
    } else {
        CHECK("large/chain_tensor_stats", 0, "no chain or no stats record");
    }
    image_u8 out;
    st = transform_resize_shorter(&out, &large, 64, NULL);
    check_u8("large/resize64", &out, st, 1);
    free(out.pixels);
    st = transform_resize(&out, &large, 53, 37, NULL);
    check_u8("large/resize37x53", &out, st, 1);
    free(out.pixels);
    st = transform_resize(&out, &large, 49, 75, NULL);
    check_u8("large/resize75x49", &out, st, 1);
    free(out.pixels);
    st = transform_resize(&out, &large, 280, 40, NULL);
    check_u8("large/resize40x280", &out, st, 1);
    free(out.pixels);
    free(large.pixels), free(rs.pixels), free(cc.pixels);
}

/* The RRC box cannot follow torch's RNG, so it is checked by its properties: inside the image,
 * area fraction within [scale_min, scale_max] and aspect ratio within [ratio_min, ratio_max]
 * (up to the rounding of w and h to integers), the same boxes for the same seed, the central
 * fallback when no draw fits, and sensible statistics over many draws. */
static void test_rrc(void) {
    const int W = 500, H = 375;
    uint64_t rng = 42, rng2 = 42;
    int inside = 1, in_scale = 1, in_ratio = 1, same = 1, hit_x0 = 0, hit_xmax = 0;
    double mean_frac = 0, mean_logr = 0;
    const int N = 20000;
    for (int i = 0; i < N; i++) {
        int x, y, w, h, x2, y2, w2, h2;
        transform_rrc_box(&x, &y, &w, &h, W, H, 0.08, 1.0, 3.0 / 4, 4.0 / 3, &rng);
        transform_rrc_box(&x2, &y2, &w2, &h2, W, H, 0.08, 1.0, 3.0 / 4, 4.0 / 3, &rng2);
        same &= x == x2 && y == y2 && w == w2 && h == h2;
        inside &= x >= 0 && y >= 0 && w > 0 && h > 0 && x + w <= W && y + h <= H;
        /* Rounding w and h moves the area by at most (w + h + 1) / 2 pixels. */
        double area = (double)w * h, slack = (w + h + 1) / 2.0;
        in_scale &= area >= 0.08 * W * H - slack && area <= 1.0 * W * H + slack;
        double r = (double)w / h;
        in_ratio &= r >= (3.0 / 4) * (w - 0.5) / w * h / (h + 0.5) - 1e-9 &&
                    r <= (4.0 / 3) * (w + 0.5) / w * h / (h - 0.5) + 1e-9;
        hit_x0 |= x == 0 && w < W;
        hit_xmax |= x == W - w && w < W;
        mean_frac += area / (W * H) / N;
        mean_logr += log(r) / N;
    }
    CHECK("rrc_inside", inside, "a box leaves the image");
    CHECK("rrc_scale_range", in_scale, "a box area is outside [0.08, 1] of the image");
    CHECK("rrc_ratio_range", in_ratio, "a box ratio is outside [3/4, 4/3]");
    CHECK("rrc_deterministic", same, "the same seed gave different boxes");
    CHECK("rrc_offsets_cover", hit_x0 && hit_xmax, "x never reached 0 or W - w");
    /* Uniform scale in [0.08, 1] has mean 0.54; draws that do not fit (too wide for 4:3 at large
     * areas) are redrawn, pulling the mean lower. Log-ratio is symmetric: mean near 0. */
    CHECK("rrc_mean_scale", mean_frac > 0.40 && mean_frac < 0.56, "mean area fraction %g",
          mean_frac);
    /* On a square image with scale <= 0.5 every draw fits (the longest side is at most
     * sqrt(0.5 * 4/3) < 1 of the image), so the first draw is the box: area fraction uniform in
     * [0.08, 0.5] (mean 0.29) and log-ratio uniform in [-log(4/3), log(4/3)] (mean 0); with 20000
     * draws the standard errors are about 0.001. */
    mean_frac = mean_logr = 0;
    for (int i = 0; i < N; i++) {
        int x, y, w, h;
        transform_rrc_box(&x, &y, &w, &h, 400, 400, 0.08, 0.5, 3.0 / 4, 4.0 / 3, &rng);
        mean_frac += (double)w * h / (400.0 * 400.0) / N;
        mean_logr += log((double)w / h) / N;
    }
    CHECK("rrc_uniform_scale", fabs(mean_frac - 0.29) < 0.006, "mean area fraction %g", mean_frac);
    CHECK("rrc_uniform_log_ratio", fabs(mean_logr) < 0.006, "mean log ratio %g", mean_logr);

    int x, y, w, h;
    rng = 7; /* scale > 1 never fits: always the fallback */
    transform_rrc_box(&x, &y, &w, &h, 300, 100, 2.0, 3.0, 3.0 / 4, 4.0 / 3, &rng);
    CHECK("rrc_fallback_wide", x == 83 && y == 0 && w == 133 && h == 100, "box %d %d %d %d", x, y,
          w, h);
    transform_rrc_box(&x, &y, &w, &h, 100, 300, 2.0, 3.0, 3.0 / 4, 4.0 / 3, &rng);
    CHECK("rrc_fallback_tall", x == 0 && y == 83 && w == 100 && h == 133, "box %d %d %d %d", x, y,
          w, h);
    transform_rrc_box(&x, &y, &w, &h, 120, 100, 2.0, 3.0, 3.0 / 4, 4.0 / 3, &rng);
    CHECK("rrc_fallback_whole", x == 0 && y == 0 && w == 120 && h == 100, "box %d %d %d %d", x, y,
          w, h);
    /* torchvision's round() is Python's (ties to even): 10 / 0.8 = 12.5 -> 12. */
    transform_rrc_box(&x, &y, &w, &h, 10, 40, 2.0, 3.0, 0.8, 1.25, &rng);
    CHECK("rrc_fallback_round_half_even", w == 10 && h == 12 && y == 14, "box %d %d %d %d", x, y,
          w, h);
}

static void test_errors(const image_u8 *src) {
    graft_err e = {0};
    image_u8 out;
    CHECK("err_resize_zero",
          transform_resize(&out, src, 0, 10, &e) == GRAFT_E_INVALID_ARGUMENT && !out.pixels &&
              strstr(e.msg, "0x10"),
          "msg '%s'", e.msg);
    image_u8 empty = {0, 0, NULL};
    CHECK("err_resize_empty",
          transform_resize_shorter(&out, &empty, 32, &e) == GRAFT_E_INVALID_ARGUMENT,
          "msg '%s'", e.msg);
    CHECK("err_crop_zero", transform_center_crop(&out, src, 0, 5, &e) == GRAFT_E_INVALID_ARGUMENT,
          "msg '%s'", e.msg);
    CHECK("err_crop_resize_box",
          transform_crop_resize(&out, src, 0, 0, -1, 5, 4, 4, &e) == GRAFT_E_INVALID_ARGUMENT,
          "msg '%s'", e.msg);
    /* Same size: a copy (PIL returns a copy too). Box entirely outside: all zero. */
    graft_status st = transform_resize(&out, src, src->width, src->height, NULL);
    CHECK("resize_same_size_copies",
          st == GRAFT_OK && !memcmp(out.pixels, src->pixels, (size_t)src->width * src->height * 3),
          "status %d", (int)st);
    free(out.pixels);
    st = transform_crop_resize(&out, src, 1000, 1000, 8, 8, 4, 4, NULL);
    int zero = st == GRAFT_OK;
    for (int i = 0; zero && i < 4 * 4 * 3; i++) zero = out.pixels[i] == 0;
    CHECK("crop_outside_is_zero", zero, "status %d", (int)st);
    free(out.pixels);
}

int main(int argc, char **argv) {
    if (argc < 2 || !load_fixtures(argv[1])) {
        printf("FAIL fixtures: cannot read %s\n", argc > 1 ? argv[1] : "(no path given)");
        return 1;
    }
    const record *nr = find("noise/src");
    image_u8 noise = {nr->w, nr->h, (uint8_t *)nr->data};
    run_image_cases("noise", &noise, 100);
    image_u8 grad = make_grad(43, 57);
    run_image_cases("grad", &grad, 70);
    test_to_tensor(&noise);
    test_chain();
    test_rrc();
    test_errors(&grad);
    free(grad.pixels);
    free(blob);
    return test_failures ? 1 : 0;
}
