/* run_record.h: what a finetune checkpoint records about its run besides the trainer's state
 * (the options finetune parsed, the class names, the prune round, which checkpoint it is), as
 * string metadata, and reading that back so `graft export` needs only the checkpoint. */
#ifndef GRAFT_CLI_RUN_RECORD_H
#define GRAFT_CLI_RUN_RECORD_H

#include <stdbool.h>

#include "finetune.h"
#include "graft.h"

/* Keys: "graft.run.<option>" holds each option as finetune_option() takes it back (flags: "1";
 * paths made absolute), "graft.class.<i>" the class names ("graft.classes" their count),
 * "graft.run.prune_round" the prune round reached, "graft.checkpoint" best or last,
 * "graft.val_loss" the validation loss of a best checkpoint. */
#define RUN_RECORD_PREFIX "graft.run."

typedef struct run_record {
    char **keys, **values;
    int n, cap;
} run_record;

/* The run's options (as they are after the data were opened, so the preprocessing is the one
 * used) and class names. 0, or 1 out of memory. */
int run_record_init(run_record *r, const finetune_opts *o, const char *const *class_names,
                    int n_classes);
/* Set (or replace) one entry. 0, or 1 out of memory. */
int run_record_set(run_record *r, const char *key, const char *value);
void run_record_free(run_record *r);

/* A checkpoint's metadata read back. */
typedef struct run_saved {
    run_record all;   /* every entry of the file (copied) */
    bool has_options; /* written by a graft that records the run (else: an older checkpoint) */
    const char **class_names;
    int n_classes, prune_round;
    long long epoch, epoch_samples;
} run_saved;

/* Read path's metadata; 0, or 1 after printing "graft CMD: ..." on stderr. */
int run_saved_read(run_saved *s, graft_ctx *ctx, const char *cmd, const char *path);
void run_saved_free(run_saved *s);
/* The value of key, or NULL. */
const char *run_saved_get(const run_saved *s, const char *key);
/* Apply every recorded option that `given(name, user)` says the command line did not give
 * (given NULL: every one), through finetune_option(). 0, or 2 after the option's error. */
int run_saved_apply(const run_saved *s, finetune_opts *o, bool (*given)(const char *, void *),
                    void *user);

#endif
