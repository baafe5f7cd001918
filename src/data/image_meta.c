/* image_meta.c: image preprocessing remembered in a model's metadata_props, read and written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph/model.h"

static const char *find(const graft_model *m, const char *key) {
    for (int i = 0; i < m->g.n_metadata; i++)
        if (strcmp(m->g.metadata[i].key, key) == 0) return m->g.metadata[i].value;
    return NULL;
}

static graft_status parse_int(const char *key, const char *v, int *out, graft_err *e) {
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < 0 || x > 16384)
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "metadata %s = '%s' is not a size 0..16384", key,
                       v);
    *out = (int)x;
    return GRAFT_OK;
}

static graft_status parse_three(const char *key, const char *v, float *out, bool positive,
                                graft_err *e) {
    const char *p = v;
    for (int c = 0; c < 3; c++) {
        char *end;
        double x = strtod(p, &end);
        if (end == p || (positive && !(x > 0)) || (c < 2 && *end != ',') || (c == 2 && *end))
            return err_set(e, GRAFT_E_MALFORMED_MODEL,
                           "metadata %s = '%s' is not three comma-separated numbers%s", key, v,
                           positive ? " > 0" : "");
        out[c] = (float)x;
        p = end + 1;
    }
    return GRAFT_OK;
}

graft_status graft_image_options_from_model(const graft_model *m, graft_image_options *o) {
    if (!m || !o) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &m->ctx->err;
    err_clear(e);
    graft_image_options r = *o;
    const char *v;
    if ((v = find(m, "graft.image.resize"))) TRY(parse_int("graft.image.resize", v, &r.resize, e));
    if ((v = find(m, "graft.image.crop"))) TRY(parse_int("graft.image.crop", v, &r.crop, e));
    if ((v = find(m, "graft.image.grayscale")))
        TRY(parse_int("graft.image.grayscale", v, &r.grayscale, e));
    if ((v = find(m, "graft.image.mean")))
        TRY(parse_three("graft.image.mean", v, r.mean, false, e));
    if ((v = find(m, "graft.image.std"))) TRY(parse_three("graft.image.std", v, r.std, true, e));
    *o = r;
    return GRAFT_OK;
}

graft_status graft_image_options_to_model(graft_model *m, const graft_image_options *o) {
    if (!m || !o) return GRAFT_E_INVALID_ARGUMENT;
    char buf[128];
    snprintf(buf, sizeof buf, "%d", o->resize);
    TRY(graft_model_set_metadata(m, "graft.image.resize", buf));
    snprintf(buf, sizeof buf, "%d", o->crop);
    TRY(graft_model_set_metadata(m, "graft.image.crop", buf));
    snprintf(buf, sizeof buf, "%d", o->grayscale != 0);
    TRY(graft_model_set_metadata(m, "graft.image.grayscale", buf));
    snprintf(buf, sizeof buf, "%.9g,%.9g,%.9g", (double)o->mean[0], (double)o->mean[1],
             (double)o->mean[2]);
    TRY(graft_model_set_metadata(m, "graft.image.mean", buf));
    snprintf(buf, sizeof buf, "%.9g,%.9g,%.9g", (double)o->std[0], (double)o->std[1],
             (double)o->std[2]);
    return graft_model_set_metadata(m, "graft.image.std", buf);
}
