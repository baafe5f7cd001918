/* resize.c: shape inference and attribute checks of Resize (opsets 10-21), and the taps its
 * kernels interpolate with: the coordinate transformations, nearest rounding and the linear and
 * cubic filters (stretched when antialiasing a downscale), as ONNX's reference defines them. */
#include <math.h>
#include <string.h>

#include "resize.h"

/* Attribute `name` (default dflt) as the index of one of `names`; an error lists them. */
static graft_status enum_attr(const ir_node *node, const char *name, const char *dflt,
                              const char *const *names, int count, int *out, graft_err *e) {
    const char *v = attr_s(node, name, dflt);
    for (int i = 0; i < count; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            return GRAFT_OK;
        }
    return op_error(node, e, GRAFT_E_UNSUPPORTED, "%s '%s' is not supported", name, v);
}

static graft_status read_modes(const ir_node *node, resize_plan *p, graft_err *e) {
    static const char *modes[] = {"nearest", "linear", "cubic"};
    static const char *coords[] = {
        "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
        "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    static const char *roundings[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    static const char *aspects[] = {"stretch", "not_larger", "not_smaller"};
    int v = 0;
    TRY(enum_attr(node, "mode", "nearest", modes, node->opset >= 11 ? 3 : 2, &v, e));
    p->mode = (resize_mode)v;
    if (node->opset < 11) {
        /* Resize-10 is Upsample's arithmetic: asymmetric coordinates, nearest rounds down. */
        p->coord = COORD_ASYMMETRIC;
        p->rounding = ROUND_FLOOR;
        p->aspect = ASPECT_STRETCH;
        p->cubic_a = -0.75;
        return GRAFT_OK;
    }
    TRY(enum_attr(node, "coordinate_transformation_mode", "half_pixel", coords, 7, &v, e));
    p->coord = (resize_coord)v;
    if (p->coord == COORD_HALF_PIXEL_SYMMETRIC && node->opset < 19)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "coordinate_transformation_mode half_pixel_symmetric needs opset 19, the "
                        "model has %d",
                        node->opset);
    TRY(enum_attr(node, "nearest_mode", "round_prefer_floor", roundings, 4, &v, e));
    p->rounding = (resize_rounding)v;
    TRY(enum_attr(node, "keep_aspect_ratio_policy", "stretch", aspects, 3, &v, e));
    p->aspect = (resize_aspect)v;
    p->cubic_a = attr_f(node, "cubic_coeff_a", -0.75f);
    p->extrapolation = attr_f(node, "extrapolation_value", 0.0f);
    p->exclude_outside = attr_i(node, "exclude_outside", 0) != 0;
    p->antialias = attr_i(node, "antialias", 0) != 0;
    if (p->antialias && p->mode == RESIZE_NEAREST)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "antialias applies to the linear and cubic modes, not nearest");
    return GRAFT_OK;
}

/* The axes attribute (opset 18): which axes scales, sizes and roi list, in their order. */
static graft_status read_axes(const ir_node *node, int ndim, int *axes, int *n_axes, graft_err *e) {
    const int64_t *vals;
    int64_t n = attr_ints(node, "axes", &vals);
    if (!ir_node_attr(node, "axes")) {
        for (int i = 0; i < ndim; i++) axes[i] = i;
        *n_axes = ndim;
        return GRAFT_OK;
    }
    if (n > ndim)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "axes lists %lld axes, X has %d",
                        (long long)n, ndim);
    for (int i = 0; i < n; i++) {
        TRY(op_axis(node, vals[i], ndim, &axes[i], e));
        for (int j = 0; j < i; j++)
            if (axes[j] == axes[i])
                return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "axis %d is listed twice",
                                axes[i]);
    }
    *n_axes = (int)n;
    return GRAFT_OK;
}

/* A present input with at least one element (opsets 11-12 pass an empty tensor for "none"). */
static bool given(const value_info *in, int n_in, int k) {
    if (k >= n_in || !in[k].present) return false;
    if (in[k].ndim < 0) return true;
    int64_t n = 1;
    for (int d = 0; d < in[k].ndim; d++) n *= in[k].dims[d];
    return n != 0;
}

/* Scales (float) into p->scales at the listed axes; false when not known yet. */
static graft_status read_scales(const ir_node *node, const value_info *s, const int *axes,
                                int n_axes, resize_plan *p, bool *known, graft_err *e) {
    *known = s->value != NULL;
    if (!*known) return GRAFT_OK;
    if (!dtype_is_float(s->value->dtype) || tensor_numel(s->value) != n_axes)
        return op_error(node, e, GRAFT_E_SHAPE, "scales must be %d floats, one per axis", n_axes);
    for (int i = 0; i < n_axes; i++) {
        double v = tensor_get_f64(s->value, i);
        if (!(v > 0))
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                            "scale %g of axis %d is not positive", v, axes[i]);
        p->scales[axes[i]] = v;
    }
    return GRAFT_OK;
}

static graft_status read_sizes(const ir_node *node, const value_info *s, const int *axes,
                               int n_axes, int64_t *sizes, bool *known, graft_err *e) {
    *known = s->value != NULL;
    if (!*known) return GRAFT_OK;
    int64_t vals[GRAFT_MAX_DIMS];
    if (op_read_ints(s->value, vals, GRAFT_MAX_DIMS) != n_axes)
        return op_error(node, e, GRAFT_E_SHAPE, "sizes must be %d integers, one per axis", n_axes);
    for (int i = 0; i < n_axes; i++) {
        if (vals[i] < 1)
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "size %lld of axis %d is not >= 1",
                            (long long)vals[i], axes[i]);
        sizes[axes[i]] = vals[i];
    }
    return GRAFT_OK;
}

/* From sizes: the scale of each resized axis (one shared scale unless stretching). */
static void scales_from_sizes(resize_plan *p, const int64_t *sizes, bool dims_known) {
    for (int d = 0; d < p->ndim; d++)
        if (p->resized[d]) p->out_dims[d] = sizes[d];
    if (!dims_known) return;
    double shared = p->aspect == ASPECT_NOT_LARGER ? INFINITY : 0.0;
    for (int d = 0; d < p->ndim; d++) {
        if (!p->resized[d]) continue;
        p->scales[d] = (double)sizes[d] / (double)p->in_dims[d];
        if (p->aspect == ASPECT_NOT_LARGER) shared = fmin(shared, p->scales[d]);
        if (p->aspect == ASPECT_NOT_SMALLER) shared = fmax(shared, p->scales[d]);
    }
    if (p->aspect == ASPECT_STRETCH) return;
    for (int d = 0; d < p->ndim; d++) {
        if (!p->resized[d]) continue;
        p->scales[d] = shared;
        p->out_dims[d] = (int64_t)(shared * (double)p->in_dims[d] + 0.5); /* half rounds up */
    }
}

static graft_status read_roi(const ir_node *node, const value_info *r, const int *axes, int n_axes,
                             resize_plan *p, graft_err *e) {
    if (!r->value || !dtype_is_float(r->value->dtype) || tensor_numel(r->value) != 2 * n_axes)
        return op_error(node, e, GRAFT_E_SHAPE,
                        "roi must be %d floats (starts, then ends) for tf_crop_and_resize",
                        2 * n_axes);
    for (int i = 0; i < n_axes; i++) {
        p->roi_start[axes[i]] = tensor_get_f64(r->value, i);
        p->roi_end[axes[i]] = tensor_get_f64(r->value, n_axes + i);
    }
    return GRAFT_OK;
}

/* Output sizes and scales: from scales (the output rounds down) or from sizes. */
static graft_status plan_sizes(const ir_node *node, const value_info *in, int n_in, const int *axes,
                               int n_axes, resize_plan *p, graft_err *e) {
    int k_scales = node->opset < 11 ? 1 : 2, k_sizes = 3;
    bool has_scales = given(in, n_in, k_scales),
         has_sizes = node->opset >= 11 && given(in, n_in, 3);
    if (has_scales == has_sizes)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "exactly one of scales and sizes must be given");
    bool dims_known = true, known;
    for (int d = 0; d < p->ndim; d++) dims_known = dims_known && p->in_dims[d] >= 0;
    if (has_scales) {
        TRY(read_scales(node, &in[k_scales], axes, n_axes, p, &known, e));
        for (int d = 0; d < p->ndim; d++)
            if (p->resized[d])
                p->out_dims[d] = known && p->in_dims[d] >= 0
                                     ? (int64_t)(p->scales[d] * (double)p->in_dims[d])
                                     : -1;
        return GRAFT_OK;
    }
    int64_t sizes[GRAFT_MAX_DIMS];
    TRY(read_sizes(node, &in[k_sizes], axes, n_axes, sizes, &known, e));
    if (!known) {
        for (int d = 0; d < p->ndim; d++)
            if (p->resized[d]) p->out_dims[d] = -1;
        return GRAFT_OK;
    }
    if (p->aspect != ASPECT_STRETCH && !dims_known) {
        for (int d = 0; d < p->ndim; d++)
            if (p->resized[d]) p->out_dims[d] = -1;
        return GRAFT_OK;
    }
    scales_from_sizes(p, sizes, dims_known);
    return GRAFT_OK;
}

graft_status resize_make_plan(const ir_node *node, const value_info *in, int n_in, resize_plan *p,
                              graft_err *e) {
    memset(p, 0, sizeof *p);
    TRY(read_modes(node, p, e));
    const value_info *x = &in[0];
    p->ndim = x->ndim;
    if (x->ndim < 0) return GRAFT_OK;
    if (x->ndim == 0) return op_error(node, e, GRAFT_E_SHAPE, "X must have rank >= 1");
    int axes[GRAFT_MAX_DIMS], n_axes = x->ndim;
    if (node->opset >= 18)
        TRY(read_axes(node, x->ndim, axes, &n_axes, e));
    else
        for (int d = 0; d < x->ndim; d++) axes[d] = d;
    for (int d = 0; d < x->ndim; d++) {
        p->in_dims[d] = p->out_dims[d] = x->dims[d];
        p->scales[d] = 1.0;
        p->roi_end[d] = 1.0;
    }
    for (int i = 0; i < n_axes; i++) p->resized[axes[i]] = true;
    TRY(plan_sizes(node, in, n_in, axes, n_axes, p, e));
    if (p->coord == COORD_TF_CROP_AND_RESIZE) {
        if (n_in < 2 || !in[1].present)
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                            "tf_crop_and_resize needs the roi input");
        if (in[1].value) TRY(read_roi(node, &in[1], axes, n_axes, p, e));
    }
    for (int d = 0; d < x->ndim; d++)
        p->identity[d] = fabs(p->scales[d] - 1.0) < 1e-9 && p->out_dims[d] == p->in_dims[d] &&
                         (p->coord != COORD_TF_CROP_AND_RESIZE ||
                          (fabs(p->roi_start[d]) < 1e-9 && fabs(p->roi_end[d] - 1.0) < 1e-9));
    return GRAFT_OK;
}

graft_status op_infer_Resize(const ir_node *node, const value_info *in, int n_in, value_info *out,
                             int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, node->opset < 11 ? 2 : 1, node->opset < 11 ? 2 : 4, n_out, 1, 1,
                       e));
    graft_dtype dt = in[0].dtype;
    if (dt == GRAFT_DTYPE_BOOL)
        return op_error(node, e, GRAFT_E_DTYPE, "X has dtype %s, expected a number type",
                        graft_dtype_name(dt));
    resize_plan p;
    TRY(resize_make_plan(node, in, n_in, &p, e));
    op_unknown(&out[0], dt);
    out[0].ndim = p.ndim;
    for (int d = 0; d < p.ndim; d++) out[0].dims[d] = p.out_dims[d];
    return GRAFT_OK;
}

/* ---- taps ------------------------------------------------------------------------------- */

/* The filter's reach in input pixels: downscales with antialias stretch it by 1 / scale. */
static int first_tap(const resize_plan *p, int axis) {
    double s = p->antialias ? fmin(p->scales[axis], 1.0) : 1.0;
    if (p->mode == RESIZE_LINEAR) return (int)floor(-1.0 / s) + 1;
    return (int)floor(-2.0 / s) + 1;
}

int resize_max_taps(const resize_plan *p, int axis) {
    if (p->identity[axis] || p->mode == RESIZE_NEAREST) return 1;
    return 2 - 2 * first_tap(p, axis);
}

/* Where output index o lies in the input's coordinates. */
static double source_coordinate(const resize_plan *p, int axis, int64_t o) {
    double in = (double)p->in_dims[axis], s = p->scales[axis], x = (double)o;
    double out_width = s * in; /* ONNX's reference: scale times size, not the rounded size */
    switch (p->coord) {
    case COORD_HALF_PIXEL:
        return (x + 0.5) / s - 0.5;
    case COORD_HALF_PIXEL_SYMMETRIC: {
        double adjustment = (double)p->out_dims[axis] / out_width;
        double offset = in / 2.0 * (1.0 - adjustment);
        return offset + (x + 0.5) / s - 0.5;
    }
    case COORD_PYTORCH_HALF_PIXEL:
        return out_width == 1.0 ? -0.5 : (x + 0.5) / s - 0.5;
    case COORD_ALIGN_CORNERS:
        return out_width == 1.0 ? 0.0 : x * (in - 1.0) / (out_width - 1.0);
    case COORD_ASYMMETRIC:
        return x / s;
    case COORD_TF_HALF_PIXEL_FOR_NN:
        return (x + 0.5) / s;
    case COORD_TF_CROP_AND_RESIZE: {
        double a = p->roi_start[axis], b = p->roi_end[axis];
        double at = out_width == 1.0 ? (b - a) * (in - 1.0) / 2.0
                                     : x * (b - a) * (in - 1.0) / (out_width - 1.0);
        return at + a * (in - 1.0);
    }
    }
    return x;
}

static double cubic_weight(double a, double x) {
    x = fabs(x);
    if (x <= 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    return 0.0;
}

static int64_t clamp_index(int64_t i, int64_t n) {
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}

static int64_t nearest_index(const resize_plan *p, double x) {
    double base = floor(x), r = x - base;
    bool up = false;
    if (r > 0.0) switch (p->rounding) {
        case ROUND_PREFER_FLOOR:
            up = r > 0.5;
            break;
        case ROUND_PREFER_CEIL:
            up = r >= 0.5;
            break;
        case ROUND_FLOOR:
            up = false;
            break;
        case ROUND_CEIL:
            up = true;
            break;
        }
    return (int64_t)base + (up ? 1 : 0);
}

int resize_taps(const resize_plan *p, int axis, int64_t o, int64_t *idx, double *w) {
    int64_t n = p->in_dims[axis];
    if (p->identity[axis]) {
        idx[0] = o;
        w[0] = 1.0;
        return 1;
    }
    double x = source_coordinate(p, axis, o);
    if (p->coord == COORD_TF_CROP_AND_RESIZE && (x < 0.0 || x > (double)(n - 1))) return 0;
    if (p->mode == RESIZE_NEAREST) {
        idx[0] = clamp_index(nearest_index(p, x), n);
        w[0] = 1.0;
        return 1;
    }
    double s = p->antialias ? fmin(p->scales[axis], 1.0) : 1.0, base = floor(x), sum = 0.0;
    int start = first_tap(p, axis), count = 2 - 2 * start;
    for (int j = 0; j < count; j++) {
        int64_t at = (int64_t)base + start + j;
        double arg = ((double)(start + j) - (x - base)) * s;
        double v =
            p->mode == RESIZE_LINEAR ? fmax(0.0, 1.0 - fabs(arg)) : cubic_weight(p->cubic_a, arg);
        if (p->exclude_outside && (at < 0 || at >= n)) v = 0.0;
        idx[j] = clamp_index(at, n);
        w[j] = v;
        sum += v;
    }
    if ((p->antialias || p->exclude_outside) && sum != 0.0)
        for (int j = 0; j < count; j++) w[j] /= sum;
    return count;
}
