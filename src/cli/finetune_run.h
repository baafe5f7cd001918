/* finetune_run.h: the state of one `graft finetune` run that its trainer callbacks share: the
 * progress display of the backbone phase and the epochs, and the best and last checkpoints. */
#ifndef GRAFT_CLI_FINETUNE_RUN_H
#define GRAFT_CLI_FINETUNE_RUN_H

#include <signal.h>
#include <stdbool.h>

#include "finetune.h"
#include "run_log.h"
#include "run_record.h"

/* Set by the SIGINT handler (the one piece of global state, in the tool only). */
extern volatile sig_atomic_t finetune_interrupted;
/* Ctrl-C: finish the current step, checkpoint, exit 130; a second Ctrl-C ends the process. */
void finetune_catch_sigint(void);

typedef enum run_phase { PHASE_SETUP, PHASE_BACKBONE, PHASE_TRAIN } run_phase;

typedef struct run {
    const finetune_opts *o;
    graft_ctx *ctx;
    graft_trainer *trainer;
    run_log *log;
    bool tty;
    run_phase phase;
    int64_t n_train, n_val, best_epoch;
    double epoch_t0, best_val_loss, best_val_acc, last_val_acc;
    int64_t rate_base; /* samples of the epoch already trained when epoch_t0 was taken */
    double shown_at;   /* when the progress line was last drawn */
    double backbone_t0;
    /* Wall time of each phase (progress_now): start, loaded (model, data, cut, trainer), fitted,
     * the export checked on the validation data, exported. */
    double t_start, t_loaded, t_fitted, t_checked, t_exported;
    int64_t backbone_ran[2];  /* samples the backbone ran for: training, validation data */
    double phase_split[2][3]; /* the same: seconds in the backbone, the reads, the cache */
    /* Checkpoints: DIR/last.safetensors after every epoch and on Ctrl-C, DIR/best.safetensors
     * at the best validation loss (without validation data: every epoch, as last). */
    char last_path[4096], best_path[4096];
    run_record record; /* the options and classes every checkpoint carries */
    bool unsaved;      /* trained since last_path was written */
    int round;         /* the prune round (1 without rounds) */
    graft_train_report last;
    graft_prune_report prune; /* the backbone as pruned for this round: dense before, then after */
} run;

#define CHECKPOINT_LAST "last.safetensors"
#define CHECKPOINT_BEST "best.safetensors"
#define CHECKPOINT_LEGACY "trainer.safetensors" /* an older graft's only checkpoint */

/* The trainer callbacks (user: the run). */
int finetune_on_report(const graft_train_report *p, void *user);
int finetune_on_extract(const graft_extract_report *p, void *user);
/* Write the trainer to path as `which` ("best" or "last") with the run's record; false (after
 * a warning) when it could not be written. */
bool finetune_save(run *r, const char *path, const char *which, double val_loss);

#endif
