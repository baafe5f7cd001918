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
 * Image.open(...).convert("RGB") would, then apply the EXIF orientation. Gray, gray+alpha,
 * RGBA (alpha dropped), palette, 16-bit (rounded to 8) and CMYK/YCCK JPEGs all come out RGB.
 * min_side > 0 lets JPEGs decode at 1/2, 1/4 or 1/8 scale (DCT-domain scaling) as long as the
 * shorter side stays >= min_side; 0 decodes at full size. An image with more than max_pixels
 * pixels (0: no limit) is refused before its pixels are decoded. Errors name `what` (a path)
 * and the reason: GRAFT_E_IO (unreadable), GRAFT_E_UNSUPPORTED (not JPEG/PNG, or a JPEG/PNG
 * variant libjpeg-turbo/libpng cannot read), GRAFT_E_MALFORMED_MODEL (truncated or corrupt),
 * GRAFT_E_INVALID_ARGUMENT (over the pixel limit). Never aborts, never prints. */
graft_status image_decode_memory(const void *data, size_t size, const char *what, int min_side,
                                 int64_t max_pixels, image_u8 *out, graft_err *e);
graft_status image_decode_file(const char *path, int min_side, int64_t max_pixels, image_u8 *out,
                               graft_err *e);
void image_free(image_u8 *img);

#endif
