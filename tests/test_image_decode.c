/* test_image_decode.c: JPEG/PNG decoding against PIL's pixels, DCT scaling, EXIF, bad inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/npy.h"
#include "data/image.h"
#include "data/transforms.h"
#include "test_util.h"

/* Tolerances. PNG is lossless: exact. The JPEG references come from Pillow's bundled
 * libjpeg-turbo (3.x), graft links the system one (2.1 on Debian 12); both use the same accurate
 * integer IDCT and fancy upsampling, whose SIMD and C paths are bit-exact, so the pixels agree
 * exactly on this machine. A tolerance of 1 leaves room for a libjpeg-turbo build whose
 * colour conversion or upsampling rounds differently (e.g. another SIMD flavour) while still
 * catching any real difference (wrong colour space, channel order, orientation, scaling). */
#define TOL_PNG 0
#define TOL_JPEG 1

static const char *dir;

static char *path_of(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

/* Max |a - b| over the pixels, or -1 when the sizes differ (reason written to why). */
static int compare_ref(const image_u8 *img, const char *npy, char *why, size_t why_size) {
    graft_tensor t;
    char err[512];
    if (npy_read(path_of(npy), &t, err, sizeof err)) {
        snprintf(why, why_size, "cannot read %s: %s", npy, err);
        return -1;
    }
    int diff = -1;
    if (t.dtype != GRAFT_DTYPE_U8 || t.ndim != 3 || t.dims[2] != 3 || t.dims[0] != img->height ||
        t.dims[1] != img->width) {
        snprintf(why, why_size, "decoded %dx%d, reference %s is (%lld, %lld, %lld)", img->width,
                 img->height, npy, (long long)t.dims[0], (long long)t.dims[1],
                 (long long)(t.ndim > 2 ? t.dims[2] : 0));
    } else {
        const uint8_t *r = t.data;
        diff = 0;
        for (size_t i = 0; i < (size_t)img->width * img->height * 3; i++) {
            int d = abs((int)img->pixels[i] - (int)r[i]);
            if (d > diff) diff = d;
        }
        snprintf(why, why_size, "max |diff| %d", diff);
    }
    free(t.data);
    return diff;
}

static void check_against_pil(const char *image, const char *npy, int min_side, int tol) {
    char name[256], why[600];
    snprintf(name, sizeof name, "decode_%s%s", image, min_side ? "_scaled" : "");
    image_u8 img;
    graft_err e = {0};
    graft_status st = image_decode_file(path_of(image), min_side, 0, &img, &e);
    if (st != GRAFT_OK) {
        CHECK(name, 0, "status %d: %s", st, e.msg);
        return;
    }
    int diff = compare_ref(&img, npy, why, sizeof why);
    CHECK(name, diff >= 0 && diff <= tol, "%s (tolerance %d)", why, tol);
    image_free(&img);
}

static void test_references(void) {
    static const char *jpegs[] = {"rgb420",      "rgb444",  "odd13x9",    "gray",
                                  "progressive", "cmyk",    "orient1",    "orient2",
                                  "orient3",     "orient4", "orient5",    "orient6",
                                  "orient7",     "orient8", "orient_xmp", "scale"};
    static const char *pngs[] = {
        "rgb",   "rgba",   "gray",       "gray_alpha", "palette_trns", "palette4",   "bilevel",
        "rgb16", "rgba16", "interlaced", "orient6",    "orient_xmp",   "orient_raw", "gray16"};
    char img[128], npy[128];
    for (size_t i = 0; i < sizeof jpegs / sizeof *jpegs; i++) {
        snprintf(img, sizeof img, "%s.jpg", jpegs[i]);
        snprintf(npy, sizeof npy, "%s.jpg.npy", jpegs[i]);
        check_against_pil(img, npy, 0, TOL_JPEG);
    }
    for (size_t i = 0; i < sizeof pngs / sizeof *pngs; i++) {
        snprintf(img, sizeof img, "%s.png", pngs[i]);
        snprintf(npy, sizeof npy, "%s.png.npy", pngs[i]);
        check_against_pil(img, npy, 0, TOL_PNG);
    }
}

/* scale.jpg is 64x48: min_side picks 1/8 (8x6), 1/4 (16x12), 1/2 (32x24) or full size; the
 * references are PIL's draft() decodes at the same scale. */
static void test_dct_scaling(void) {
    static const struct {
        int min_side;
        const char *npy;
    } cases[] = {
        {1, "scale.jpg.scale8.npy"},  {6, "scale.jpg.scale8.npy"},  {7, "scale.jpg.scale4.npy"},
        {12, "scale.jpg.scale4.npy"}, {13, "scale.jpg.scale2.npy"}, {24, "scale.jpg.scale2.npy"},
        {25, "scale.jpg.npy"},        {1000, "scale.jpg.npy"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char name[64], why[600];
        snprintf(name, sizeof name, "dct_scale_min_side_%d", cases[i].min_side);
        image_u8 img;
        graft_err e = {0};
        if (image_decode_file(path_of("scale.jpg"), cases[i].min_side, 0, &img, &e) != GRAFT_OK) {
            CHECK(name, 0, "%s", e.msg);
            continue;
        }
        int diff = compare_ref(&img, cases[i].npy, why, sizeof why);
        CHECK(name, diff >= 0 && diff <= TOL_JPEG, "%s vs %s", why, cases[i].npy);
        image_free(&img);
    }
    // Odd sizes round up (13x9 at 1/8 is 2x2); EXIF orientation turns the scaled image.
    static const struct {
        const char *file;
        int min_side, w, h;
    } sizes[] = {
        {"odd13x9.jpg", 2, 2, 2},  {"odd13x9.jpg", 3, 4, 3},  {"odd13x9.jpg", 4, 7, 5},
        {"odd13x9.jpg", 9, 13, 9}, {"orient6.jpg", 8, 8, 12}, {"orient6.jpg", 2, 2, 3},
        {"rgb.png", 2, 40, 30}, // PNG has no DCT scaling: full size
    };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        char name[96];
        snprintf(name, sizeof name, "dct_scale_size_%s_%d", sizes[i].file, sizes[i].min_side);
        image_u8 img;
        graft_err e = {0};
        graft_status st = image_decode_file(path_of(sizes[i].file), sizes[i].min_side, 0, &img, &e);
        CHECK(name, st == GRAFT_OK && img.width == sizes[i].w && img.height == sizes[i].h,
              "status %d (%s), got %dx%d, want %dx%d", st, e.msg, st ? 0 : img.width,
              st ? 0 : img.height, sizes[i].w, sizes[i].h);
        if (st == GRAFT_OK) image_free(&img);
    }
}

/* large.jpg (512x384) through graft_image_load's Resize(64) + CenterCrop(56), as pixels (mean 0,
 * std 1: value * 255). By default it must be Pillow's full-size decode + resize (torchvision's
 * ImageFolder); with fast_decode the 1/4 decode + resize, which differs from it. */
static void test_large_jpeg(void) {
    graft_ctx *ctx = NULL;
    graft_ctx_create(NULL, &ctx);
    for (int fast = 0; fast < 2; fast++) {
        graft_image_options o = GRAFT_IMAGE_OPTIONS_INIT;
        o.resize = 64, o.crop = 56, o.fast_decode = fast;
        for (int c = 0; c < 3; c++) o.mean[c] = 0, o.std[c] = 1;
        float chw[3 * 56 * 56];
        graft_status st = graft_image_load(ctx, path_of("large.jpg"), &o, chw, sizeof chw);
        image_u8 img = {56, 56, malloc(56 * 56 * 3)};
        for (int i = 0; img.pixels && i < 56 * 56; i++)
            for (int c = 0; c < 3; c++)
                img.pixels[i * 3 + c] = (uint8_t)lrintf(chw[c * 56 * 56 + i] * 255.0f);
        char why[600], other[600];
        const char *name = fast ? "large_jpeg_fast_decode_reduced" : "large_jpeg_as_pillow";
        int diff =
            st == GRAFT_OK && img.pixels
                ? compare_ref(&img, fast ? "large.jpg.fast_r64c56.npy" : "large.jpg.r64c56.npy",
                              why, sizeof why)
                : -1;
        int off =
            st == GRAFT_OK && img.pixels
                ? compare_ref(&img, fast ? "large.jpg.r64c56.npy" : "large.jpg.fast_r64c56.npy",
                              other, sizeof other)
                : -1;
        printf("  %s: %s against its reference, %s against the other\n", name, why, other);
        /* The two references differ by far more than the tolerance, so each path is told apart. */
        CHECK(name, diff >= 0 && diff <= TOL_JPEG && off > 4 * TOL_JPEG,
              "status %d (%s): %s against its reference, %s against the other", st,
              st ? graft_last_error(ctx) : "", why, other);
        image_free(&img);
    }
    graft_ctx_free(ctx);
}

/* image_prepare_memory (the GPU decoder's CPU threads) on a file's bytes gives graft_image_load's
 * values exactly, for F32 NCHW and U8 NHWC, JPEG (full size and DCT-scaled) and PNG; a truncated
 * copy is an error naming what it was given. */
static void test_prepare_memory(void) {
    static const char *const files[] = {"large.jpg", "rgb.png", "progressive.jpg"};
    graft_ctx *ctx = NULL;
    graft_ctx_create(NULL, &ctx);
    for (int f = 0; f < 3; f++) {
        FILE *fp = fopen(path_of(files[f]), "rb");
        static unsigned char bytes[1 << 20];
        size_t n = fp ? fread(bytes, 1, sizeof bytes, fp) : 0;
        if (fp) fclose(fp);
        for (int k = 0; k < 3; k++) {
            graft_image_options o = GRAFT_IMAGE_OPTIONS_INIT;
            o.resize = 64, o.crop = 56, o.fast_decode = k == 2;
            if (k == 1) o.dtype = GRAFT_DTYPE_U8, o.nhwc = 1;
            static float a[3 * 56 * 56], b[3 * 56 * 56];
            memset(a, 0, sizeof a), memset(b, 1, sizeof b);
            graft_err e;
            err_clear(&e);
            graft_status sa = graft_image_load(ctx, path_of(files[f]), &o, a, sizeof a);
            graft_status sb = image_prepare_memory(bytes, n, files[f], &o, b, &e);
            size_t used = (size_t)3 * 56 * 56 * graft_dtype_size(o.dtype);
            char name[128];
            snprintf(name, sizeof name, "prepare_memory %s %s", files[f],
                     k == 1 ? "u8_nhwc" : k == 2 ? "fast_decode" : "f32_nchw");
            CHECK(name, n > 0 && sa == GRAFT_OK && sb == GRAFT_OK && !memcmp(a, b, used),
                  "%zu bytes read, load %d, memory %d (%s), same %d", n, sa, sb, e.msg,
                  !memcmp(a, b, used));
        }
        graft_image_options o = GRAFT_IMAGE_OPTIONS_INIT;
        static float out[3 * 224 * 224];
        graft_err e;
        err_clear(&e);
        graft_status st = image_prepare_memory(bytes, n / 2, "the half copy", &o, out, &e);
        char name[128];
        snprintf(name, sizeof name, "prepare_memory truncated %s", files[f]);
        CHECK(name, st != GRAFT_OK && strstr(e.msg, "the half copy"), "status %d: %s", st, e.msg);
    }
    graft_ctx_free(ctx);
}

static void expect_error(const char *name, const char *file, int64_t max_pixels, graft_status want,
                         const char *want_text) {
    image_u8 img = {1, 1, NULL};
    graft_err e = {0};
    const char *path = path_of(file);
    graft_status st = image_decode_file(path, 0, max_pixels, &img, &e);
    int ok = st == want && strstr(e.msg, path) && strstr(e.msg, want_text) && !img.pixels &&
             img.width == 0;
    CHECK(name, ok, "status %d (want %d), message \"%s\" (want the path and \"%s\")", st, want,
          e.msg, want_text);
    if (st == GRAFT_OK) image_free(&img);
}

/* A tiny JPEG of extreme aspect ratio (2x6000): its Resize(256) would be 256x768000 pixels, so
 * the resize is refused by the pixel limit before its output is allocated; so is a huge crop. */
static void test_resize_limit(void) {
    image_u8 img, out = {1, 1, NULL};
    graft_err e = {0};
    graft_status st = image_decode_file(path_of("bad_aspect.jpg"), 0, IMAGE_MAX_PIXELS, &img, &e);
    CHECK("aspect_jpeg_decodes", st == GRAFT_OK && img.width == 2 && img.height == 6000,
          "status %d: %s", st, e.msg);
    if (st != GRAFT_OK) return;
    st = transform_resize_shorter(&out, &img, 256, &e);
    CHECK("aspect_resize_over_pixel_limit",
          st == GRAFT_E_INVALID_ARGUMENT && !out.pixels && strstr(e.msg, "256x768000") &&
              strstr(e.msg, "over the limit of 178956970"),
          "status %d: %s", st, e.msg);
    printf("  message: %s\n", e.msg);
    st = transform_center_crop(&out, &img, 20000, 20000, &e);
    CHECK("crop_over_pixel_limit",
          st == GRAFT_E_INVALID_ARGUMENT && !out.pixels && strstr(e.msg, "over the limit"),
          "status %d: %s", st, e.msg);
    st = transform_resize_shorter(&out, &img, 2, &e);
    CHECK("aspect_resize_within_limit", st == GRAFT_OK && out.width == 2 && out.height == 6000,
          "status %d: %s", st, e.msg);
    image_free(&out);
    image_free(&img);
}

static void test_bad_inputs(void) {
    expect_error("bad_missing_file", "no_such_file.jpg", 0, GRAFT_E_IO, "No such file");
    expect_error("bad_empty", "bad_empty.jpg", 0, GRAFT_E_MALFORMED_MODEL, "empty");
    expect_error("bad_text", "bad_text.jpg", 0, GRAFT_E_UNSUPPORTED, "not a JPEG or PNG");
    expect_error("bad_truncated_jpeg", "bad_truncated.jpg", 0, GRAFT_E_MALFORMED_MODEL,
                 "truncated");
    expect_error("bad_truncated_png", "bad_truncated.png", 0, GRAFT_E_MALFORMED_MODEL, "truncated");
    expect_error("bad_huge_png", "bad_huge.png", 178956970, GRAFT_E_INVALID_ARGUMENT,
                 "100000x100000");
    expect_error("bad_gif", "bad_format.gif", 0, GRAFT_E_UNSUPPORTED, "GIF");
    expect_error("bad_bmp", "bad_format.bmp", 0, GRAFT_E_UNSUPPORTED, "BMP");
    expect_error("max_pixels_png", "rgb.png", 1199, GRAFT_E_INVALID_ARGUMENT, "over the limit");
    expect_error("max_pixels_jpeg", "rgb420.jpg", 1199, GRAFT_E_INVALID_ARGUMENT, "over the limit");
    image_u8 img;
    graft_status st = image_decode_file(path_of("rgb.png"), 0, 1200, &img, NULL);
    CHECK("max_pixels_at_limit", st == GRAFT_OK, "status %d", st);
    if (st == GRAFT_OK) image_free(&img);
}

static uint8_t *slurp(const char *file, size_t *size) {
    FILE *f = fopen(path_of(file), "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) free(buf), buf = NULL;
    fclose(f);
    *size = (size_t)n;
    return buf;
}

/* Every prefix of a good file: an error (never a crash or a gray-filled image). PIL refuses a
 * JPEG that lacks even its EOI marker (tail_ok 0), but reads a PNG whose pixels are complete
 * with the IDAT CRC and IEND chunk missing (tail_ok 16 bytes); either way the accepted prefixes
 * must be the longest ones only. Then random byte corruptions: any status, but no crash, no
 * leak (ASan) and a message on failure. */
static void test_damage(const char *file, size_t tail_ok) {
    size_t size;
    uint8_t *data = slurp(file, &size);
    char name[96];
    snprintf(name, sizeof name, "prefixes_%s", file);
    if (!data) {
        CHECK(name, 0, "cannot read %s", file);
        return;
    }
    size_t first_ok = size + 1, bad = 0;
    for (size_t n = 0; n <= size; n++) {
        image_u8 img;
        graft_err e = {0};
        graft_status st = image_decode_memory(data, n, file, 0, 0, &img, &e);
        if (st == GRAFT_OK) image_free(&img);
        if (st == GRAFT_OK && first_ok > size) first_ok = n;
        if ((st == GRAFT_OK) != (n >= first_ok) || (st != GRAFT_OK && !e.msg[0])) bad++;
    }
    CHECK(name, bad == 0 && first_ok + tail_ok >= size && first_ok <= size,
          "%zu prefixes out of order, first success at %zu of %zu bytes (allowed: %zu short)", bad,
          first_ok, size, tail_ok);
    snprintf(name, sizeof name, "corruptions_%s", file);
    uint32_t rng = 12345;
    size_t failed_without_message = 0;
    uint8_t *copy = malloc(size);
    for (int trial = 0; trial < 300 && copy; trial++) {
        memcpy(copy, data, size);
        for (int k = 0; k < 1 + trial % 4; k++) {
            rng = rng * 1664525u + 1013904223u;
            size_t at = 8 + (rng >> 8) % (size - 8); // keep the signature
            copy[at] ^= (uint8_t)(1 + (rng & 0xfe));
        }
        image_u8 img;
        graft_err e = {0};
        graft_status st = image_decode_memory(copy, size, file, 0, 0, &img, &e);
        if (st == GRAFT_OK) {
            volatile uint8_t sink = img.pixels[(size_t)img.width * img.height * 3 - 1];
            (void)sink;
            image_free(&img);
        } else if (!e.msg[0]) {
            failed_without_message++;
        }
    }
    CHECK(name, copy && failed_without_message == 0, "%zu failures without a message",
          failed_without_message);
    free(copy);
    free(data);
}

int main(int argc, char **argv) {
    dir = argc > 1 ? argv[1] : "tests/data/images";
    test_references();
    test_dct_scaling();
    test_large_jpeg();
    test_prepare_memory();
    test_bad_inputs();
    test_resize_limit();
    test_damage("rgb420.jpg", 0);
    test_damage("progressive.jpg", 0);
    test_damage("rgb.png", 16);
    test_damage("interlaced.png", 16);
    return test_failures ? 1 : 0;
}
