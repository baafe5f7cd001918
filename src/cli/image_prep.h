/* image_prep.h: the image preprocessing a command uses (finetune, export, eval, predict, prune,
 * info), each value with where it came from: the options given, else the model's metadata
 * (graft.image.*), else what the model's declared input shape fixes, else ImageNet's. */
#ifndef GRAFT_CLI_IMAGE_PREP_H
#define GRAFT_CLI_IMAGE_PREP_H

#include <stdbool.h>
#include <stdio.h>

#include "graft.h"

/* The values resolved one by one, in finetune_opts.image_set's order. */
typedef enum {
    PREP_RESIZE,
    PREP_CROP,
    PREP_GRAYSCALE,
    PREP_MEAN,
    PREP_STD,
    PREP_FIELDS
} prep_field;
typedef enum { PREP_DEFAULT, PREP_INPUT_SHAPE, PREP_METADATA, PREP_OPTION } prep_source;

typedef struct image_prep {
    graft_image_options o; /* resolved; o.input_name points at input_name (do not copy p) */
    prep_source from[PREP_FIELDS];
    char input_name[1024];
    int64_t sample;  /* elements of one preprocessed image */
    char error[512]; /* why resolving failed */
} image_prep;

/* Resolve for the model's first input, which must be an image batch (4-d, float32, float16 or
 * uint8 pixels that the model normalises, NCHW or NHWC). given: the command's options (NULL: none;
 * its other fields, e.g. augment, are kept), given_set[PREP_FIELDS]: which of them the user gave.
 * The input shape fixes crop = H and resize = floor(H / 0.875) (timm's crop_pct) for a fixed square
 * H x W, and the channels (1: grayscale); a crop or channel count from an option or the metadata
 * that the input cannot take is an error. Layout, dtype and input name always come from the input.
 * Returns 0, or -1 with p->error set. */
int image_prep_resolve(image_prep *p, graft_ctx *ctx, const graft_model *m,
                       const graft_image_options *given, const bool *given_set);
/* "option", "model metadata", "model input shape" or "default". */
const char *image_prep_source(prep_source s);
/* A "preprocessing" block: one line per value with its source. */
void image_prep_print(FILE *f, const image_prep *p);
/* The same as a JSON object {"resize": {"value": V, "source": S}, ...}. */
void image_prep_json(FILE *f, const image_prep *p);

#endif
