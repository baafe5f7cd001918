/* image_prep.c: resolving image preprocessing from options, model metadata, the model's input
 * shape and ImageNet's defaults, and printing it with the source of each value. */
#include "image_prep.h"

#include <stdarg.h>
#include <string.h>

#include "cli_util.h"

static const char *const metadata_keys[PREP_FIELDS] = {"graft.image.resize", "graft.image.crop",
                                                       "graft.image.grayscale", "graft.image.mean",
                                                       "graft.image.std"};
static const char *const option_names[PREP_FIELDS] = {"--resize", "--crop", "--grayscale", "--mean",
                                                      "--std"};

const char *image_prep_source(prep_source s) {
    switch (s) {
    case PREP_OPTION:
        return "option";
    case PREP_METADATA:
        return "model metadata";
    case PREP_INPUT_SHAPE:
        return "model input shape";
    default:
        return "default";
    }
}

static int fail(image_prep *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int fail(image_prep *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->error, sizeof p->error, fmt, ap);
    va_end(ap);
    return -1;
}

/* How a value that disagrees with the input was given, for the error message. */
static void describe(const image_prep *p, prep_field f, char *buf, size_t size) {
    const graft_image_options *o = &p->o;
    int v = f == PREP_CROP ? o->crop : o->grayscale;
    if (p->from[f] == PREP_OPTION && f == PREP_GRAYSCALE)
        snprintf(buf, size, "--grayscale");
    else if (p->from[f] == PREP_OPTION)
        snprintf(buf, size, "%s %d", option_names[f], v);
    else
        snprintf(buf, size, "the model's metadata %s = %d", metadata_keys[f], v);
}

/* Channels at dims[1] (NCHW) unless only the last dimension can be channels (NHWC). */
static int input_is_nhwc(const graft_value_info *v) {
    int c1 = v->dims[1] == 1 || v->dims[1] == 3, c3 = v->dims[3] == 1 || v->dims[3] == 3;
    return !c1 && c3;
}

/* Take field f from the options, else the metadata, else the input shape (when it fixes one:
 * have_shape), else leave the default. */
static void pick(image_prep *p, prep_field f, const bool *given_set, const graft_model *m,
                 bool have_shape) {
    if (given_set && given_set[f])
        p->from[f] = PREP_OPTION;
    else if (cli_metadata(m, metadata_keys[f]))
        p->from[f] = PREP_METADATA;
    else if (have_shape)
        p->from[f] = PREP_INPUT_SHAPE;
    else
        p->from[f] = PREP_DEFAULT;
}

/* Fill the fields from their sources (meta: the metadata over the defaults). */
static void fill(image_prep *p, const graft_image_options *meta, int64_t size, int64_t channels) {
    graft_image_options *o = &p->o;
    graft_image_options d = GRAFT_IMAGE_OPTIONS_INIT;
    for (int f = 0; f < PREP_FIELDS; f++) {
        if (p->from[f] == PREP_OPTION) continue; /* already in o */
        const graft_image_options *src = p->from[f] == PREP_METADATA ? meta : &d;
        if (f == PREP_RESIZE) o->resize = src->resize;
        if (f == PREP_CROP) o->crop = src->crop;
        if (f == PREP_GRAYSCALE) o->grayscale = src->grayscale;
        if (f == PREP_MEAN) memcpy(o->mean, src->mean, sizeof o->mean);
        if (f == PREP_STD) memcpy(o->std, src->std, sizeof o->std);
    }
    /* timm's data config: resize = floor(crop / crop_pct), crop_pct 0.875 (224 -> 256) */
    if (p->from[PREP_RESIZE] == PREP_INPUT_SHAPE) o->resize = (int)(size * 8 / 7);
    if (p->from[PREP_CROP] == PREP_INPUT_SHAPE) o->crop = (int)size;
    if (p->from[PREP_GRAYSCALE] == PREP_INPUT_SHAPE) o->grayscale = channels == 1;
}

int image_prep_resolve(image_prep *p, graft_ctx *ctx, const graft_model *m,
                       const graft_image_options *given, const bool *given_set) {
    graft_image_options defaults = GRAFT_IMAGE_OPTIONS_INIT, meta = GRAFT_IMAGE_OPTIONS_INIT;
    memset(p, 0, sizeof *p);
    p->o = given ? *given : defaults;
    graft_value_info v;
    if (graft_model_input_count(m) < 1 || graft_model_input_info(m, 0, &v) != GRAFT_OK)
        return fail(p, "the model has no inputs");
    if (v.ndim != 4 ||
        (v.dtype != GRAFT_DTYPE_F32 && v.dtype != GRAFT_DTYPE_F16 && v.dtype != GRAFT_DTYPE_U8))
        return fail(p, "input '%s' is not an image batch (N, C, H, W) of float32, float16 or uint8",
                    v.name);
    if (graft_image_options_from_model(m, &meta) != GRAFT_OK)
        return fail(p, "%s", graft_last_error(ctx));
    int nhwc = input_is_nhwc(&v);
    int64_t h = v.dims[nhwc ? 1 : 2], w = v.dims[nhwc ? 2 : 3], ch = v.dims[nhwc ? 3 : 1];
    if (h > 0 && w > 0 && h != w)
        return fail(p, "input '%s' takes %lldx%lld images; graft makes square crops", v.name,
                    (long long)h, (long long)w);
    if (ch > 0 && ch != 1 && ch != 3)
        return fail(p, "input '%s' takes %lld channels; images give 1 (gray) or 3 (RGB)", v.name,
                    (long long)ch);
    bool fixed = h > 0 && w > 0;
    pick(p, PREP_RESIZE, given_set, m, fixed);
    pick(p, PREP_CROP, given_set, m, fixed);
    pick(p, PREP_GRAYSCALE, given_set, m, ch > 0);
    pick(p, PREP_MEAN, given_set, m, false);
    pick(p, PREP_STD, given_set, m, false);
    fill(p, &meta, h, ch);
    char what[128];
    if (fixed && p->o.crop != h) {
        describe(p, PREP_CROP, what, sizeof what);
        return fail(p, "%s, but input '%s' takes %lldx%lld images", what, v.name, (long long)h,
                    (long long)w);
    }
    if (ch > 0 && p->o.grayscale != (ch == 1)) {
        describe(p, PREP_GRAYSCALE, what, sizeof what);
        return fail(p, "%s, but input '%s' takes %lld channel%s", what, v.name, (long long)ch,
                    ch == 1 ? "" : "s");
    }
    if (strlen(v.name) >= sizeof p->input_name)
        return fail(p, "input name of %zu bytes: graft takes at most %zu", strlen(v.name),
                    sizeof p->input_name - 1);
    snprintf(p->input_name, sizeof p->input_name, "%s", v.name);
    p->o.input_name = p->input_name;
    p->o.dtype = v.dtype;
    p->o.nhwc = nhwc;
    p->sample = (int64_t)(p->o.grayscale ? 1 : 3) * p->o.crop * p->o.crop;
    return 0;
}

void image_prep_print(FILE *f, const image_prep *p) {
    const graft_image_options *o = &p->o;
    char v[64];
    fprintf(f, "preprocessing\n");
    snprintf(v, sizeof v, o->resize ? "%d" : "%d (none)", o->resize);
    fprintf(f, "  resize    %-22s %s\n", v, image_prep_source(p->from[PREP_RESIZE]));
    fprintf(f, "  crop      %-22d %s\n", o->crop, image_prep_source(p->from[PREP_CROP]));
    fprintf(f, "  channels  %-22s %s\n", o->grayscale ? "1 (gray)" : "3 (RGB)",
            image_prep_source(p->from[PREP_GRAYSCALE]));
    snprintf(v, sizeof v, "%.4g,%.4g,%.4g", (double)o->mean[0], (double)o->mean[1],
             (double)o->mean[2]);
    fprintf(f, "  mean      %-22s %s\n", v, image_prep_source(p->from[PREP_MEAN]));
    snprintf(v, sizeof v, "%.4g,%.4g,%.4g", (double)o->std[0], (double)o->std[1],
             (double)o->std[2]);
    fprintf(f, "  std       %-22s %s\n", v, image_prep_source(p->from[PREP_STD]));
}

void image_prep_json(FILE *f, const image_prep *p) {
    const graft_image_options *o = &p->o;
    fprintf(f, "{\"resize\": {\"value\": %d, \"source\": \"%s\"}", o->resize,
            image_prep_source(p->from[PREP_RESIZE]));
    fprintf(f, ", \"crop\": {\"value\": %d, \"source\": \"%s\"}", o->crop,
            image_prep_source(p->from[PREP_CROP]));
    fprintf(f, ", \"grayscale\": {\"value\": %s, \"source\": \"%s\"}",
            o->grayscale ? "true" : "false", image_prep_source(p->from[PREP_GRAYSCALE]));
    const float *three[2] = {o->mean, o->std};
    for (int k = 0; k < 2; k++)
        fprintf(f, ", \"%s\": {\"value\": [%.9g, %.9g, %.9g], \"source\": \"%s\"}",
                k ? "std" : "mean", (double)three[k][0], (double)three[k][1], (double)three[k][2],
                image_prep_source(p->from[k ? PREP_STD : PREP_MEAN]));
    fprintf(f, "}");
}
