/* fuzz_image.c: libFuzzer target: the JPEG/PNG decoders, then resize, center crop and
 * normalisation as a model input is made. */
#include <stdint.h>
#include <stdlib.h>

#include "data/image.h"
#include "data/transforms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Small outputs keep each run fast; the cap keeps decompression bombs out, as the data sets do. */
enum { FUZZ_SIDE = 24, FUZZ_MAX_PIXELS = 1 << 22 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    graft_err e;
    image_u8 img = {0}, resized = {0}, crop = {0};
    /* The first byte picks the DCT-scaled decode (min_side) for JPEGs. */
    int min_side = size > 0 && (data[0] & 1) ? FUZZ_SIDE : 0;
    if (image_decode_memory(data, size, "fuzz", min_side, FUZZ_MAX_PIXELS, &img, &e) != GRAFT_OK)
        return 0;
    if (transform_resize_shorter(&resized, &img, FUZZ_SIDE, &e) == GRAFT_OK &&
        transform_center_crop(&crop, &resized, FUZZ_SIDE - 4, FUZZ_SIDE - 4, &e) == GRAFT_OK) {
        static float out[3 * FUZZ_SIDE * FUZZ_SIDE];
        const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
        transform_to_tensor(out, GRAFT_DTYPE_F32, false, &crop, mean, std, &e);
    }
    image_free(&crop);
    image_free(&resized);
    image_free(&img);
    return 0;
}
