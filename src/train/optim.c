/* optim.c: SGD, Adam, AdamW and LAMB updates (PyTorch's formulas) and global-norm clipping. */
#include "train/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BUF_MOMENTUM, BUF_EXP_AVG, BUF_EXP_AVG_SQ, BUF_MAX_EXP_AVG_SQ, BUF_KINDS };

static const char *const buf_names[BUF_KINDS] = {"momentum_buffer", "exp_avg", "exp_avg_sq",
                                                 "max_exp_avg_sq"};

struct optim {
    optim_config cfg;
    int n_params;
    optim_param *params;    /* copied array; buffers belong to the caller */
    float *bufs[BUF_KINDS]; /* one allocation per kind, params laid end to end; NULL if unused */
    int64_t *offsets;       /* (n_params + 1) start of each param within a state buffer */
    int64_t steps;
};

optim_config optim_config_default(optim_kind kind) {
    optim_config c = {0};
    c.kind = kind;
    c.beta1 = 0.9f;
    c.beta2 = 0.999f;
    c.eps = 1e-8f;
    if (kind == OPTIM_ADAMW) c.weight_decay = 1e-2f;
    return c;
}

static bool buf_used(const optim_config *c, int kind) {
    switch (kind) {
    case BUF_MOMENTUM:
        return c->kind == OPTIM_SGD && c->momentum != 0.0f;
    case BUF_EXP_AVG:
    case BUF_EXP_AVG_SQ:
        return c->kind != OPTIM_SGD;
    case BUF_MAX_EXP_AVG_SQ:
        return (c->kind == OPTIM_ADAM || c->kind == OPTIM_ADAMW) && c->amsgrad;
    default:
        return false;
    }
}

graft_status optim_check_config(const optim_config *c, graft_err *err) {
    if (c->kind < OPTIM_SGD || c->kind > OPTIM_LAMB)
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "optimizer: unknown kind %d", (int)c->kind);
    if (!(c->weight_decay >= 0.0f))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "optimizer: weight_decay %g < 0",
                       c->weight_decay);
    if (c->kind == OPTIM_SGD) {
        if (!(c->momentum >= 0.0f))
            return err_set(err, GRAFT_E_INVALID_ARGUMENT, "SGD: momentum %g < 0", c->momentum);
        if (c->nesterov && (c->momentum <= 0.0f || c->dampening != 0.0f))
            return err_set(err, GRAFT_E_INVALID_ARGUMENT,
                           "SGD: nesterov needs momentum > 0 and dampening 0");
        return GRAFT_OK;
    }
    if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f) || !(c->beta2 >= 0.0f && c->beta2 < 1.0f))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "optimizer: betas (%g, %g) not in [0, 1)",
                       c->beta1, c->beta2);
    if (!(c->eps >= 0.0f)) return err_set(err, GRAFT_E_INVALID_ARGUMENT, "optimizer: eps < 0");
    return GRAFT_OK;
}

graft_status optim_create(optim **out, const optim_config *cfg, const optim_param *params,
                          int n_params, graft_err *err) {
    *out = NULL;
    TRY(optim_check_config(cfg, err));
    if (n_params < 0 || (n_params > 0 && !params))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "optimizer: bad parameter list");
    optim *o = calloc(1, sizeof *o);
    if (!o) return err_set(err, GRAFT_E_OUT_OF_MEMORY, "optimizer: out of memory");
    o->cfg = *cfg;
    o->n_params = n_params;
    o->params = calloc((size_t)n_params + 1, sizeof *o->params);
    o->offsets = calloc((size_t)n_params + 1, sizeof *o->offsets);
    if (!o->params || !o->offsets) goto oom;
    for (int i = 0; i < n_params; i++) {
        const optim_param *p = &params[i];
        if (p->numel < 0 || (p->numel > 0 && (!p->data || !p->grad))) {
            optim_free(o);
            return err_set(err, GRAFT_E_INVALID_ARGUMENT, "optimizer: param %d has no data/grad",
                           i);
        }
        o->params[i] = *p;
        o->offsets[i + 1] = o->offsets[i] + p->numel;
    }
    int64_t total = o->offsets[n_params];
    for (int k = 0; k < BUF_KINDS; k++) {
        if (!buf_used(cfg, k)) continue;
        o->bufs[k] = calloc((size_t)(total > 0 ? total : 1), sizeof(float));
        if (!o->bufs[k]) goto oom;
    }
    *out = o;
    return GRAFT_OK;
oom:
    optim_free(o);
    return err_set(err, GRAFT_E_OUT_OF_MEMORY, "optimizer: out of memory for state");
}

void optim_free(optim *opt) {
    if (!opt) return;
    for (int k = 0; k < BUF_KINDS; k++) free(opt->bufs[k]);
    free(opt->params);
    free(opt->offsets);
    free(opt);
}

/* Tensors this large update on all threads (the norms' sums stay serial: their order is the
 * result's). */
#define PARALLEL_MIN ((int64_t)1 << 16)

static void sgd_tensor(const optim_config *c, const optim_tensor *p, float lr, int64_t t) {
    float wd = p->decay ? c->weight_decay : 0.0f;
    float *buf = p->s[0]; /* with momentum (made when the optimizer was) */
    float keep = 1.0f - c->dampening;
    bool first = t <= 1;
    /* element by element: threads change no result (the same holds below) */
#pragma omp parallel for if (p->numel >= PARALLEL_MIN) schedule(static)
    for (int64_t j = 0; j < p->numel; j++) {
        float d = p->g[j];
        if (wd != 0.0f) d = d + wd * p->w[j];
        if (buf) {
            buf[j] = first ? d : buf[j] * c->momentum + keep * d;
            d = c->nesterov ? d + c->momentum * buf[j] : buf[j];
        }
        p->w[j] = p->w[j] + (-lr) * d;
    }
}

/* torch.lerp: start + w*(end-start), computed from the nearer end for w >= 0.5. */
static inline float lerp_f(float start, float end, float w) {
    float diff = end - start;
    return w < 0.5f ? start + w * diff : end - diff * (1.0f - w);
}

static void adam_tensor(const optim_config *c, const optim_tensor *p, float lr, double t) {
    float wd = p->decay ? c->weight_decay : 0.0f;
    bool decoupled = c->kind == OPTIM_ADAMW;
    float *m = p->s[0], *v = p->s[1], *vmax = c->amsgrad ? p->s[2] : NULL;
    float w1 = (float)(1.0 - (double)c->beta1);
    float w2 = (float)(1.0 - (double)c->beta2);
    float decay_mul = (float)(1.0 - (double)lr * (double)wd);
    float step_size = (float)((double)lr / (1.0 - pow((double)c->beta1, t)));
    float bc2_sqrt = (float)sqrt(1.0 - pow((double)c->beta2, t));
#pragma omp parallel for if (p->numel >= PARALLEL_MIN) schedule(static)
    for (int64_t j = 0; j < p->numel; j++) {
        float g = p->g[j];
        if (wd != 0.0f) {
            if (decoupled)
                p->w[j] = p->w[j] * decay_mul;
            else
                g = g + wd * p->w[j];
        }
        m[j] = lerp_f(m[j], g, w1);
        v[j] = v[j] * c->beta2 + w2 * (g * g);
        float vv = v[j];
        if (vmax) {
            if (vv > vmax[j]) vmax[j] = vv;
            vv = vmax[j];
        }
        float denom = sqrtf(vv) / bc2_sqrt + c->eps;
        p->w[j] = p->w[j] + (-step_size) * (m[j] / denom);
    }
}

static void lamb_tensor(const optim_config *c, const optim_tensor *p, float lr, double t) {
    float wd = p->decay ? c->weight_decay : 0.0f;
    float *m = p->s[0], *v = p->s[1], *w = p->w;
    float w1 = (float)(1.0 - (double)c->beta1);
    float w2 = (float)(1.0 - (double)c->beta2);
    float bc1 = (float)(1.0 - pow((double)c->beta1, t));
    float bc2 = (float)(1.0 - pow((double)c->beta2, t));
    double wnorm2 = 0.0, unorm2 = 0.0;
    /* first pass: moments and norms; the update u is recomputed in the second pass */
    for (int64_t j = 0; j < p->numel; j++) {
        float g = p->g[j];
        m[j] = c->beta1 * m[j] + w1 * g;
        v[j] = c->beta2 * v[j] + w2 * (g * g);
        float u = (m[j] / bc1) / (sqrtf(v[j] / bc2) + c->eps) + wd * w[j];
        wnorm2 += (double)w[j] * w[j];
        unorm2 += (double)u * u;
    }
    float ratio = 1.0f;
    if (wnorm2 > 0.0 && unorm2 > 0.0) ratio = (float)(sqrt(wnorm2) / sqrt(unorm2));
    float scale = lr * ratio;
#pragma omp parallel for if (p->numel >= PARALLEL_MIN) schedule(static)
    for (int64_t j = 0; j < p->numel; j++) {
        float u = (m[j] / bc1) / (sqrtf(v[j] / bc2) + c->eps) + wd * w[j];
        w[j] = w[j] - scale * u;
    }
}

void optim_update_tensor(const optim_config *c, const optim_tensor *p, float lr, int64_t t) {
    switch (c->kind) {
    case OPTIM_SGD:
        sgd_tensor(c, p, lr, t);
        break;
    case OPTIM_ADAM:
    case OPTIM_ADAMW:
        adam_tensor(c, p, lr, (double)t);
        break;
    case OPTIM_LAMB:
        lamb_tensor(c, p, lr, (double)t);
        break;
    }
}

void optim_state_slots(const optim_config *c, bool used[OPTIM_SLOTS]) {
    used[0] = buf_used(c, c->kind == OPTIM_SGD ? BUF_MOMENTUM : BUF_EXP_AVG);
    used[1] = buf_used(c, BUF_EXP_AVG_SQ);
    used[2] = buf_used(c, BUF_MAX_EXP_AVG_SQ);
}

float optim_param_lr(float lr, double lr_scale) {
    return lr_scale > 0.0 ? (float)((double)lr * lr_scale) : lr;
}

void optim_param_tensor(const optim *opt, int i, optim_tensor *out) {
    const optim_param *p = &opt->params[i];
    static const int kinds[OPTIM_SLOTS][2] = {{BUF_MOMENTUM, BUF_EXP_AVG},
                                              {BUF_EXP_AVG_SQ, BUF_EXP_AVG_SQ},
                                              {BUF_MAX_EXP_AVG_SQ, BUF_MAX_EXP_AVG_SQ}};
    *out = (optim_tensor){.w = p->data, .g = p->grad, .numel = p->numel, .decay = p->decay};
    for (int k = 0; k < OPTIM_SLOTS; k++) {
        float *buf = opt->bufs[kinds[k][opt->cfg.kind != OPTIM_SGD]];
        out->s[k] = buf ? buf + opt->offsets[i] : NULL;
    }
}

const optim_param *optim_get_param(const optim *opt, int i) {
    return i >= 0 && i < opt->n_params ? &opt->params[i] : NULL;
}

int optim_param_count(const optim *opt) {
    return opt->n_params;
}

graft_status optim_step(optim *opt, float lr, graft_err *err) {
    if (!opt) return err_set(err, GRAFT_E_INVALID_ARGUMENT, "optim_step: no optimizer");
    if (!isfinite(lr) || lr < 0.0f)
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "optim_step: learning rate %g", lr);
    for (int i = 0; i < opt->n_params; i++) {
        optim_tensor p;
        optim_param_tensor(opt, i, &p);
        optim_update_tensor(&opt->cfg, &p, optim_param_lr(lr, opt->params[i].lr_scale),
                            opt->steps + 1);
    }
    opt->steps++;
    return GRAFT_OK;
}

int64_t optim_step_count(const optim *opt) {
    return opt->steps;
}
void optim_set_step_count(optim *opt, int64_t steps) {
    opt->steps = steps < 0 ? 0 : steps;
}
const optim_config *optim_get_config(const optim *opt) {
    return &opt->cfg;
}

void optim_set_momentum(optim *opt, float momentum) {
    if (opt->cfg.kind == OPTIM_SGD)
        opt->cfg.momentum = momentum;
    else
        opt->cfg.beta1 = momentum;
}

int optim_state_count(const optim *opt) {
    int kinds = 0;
    for (int k = 0; k < BUF_KINDS; k++) kinds += opt->bufs[k] != NULL;
    return kinds * opt->n_params;
}

graft_status optim_state_get(optim_state_buf *out, optim *opt, int index, graft_err *err) {
    memset(out, 0, sizeof *out);
    if (index < 0 || index >= optim_state_count(opt))
        return err_set(err, GRAFT_E_NOT_FOUND, "optimizer state %d of %d", index,
                       optim_state_count(opt));
    int seen = 0;
    for (int k = 0; k < BUF_KINDS; k++) {
        if (!opt->bufs[k]) continue;
        if (index < seen + opt->n_params) {
            int i = index - seen;
            const optim_param *p = &opt->params[i];
            if (p->name)
                snprintf(out->name, sizeof out->name, "%s.%s", p->name, buf_names[k]);
            else
                snprintf(out->name, sizeof out->name, "p%d.%s", i, buf_names[k]);
            out->data = opt->bufs[k] + opt->offsets[i];
            out->numel = p->numel;
            out->param_index = i;
            return GRAFT_OK;
        }
        seen += opt->n_params;
    }
    return err_set(err, GRAFT_E_INTERNAL, "optimizer state %d not found", index);
}

graft_status clip_grad_norm(float *total_norm, float **grads, const int64_t *numels, int n,
                            float max_norm, graft_err *err) {
    *total_norm = 0.0f;
    if (n < 0 || (n > 0 && (!grads || !numels)))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "clip_grad_norm: bad gradient list");
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        double s = 0.0; /* PyTorch takes each tensor's norm in fp32, then the norm of norms */
        for (int64_t j = 0; j < numels[i]; j++) s += (double)grads[i][j] * grads[i][j];
        float norm_i = (float)sqrt(s);
        sum += (double)norm_i * norm_i;
    }
    float total = (float)sqrt(sum);
    *total_norm = total;
    float coef = max_norm / (total + 1e-6f);
    if (coef >= 1.0f) return GRAFT_OK;
    for (int i = 0; i < n; i++)
        for (int64_t j = 0; j < numels[i]; j++) grads[i][j] *= coef;
    return GRAFT_OK;
}
