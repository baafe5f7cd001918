/* image_folder.c: image data sets in the ImageFolder layout (DIR/<class>/<image>): scanning the
 * folder, and loading one sample (decode, resize, crop or random-resized-crop + flip,
 * normalise) into a batch row. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/hash.h"
#include "../core/half.h"
#include "../core/rng.h"
#include "dataset.h"
#include "file_list.h"
#include "transforms.h"

#define DEFAULT_MAX_PIXELS IMAGE_MAX_PIXELS

typedef struct image_folder {
    char *root;
    graft_image_options o;
    char input_name[1024];
    char **paths;
    file_stamp *stamps; /* (n_paths) the listing's sizes and times, for the identity */
    int64_t n_paths;
} image_folder;

static const dataset_kind image_kind;

static graft_status check_options(const graft_image_options *o, graft_err *e) {
    if (o->crop < 1 || o->resize < 0 || o->crop > 16384 || o->resize > 16384)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "image options: crop must be 1..16384 (a batch needs one size) and resize "
                       "0..16384 (got crop %d, resize %d)",
                       o->crop, o->resize);
    if (o->dtype != GRAFT_DTYPE_F32 && o->dtype != GRAFT_DTYPE_F16 && o->dtype != GRAFT_DTYPE_U8)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "image options: dtype must be F32, F16 or U8 (got %s)",
                       graft_dtype_name(o->dtype));
    for (int c = 0; c < 3; c++)
        if (!(o->std[c] > 0.0f))
            return err_set(e, GRAFT_E_INVALID_ARGUMENT, "image options: std must be > 0");
    if (o->augment && !(o->scale_min > 0 && o->scale_min <= o->scale_max && o->scale_max <= 1 &&
                        o->ratio_min > 0 && o->ratio_min <= o->ratio_max))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "image options: random-resized-crop needs 0 < scale_min <= scale_max <= 1 "
                       "and 0 < ratio_min <= ratio_max");
    return GRAFT_OK;
}

/* The class folder's error when it lists no image: what was skipped in it, if anything. */
static graft_status no_images(const file_walk *w, int64_t first_note, const char *dir,
                              graft_err *e) {
    int64_t skipped = 0;
    const file_note *example = NULL;
    for (int64_t i = first_note; i < w->n_notes; i++)
        if (w->notes[i].skipped && skipped++ == 0) example = &w->notes[i];
    if (!example)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "class folder '%s' has no image files (.jpg, .jpeg or .png)", dir);
    return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                   "class folder '%s' has no image files graft reads: %lld skipped, e.g. %s: %s",
                   dir, (long long)skipped, example->path, example->reason);
}

/* Every image under root/<class>/ (recursively, graft_image_files' rules) for the given
 * classes, class by class. The class folders were marked by file_walk_classes, so a link from
 * one class to another is not followed (its images stay in their own class). A class folder
 * with no images is an error; present[c] 0 (allow_missing) is a class with no samples here. */
static graft_status scan(image_folder *f, file_walk *w, char **classes, int n_classes,
                         const bool *present, int64_t **labels_out, graft_err *e) {
    char dir[4096];
    int64_t *labels = NULL, cap = 0;
    for (int c = 0; c < n_classes; c++) {
        if (!present[c]) continue;
        snprintf(dir, sizeof dir, "%s/%s", f->root, classes[c]);
        int64_t start = w->n_paths, first_note = w->n_notes;
        graft_status st = file_walk_dir(w, dir, e);
        if (st == GRAFT_OK && w->n_paths == start) st = no_images(w, first_note, dir, e);
        if (st == GRAFT_OK && w->n_paths > cap) {
            int64_t *nl = realloc(labels, sizeof *nl * (size_t)(cap = w->cap_paths));
            if (nl)
                labels = nl;
            else
                st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory scanning '%s'", f->root);
        }
        if (st != GRAFT_OK) return free(labels), st;
        for (int64_t i = start; i < w->n_paths; i++) labels[i] = c;
    }
    /* the data set owns the paths from here; the walk keeps its notes */
    f->paths = w->paths, f->stamps = w->stamps, f->n_paths = w->n_paths;
    w->paths = NULL, w->stamps = NULL, w->n_paths = w->cap_paths = w->cap_stamps = 0;
    *labels_out = labels;
    return GRAFT_OK;
}

/* What the listing left out, now that the data set exists: every note (skipped files, link
 * loops, folders and files reached twice) into its list of skipped files, with the reason. */
static void report_notes(dataset_shared *sh, const file_walk *w) {
    for (int64_t i = 0; i < w->n_notes; i++) dataset_skip(sh, w->notes[i].path, w->notes[i].reason);
}

/* PIL's convert("L") (ITU-R 601-2 luma, rounded), written back to all three channels so the
 * RGB transforms resample it exactly as PIL resamples an L image. */
static void to_gray(image_u8 *img) {
    uint8_t *p = img->pixels;
    for (int64_t i = 0; i < (int64_t)img->width * img->height; i++, p += 3) {
        uint32_t l = (p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16;
        p[0] = p[1] = p[2] = (uint8_t)l;
    }
}

/* Write channel 0 of an RGB image (gray replicated) as one normalised channel. */
static graft_status gray_to_tensor(void *dst, const graft_image_options *o, const image_u8 *img,
                                   graft_err *e) {
    int64_t n = (int64_t)img->width * img->height;
    float scale = 1.0f / (255.0f * o->std[0]), shift = o->mean[0] / o->std[0];
    for (int64_t i = 0; i < n; i++) {
        float v = (float)img->pixels[3 * i] * scale - shift;
        if (o->dtype == GRAFT_DTYPE_U8)
            ((uint8_t *)dst)[i] = img->pixels[3 * i];
        else if (o->dtype == GRAFT_DTYPE_F32)
            ((float *)dst)[i] = v;
        else if (o->dtype == GRAFT_DTYPE_F16)
            ((uint16_t *)dst)[i] = f32_to_f16(v);
        else
            return err_set(e, GRAFT_E_INVALID_ARGUMENT, "image dtype must be F32, F16 or U8");
    }
    return GRAFT_OK;
}

/* A decoded image through the options' transforms into dst; frees img. */
static graft_status image_finish(image_u8 *img, const graft_image_options *o, void *dst,
                                 uint64_t seed, graft_err *e) {
    image_u8 a = {0}, b = {0};
    graft_status st = GRAFT_OK;
    if (o->grayscale) to_gray(img);
    if (o->augment) {
        int x, y, w, h;
        uint64_t rng = seed;
        transform_rrc_box(&x, &y, &w, &h, img->width, img->height, o->scale_min, o->scale_max,
                          o->ratio_min, o->ratio_max, &rng);
        st = transform_crop_resize(&b, img, x, y, w, h, o->crop, o->crop, e);
        if (st == GRAFT_OK && rng_uniform(&rng) < 0.5) transform_hflip(&b);
    } else {
        const image_u8 *src = img;
        if (o->resize > 0) {
            st = transform_resize_shorter(&a, img, o->resize, e);
            src = &a;
        }
        if (st == GRAFT_OK) st = transform_center_crop(&b, src, o->crop, o->crop, e);
    }
    if (st == GRAFT_OK && o->grayscale)
        st = gray_to_tensor(dst, o, &b, e);
    else if (st == GRAFT_OK && o->dtype == GRAFT_DTYPE_U8)
        st = transform_to_u8(dst, o->nhwc != 0, &b, e);
    else if (st == GRAFT_OK)
        st = transform_to_tensor(dst, o->dtype, o->nhwc != 0, &b, o->mean, o->std, e);
    image_free(img), image_free(&a), image_free(&b);
    return st;
}

/* Reduced-size decoding only when asked: it is faster but not what PIL gives. */
static int decode_min_side(const graft_image_options *o) {
    return !o->fast_decode ? 0 : o->augment ? o->crop : (o->resize ? o->resize : o->crop);
}

graft_status image_prepare(const char *path, const graft_image_options *o, void *dst, uint64_t seed,
                           graft_err *e) {
    image_u8 img = {0};
    TRY(image_decode_file(path, decode_min_side(o), o->max_pixels, &img, e));
    return image_finish(&img, o, dst, seed, e);
}

graft_status image_prepare_memory(const void *data, size_t size, const char *what,
                                  const graft_image_options *o, void *dst, graft_err *e) {
    image_u8 img = {0};
    graft_image_options plain = *o;
    plain.augment = 0;
    TRY(image_decode_memory(data, size, what, decode_min_side(&plain), o->max_pixels, &img, e));
    return image_finish(&img, &plain, dst, 0, e);
}

static graft_status load_image(void *impl, int64_t item, void *const *dst, uint64_t seed,
                               graft_err *e) {
    image_folder *f = impl;
    return image_prepare(f->paths[item], &f->o, dst[0], seed, e);
}

graft_status graft_image_load(graft_ctx *ctx, const char *path, const graft_image_options *options,
                              void *dst, size_t dst_bytes) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ctx->err;
    err_clear(e);
    graft_image_options defaults = GRAFT_IMAGE_OPTIONS_INIT;
    graft_image_options o = options ? *options : defaults;
    if (!path || !dst) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "no image path or buffer");
    TRY(check_options(&o, e));
    o.augment = 0;
    if (!o.max_pixels) o.max_pixels = DEFAULT_MAX_PIXELS;
    size_t need =
        (size_t)(o.grayscale ? 1 : 3) * (size_t)o.crop * (size_t)o.crop * graft_dtype_size(o.dtype);
    if (dst_bytes < need)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "the buffer holds %zu bytes, the image needs %zu", dst_bytes, need);
    return image_prepare(path, &o, dst, 0, e);
}

static const char *image_path(void *impl, int64_t item) {
    return ((image_folder *)impl)->paths[item];
}

static void free_folder(void *impl) {
    image_folder *f = impl;
    if (!f) return;
    free(f->root);
    file_names_free(f->paths, f->n_paths);
    free(f->stamps);
    free(f);
}

/* The data and preprocessing, for the feature cache key: options and every file's path, size
 * and modification time (the listing's own: a second stat a file took seconds for a million). */
static void set_identity(dataset_shared *sh, const image_folder *f) {
    hash64_state h;
    hash64_init(&h, 0x696d61676573ull);
    for (int64_t i = 0; i < f->n_paths; i++) {
        hash64_update_str(&h, f->paths[i]);
        hash64_update_u64(&h, (uint64_t)f->stamps[i].size);
        hash64_update_u64(&h, (uint64_t)f->stamps[i].mtime);
    }
    const graft_image_options *o = &f->o;
    snprintf(sh->identity, sizeof sh->identity,
             "images:%016llx;resize=%d;crop=%d;augment=%d;scale=%g,%g;ratio=%g,%g;mean=%g,%g,%g;"
             "std=%g,%g,%g;nhwc=%d;dtype=%d;gray=%d;fast_decode=%d",
             (unsigned long long)hash64_final(&h), o->resize, o->crop, o->augment,
             (double)o->scale_min, (double)o->scale_max, (double)o->ratio_min, (double)o->ratio_max,
             (double)o->mean[0], (double)o->mean[1], (double)o->mean[2], (double)o->std[0],
             (double)o->std[1], (double)o->std[2], o->nhwc, (int)o->dtype, o->grayscale,
             o->fast_decode != 0);
}

/* The data set's input: one image of the options' size, layout and dtype. */
static void set_input(dataset_shared *sh, const image_folder *f) {
    const graft_image_options *o = &f->o;
    sh->n_inputs = 1;
    snprintf(sh->input_names[0], sizeof sh->input_names[0], "%s", f->input_name);
    sh->input_dtype[0] = o->dtype;
    sh->input_ndim[0] = 3;
    int64_t ch = o->grayscale ? 1 : 3;
    int64_t chw[3] = {ch, o->crop, o->crop}, hwc[3] = {o->crop, o->crop, ch};
    memcpy(sh->input_dims[0], o->nhwc ? hwc : chw, sizeof chw);
    sh->label_dtype = GRAFT_DTYPE_I64;
    sh->label_width = 1;
}

/* Build the data set over root for the given classes (owned by the call; present: which have
 * a folder here) and the walk that listed them (its notes; freed by the call). */
static graft_status open_with(graft_ctx *ctx, const char *root, const graft_image_options *o,
                              char **classes, int n_classes, const bool *present, file_walk *w,
                              graft_dataset **out, graft_err *e) {
    image_folder *f = calloc(1, sizeof *f);
    int64_t *labels = NULL;
    graft_status st = f ? GRAFT_OK : err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    if (st == GRAFT_OK) {
        f->o = *o;
        if (!f->o.max_pixels) f->o.max_pixels = DEFAULT_MAX_PIXELS;
        const char *name = o->input_name ? o->input_name : "input";
        if (strlen(name) >= sizeof f->input_name)
            st = err_set(e, GRAFT_E_INVALID_ARGUMENT, "input name of %zu bytes: at most %zu",
                         strlen(name), sizeof f->input_name - 1);
        snprintf(f->input_name, sizeof f->input_name, "%s", name);
        f->root = strdup(root);
        st = st != GRAFT_OK ? st
             : f->root      ? scan(f, w, classes, n_classes, present, &labels, e)
                            : err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    }
    int64_t *items = st == GRAFT_OK ? malloc(sizeof(int64_t) * (size_t)(f->n_paths + 1)) : NULL;
    if (st == GRAFT_OK && !items) st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    if (st == GRAFT_OK) {
        for (int64_t i = 0; i < f->n_paths; i++) items[i] = i;
        st = dataset_create(ctx, &image_kind, f, classes, n_classes, f->n_paths, items, labels, out,
                            e);
    }
    if (st != GRAFT_OK) {
        free_folder(f);
        free(labels), free(items);
        file_names_free(classes, n_classes);
        file_walk_free(w);
        return st;
    }
    set_input((*out)->sh, f);
    set_identity((*out)->sh, f);
    report_notes((*out)->sh, w);
    file_walk_free(w);
    return GRAFT_OK;
}

graft_status graft_dataset_open_images(graft_ctx *ctx, const char *dir,
                                       const graft_image_options *options, graft_dataset **out) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ctx->err;
    err_clear(e);
    if (!dir || !out) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "no folder given");
    graft_image_options defaults = GRAFT_IMAGE_OPTIONS_INIT;
    const graft_image_options *o = options ? options : &defaults;
    TRY(check_options(o, e));
    char **classes;
    int64_t n_classes;
    file_walk w = {.kind = FILE_WALK_IMAGES};
    graft_status st = file_walk_classes(&w, dir, &classes, &n_classes, e);
    if (st == GRAFT_OK && n_classes == 0)
        st = err_set(e, GRAFT_E_INVALID_ARGUMENT,
                     "'%s' has no class folders (expected DIR/<class>/<image>)", dir);
    bool *present = st == GRAFT_OK ? malloc((size_t)n_classes * sizeof *present) : NULL;
    if (st == GRAFT_OK && !present) st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    if (st != GRAFT_OK) return file_names_free(classes, n_classes), file_walk_free(&w), st;
    for (int64_t c = 0; c < n_classes; c++) present[c] = true;
    st = open_with(ctx, dir, o, classes, (int)n_classes, present, &w, out, e);
    free(present);
    return st;
}

static graft_status open_images_like(const graft_dataset *like, const char *dir,
                                     graft_dataset **out) {
    graft_err *e = &like->ctx->err;
    const image_folder *lf = like->sh->impl;
    char **found;
    int64_t n_found;
    file_walk w = {.kind = FILE_WALK_IMAGES};
    TRY(file_walk_classes(&w, dir, &found, &n_found, e));
    /* Same classes, same order; a class missing here simply has no samples. */
    int n = like->sh->n_classes, n_present = 0;
    char **classes = calloc((size_t)n + 1, sizeof *classes);
    bool *present = calloc((size_t)n + 1, sizeof *present);
    graft_status st =
        classes && present ? GRAFT_OK : err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; i < n_found && st == GRAFT_OK; i++) {
        int known = -1;
        for (int c = 0; c < n && known < 0; c++)
            if (strcmp(found[i], like->sh->class_names[c]) == 0) known = c;
        if (known < 0)
            st = err_set(e, GRAFT_E_INVALID_ARGUMENT,
                         "class '%s' of '%s' is not among the training classes", found[i], dir);
        else
            present[known] = true, n_present++;
    }
    for (int c = 0; c < n && st == GRAFT_OK; c++)
        if (!(classes[c] = strdup(like->sh->class_names[c])))
            st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    if (st == GRAFT_OK && !n_present)
        st = err_set(e, GRAFT_E_INVALID_ARGUMENT, "'%s' has none of the training classes", dir);
    file_names_free(found, n_found);
    if (st != GRAFT_OK) {
        if (classes) file_names_free(classes, n);
        free(present);
        file_walk_free(&w);
        return st;
    }
    st = open_with(like->ctx, dir, &lf->o, classes, n, present, &w, out, e);
    free(present);
    return st;
}

static const dataset_kind image_kind = {"images", load_image, image_path, open_images_like,
                                        free_folder};
