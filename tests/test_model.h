/* test_model.h: a generated model loaded with its recorded inputs (tests/data/gen/<name>.in.*.npy),
 * for the tests that run whole models. */
#ifndef GRAFT_TEST_MODEL_H
#define GRAFT_TEST_MODEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/npy.h"
#include "graft.h"

typedef struct loaded {
    graft_ctx *ctx;
    graft_model *m;
    graft_named_tensor in[8];
    int n_in;
} loaded;

/* Load model_path with context options `opts` (NULL: the defaults) and the inputs recorded for
 * the generated model `name` in gen. */
static inline int loaded_open_opts(loaded *l, const char *model_path, const char *gen,
                                   const char *name, const graft_ctx_options *opts) {
    char path[1024], err[512];
    memset(l, 0, sizeof *l);
    graft_ctx_create(opts, &l->ctx);
    if (graft_model_load(l->ctx, model_path, &l->m) != GRAFT_OK) return -1;
    int n = graft_model_input_count(l->m);
    for (int i = 0; i < n && i < 8; i++) {
        graft_value_info info;
        graft_model_input_info(l->m, i, &info);
        l->in[i].name = strdup(info.name);
        l->n_in = i + 1;
        if (snprintf(path, sizeof path, "%s/%s.in.%s.npy", gen, name, info.name) >=
            (int)sizeof path)
            return -1;
        if (npy_read(path, &l->in[i].tensor, err, sizeof err) != 0) return -1;
    }
    return 0;
}

/* Load model_path on `device` (NULL: the CPU) and the inputs recorded for the generated model
 * `name` in gen. */
static inline int loaded_open_on(loaded *l, const char *model_path, const char *gen,
                                 const char *name, const char *device) {
    graft_ctx_options opts = GRAFT_CTX_OPTIONS_INIT;
    opts.device = device;
    return loaded_open_opts(l, model_path, gen, name, &opts);
}

static inline int loaded_open(loaded *l, const char *model_path, const char *gen,
                              const char *name) {
    return loaded_open_on(l, model_path, gen, name, NULL);
}

static inline void loaded_close(loaded *l) {
    for (int i = 0; i < l->n_in; i++) {
        free((char *)l->in[i].name);
        free(l->in[i].tensor.data);
    }
    graft_model_free(l->m);
    graft_ctx_free(l->ctx);
    memset(l, 0, sizeof *l);
}

/* Run and copy output `index` (NULL on failure); *n its element count. */
static inline float *loaded_run_copy(loaded *l, int index, int64_t *n) {
    const graft_tensor *t;
    if (graft_model_run(l->m, l->in, l->n_in) != GRAFT_OK ||
        graft_model_output(l->m, index, &t) != GRAFT_OK)
        return NULL;
    *n = graft_tensor_numel(t);
    float *c = malloc(sizeof(float) * (size_t)(*n ? *n : 1));
    if (c) memcpy(c, t->data, sizeof(float) * (size_t)*n);
    return c;
}

#endif
