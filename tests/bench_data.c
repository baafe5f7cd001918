/* bench_data.c: the data pipeline's speed next to the plain decode it is built on, in one run:
 * images per second for (a) decode alone, (b) decode + resize, both single-threaded straight
 * calls, and (c) the pipeline (decode, resize, center crop, normalise, batch) on 1 and 2
 * threads; prints per-thread rates and ratios. No assertion: read the table.
 *   bench_data IMAGE_FOLDER [resize crop] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/data/dataset.h"
#include "../src/data/transforms.h"
#include "graft.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Paths of the data set's samples (through the image folder's item paths). */
static double straight(graft_dataset *ds, int resize, bool do_resize, bool fast_decode) {
    double t0 = now();
    int64_t done = 0;
    for (int64_t i = 0; i < ds->n; i++) {
        const char *p = ds->sh->kind->item_path(ds->sh->impl, ds->items[i]);
        image_u8 img = {0}, out = {0};
        graft_err e;
        if (image_decode_file(p, fast_decode ? resize : 0, 0, &img, &e) != GRAFT_OK) continue;
        if (do_resize) transform_resize_shorter(&out, &img, resize, &e);
        image_free(&img), image_free(&out);
        done++;
    }
    return (double)done / (now() - t0);
}

static double through_pipeline(graft_dataset *ds, int threads) {
    graft_batch_source src;
    graft_dataset_source(ds, threads, 4, 0, &src);
    unsigned char kept[64];
    graft_named_tensor in[4];
    graft_tensor labels;
    double t0 = now();
    int64_t done = 0;
    for (int64_t at = 0; at < src.n_samples; at += 32) {
        int64_t m = src.n_samples - at < 32 ? src.n_samples - at : 32;
        if (src.read(src.user, at, m, in, &labels, kept) != GRAFT_OK) break;
        done += labels.dims[0];
    }
    return (double)done / (now() - t0);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_data IMAGE_FOLDER [resize crop [fast]]\n");
        return 2;
    }
    graft_image_options o = GRAFT_IMAGE_OPTIONS_INIT;
    if (argc > 3) o.resize = atoi(argv[2]), o.crop = atoi(argv[3]);
    o.fast_decode = argc > 4 && !strcmp(argv[4], "fast"); /* reduced-size JPEG decoding */
    graft_ctx *ctx;
    graft_dataset *ds;
    graft_ctx_create(NULL, &ctx);
    if (graft_dataset_open_images(ctx, argv[1], &o, &ds) != GRAFT_OK) {
        fprintf(stderr, "bench_data: %s\n", graft_last_error(ctx));
        return 1;
    }
    through_pipeline(ds, 1); /* warm the page cache */
    double dec = straight(ds, o.resize, false, o.fast_decode);
    double dec_resize = straight(ds, o.resize, true, o.fast_decode);
    double p1 = through_pipeline(ds, 1), p2 = through_pipeline(ds, 2);
    printf("%lld images, resize %d, crop %d, %s decoding\n", (long long)ds->n, o.resize, o.crop,
           o.fast_decode ? "reduced-size (fast)" : "full-size");
    printf("%-44s %10s\n", "path", "images/s");
    printf("%-44s %10.1f\n", "decode (libjpeg-turbo/libpng), 1 thread", dec);
    printf("%-44s %10.1f\n", "decode + resize, 1 thread", dec_resize);
    printf("%-44s %10.1f\n", "pipeline (+crop, normalise, batch), 1 thread", p1);
    printf("%-44s %10.1f\n", "pipeline, 2 threads", p2);
    printf("pipeline 1 thread / (decode + resize): %.2f\n", p1 / dec_resize);
    printf("pipeline 2 threads / 1 thread:         %.2f\n", p2 / p1);
    graft_dataset_free(ds);
    graft_ctx_free(ctx);
    return 0;
}
