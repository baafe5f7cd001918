/* jpeg_decoder_none.c: the GPU JPEG decoder's API in a graft built without CUDA or nvJPEG. */
#include <stdio.h>

#include "model.h"

graft_status graft_jpeg_decoder_create(graft_model *model, const graft_image_options *options,
                                       int max_batch, graft_jpeg_decoder **out) {
    (void)options, (void)max_batch;
    if (out) *out = NULL;
    if (!model) return GRAFT_E_INVALID_ARGUMENT;
    return err_set(&model->ctx->err, GRAFT_E_UNSUPPORTED,
                   "graft_jpeg_decoder_create: graft was built without nvJPEG (GPU JPEG decoding "
                   "needs -Dcuda=enabled and nvJPEG: see -Dnvjpeg_dir)");
}

graft_status graft_jpeg_decoder_open(graft_model *model, const graft_image_options *options,
                                     int max_batch, char *error, size_t error_size,
                                     graft_jpeg_decoder **out) {
    (void)options, (void)max_batch;
    if (out) *out = NULL;
    if (!model) return GRAFT_E_INVALID_ARGUMENT;
    if (error && error_size)
        snprintf(error, error_size, "graft was built without nvJPEG (see -Dnvjpeg_dir)");
    return GRAFT_E_UNSUPPORTED;
}

graft_status graft_jpeg_decode_batch(graft_jpeg_decoder *d, const unsigned char *const *data,
                                     const size_t *lengths, int n, void *dst,
                                     unsigned char *decoded) {
    (void)d, (void)data, (void)lengths, (void)n, (void)dst, (void)decoded;
    return GRAFT_E_UNSUPPORTED;
}

graft_status graft_jpeg_decoder_set_cpu_threads(graft_jpeg_decoder *d, int threads) {
    (void)d, (void)threads;
    return GRAFT_E_UNSUPPORTED;
}

const char *graft_jpeg_decoder_backend(const graft_jpeg_decoder *d) {
    (void)d;
    return "none";
}

const char *graft_jpeg_decoder_error(const graft_jpeg_decoder *d) {
    (void)d;
    return "graft was built without nvJPEG";
}

void graft_jpeg_decoder_free(graft_jpeg_decoder *d) {
    (void)d;
}
