/* image_internal.h: what the image decoders (image_decode.c, image_jpeg.c, image_png.c) share. */
#ifndef GRAFT_DATA_IMAGE_INTERNAL_H
#define GRAFT_DATA_IMAGE_INTERNAL_H

#include "image.h"

/* Each format decoder fills out with RGB pixels as stored (not yet turned by the EXIF
 * orientation) and sets *orientation to 1..8 (1: as stored). `what` is never NULL. */
graft_status image_decode_jpeg(const uint8_t *data, size_t size, const char *what, int min_side,
                               int64_t max_pixels, image_u8 *out, int *orientation, graft_err *e);
graft_status image_decode_png(const uint8_t *data, size_t size, const char *what,
                              int64_t max_pixels, image_u8 *out, int *orientation, graft_err *e);

/* Refuse width x height when it exceeds max_pixels (0: no limit), or its RGB buffer would not
 * fit in size_t; called right after the header is read, before any pixel is decoded. */
graft_status image_check_size(const char *what, uint32_t width, uint32_t height, int64_t max_pixels,
                              graft_err *e);

/* The Orientation tag (0x0112) of IFD0 in TIFF-structured EXIF data (starting at the "II"/"MM"
 * byte-order mark, an optional "Exif\0\0" prefix is skipped); 0 when there is none. */
int image_exif_orientation(const uint8_t *tiff, size_t size);
/* tiff:Orientation="N" or <tiff:Orientation>N</...> in an XMP packet, as PIL reads it; 0 if
 * absent. PIL only looks at XMP when the EXIF data have no Orientation tag. */
int image_xmp_orientation(const uint8_t *xmp, size_t size);

#endif
