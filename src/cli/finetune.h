/* finetune.h: `graft finetune`'s options (parsed from the command line and a config file, all
 * checked before any work starts) and the run itself. */
#ifndef GRAFT_CLI_FINETUNE_H
#define GRAFT_CLI_FINETUNE_H

#include <stdbool.h>

#include "graft.h"

typedef struct finetune_opts {
    const char *model, *data, *val, *out, *cut, *cache_dir, *checkpoint_dir, *report_dir;
    const char *vocab, *config;
    const char *text_column, *label_column; /* a CSV/TSV's columns (NULL: text, label) */
    double val_split, prune_sparsity;
    int prune, prune_method, prune_rounds, prune_importance, prune_scope;
    graft_pooling pooling;
    graft_head_options head;
    graft_train_options train;
    graft_image_options image;
    bool image_set[6]; /* resize, crop, grayscale, mean, std given on the command line */
    int max_len, threads, softmax, resume, no_cache, cased, fp16_weights;
    int pad_max;     /* --pad max: every text padded to max_len, not to its batch's longest */
    int input_uint8; /* --input-uint8: -1 auto (on for a cuda device), 0 off, 1 on */
    int decode_gpu;  /* --decode gpu (1) or gpu+cpu (2): the backbone phase's JPEGs through nvJPEG
                        (gpu_source.c); with gpu+cpu, CPU threads decode a share beside it */
    int nproc;       /* --nproc N: N data-parallel ranks (launch.c re-launches under mpirun) */
    int unfreeze;    /* --unfreeze N: train.train_from becomes the model's point for N */
    char unfreeze_tensor[512];
    char device[32];
    char precision[16];
    char strings[64][256]; /* storage for values read from a config file */
    int n_strings;
} finetune_opts;

/* Parse argv (argv[0] is "finetune"; --config
 * FILE, whose lines are `option value` or `option=value`, is read first so the command line
 * wins). Prints one line on stderr and returns 2 for a bad option, 1 for --help (printed), 0
 * when the options are good. */
int finetune_parse(finetune_opts *o, int argc, char **argv);
/* For a command that borrows some of these options (`graft prune --refit`): the defaults, with
 * messages naming `graft CMD`, and one option applied as finetune_parse would (0, or 2 after
 * printing the error). */
void finetune_defaults(finetune_opts *o, const char *cmd);
int finetune_option(finetune_opts *o, const char *name, const char *value);
/* Whether option NAME (no dashes) takes a value (1), is a flag (0) or is unknown (-1). */
int finetune_takes_value(const char *name);
/* The options of a --config file, as finetune_parse reads it (0, or 2 after the error). */
int finetune_read_config(finetune_opts *o, const char *path);
/* finetune's option table (what `graft export` accepts as overrides); *n its length. */
struct cli_option;
const struct cli_option *finetune_option_table(int *n);

#endif
