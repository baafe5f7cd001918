/* session.c: the model, data and head training shared by `graft finetune`, `graft export` and
 * `graft prune --refit`. */
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text_model.h"

void session_free(session *s) {
    graft_trainer_free(s->trainer);
    graft_dataset_free(s->val);
    graft_dataset_free(s->train);
    graft_dataset_free(s->all);
    graft_model_free(s->model);
    graft_ctx_free(s->ctx);
}

int session_fail(session *s, const char *what) {
    fprintf(stderr, "graft %s: %s: %s\n", s->cmd, what, graft_last_error(s->ctx));
    return 1;
}

int session_open_data(session *s, finetune_opts *o) {
    graft_status st;
    if (o->vocab) {
        graft_text_options t = GRAFT_TEXT_OPTIONS_INIT;
        t.vocab_path = o->vocab, t.cased = o->cased, t.max_len = o->max_len;
        st = graft_dataset_open_text(s->ctx, o->data, &t, &s->all);
    } else {
        /* The model's own preprocessing, where it records one, under the command line's. */
        graft_image_options m = GRAFT_IMAGE_OPTIONS_INIT;
        if (graft_image_options_from_model(s->model, &m) != GRAFT_OK)
            return session_fail(s, o->model);
        if (!o->image_set[0]) o->image.resize = m.resize;
        if (!o->image_set[1]) o->image.crop = m.crop;
        if (!o->image_set[2]) o->image.grayscale = m.grayscale;
        if (!o->image_set[3]) memcpy(o->image.mean, m.mean, sizeof m.mean);
        if (!o->image_set[4]) memcpy(o->image.std, m.std, sizeof m.std);
        st = graft_dataset_open_images(s->ctx, o->data, &o->image, &s->all);
    }
    if (st != GRAFT_OK) return session_fail(s, o->data);
    if (o->val) {
        if (graft_dataset_open_like(s->all, o->val, &s->val) != GRAFT_OK)
            return session_fail(s, o->val);
        s->train = s->all, s->all = NULL;
    } else if (o->val_split > 0) {
        if (graft_dataset_split(s->all, o->val_split, o->train.seed, &s->train, &s->val) !=
            GRAFT_OK)
            return session_fail(s, "splitting the data");
        s->val_shares_train = true;
    } else {
        s->train = s->all, s->all = NULL;
    }
    return 0;
}

int session_make_trainer(session *s, finetune_opts *o) {
    o->head.n_outputs = graft_dataset_class_count(s->train);
    if (o->head.n_outputs < 2) {
        fprintf(stderr, "graft %s: %s: need at least 2 classes\n", s->cmd, o->data);
        return 1;
    }
    if (graft_trainer_create(s->model, &o->head, &o->train, &s->trainer) != GRAFT_OK)
        return session_fail(s, "setting up training");
    return 0;
}

int session_fit(session *s, const finetune_opts *o) {
    graft_batch_source train, val;
    graft_status st = graft_dataset_source(s->train, o->threads, 2, o->train.seed, &train);
    if (st == GRAFT_OK && s->val) st = graft_dataset_source(s->val, o->threads, 2, 0, &val);
    if (st == GRAFT_OK) st = graft_trainer_fit_source(s->trainer, &train, s->val ? &val : NULL);
    return st == GRAFT_OK ? 0 : session_fail(s, "training");
}

int session_export(session *s, const finetune_opts *o) {
    int n = graft_dataset_class_count(s->train), rc = 0;
    const char **names = calloc((size_t)n, sizeof *names);
    if (!names) return 1;
    for (int c = 0; c < n; c++) names[c] = graft_dataset_class_name(s->train, c);
    graft_export_options ex = GRAFT_EXPORT_OPTIONS_INIT;
    ex.class_names = names, ex.n_class_names = n, ex.fp16_weights = o->fp16_weights;
    if (!o->vocab && graft_image_options_to_model(s->model, &o->image) != GRAFT_OK)
        rc = session_fail(s, "recording the preprocessing");
    if (!rc && o->vocab) rc = text_model_record(s->cmd, s->ctx, s->model, o);
    if (!rc && graft_model_export(s->model, o->out, &ex) != GRAFT_OK)
        rc = session_fail(s, "exporting");
    free(names);
    return rc;
}
