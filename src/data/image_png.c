/* image_png.c: PNG decoding through libpng: every colour type and bit depth to 8-bit RGB. */
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_internal.h"

/* Where libpng reads from and reports to; errors longjmp back to image_decode_png. */
typedef struct png_guard {
    const uint8_t *data;
    size_t size, pos;
    int pixels_done; // every row is decoded: a damaged tail (after IDAT) is tolerated
    int oom;         // the failure was ours: no memory
    char msg[256];   // libpng's message
    uint8_t *pixels; // (height, width, 3)
    png_bytep *rows; // (height) pointers into pixels
} png_guard;

static void guard_error(png_structp png, png_const_charp msg) {
    png_guard *g = png_get_error_ptr(png);
    snprintf(g->msg, sizeof g->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void guard_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg; // ancillary-chunk trouble: PIL reads such files too
}

static void guard_read(png_structp png, png_bytep dst, size_t n) {
    png_guard *g = png_get_io_ptr(png);
    if (n > g->size - g->pos) png_error(png, "truncated PNG (the data end before the image does)");
    memcpy(dst, g->data + g->pos, n);
    g->pos += n;
}

/* Decode "Raw profile type exif" text (ImageMagick's form: three header lines, then hex) and
 * read its orientation, as PIL does when there is no eXIf chunk. */
static int raw_profile_orientation(const char *text, size_t len) {
    size_t i = 0;
    for (int lines = 0; i < len && lines < 3; i++)
        if (text[i] == '\n') lines++;
    uint8_t *bin = malloc(len / 2 + 1); // (at most len / 2) decoded bytes
    if (!bin) return 0;
    size_t n = 0;
    int hi = -1;
    for (; i < len; i++) {
        char ch = text[i];
        int v = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
        if (v < 0) continue; // whitespace and line breaks
        if (hi < 0)
            hi = v;
        else
            bin[n++] = (uint8_t)(hi << 4 | v), hi = -1;
    }
    int o = image_exif_orientation(bin, n);
    free(bin);
    return o;
}

/* PIL's order: the eXIf chunk, else a raw EXIF profile in text, else XMP (iTXt). */
static int png_orientation(png_structp png, png_infop info) {
    png_bytep exif = NULL;
    png_uint_32 exif_len = 0;
    if (png_get_eXIf_1(png, info, &exif_len, &exif) && exif && exif_len) {
        int o = image_exif_orientation(exif, exif_len);
        if (o) return o;
    }
    png_textp text = NULL;
    int ntext = 0, xmp = 0, raw = 0;
    png_get_text(png, info, &text, &ntext);
    for (int i = 0; i < ntext; i++) {
        size_t len = text[i].compression > 0 ? text[i].itxt_length : text[i].text_length;
        if (!raw && strcmp(text[i].key, "Raw profile type exif") == 0)
            raw = raw_profile_orientation(text[i].text, len);
        else if (!xmp && strcmp(text[i].key, "XML:com.adobe.xmp") == 0)
            xmp = image_xmp_orientation((const uint8_t *)text[i].text, len);
    }
    return raw ? raw : xmp ? xmp : 1;
}

/* Ask libpng for 8-bit RGB whatever the file holds. */
static void set_transforms(png_structp png, png_infop info) {
    int color = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    // PIL keeps the high byte of 16-bit samples ("RGB;16B"); png_set_strip_16 does the same.
    if (depth == 16) png_set_strip_16(png);
    if (!(color & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(png);
    png_set_strip_alpha(png); // PIL's convert("RGB") drops alpha without compositing
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
}

static graft_status png_failure(const png_guard *g, const char *what, graft_err *e) {
    if (g->oom) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "image '%s': %s", what, g->msg);
    return err_set(e, GRAFT_E_MALFORMED_MODEL, "image '%s': corrupt PNG: %s", what, g->msg);
}

/* The bytes libpng may be given: all of them, or up to the first chunk that declares more data
 * than the file holds. libpng allocates a chunk's declared length before reading it, so a
 * 200-byte file declaring a 2 GB text chunk would allocate 2 GB only to fail on the short read;
 * cut there, libpng fails at that chunk's header instead (the same failure, without the
 * allocation). */
static size_t png_sane_size(const uint8_t *data, size_t size) {
    size_t pos = 8; /* the signature */
    while (pos + 8 <= size) {
        uint32_t len = (uint32_t)data[pos] << 24 | (uint32_t)data[pos + 1] << 16 |
                       (uint32_t)data[pos + 2] << 8 | data[pos + 3];
        if ((uint64_t)len + 12 > size - pos) return pos;
        pos += (size_t)len + 12; /* length, type, data, CRC */
    }
    return size;
}

graft_status image_decode_png(const uint8_t *data, size_t size, const char *what,
                              int64_t max_pixels, image_u8 *out, int *orientation, graft_err *e) {
    png_guard g;
    memset(&g, 0, sizeof g);
    g.data = data, g.size = png_sane_size(data, size);
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &g, guard_error, guard_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "image '%s': no memory for libpng", what);
    }
    graft_status st = GRAFT_OK;
    if (setjmp(png_jmpbuf(png))) {
        if (!g.pixels_done) {
            png_destroy_read_struct(&png, &info, NULL);
            free(g.rows);
            free(g.pixels);
            return png_failure(&g, what, e);
        }
        goto done; // trouble after the last row (e.g. no IEND): keep the pixels, as PIL does
    }
    png_set_read_fn(png, &g, guard_read);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    st = image_check_size(what, w, h, max_pixels, e);
    if (st != GRAFT_OK) {
        png_destroy_read_struct(&png, &info, NULL);
        return st;
    }
    set_transforms(png, info);
    if (png_get_rowbytes(png, info) != (size_t)w * 3) {
        snprintf(g.msg, sizeof g.msg, "libpng gives %zu bytes a row, not %zu",
                 (size_t)png_get_rowbytes(png, info), (size_t)w * 3);
        png_longjmp(png, 1);
    }
    g.pixels = malloc((size_t)w * h * 3);
    g.rows = malloc(sizeof(png_bytep) * h);
    if (!g.pixels || !g.rows) {
        g.oom = 1;
        snprintf(g.msg, sizeof g.msg, "no memory for %ux%u pixels", (unsigned)w, (unsigned)h);
        png_longjmp(png, 1);
    }
    for (png_uint_32 y = 0; y < h; y++) g.rows[y] = g.pixels + (size_t)y * w * 3;
    png_read_image(png, g.rows);
    g.pixels_done = 1;
    png_read_end(png, info); // text and eXIf chunks may follow the image data
done:
    *orientation = png_orientation(png, info);
    out->width = (int)png_get_image_width(png, info);
    out->height = (int)png_get_image_height(png, info);
    out->pixels = g.pixels;
    free(g.rows);
    png_destroy_read_struct(&png, &info, NULL);
    return GRAFT_OK;
}
