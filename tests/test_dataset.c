/* test_dataset.c: image folders through the public data API: a folder of a few hundred mixed
 * images with bad files loads with exactly the bad files reported and the rest intact; batches
 * are the same whatever the thread count; splits are stratified and disjoint; a validation
 * folder must have known classes; an empty class folder is an error. The folder is made by
 * tools/make_image_folder.py. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graft.h"
#include "test_util.h"

/* Read the whole source; returns delivered samples, copies every batch's bytes into *all. */
static int64_t read_all(graft_batch_source *src, int batch, unsigned char **all, size_t *size) {
    int64_t got = 0;
    size_t used = 0, cap = 1 << 20;
    *all = malloc(cap);
    unsigned char *kept = malloc((size_t)batch);
    for (int64_t at = 0; at < src->n_samples; at += batch) {
        int64_t m = src->n_samples - at < batch ? src->n_samples - at : batch;
        graft_named_tensor in[4];
        graft_tensor labels;
        if (src->read(src->user, at, m, in, &labels, kept) != GRAFT_OK) break;
        size_t bytes =
            (size_t)graft_tensor_numel(&in[0].tensor) * graft_dtype_size(in[0].tensor.dtype);
        while (used + bytes + 8 * (size_t)m > cap) *all = realloc(*all, cap *= 2);
        memcpy(*all + used, in[0].tensor.data, bytes);
        memcpy(*all + used + bytes, labels.data, 8 * (size_t)labels.dims[0]);
        used += bytes + 8 * (size_t)labels.dims[0];
        got += labels.dims[0];
    }
    free(kept);
    *size = used;
    return got;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void bad_files_reported(graft_dataset *ds, const char *dir) {
    char path[1024], line[1024];
    snprintf(path, sizeof path, "%s.expected_bad.txt", dir);
    FILE *f = fopen(path, "r");
    char *want[64];
    int n_want = 0;
    while (f && n_want < 64 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0]) want[n_want++] = strdup(line);
    }
    if (f) fclose(f);
    int64_t n = graft_dataset_skipped_count(ds);
    char *got[64];
    int ok = n == n_want;
    for (int64_t i = 0; i < n && i < 64; i++) {
        const char *p, *why;
        graft_dataset_skipped(ds, i, &p, &why);
        got[i] = (char *)p;
        printf("  skipped %s: %s\n", p, why);
        ok &= why && why[0];
        ok &= why && !strstr(why, p); /* the listing names the file once: not again in why */
    }
    if (ok) qsort(got, (size_t)n, sizeof *got, cmp_str);
    for (int i = 0; ok && i < n_want; i++) ok = strcmp(got[i], want[i]) == 0;
    CHECK("images_exactly_the_bad_files_reported", ok, "%lld skipped, %d expected", (long long)n,
          n_want);
    for (int i = 0; i < n_want; i++) free(want[i]);
}

/* Image preprocessing written into a model's metadata comes back after an export and reload. */
static void options_in_metadata(graft_ctx *ctx, const char *model_path) {
    graft_model *m = NULL, *back = NULL;
    if (graft_model_load(ctx, model_path, &m) != GRAFT_OK) {
        MISSING("image_options_in_metadata", "model not generated");
        return;
    }
    graft_image_options o = GRAFT_IMAGE_OPTIONS_INIT, got = GRAFT_IMAGE_OPTIONS_INIT;
    o.resize = 72, o.crop = 64, o.mean[1] = 0.5f, o.std[2] = 0.25f;
    char out[] = "/tmp/graft_meta_XXXXXX", path[64];
    graft_status st = mkdtemp(out) ? graft_image_options_to_model(m, &o) : GRAFT_E_IO;
    snprintf(path, sizeof path, "%s/m.onnx", out);
    if (st == GRAFT_OK) st = graft_model_export(m, path, NULL);
    if (st == GRAFT_OK) st = graft_model_load(ctx, path, &back);
    if (st == GRAFT_OK) st = graft_image_options_from_model(back, &got);
    CHECK("image_options_in_metadata",
          st == GRAFT_OK && got.resize == 72 && got.crop == 64 && got.mean[1] == 0.5f &&
              got.std[2] == 0.25f && got.mean[0] == o.mean[0],
          "status %d: %s", st, graft_last_error(ctx));
    graft_model_set_metadata(m, "graft.image.std", "1,0,1");
    st = graft_image_options_from_model(m, &got);
    CHECK("image_options_bad_metadata",
          st == GRAFT_E_MALFORMED_MODEL && strstr(graft_last_error(ctx), "graft.image.std"),
          "status %d: %s", st, graft_last_error(ctx));
    remove(path), rmdir(out);
    graft_model_free(back), graft_model_free(m);
}

typedef struct counting {
    int64_t allocs, frees;
} counting;

static void *count_alloc(void *user, size_t bytes) {
    ((counting *)user)->allocs++;
    return malloc(bytes);
}

static void count_free(void *user, void *ptr) {
    ((counting *)user)->frees++;
    free(ptr);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "build/test-logs/images";
    char path[1024];
    snprintf(path, sizeof path, "%s.expected_count.txt", dir);
    FILE *f = fopen(path, "r");
    long long good = -1;
    if (!f || fscanf(f, "%lld", &good) != 1) {
        CHECK("images_folder", 0, "run tools/make_image_folder.py %s first", dir);
        return 1;
    }
    fclose(f);
    graft_ctx *ctx;
    graft_ctx_create(NULL, &ctx);
    graft_image_options o = GRAFT_IMAGE_OPTIONS_INIT;
    o.resize = 64, o.crop = 56;
    graft_dataset *ds = NULL;
    graft_status st = graft_dataset_open_images(ctx, dir, &o, &ds);
    CHECK("images_open",
          st == GRAFT_OK && graft_dataset_class_count(ds) == 3 &&
              !strcmp(graft_dataset_class_name(ds, 1), "square"),
          "%s", graft_last_error(ctx));
    if (st != GRAFT_OK) return 1;
    graft_batch_source s1, s2;
    unsigned char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    graft_dataset_source(ds, 1, 2, 0, &s1);
    int64_t got1 = read_all(&s1, 16, &a, &na);
    CHECK("images_rest_intact", got1 == good, "%lld delivered, %lld good", (long long)got1, good);
    bad_files_reported(ds, dir);
    counting c = {0, 0};
    graft_dataset_set_allocator(ds, count_alloc, count_free, &c);
    graft_dataset_source(ds, 2, 3, 0, &s2);
    int64_t got2 = read_all(&s2, 16, &b, &nb);
    CHECK("images_same_batches_any_thread_count", got2 == got1 && na == nb && !memcmp(a, b, na),
          "%lld vs %lld samples", (long long)got1, (long long)got2);
    free(a), free(b);
    graft_dataset_source(ds, 1, 2, 0, &s1); /* frees the previous source's buffers */
    CHECK("images_batch_buffers_from_caller_allocator", c.allocs > 0 && c.frees == c.allocs,
          "%lld allocations, %lld releases", (long long)c.allocs, (long long)c.frees);
    graft_dataset_set_allocator(ds, NULL, NULL, NULL);

    graft_dataset *train = NULL, *val = NULL;
    st = graft_dataset_split(ds, 0.2, 5, &train, &val);
    CHECK("images_split_stratified",
          st == GRAFT_OK &&
              graft_dataset_size(train) + graft_dataset_size(val) == graft_dataset_size(ds) &&
              graft_dataset_size(val) >= 58 && graft_dataset_size(val) <= 64,
          "%lld + %lld of %lld", (long long)graft_dataset_size(train),
          (long long)graft_dataset_size(val), (long long)graft_dataset_size(ds));
    graft_dataset_free(train), graft_dataset_free(val);

    char other[900];
    snprintf(other, sizeof other, "%s.other", dir);
    snprintf(path, sizeof path, "%s/unknown_class", other);
    mkdir(other, 0777), mkdir(path, 0777);
    graft_dataset *like = NULL;
    st = graft_dataset_open_like(ds, other, &like);
    CHECK("images_unknown_class_in_validation",
          st == GRAFT_E_INVALID_ARGUMENT && strstr(graft_last_error(ctx), "unknown_class"),
          "status %d: %s", st, graft_last_error(ctx));
    rmdir(path);
    snprintf(path, sizeof path, "%s/empty_class", other);
    mkdir(path, 0777);
    st = graft_dataset_open_images(ctx, other, &o, &like);
    CHECK("images_empty_class_is_an_error",
          st == GRAFT_E_INVALID_ARGUMENT && strstr(graft_last_error(ctx), "no image files"),
          "status %d: %s", st, graft_last_error(ctx));
    rmdir(path), rmdir(other);
    graft_dataset_free(ds);
    if (argc > 2) options_in_metadata(ctx, argv[2]);
    graft_ctx_free(ctx);
    return test_failures ? 1 : 0;
}
