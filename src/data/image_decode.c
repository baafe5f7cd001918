/* image_decode.c: recognises JPEG/PNG by content, reads EXIF orientation and turns images upright.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_internal.h"
#include "../core/files.h"

void image_free(image_u8 *img) {
    if (!img) return;
    free(img->pixels);
    img->pixels = NULL;
    img->width = img->height = 0;
}

graft_status image_check_size(const char *what, uint32_t width, uint32_t height, int64_t max_pixels,
                              graft_err *e) {
    uint64_t n = (uint64_t)width * height;
    if (width == 0 || height == 0)
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "image '%s': header gives an empty size %ux%u",
                       what, width, height);
    if (max_pixels > 0 && n > (uint64_t)max_pixels)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "image '%s': %ux%u = %llu pixels is over the limit of %lld (a "
                       "decompression bomb?)",
                       what, width, height, (unsigned long long)n, (long long)max_pixels);
    if (n > SIZE_MAX / 3)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "image '%s': %ux%u pixels do not fit in memory",
                       what, width, height);
    return GRAFT_OK;
}

/* ---- EXIF and XMP orientation ---- */

static uint32_t rd16(const uint8_t *p, int big) {
    return big ? (uint32_t)p[0] << 8 | p[1] : (uint32_t)p[1] << 8 | p[0];
}
static uint32_t rd32(const uint8_t *p, int big) {
    return big ? rd16(p, 1) << 16 | rd16(p + 2, 1) : rd16(p + 2, 0) << 16 | rd16(p, 0);
}

int image_exif_orientation(const uint8_t *tiff, size_t size) {
    if (size >= 6 && memcmp(tiff, "Exif\0\0", 6) == 0) tiff += 6, size -= 6;
    if (size < 8) return 0;
    int big;
    if (memcmp(tiff, "MM\0*", 4) == 0)
        big = 1;
    else if (memcmp(tiff, "II*\0", 4) == 0)
        big = 0;
    else
        return 0;
    uint32_t ifd = rd32(tiff + 4, big);
    if (ifd > size - 2) return 0;
    uint32_t count = rd16(tiff + ifd, big);
    const uint8_t *entry = tiff + ifd + 2;
    for (uint32_t i = 0; i < count; i++, entry += 12) {
        if ((size_t)(entry + 12 - tiff) > size) return 0;
        if (rd16(entry, big) != 0x0112) continue;
        uint32_t type = rd16(entry + 2, big);
        // The value sits in the entry's 4-byte value field: BYTE (1), SHORT (3), LONG (4).
        if (type == 1) return entry[8];
        if (type == 3) return (int)rd16(entry + 8, big);
        if (type == 4) {
            uint32_t v = rd32(entry + 8, big);
            return v > 9 ? 9 : (int)v; // anything outside 1..8 leaves the image as stored
        }
        return 0;
    }
    return 0;
}

int image_xmp_orientation(const uint8_t *xmp, size_t size) {
    static const char key[] = "tiff:Orientation";
    const size_t klen = sizeof key - 1;
    if (size < klen) return 0;
    for (size_t i = 0; i + klen <= size; i++) {
        if (memcmp(xmp + i, key, klen) != 0) continue;
        const uint8_t *p = xmp + i + klen;
        size_t left = size - i - klen;
        if (left >= 3 && p[0] == '=' && p[1] == '"' && p[2] >= '0' && p[2] <= '9')
            return p[2] - '0';
        if (left >= 2 && p[0] == '>' && p[1] >= '0' && p[1] <= '9') return p[1] - '0';
    }
    return 0;
}

/* Turn img upright as PIL's ImageOps.exif_transpose does for orientation 2..8. */
static graft_status apply_orientation(image_u8 *img, int orientation, const char *what,
                                      graft_err *e) {
    if (orientation < 2 || orientation > 8) return GRAFT_OK;
    ptrdiff_t w = img->width, h = img->height;
    int swap = orientation >= 5;
    ptrdiff_t ow = swap ? h : w, oh = swap ? w : h;
    // Output pixel (x, y) reads source pixel origin + x * xs + y * ys (offsets in pixels).
    ptrdiff_t origin = 0, xs = 1, ys = w;
    switch (orientation) {
    case 2:
        origin = w - 1, xs = -1, ys = w;
        break; // mirror left-right
    case 3:
        origin = h * w - 1, xs = -1, ys = -w;
        break; // rotate 180
    case 4:
        origin = (h - 1) * w, xs = 1, ys = -w;
        break; // mirror top-bottom
    case 5:
        origin = 0, xs = w, ys = 1;
        break; // transpose
    case 6:
        origin = (h - 1) * w, xs = -w, ys = 1;
        break; // rotate 90 clockwise
    case 7:
        origin = h * w - 1, xs = -w, ys = -1;
        break; // transverse
    case 8:
        origin = w - 1, xs = w, ys = -1;
        break; // rotate 90 anticlockwise
    }
    uint8_t *dst = malloc((size_t)(ow * oh * 3)); // (oh, ow, 3)
    if (!dst)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "image '%s': no memory to turn %tdx%td pixels",
                       what, w, h);
    uint8_t *d = dst;
    for (ptrdiff_t y = 0; y < oh; y++) {
        const uint8_t *row = img->pixels + (origin + y * ys) * 3;
        for (ptrdiff_t x = 0; x < ow; x++, d += 3) {
            const uint8_t *s = row + x * xs * 3;
            d[0] = s[0], d[1] = s[1], d[2] = s[2];
        }
    }
    free(img->pixels);
    img->pixels = dst;
    img->width = (int)ow;
    img->height = (int)oh;
    return GRAFT_OK;
}

/* ---- format recognition ---- */

/* A name for formats we recognise but do not decode, or NULL. */
static const char *other_format(const uint8_t *p, size_t n) {
    if (n >= 6 && (memcmp(p, "GIF87a", 6) == 0 || memcmp(p, "GIF89a", 6) == 0)) return "GIF";
    if (n >= 2 && memcmp(p, "BM", 2) == 0) return "BMP";
    if (n >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0) return "WebP";
    if (n >= 4 && (memcmp(p, "II*\0", 4) == 0 || memcmp(p, "MM\0*", 4) == 0)) return "TIFF";
    if (n >= 12 && memcmp(p + 4, "ftyp", 4) == 0) {
        if (memcmp(p + 8, "avif", 4) == 0 || memcmp(p + 8, "avis", 4) == 0) return "AVIF";
        if (memcmp(p + 8, "hei", 3) == 0 || memcmp(p + 8, "mif1", 4) == 0) return "HEIF";
    }
    if (n >= 12 && memcmp(p, "\0\0\0\x0cjP  ", 8) == 0) return "JPEG 2000";
    if (n >= 4 && memcmp(p, "\xff\x0a", 2) == 0) return "JPEG XL";
    if (n >= 4 && memcmp(p, "8BPS", 4) == 0) return "Photoshop PSD";
    if (n >= 4 && memcmp(p, "qoif", 4) == 0) return "QOI";
    if (n >= 4 && memcmp(p, "\0\0\1\0", 4) == 0) return "ICO";
    if (n >= 2 && p[0] == 'P' && p[1] >= '1' && p[1] <= '7') return "PNM";
    return NULL;
}

graft_status image_decode_memory(const void *data, size_t size, const char *what, int min_side,
                                 int64_t max_pixels, image_u8 *out, graft_err *e) {
    if (!what) what = "<memory>";
    if (!out || (!data && size))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "image '%s': no data or no output", what);
    out->width = out->height = 0;
    out->pixels = NULL;
    if (size == 0)
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "image '%s': the file is empty", what);
    const uint8_t *p = data;
    int orientation = 1;
    graft_status st;
    if (size >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF)
        st = image_decode_jpeg(p, size, what, min_side, max_pixels, out, &orientation, e);
    else if (size >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0)
        st = image_decode_png(p, size, what, max_pixels, out, &orientation, e);
    else {
        const char *fmt = other_format(p, size);
        if (fmt)
            return err_set(e, GRAFT_E_UNSUPPORTED,
                           "image '%s': %s images are not supported (only JPEG and PNG)", what,
                           fmt);
        return err_set(e, GRAFT_E_UNSUPPORTED,
                       "image '%s': not a JPEG or PNG file (unrecognised first bytes "
                       "%02x %02x %02x %02x)",
                       what, p[0], size > 1 ? p[1] : 0, size > 2 ? p[2] : 0, size > 3 ? p[3] : 0);
    }
    if (st == GRAFT_OK) st = apply_orientation(out, orientation, what, e);
    if (st != GRAFT_OK) image_free(out);
    return st;
}

graft_status image_decode_file(const char *path, int min_side, int64_t max_pixels, image_u8 *out,
                               graft_err *e) {
    if (!path || !out)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "image_decode_file: no path or no output");
    out->width = out->height = 0;
    out->pixels = NULL;
    const char *why = NULL;
    FILE *f = file_open_regular(path, &why);
    if (!f) return err_set(e, GRAFT_E_IO, "cannot open image '%s': %s", path, why);
    uint8_t *buf = NULL; // whole file
    size_t size = 0, cap = 0;
    graft_status st = GRAFT_OK;
    for (;;) {
        if (size == cap) {
            size_t ncap = cap ? cap * 2 : 1 << 16;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "image '%s': no memory to read it", path);
                break;
            }
            buf = nb, cap = ncap;
        }
        size_t got = fread(buf + size, 1, cap - size, f);
        size += got;
        if (got == 0) {
            if (ferror(f))
                st = err_set(e, GRAFT_E_IO, "cannot read image '%s': %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (st == GRAFT_OK) st = image_decode_memory(buf, size, path, min_side, max_pixels, out, e);
    free(buf);
    return st;
}
