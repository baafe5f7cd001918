/* finetune_run.c: what `graft finetune` shows and saves while the trainer works: the backbone
 * phase's progress, a progress line per step and a line per epoch, metrics, and the best and
 * last checkpoints. */
#include "finetune_run.h"

#include <stdio.h>
#include <string.h>

#include "launch.h"
#include "progress.h"

volatile sig_atomic_t finetune_interrupted;

static void on_sigint(int sig) {
    (void)sig;
    finetune_interrupted = 1;
    signal(SIGINT, SIG_DFL); /* a second Ctrl-C is not kept waiting for the step */
}

void finetune_catch_sigint(void) {
    signal(SIGINT, on_sigint);
    /* data-parallel ranks: mpirun forwards SIGUSR1 (graft --nproc sends it on Ctrl-C; a user of
     * mpirun can send it to mpirun): the ranks stop together, as on Ctrl-C */
    signal(SIGUSR1, on_sigint);
}

bool finetune_save(run *r, const char *path, const char *which, double val_loss) {
    if (!launch_writes(r->ctx)) return true; /* data-parallel: rank 0 writes the replicated state */
    char round[16], loss[64] = "none";
    snprintf(round, sizeof round, "%d", r->round);
    if (val_loss >= 0) snprintf(loss, sizeof loss, "%.17g", val_loss);
    if (run_record_set(&r->record, "graft.checkpoint", which) ||
        run_record_set(&r->record, RUN_RECORD_PREFIX "prune_round", round) ||
        run_record_set(&r->record, "graft.val_loss", loss)) {
        fprintf(stderr, "graft finetune: warning: checkpoint %s not written: out of memory\n",
                path);
        return false;
    }
    if (graft_trainer_save_meta(r->trainer, path, (const char *const *)r->record.keys,
                                (const char *const *)r->record.values, r->record.n) != GRAFT_OK) {
        fprintf(stderr, "graft finetune: warning: checkpoint %s not written: %s\n", path,
                graft_last_error(r->ctx));
        return false;
    }
    return true;
}

static const char *unit(const run *r) {
    return r->o->vocab ? "samples/s" : "images/s";
}

/* The backbone phase: a bar on a terminal, else a line at its start and one at its end. */
int finetune_on_extract(const graft_extract_report *p, void *user) {
    run *r = user;
    double t = progress_now();
    int64_t total = r->n_train + r->n_val, done = (p->validation ? r->n_train : 0) + p->done;
    r->backbone_ran[p->validation != 0] = p->backbone_samples;
    r->phase_split[p->validation != 0][0] = p->backbone_seconds;
    r->phase_split[p->validation != 0][1] = p->read_seconds;
    r->phase_split[p->validation != 0][2] = p->cache_seconds;
    if (p->done == 0 && p->cache_note) {
        if (r->tty) progress_clear();
        fprintf(stderr, "graft: warning: the feature cache of the %s data was %s\n",
                p->validation ? "validation" : "training", p->cache_note);
    }
    if (!p->validation && p->done == 0) {
        r->phase = PHASE_BACKBONE, r->backbone_t0 = t, r->shown_at = 0;
        r->backbone_ran[1] = 0;
        memset(r->phase_split[1], 0, sizeof r->phase_split[1]);
        if (!r->tty) {
            printf("backbone: features of %lld samples (from the cache where it has them)\n",
                   (long long)total);
            fflush(stdout);
        }
    }
    double dt = t - r->backbone_t0, rate = dt > 0 ? (double)done / dt : 0;
    bool end = p->done == p->total && (p->validation || r->n_val == 0);
    if (r->tty && !end && t - r->shown_at >= 0.1) {
        char suffix[160];
        char eta[32] = "?";
        if (rate > 0) snprintf(eta, sizeof eta, "%.0fs", (double)(total - done) / rate);
        snprintf(suffix, sizeof suffix, "%lld/%lld %.0f %s ETA %s", (long long)done,
                 (long long)total, rate, unit(r), eta);
        progress_show("backbone", total ? (double)done / (double)total : 1.0, suffix);
        r->shown_at = t;
    }
    if (end) {
        int64_t ran = r->backbone_ran[0] + r->backbone_ran[1];
        if (r->tty) progress_clear();
        double split[3];
        for (int k = 0; k < 3; k++) split[k] = r->phase_split[0][k] + r->phase_split[1][k];
        printf("backbone: %lld samples in %.1fs (%.0f %s; %lld through the backbone%s): backbone "
               "%.2fs, reading inputs %.2fs, feature cache %.2fs\n",
               (long long)done, dt, rate, unit(r), (long long)ran,
               ran < done ? ", the others from the cache or skipped" : "", split[0], split[1],
               split[2]);
        fflush(stdout);
    }
    r->epoch_t0 = t; /* the first epoch's clock starts when this phase ends */
    return finetune_interrupted != 0;
}

static void progress(run *r, const graft_train_report *p) {
    double t = progress_now();
    if (!r->tty || (t - r->shown_at < 0.1 && p->epoch_samples < r->n_train)) return;
    r->shown_at = t;
    double dt = t - r->epoch_t0;
    int64_t fresh = p->epoch_samples - r->rate_base;
    double rate = dt > 0 && fresh > 0 ? (double)fresh / dt : 0;
    double eta = rate > 0 ? (double)(r->n_train - p->epoch_samples) / rate : 0;
    char prefix[48], suffix[200];
    snprintf(prefix, sizeof prefix, "epoch %lld/%d", (long long)p->epoch + 1, r->o->train.epochs);
    int used = snprintf(suffix, sizeof suffix, "%lld/%lld %.0f samples/s ETA %.0fs loss %.4f",
                        (long long)p->epoch_samples, (long long)r->n_train, rate, eta, p->loss);
    if (p->accuracy >= 0 && used < (int)sizeof suffix)
        snprintf(suffix + used, sizeof suffix - (size_t)used, " acc %.3f", p->accuracy);
    progress_show(prefix, r->n_train ? (double)p->epoch_samples / (double)r->n_train : 1.0, suffix);
}

static void epoch_line(run *r, const graft_train_report *p) {
    if (r->tty) progress_clear();
    printf("epoch %lld/%d: loss %.4f", (long long)p->epoch, r->o->train.epochs, p->loss);
    if (p->accuracy >= 0) printf(" acc %.3f", p->accuracy);
    if (p->val_loss >= 0) printf(", val loss %.4f", p->val_loss);
    if (p->val_accuracy >= 0) printf(" val acc %.3f", p->val_accuracy);
    printf(", lr %.3g, %.1fs\n", p->lr, progress_now() - r->epoch_t0);
    fflush(stdout);
}

static void log_report(run *r, const graft_train_report *p) {
    if (!r->log) return;
    if (p->epoch_end) {
        run_log_epoch(r->log, p);
        return;
    }
    run_log_scalar(r->log, "train/loss", p->step, p->loss);
    run_log_scalar(r->log, "train/lr", p->step, p->lr);
    if (r->o->train.precision == GRAFT_PRECISION_FP16)
        run_log_scalar(r->log, "train/loss_scale", p->step, p->loss_scale);
}

int finetune_on_report(const graft_train_report *p, void *user) {
    run *r = user;
    r->last = *p;
    r->phase = PHASE_TRAIN;
    log_report(r, p);
    if (!p->epoch_end) {
        r->unsaved = true;
        progress(r, p);
        return finetune_interrupted != 0;
    }
    epoch_line(r, p);
    bool improved = p->val_loss >= 0 && p->val_loss < r->best_val_loss;
    if (improved) {
        r->best_val_loss = p->val_loss;
        r->best_val_acc = p->val_accuracy;
        r->best_epoch = p->epoch;
    }
    r->last_val_acc = p->val_accuracy;
    /* best before last: a kill between the two then resumes the epoch again and finds it best
     * already (the other order would forget that this epoch was the best). */
    if (r->last_path[0]) {
        if (improved || p->val_loss < 0) finetune_save(r, r->best_path, "best", p->val_loss);
        r->unsaved = !finetune_save(r, r->last_path, "last", p->val_loss);
    }
    r->epoch_t0 = progress_now(), r->rate_base = 0;
    return finetune_interrupted != 0;
}
