/* image.h: decoded images (8-bit RGB, row-major HWC) and the decoders for JPEG and PNG files. */
#ifndef GRAFT_DATA_IMAGE_H
#define GRAFT_DATA_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "../core/error.h"

/* 8-bit RGB pixels, rows top to bottom, 3 bytes per pixel (HWC). */
typedef struct image_u8 {
    int width, height;
    uint8_t *pixels; // (height, width, 3)
} image_u8;

/* Decode a JPEG or PNG (recognised by content, not by name) into RGB as PIL's
 * Image.open(...).convert("RGB") would, then apply the EXIF orientation as
 * ImageOps.exif_transpose does (JPEG: first EXIF APP1, else XMP tiff:Orientation; PNG: eXIf
 * chunk, else a "Raw profile type exif" text, else XMP). Gray, gray+alpha, RGBA (alpha dropped,
 * no compositing), palette (tRNS ignored), 1/2/4-bit, 16-bit (the high byte, as PIL keeps for
 * 16-bit RGB; for 16-bit gray PIL clips at 255 instead, a white image, graft keeps the high
 * byte there too) and Adobe-inverted CMYK JPEGs (YCCK: libjpeg makes CMYK first) come out RGB,
 * pixel-identical to PIL (YCCK untested: no fixture).
 * min_side > 0 lets JPEGs decode at 1/8, 1/4 or 1/2 scale (DCT-domain scaling, the largest
 * reduction whose shorter side, rounded up, stays >= min_side; same pixels as PIL's draft());
 * 0 decodes at full size; PNGs always decode at full size. An image whose stored (full) size
 * has more than max_pixels pixels (0: no limit) is refused right after its header. Errors
 * name `what` (a path) and the reason: GRAFT_E_IO (unreadable), GRAFT_E_UNSUPPORTED (not
 * JPEG/PNG, naming GIF, BMP, WebP, TIFF, HEIF... when recognised, or a JPEG variant libjpeg-turbo
 * cannot read, e.g. 12-bit), GRAFT_E_MALFORMED_MODEL (empty, truncated or corrupt; like PIL, a
 * JPEG missing only its EOI marker is truncated, a PNG missing only its IEND chunk is not),
 * GRAFT_E_INVALID_ARGUMENT (over the pixel limit). On failure *out is empty (pixels NULL).
 * Never aborts, never prints. */
/* PIL's decompression-bomb limit: the decoders' default max_pixels and the cap on the output of
 * every resize and crop (transforms.h), checked before the output is allocated. */
#define IMAGE_MAX_PIXELS 178956970

graft_status image_decode_memory(const void *data, size_t size, const char *what, int min_side,
                                 int64_t max_pixels, image_u8 *out, graft_err *e);
graft_status image_decode_file(const char *path, int min_side, int64_t max_pixels, image_u8 *out,
                               graft_err *e);
void image_free(image_u8 *img);

#endif
