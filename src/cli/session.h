/* session.h: what `graft finetune`, `graft export` and `graft prune --refit` share: the loaded
 * model, its data sets and trainer, opening the data as the options say, fitting the head and
 * exporting backbone + head with the class names and preprocessing. */
#ifndef GRAFT_CLI_SESSION_H
#define GRAFT_CLI_SESSION_H

#include <stdbool.h>

#include "finetune.h"
#include "graft.h"
#include "image_prep.h"
#include "run_log.h"

typedef struct session {
    const char *cmd; /* for messages: "graft CMD: ..." */
    graft_ctx *ctx;
    graft_model *model;
    graft_dataset *all, *train, *val;
    graft_trainer *trainer;
    run_log *log;
    bool val_shares_train; /* a split: both views report the same skipped files */
    char cache[4096];      /* the feature cache folder: the trainer keeps a pointer to it */
    image_prep prep;       /* images: the preprocessing and where each value came from */
    bool allow_uint8;      /* the command honours --input-uint8 (finetune) */
    bool uint8_input;      /* the data decode to uint8 NHWC; session_apply_uint8 rewrites */
    /* The classes when there is no training data (an export from a checkpoint's record). */
    const char *const *class_names;
    int n_classes;
} session;

void session_free(session *s);
/* mkdir -p of path's folder part (its whole path when `whole`). */
void session_make_dirs(const char *path, bool whole);
/* Print "graft CMD: WHAT: <the context's last error>"; returns 1. */
int session_fail(session *s, const char *what);
/* The training and validation data sets (--data, then --val, --val-split or none): images
 * preprocessed as image_prep_resolve says (the options, the model's metadata, its input shape,
 * ImageNet's defaults; printed as a block), or text with --vocab. */
int session_open_data(session *s, finetune_opts *o);
/* With s->uint8_input, make the (cut) model's image input uint8 NHWC with s->prep's
 * normalisation inside it (graft_model_set_uint8_input); 0, or 1 after the error. */
int session_apply_uint8(session *s);
/* A text run's vocabulary against the model: token ids must be below the row count of the
 * word embeddings that input_ids indexes. 0, or 2 after an error naming both sizes and files. */
int session_check_vocab(session *s, const finetune_opts *o);
/* The classes: the training data's, else class_names. */
int session_class_count(const session *s);
const char *session_class_name(const session *s, int index);
/* Prune the freshly loaded (uncut) model through rounds 1..k of o's schedule (see session.c);
 * *report: dense before, round k after. */
int session_prune_through(session *s, const finetune_opts *o, int k, graft_prune_report *report);
/* The trainer for the (cut) model: a head with one output per class. */
/* --unfreeze N: train_from becomes the tensor the model's last N stages or layers start from
 * (before the cut; say: print it). 0, or 1 after printing the error. */
int session_unfreeze(session *s, finetune_opts *o, bool say);
int session_make_trainer(session *s, finetune_opts *o);
/* Fit the head on the current backbone (the validation data when there is some). */
int session_fit(session *s, const finetune_opts *o);
/* Export the model (head attached) to o->out with the class names and, for images, the
 * preprocessing. */
int session_export(session *s, const finetune_opts *o);

#endif
