/* resize.h: Resize's plan (modes, coordinate transformation, scales and output sizes per axis)
 * and its interpolation taps, shared by shape inference and the kernels. */
#ifndef GRAFT_OPS_RESIZE_H
#define GRAFT_OPS_RESIZE_H

#include "shape_plan.h"

typedef enum resize_mode { RESIZE_NEAREST, RESIZE_LINEAR, RESIZE_CUBIC } resize_mode;

typedef enum resize_coord {
    COORD_HALF_PIXEL,
    COORD_HALF_PIXEL_SYMMETRIC,
    COORD_PYTORCH_HALF_PIXEL,
    COORD_ALIGN_CORNERS,
    COORD_ASYMMETRIC,
    COORD_TF_HALF_PIXEL_FOR_NN,
    COORD_TF_CROP_AND_RESIZE
} resize_coord;

typedef enum resize_rounding {
    ROUND_PREFER_FLOOR,
    ROUND_PREFER_CEIL,
    ROUND_FLOOR,
    ROUND_CEIL
} resize_rounding;

typedef enum resize_aspect { ASPECT_STRETCH, ASPECT_NOT_LARGER, ASPECT_NOT_SMALLER } resize_aspect;

/* Everything about one Resize call. An axis that keeps its size with scale 1 (and the whole
 * region of interest) is an identity and is not interpolated, as ONNX's reference does. */
typedef struct resize_plan {
    resize_mode mode;
    resize_coord coord;
    resize_rounding rounding;
    resize_aspect aspect;
    double cubic_a, extrapolation;
    bool exclude_outside, antialias;
    int ndim;
    bool resized[GRAFT_MAX_DIMS]; /* listed in the axes attribute (all when absent) */
    int64_t in_dims[GRAFT_MAX_DIMS];
    int64_t out_dims[GRAFT_MAX_DIMS]; /* -1: not known until run time */
    double scales[GRAFT_MAX_DIMS];
    double roi_start[GRAFT_MAX_DIMS], roi_end[GRAFT_MAX_DIMS];
    bool identity[GRAFT_MAX_DIMS];
} resize_plan;

/* The plan from the node and its inputs' value_infos (X, then roi, scales, sizes; opset 10:
 * X, scales). Output sizes are -1 where the input sizes, scales or sizes are not known yet. */
graft_status resize_make_plan(const ir_node *node, const value_info *in, int n_in, resize_plan *p,
                              graft_err *e);

/* The most taps one output element of `axis` reads. */
int resize_max_taps(const resize_plan *p, int axis);

/* The taps of output index o along axis (at most resize_max_taps): input indices (within the
 * axis) and weights. Returns the count; 0 when the point lies outside the input
 * (tf_crop_and_resize), where the output is the extrapolation value. */
int resize_taps(const resize_plan *p, int axis, int64_t o, int64_t *idx, double *w);

#endif
