/* test_gpu_decode.c: `finetune --decode gpu`'s batch sources (gpu_source over the gpu_decode
 * worker, a batch decoded ahead on its own thread and stream) against the data set's own CPU
 * source: the same samples kept and skipped, the same labels, pixels within nvJPEG's rounding;
 * read in order (prefetched), out of order, and from two sources sharing the worker, while the
 * model runs on the main thread between reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/gpu_source.h"
#include "gpu_test_util.h"
#include "test_util.h"

#define BATCH 7
/* Synthetic images (tools/make_image_folder.py): flat colours, sharp edges, where nvJPEG's
 * chroma upsampling differs from libjpeg-turbo's most (test_gpu_jpeg.c's FIXTURE bounds). */
#define MEAN_DIFF 6.0
#define MAX_DIFF 110

typedef struct side {
    graft_dataset *ds, *ref; /* ref: the same samples (a data set makes one source at a time) */
    graft_batch_source cpu, gpu_base, gpu;
    gpu_source *g;
} side;

static size_t slot_of(const graft_image_options *o) {
    return (size_t)3 * (size_t)o->crop * (size_t)o->crop;
}

/* Batch [start, start + count) through both sources; the GPU one's pixels back to the host. */
static void compare_batch(graft_ctx *ctx, graft_model *m, side *s, const graft_image_options *o,
                          int64_t start, int64_t count, const char *what) {
    char name[200];
    snprintf(name, sizeof name, "%s [%lld, %lld)", what, (long long)start,
             (long long)(start + count));
    graft_named_tensor gin[2], cin[2];
    graft_tensor gy, cy;
    unsigned char gk[BATCH], ck[BATCH];
    graft_status st = s->gpu.read(s->gpu.user, start, count, gin, &gy, gk);
    if (st != GRAFT_OK) {
        CHECK(name, 0, "gpu read: status %d: %s", st, graft_last_error(ctx));
        return;
    }
    int64_t got = gin[0].tensor.dims[0];
    size_t slot = slot_of(o);
    unsigned char *host = malloc(slot * (size_t)(got ? got : 1));
    int64_t *glabels = malloc(sizeof(int64_t) * (size_t)(got ? got : 1));
    memcpy(glabels, gy.data, sizeof(int64_t) * (size_t)got);
    st = graft_model_copy(m, host, gin[0].tensor.data, slot * (size_t)got,
                          GRAFT_COPY_DEVICE_TO_HOST);
    if (st == GRAFT_OK) st = s->cpu.read(s->cpu.user, start, count, cin, &cy, ck);
    if (st != GRAFT_OK) {
        CHECK(name, 0, "status %d: %s", st, graft_last_error(ctx));
        free(host), free(glabels);
        return;
    }
    int64_t cgot = cin[0].tensor.dims[0];
    bool same_kept = memcmp(gk, ck, (size_t)count) == 0 && got == cgot;
    bool same_labels = same_kept && memcmp(glabels, cy.data, sizeof(int64_t) * (size_t)got) == 0;
    double sum = 0;
    int mx = 0;
    const unsigned char *cpu = cin[0].tensor.data;
    for (size_t i = 0; same_kept && i < slot * (size_t)got; i++) {
        int d = abs((int)host[i] - (int)cpu[i]);
        sum += d;
        if (d > mx) mx = d;
    }
    double mean = got && same_kept ? sum / (double)(slot * (size_t)got) : 0;
    CHECK(name,
          same_kept && same_labels && gin[0].tensor.dtype == GRAFT_DTYPE_U8 && mean <= MEAN_DIFF &&
              mx <= MAX_DIFF,
          "kept %s (%lld vs %lld), labels %s, mean |gpu - cpu| %.2f (<= %.1f), max %d (<= %d)",
          same_kept ? "same" : "differ", (long long)got, (long long)cgot,
          same_labels ? "same" : "differ", mean, MEAN_DIFF, mx, MAX_DIFF);
    free(host), free(glabels);
}

/* The model on the main thread while the worker decodes the next batch. */
static void run_model(graft_ctx *ctx, graft_model *m, float *x) {
    graft_named_tensor in = {"input", {GRAFT_DTYPE_F32, 4, {2, 1, 8, 8}, x}};
    graft_value_info v;
    if (graft_model_input_info(m, 0, &v) == GRAFT_OK) in.name = v.name;
    graft_status st = graft_model_run(m, &in, 1);
    if (st != GRAFT_OK) CHECK("model run between reads", 0, "%s", graft_last_error(ctx));
}

static int open_side(graft_dataset *ds, graft_dataset *ref, side *s) {
    s->ds = ds, s->ref = ref;
    return graft_dataset_source(ref, 2, 2, 0, &s->cpu) != GRAFT_OK ||
           graft_dataset_source(ds, 2, 2, 0, &s->gpu_base) != GRAFT_OK;
}

static void read_all(graft_ctx *ctx, graft_model *m, side *s, const graft_image_options *o,
                     float *x, const char *what) {
    int64_t n = s->gpu.n_samples;
    for (int64_t at = 0; at < n; at += BATCH) {
        compare_batch(ctx, m, s, o, at, n - at < BATCH ? n - at : BATCH, what);
        run_model(ctx, m, x);
    }
}

/* The whole round on one worker with `decoders` nvJPEG threads and `beside` CPU threads next to
 * nvJPEG (0: nvJPEG alone). */
static void scenario(graft_ctx *ctx, graft_model *m, const char *folder, int beside, int decoders) {
    graft_dataset *all = NULL, *train = NULL, *val = NULL, *all2 = NULL, *train2 = NULL,
                  *val2 = NULL;
    graft_image_options o = GRAFT_IMAGE_OPTIONS_INIT;
    o.resize = 72, o.crop = 64, o.dtype = GRAFT_DTYPE_U8, o.nhwc = 1;
    side tr = {0}, va = {0};
    gpu_decode *w = NULL;
    if (graft_dataset_open_images(ctx, folder, &o, &all) ||
        graft_dataset_split(all, 0.3, 1, &train, &val) ||
        graft_dataset_open_images(ctx, folder, &o, &all2) ||
        graft_dataset_split(all2, 0.3, 1, &train2, &val2) || open_side(train, train2, &tr) ||
        open_side(val, val2, &va) || gpu_decode_create(ctx, m, &o, BATCH, beside, decoders, &w) ||
        gpu_source_create(train, &tr.gpu_base, w, m, &o, BATCH, beside > 0, &tr.g, &tr.gpu) ||
        gpu_source_create(val, &va.gpu_base, w, m, &o, BATCH, beside > 0, &va.g, &va.gpu)) {
        CHECK("gpu_decode sources", 0, "%s", graft_last_error(ctx));
        return;
    }
    float x[2 * 64];
    for (int i = 0; i < 2 * 64; i++) x[i] = (float)(i % 17) / 17.0f;
    CHECK("not started before a read", strcmp(gpu_decode_backend(w), "not started") == 0, "%s",
          gpu_decode_backend(w));
    CHECK("begin", tr.gpu.begin && tr.gpu.begin(tr.gpu.user, 0, BATCH) == GRAFT_OK, "%s",
          graft_last_error(ctx));
    read_all(ctx, m, &tr, &o, x, "train in order");
    read_all(ctx, m, &va, &o, x, "val in order (shared worker)");
    /* Out of order: the prefetched next batch is not what is asked for. */
    compare_batch(ctx, m, &tr, &o, 2 * BATCH, BATCH, "train jump");
    compare_batch(ctx, m, &tr, &o, 0, BATCH, "train back to the start");
    compare_batch(ctx, m, &va, &o, BATCH, BATCH, "val after train");
    compare_batch(ctx, m, &tr, &o, BATCH, BATCH, "train next (prefetched)");
    gpu_decode_stats st;
    gpu_decode_get_stats(w, &st);
    int64_t tg, tb, tc, vg, vb, vc;
    gpu_source_counts(tr.g, &tg, &tb, &tc), gpu_source_counts(va.g, &vg, &vb, &vc);
    int64_t batches =
        (tr.gpu.n_samples + BATCH - 1) / BATCH + (va.gpu.n_samples + BATCH - 1) / BATCH;
    printf("# %d decoders, %d CPU threads beside: backend %s; %lld batches decoded, %lld "
           "prefetched hits; "
           "images by nvJPEG %lld, by the CPU threads beside it %lld, CPU fallbacks %lld; start "
           "%.2fs, read %.3fs, decode %.3fs, waited %.3fs\n",
           decoders, beside, gpu_decode_backend(w), (long long)st.batches, (long long)st.prefetched,
           (long long)(tg + vg), (long long)(tb + vb), (long long)(tc + vc), st.start_s, st.read_s,
           st.decode_s, st.wait_s);
    CHECK("prefetch hits", st.prefetched >= batches - 2, "%lld of %lld batches",
          (long long)st.prefetched, (long long)batches);
    CHECK("both decoders used", tg + vg > 0 && tc + vc > 0,
          "GPU %lld, CPU %lld (the folder has PNGs for the CPU)", (long long)(tg + vg),
          (long long)(tc + vc));
    CHECK(beside ? "CPU threads beside nvJPEG used" : "no CPU threads beside nvJPEG",
          beside ? tb + vb > 0 : tb + vb == 0, "%lld images", (long long)(tb + vb));
    /* A batch larger than the worker takes: an error, and the worker still works. */
    void *dev;
    const unsigned char *dec;
    CHECK("error batch too large",
          gpu_decode_get(w, train, tr.gpu.n_samples, 0, BATCH + 1, &dev, &dec) ==
                  GRAFT_E_INVALID_ARGUMENT &&
              strstr(graft_last_error(ctx), "batch"),
          "%s", graft_last_error(ctx));
    compare_batch(ctx, m, &tr, &o, 0, BATCH, "after an error");
    gpu_source_free(tr.g), gpu_source_free(va.g);
    gpu_decode_free(w);
    graft_dataset_free(train), graft_dataset_free(val), graft_dataset_free(all);
    graft_dataset_free(train2), graft_dataset_free(val2), graft_dataset_free(all2);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.onnx IMAGE_FOLDER (tools/make_image_folder.py)\n",
                argv[0]);
        return 2;
    }
    const char *device = gpu_test_device(NULL);
    if (gpu_test_skip_without_gpu("gpu_decode", device)) return 0;
    gpu_test_describe(device);
    graft_ctx_options co = GRAFT_CTX_OPTIONS_INIT;
    co.device = device;
    graft_ctx *ctx = NULL;
    graft_model *m = NULL;
    if (graft_ctx_create(&co, &ctx) || graft_model_load(ctx, argv[1], &m)) {
        printf("FAIL gpu_decode setup: %s\n", ctx ? graft_last_error(ctx) : "no context");
        return 1;
    }
    scenario(ctx, m, argv[2], 0, 1);
    scenario(ctx, m, argv[2], 2, 1);
    scenario(ctx, m, argv[2], 0, 3); /* batches decoded out of order, taken in order */
    graft_image_options o = GRAFT_IMAGE_OPTIONS_INIT;
    gpu_decode *w = NULL;
    CHECK("error 5 decoders",
          gpu_decode_create(ctx, m, &o, BATCH, 0, 5, &w) == GRAFT_E_INVALID_ARGUMENT && !w &&
              strstr(graft_last_error(ctx), "decoding threads"),
          "%s", graft_last_error(ctx));
    graft_model_free(m);
    graft_ctx_free(ctx);
    printf("# gpu_decode: %d failures\n", test_failures);
    return test_failures ? 1 : 0;
}
