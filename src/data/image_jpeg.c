/* image_jpeg.c: JPEG decoding through libjpeg(-turbo): RGB/gray/CMYK/YCCK, DCT scaling, EXIF. */
#include <setjmp.h>
#include <stdio.h> // jpeglib.h needs FILE
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "image_internal.h"

/* libjpeg's error manager, extended so that errors (and a premature end of the data) jump back
 * to image_decode_jpeg instead of exiting, and nothing is printed. */
typedef struct jpeg_guard {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    int code;                  // libjpeg message code of the failure
    char msg[JMSG_LENGTH_MAX]; // its text
    uint8_t *pixels;           // (output_height, output_width, 3); freed on failure
    uint8_t *row;              // (output_width, 4): one CMYK row
} jpeg_guard;

static void guard_error_exit(j_common_ptr c) {
    jpeg_guard *g = (jpeg_guard *)c->err;
    g->code = c->err->msg_code;
    c->err->format_message(c, g->msg);
    longjmp(g->jump, 1);
}

/* Warnings (level -1) are ignored as PIL ignores them, except running out of data: libjpeg would
 * fill the rest of the image with gray, which hides a damaged file. Like PIL, a file that only
 * lacks its EOI marker is refused too (libjpeg reads ahead, so the two cannot be told apart). */
static void guard_emit_message(j_common_ptr c, int level) {
    if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) guard_error_exit(c);
    if (level < 0) c->err->num_warnings++;
}

static void guard_output_message(j_common_ptr c) {
    (void)c;
}

static graft_status jpeg_failure(const jpeg_guard *g, const char *what, graft_err *e) {
    switch (g->code) {
    case JERR_BAD_PRECISION:
    case JERR_NOT_COMPILED:
    case JERR_CONVERSION_NOTIMPL:
    case JERR_SOF_UNSUPPORTED:
    case JERR_ARITH_NOTIMPL:
        return err_set(e, GRAFT_E_UNSUPPORTED, "image '%s': unsupported JPEG variant: %s", what,
                       g->msg);
    case JERR_OUT_OF_MEMORY:
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "image '%s': %s", what, g->msg);
    case JWRN_JPEG_EOF:
        return err_set(e, GRAFT_E_MALFORMED_MODEL,
                       "image '%s': truncated JPEG (the data end before the image does)", what);
    default:
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "image '%s': corrupt JPEG: %s", what, g->msg);
    }
}

/* Orientation from the first EXIF APP1 segment, else (as PIL) from an XMP APP1 segment. */
static int jpeg_orientation(j_decompress_ptr c) {
    static const char xmp_id[] = "http://ns.adobe.com/xap/1.0/";
    int exif = 0, xmp = 0;
    int seen_exif = 0, seen_xmp = 0;
    for (jpeg_saved_marker_ptr m = c->marker_list; m; m = m->next) {
        if (m->marker != JPEG_APP0 + 1) continue;
        if (!seen_exif && m->data_length >= 6 && memcmp(m->data, "Exif\0\0", 6) == 0) {
            exif = image_exif_orientation(m->data + 6, m->data_length - 6);
            seen_exif = 1;
        } else if (!seen_xmp && m->data_length >= sizeof xmp_id &&
                   memcmp(m->data, xmp_id, sizeof xmp_id) == 0) {
            xmp = image_xmp_orientation(m->data + sizeof xmp_id, m->data_length - sizeof xmp_id);
            seen_xmp = 1;
        }
    }
    return exif ? exif : xmp ? xmp : 1;
}

/* The largest reduction 1/8, 1/4 or 1/2 whose shorter output side stays >= min_side. */
static void choose_scale(j_decompress_ptr c, int min_side) {
    c->scale_num = 1;
    c->scale_denom = 1;
    if (min_side <= 0) return;
    for (unsigned d = 8; d >= 2; d /= 2) {
        c->scale_denom = d;
        jpeg_calc_output_dimensions(c);
        JDIMENSION side = c->output_width < c->output_height ? c->output_width : c->output_height;
        if (side >= (JDIMENSION)min_side) return;
    }
    c->scale_denom = 1;
}

/* PIL reads 4-channel JPEGs as Adobe-inverted CMYK ("CMYK;I") and converts each channel to
 * R = (255 - K) * (255 - C) / 255, rounded as PIL rounds; in stored (inverted) values k, c
 * that is k - round(k * (255 - c) / 255). */
static void cmyk_row_to_rgb(const uint8_t *cmyk, uint8_t *rgb, JDIMENSION width) {
    for (JDIMENSION x = 0; x < width; x++, cmyk += 4, rgb += 3) {
        int k = cmyk[3];
        for (int ch = 0; ch < 3; ch++) {
            int t = (255 - cmyk[ch]) * k + 128;
            rgb[ch] = (uint8_t)(k - ((t + (t >> 8)) >> 8));
        }
    }
}

static void read_pixels(j_decompress_ptr c, jpeg_guard *g) {
    size_t stride = (size_t)c->output_width * 3;
    int cmyk = c->out_color_space == JCS_CMYK;
    while (c->output_scanline < c->output_height) {
        uint8_t *dst = g->pixels + (size_t)c->output_scanline * stride;
        JSAMPROW row = cmyk ? g->row : dst;
        if (jpeg_read_scanlines(c, &row, 1) != 1) { // a memory source never suspends
            g->code = JWRN_JPEG_EOF;
            longjmp(g->jump, 1);
        }
        if (cmyk) cmyk_row_to_rgb(g->row, dst, c->output_width);
    }
}

graft_status image_decode_jpeg(const uint8_t *data, size_t size, const char *what, int min_side,
                               int64_t max_pixels, image_u8 *out, int *orientation, graft_err *e) {
    struct jpeg_decompress_struct cinfo;
    jpeg_guard g;
    memset(&g, 0, sizeof g);
    cinfo.err = jpeg_std_error(&g.mgr);
    g.mgr.error_exit = guard_error_exit;
    g.mgr.emit_message = guard_emit_message;
    g.mgr.output_message = guard_output_message;
    if (setjmp(g.jump)) {
        jpeg_destroy_decompress(&cinfo);
        free(g.pixels);
        free(g.row);
        return jpeg_failure(&g, what, e);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)size);
    jpeg_save_markers(&cinfo, JPEG_APP0 + 1, 0xFFFF);
    jpeg_read_header(&cinfo, TRUE);
    graft_status st = image_check_size(what, cinfo.image_width, cinfo.image_height, max_pixels, e);
    if (st != GRAFT_OK) {
        jpeg_destroy_decompress(&cinfo);
        return st;
    }
    *orientation = jpeg_orientation(&cinfo);
    int cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
    cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    choose_scale(&cinfo, min_side);
    jpeg_start_decompress(&cinfo);
    g.pixels = malloc((size_t)cinfo.output_width * cinfo.output_height * 3);
    if (cmyk) g.row = malloc((size_t)cinfo.output_width * 4);
    if (!g.pixels || (cmyk && !g.row)) {
        g.code = JERR_OUT_OF_MEMORY;
        snprintf(g.msg, sizeof g.msg, "no memory for %ux%u pixels", cinfo.output_width,
                 cinfo.output_height);
        longjmp(g.jump, 1);
    }
    read_pixels(&cinfo, &g);
    jpeg_finish_decompress(&cinfo);
    out->width = (int)cinfo.output_width;
    out->height = (int)cinfo.output_height;
    out->pixels = g.pixels;
    free(g.row);
    jpeg_destroy_decompress(&cinfo);
    return GRAFT_OK;
}
