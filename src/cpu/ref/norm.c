/* norm.c: reference kernels of InstanceNormalization and GroupNormalization: each (sample,
 * group) of contiguous elements normalised with its mean and variance (double accumulation),
 * then scaled and shifted per channel (or per group: GroupNormalization before opset 21). */
#include <math.h>

#include "../../ops/norm.h"

/* X viewed as (n, groups, chans_per_group, spatial); scale and bias indexed by channel, or by
 * group when per_group. */
typedef struct norm_shape {
    int64_t n, groups, chans_per_group, spatial;
    bool per_group;
} norm_shape;

static void normalise_group(const tensor *x, const tensor *scale, const tensor *bias, tensor *y,
                            const norm_shape *s, int64_t sample, int64_t g, double eps) {
    int64_t m = s->chans_per_group * s->spatial;
    int64_t base = (sample * s->groups + g) * m;
    double sum = 0.0, sq = 0.0;
    for (int64_t i = 0; i < m; i++) sum += tensor_get_f64(x, base + i);
    double mean = m ? sum / (double)m : 0.0;
    for (int64_t i = 0; i < m; i++) {
        double d = tensor_get_f64(x, base + i) - mean;
        sq += d * d;
    }
    double inv_std = 1.0 / sqrt((m ? sq / (double)m : 0.0) + eps);
    for (int64_t i = 0; i < m; i++) {
        int64_t p = s->per_group ? g : g * s->chans_per_group + i / s->spatial;
        double v = (tensor_get_f64(x, base + i) - mean) * inv_std;
        tensor_set_f64(y, base + i, v * tensor_get_f64(scale, p) + tensor_get_f64(bias, p));
    }
}

static graft_status run_norm(const op_call *c, int64_t groups, bool per_group) {
    const tensor *x = c->in[0];
    for (int i = 0; i < 3; i++)
        if (i >= c->n_in || !c->in[i]) return op_missing_input(c, i);
    TRY(op_check_output(c, 0, x->dtype, tensor_numel(x)));
    int64_t channels = x->dims[1], spatial = 1;
    for (int d = 2; d < x->ndim; d++) spatial *= x->dims[d];
    int64_t want = per_group ? groups : channels;
    if (tensor_numel(c->in[1]) != want || tensor_numel(c->in[2]) != want)
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "scale and bias must have %lld elements, they have %lld and %lld",
                        (long long)want, (long long)tensor_numel(c->in[1]),
                        (long long)tensor_numel(c->in[2]));
    norm_shape s = {x->dims[0], groups, channels / groups, spatial, per_group};
    double eps = attr_f(c->node, "epsilon", 1e-5f);
    for (int64_t b = 0; b < s.n; b++)
        for (int64_t g = 0; g < groups; g++)
            normalise_group(x, c->in[1], c->in[2], c->out[0], &s, b, g, eps);
    return GRAFT_OK;
}

graft_status ref_InstanceNormalization(const op_call *c) {
    value_info vi[3], out;
    int n = call_value_infos(c, vi, 3);
    TRY(op_infer_InstanceNormalization(c->node, vi, n, &out, 1, c->err));
    return run_norm(c, c->in[0]->dims[1], false);
}

graft_status ref_GroupNormalization(const op_call *c) {
    value_info vi[3], out;
    int n = call_value_infos(c, vi, 3);
    TRY(op_infer_GroupNormalization(c->node, vi, n, &out, 1, c->err));
    int64_t groups;
    bool per_channel;
    TRY(group_norm_params(c->node, c->in[0]->dims[1], &groups, &per_channel, c->err));
    return run_norm(c, groups, !per_channel);
}
