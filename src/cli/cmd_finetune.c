/* cmd_finetune.c: `graft finetune`: data, cut, head training with progress, logs and the best
 * and last checkpoints, Ctrl-C, a summary, and the grafted export. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"
#include "commands.h"
#include "finetune.h"
#include "finetune_run.h"
#include "launch.h"
#include "progress.h"
#include "run_log.h"
#include "session.h"

/* After attaching the head: the validation confusion matrix of the head on the validation
 * features the fit computed (the same backbone and precision the export runs), else through the
 * grafted model. */
static int confusion(session *s, const finetune_opts *o, int64_t *counts, int n_classes) {
    graft_batch_source src;
    if (!s->val) return 0;
    if (graft_trainer_validation_confusion(s->trainer, n_classes, counts) == GRAFT_OK) return 0;
    memset(counts, 0, sizeof(int64_t) * (size_t)n_classes * (size_t)n_classes);
    if (graft_dataset_source(s->val, o->threads, 2, 0, &src) != GRAFT_OK) return 0;
    graft_named_tensor in[4];
    graft_tensor labels;
    unsigned char kept[4096];
    int64_t b = o->train.batch_size < 4096 ? o->train.batch_size : 4096;
    for (int64_t at = 0; at < src.n_samples; at += b) {
        int64_t m = src.n_samples - at < b ? src.n_samples - at : b;
        const graft_tensor *out;
        if (src.read(src.user, at, m, in, &labels, kept) != GRAFT_OK ||
            graft_model_run(s->model, in, src.n_inputs) != GRAFT_OK ||
            graft_model_output(s->model, 0, &out) != GRAFT_OK)
            return session_fail(s, "evaluating the grafted model");
        if (labels.dtype != GRAFT_DTYPE_I64) return 0;
        for (int64_t i = 0; i < labels.dims[0]; i++) {
            const float *p = (const float *)out->data + i * n_classes;
            int best = 0;
            for (int c = 1; c < n_classes; c++) best = p[c] > p[best] ? c : best;
            int64_t y = ((const int64_t *)labels.data)[i];
            if (y >= 0 && y < n_classes) counts[y * n_classes + best]++;
        }
    }
    return 0;
}

static void print_summary(session *s, const run *r, const int64_t *counts, int n_classes) {
    int64_t right = 0, total = 0;
    for (int i = 0; i < n_classes; i++)
        for (int j = 0; j < n_classes; j++) {
            total += counts[i * n_classes + j];
            right += i == j ? counts[i * n_classes + j] : 0;
        }
    printf("\nsummary\n");
    if (r->best_epoch > 0)
        printf("  best epoch        %lld (val loss %.4f, val acc %.3f)\n", (long long)r->best_epoch,
               r->best_val_loss, r->best_val_acc);
    if (total)
        printf("  val accuracy      %.4f (%lld of %lld, the exported head)\n",
               (double)right / total, (long long)right, (long long)total);
    printf("  device            %s\n", graft_model_device(s->model));
    if (s->uint8_input) printf("  input             uint8 NHWC, normalised in the model\n");
    printf("  time              backbone %.1fs (%lld samples run; the rest from the cache), "
           "inputs read %.1fs, feature cache %.1fs, head %.1fs\n",
           r->last.backbone_seconds, (long long)r->last.backbone_samples, r->last.read_seconds,
           r->last.cache_seconds, r->last.head_seconds);
    /* The two views of a --val-split share one list of skipped files: count it once. */
    int64_t in_train = graft_dataset_skipped_count(s->train);
    int64_t skipped =
        in_train + (s->val && !s->val_shares_train ? graft_dataset_skipped_count(s->val) : 0);
    printf("  skipped files     %lld\n", (long long)skipped);
    for (int64_t i = 0; i < skipped && i < 10; i++) {
        const char *path, *why;
        graft_dataset *d = i < in_train ? s->train : s->val;
        if (graft_dataset_skipped(d, i < in_train ? i : i - in_train, &path, &why) == GRAFT_OK)
            printf("    %s: %s\n", path, why);
    }
    if (r->last_path[0]) printf("  checkpoints       %s, %s\n", r->best_path, r->last_path);
    if (s->log && total) {
        run_log_summary(s->log, "val_accuracy", run_log_float((double)right / total));
        run_log_summary(s->log, "best_epoch", run_log_int(r->best_epoch));
        run_log_summary(s->log, "skipped_files", run_log_int(skipped));
    }
}

/* The command line's options, typed: flags true, numbers as numbers, paths and names as text
 * (a tensor named "191" stays a name). */
static void log_config(run_log *log, int argc, char **argv) {
    static const char *const text_options[] = {
        "model",  "data",  "val",    "out",         "cut",          "cache", "checkpoint",
        "report", "vocab", "config", "text-column", "label-column", NULL};
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) != 0) continue;
        char name[64];
        const char *eq = strchr(argv[i], '='), *value = eq ? eq + 1 : NULL;
        snprintf(name, sizeof name, "%.*s", (int)(eq ? eq - argv[i] - 2 : 63), argv[i] + 2);
        if (!value && finetune_takes_value(name) == 1 && i + 1 < argc) value = argv[++i];
        if (!value) {
            run_log_config(log, name, run_log_bool(true));
            continue;
        }
        bool text = false;
        for (int k = 0; text_options[k]; k++) text = text || !strcmp(name, text_options[k]);
        run_log_config(log, name, text ? run_log_text(value) : run_log_number_or_text(value));
    }
}

/* The checkpoint --resume continues (NULL when DIR has none). */
static const char *resume_path(run *r, const char *dir, char *legacy, size_t size) {
    if (access(r->last_path, R_OK) == 0) return r->last_path;
    snprintf(legacy, size, "%s/" CHECKPOINT_LEGACY, dir);
    return access(legacy, R_OK) == 0 ? legacy : NULL;
}

/* Load the checkpoint to resume, and the best validation loss so far from the best one (so
 * that a worse epoch after resuming does not replace it). */
static int resume(session *s, const finetune_opts *o, run *r) {
    char legacy[4200];
    const char *from = resume_path(r, o->checkpoint_dir, legacy, sizeof legacy);
    if (graft_trainer_load(s->trainer, from) != GRAFT_OK) return session_fail(s, "resuming");
    run_saved saved;
    if (run_saved_read(&saved, s->ctx, s->cmd, from)) return 1;
    printf("resuming from %s (%lld epochs done", from, saved.epoch);
    if (saved.epoch_samples > 0) printf(", %lld samples into the next", saved.epoch_samples);
    printf(")\n");
    r->rate_base = saved.epoch_samples;
    run_saved_free(&saved);
    if (access(r->best_path, R_OK) == 0 && !run_saved_read(&saved, s->ctx, s->cmd, r->best_path)) {
        const char *v = run_saved_get(&saved, "graft.val_loss");
        if (v && strcmp(v, "none") != 0) {
            r->best_val_loss = strtod(v, NULL);
            r->best_epoch = saved.epoch;
        }
        run_saved_free(&saved);
    }
    return 0;
}

/* The trainer for the cut model (resuming when asked). */
static int make_trainer(session *s, finetune_opts *o, run *r) {
    if (o->cache_dir && !o->no_cache) {
        mkdir(o->cache_dir, 0777);
        snprintf(s->cache, sizeof s->cache, "%s", o->cache_dir);
        o->train.cache_dir = s->cache; /* one file per feature set, named from its key */
    }
    if (!strcmp(o->precision, "bf16")) o->train.precision = GRAFT_PRECISION_BF16;
    if (!strcmp(o->precision, "fp16")) o->train.precision = GRAFT_PRECISION_FP16;
    /* On a GPU the frozen backbone computes in that precision too (its own feature cache). */
    graft_dtype backbone = o->train.precision == GRAFT_PRECISION_BF16   ? GRAFT_DTYPE_BF16
                           : o->train.precision == GRAFT_PRECISION_FP16 ? GRAFT_DTYPE_F16
                                                                        : GRAFT_DTYPE_F32;
    if (backbone != GRAFT_DTYPE_F32 && !strncmp(graft_model_device(s->model), "cuda", 4) &&
        graft_model_set_precision(s->model, backbone) != GRAFT_OK)
        return session_fail(s, "setting the backbone's precision");
    o->train.callback = finetune_on_report, o->train.callback_user = r;
    o->train.extract_callback = finetune_on_extract;
    if (session_make_trainer(s, o)) return 1;
    r->trainer = s->trainer;
    r->unsaved = false;
    return o->resume && r->round == 1 ? resume(s, o, r) : 0;
}

/* The run's record for its checkpoints: the options as the data left them (the preprocessing
 * used) and the class names. */
static int record_run(session *s, const finetune_opts *o, run *r) {
    int n = graft_dataset_class_count(s->train);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    if (!names) return 1;
    for (int c = 0; c < n; c++) names[c] = graft_dataset_class_name(s->train, c);
    int rc = run_record_init(&r->record, o, names, n);
    free(names);
    if (rc) fprintf(stderr, "graft finetune: out of memory\n");
    return rc;
}

/* The checkpoint paths; with --resume, DIR must hold one (exit 2 before any work). */
static int checkpoint_paths(const finetune_opts *o, run *r) {
    if (!o->checkpoint_dir) return 0;
    snprintf(r->last_path, sizeof r->last_path, "%s/" CHECKPOINT_LAST, o->checkpoint_dir);
    snprintf(r->best_path, sizeof r->best_path, "%s/" CHECKPOINT_BEST, o->checkpoint_dir);
    char legacy[4200];
    if (o->resume && !resume_path(r, o->checkpoint_dir, legacy, sizeof legacy)) {
        fprintf(stderr, "graft finetune: --resume: no checkpoint in %s (no %s)\n",
                o->checkpoint_dir, r->last_path);
        return 2;
    }
    return 0;
}

/* Load, check the vocabulary, open the data, prune (the first round of several; every round
 * when resuming), cut, make the trainer. */
/* GRAFT_LOG=debug: the tool's own timing lines beside the library's debug messages. */
static bool debug_wanted(void) {
    const char *level = getenv("GRAFT_LOG");
    return level && !strcmp(level, "debug");
}

static int prepare(session *s, finetune_opts *o, run *r, int argc, char **argv) {
    int rc = checkpoint_paths(o, r);
    if (rc) return rc;
    double t0 = progress_now();
    if (!(s->ctx = cli_ctx("finetune", 0, o->device))) return 1;
    double t_ctx = progress_now();
    r->ctx = s->ctx;
    /* data-parallel ranks (mpirun, --nproc): rank 0 alone prints and writes the run's files */
    if (launch_join("finetune", s->ctx)) return 1;
    if (!launch_writes(s->ctx)) o->report_dir = NULL, r->tty = false;
    session_make_dirs(o->out, false);
    if (o->report_dir) session_make_dirs(o->report_dir, true);
    if (o->checkpoint_dir) session_make_dirs(o->checkpoint_dir, true);
    if (o->cache_dir && !o->no_cache) session_make_dirs(o->cache_dir, true);
    /* fine-tuned blocks train conv weights and BN scale/bias apart, as PyTorch does */
    if (o->unfreeze || o->train.train_from) cli_ctx_keep_batchnorm(s->ctx, 1);
    if (graft_model_load(s->ctx, o->model, &s->model) != GRAFT_OK)
        return session_fail(s, "loading");
    double t_model = progress_now();
    if (o->vocab && (o->unfreeze || o->train.train_from) && !o->pad_max) {
        /* the blocks' rows in the cache have one size: every text padded to --max-len */
        o->pad_max = 1;
        printf("note: texts are padded to --max-len %d for --%s (the fine-tuned blocks take "
               "one sequence length)\n",
               o->max_len, o->unfreeze ? "unfreeze" : "train-from");
    }
    if ((rc = session_check_vocab(s, o)) || (rc = session_open_data(s, o))) return rc;
    if (debug_wanted()) /* the load phase's parts */
        fprintf(stderr, "graft finetune: debug: context %.3fs, model %.3fs, data listed %.3fs\n",
                t_ctx - t0, t_model - t_ctx, progress_now() - t_model);
    if (o->checkpoint_dir && record_run(s, o, r)) return 1;
    if (o->prune) {
        const graft_prune_report *pr = &r->prune;
        r->round = o->resume ? o->prune_rounds : 1;
        if (session_prune_through(s, o, r->round, &r->prune)) return 1;
        if (o->prune_rounds == 1)
            printf("pruned the backbone: %lld -> %lld non-zero weights, %.3g -> %.3g FLOPs per "
                   "sample\n",
                   (long long)pr->nonzero_before, (long long)pr->nonzero_after, pr->flops_before,
                   pr->flops_after);
    }
    if (o->unfreeze && session_unfreeze(s, o, true)) return 1;
    if (graft_model_cut(s->model, o->cut, o->pooling) != GRAFT_OK)
        return session_fail(s, "cutting");
    if (session_apply_uint8(s)) return 1;
    if (make_trainer(s, o, r)) return 1;
    if (o->report_dir) {
        char err[512];
        if (!(s->log = run_log_open(o->report_dir, err, sizeof err))) {
            fprintf(stderr, "graft finetune: %s\n", err);
            return 1;
        }
        log_config(s->log, argc, argv);
        r->log = s->log;
    }
    return 0;
}

/* Where the wall time went, phase by phase (the terminal and --report's summary). */
static void print_phases(const run *r) {
    double load = r->t_loaded - r->t_start, fit = r->t_fitted - r->t_loaded,
           check = r->t_checked - r->t_fitted, out = r->t_exported - r->t_checked;
    printf("  wall time         %.2fs: load %.2fs, features and head %.2fs, export checked on the "
           "validation data %.2fs, export %.2fs\n",
           r->t_exported - r->t_start, load, fit, check, out);
    if (!r->log) return;
    run_log_summary(r->log, "seconds_load", run_log_float(load));
    run_log_summary(r->log, "seconds_fit", run_log_float(fit));
    run_log_summary(r->log, "seconds_check_export", run_log_float(check));
    run_log_summary(r->log, "seconds_export", run_log_float(out));
}

/* Attach, evaluate, export. */
static int finish(session *s, const finetune_opts *o, run *r) {
    int n = graft_dataset_class_count(s->train);
    if (graft_trainer_attach(s->trainer, o->softmax) != GRAFT_OK)
        return session_fail(s, "attaching");
    int64_t *counts = calloc((size_t)n * (size_t)n, sizeof *counts);
    const char **names = calloc((size_t)n, sizeof *names);
    if (!counts || !names) return free(counts), free(names), 1;
    for (int c = 0; c < n; c++) names[c] = graft_dataset_class_name(s->train, c);
    int rc = confusion(s, o, counts, n);
    r->t_checked = progress_now();
    if (!rc) print_summary(s, r, counts, n);
    if (!rc && s->log) run_log_confusion(s->log, n, names, counts);
    if (!rc && launch_writes(s->ctx)) rc = session_export(s, o);
    r->t_exported = progress_now();
    if (!rc) printf("  exported          %s\n", o->out);
    if (!rc) print_phases(r);
    free(counts), free(names);
    return rc;
}

/* Fit the head on the current backbone. */
static int fit(session *s, const finetune_opts *o, run *r) {
    r->n_train = graft_dataset_size(s->train);
    r->n_val = s->val ? graft_dataset_size(s->val) : 0;
    r->epoch_t0 = progress_now();
    r->phase = PHASE_SETUP;
    int rc = session_fit(s, o);
    /* After a failed run (a NaN loss, say), where to resume from. */
    if (rc && o->checkpoint_dir && access(r->last_path, R_OK) == 0)
        fprintf(stderr,
                "graft finetune: the last checkpoint written is %s (--resume continues "
                "from it)\n",
                r->last_path);
    return rc;
}

/* Round k > 1: a fresh backbone pruned through round k, cut, and a new head (the features may
 * have narrowed). */
static int next_round(session *s, finetune_opts *o, run *r, int k) {
    graft_trainer_free(s->trainer);
    graft_model_free(s->model);
    s->trainer = NULL, r->trainer = NULL, s->model = NULL;
    if (graft_model_load(s->ctx, o->model, &s->model) != GRAFT_OK)
        return session_fail(s, "loading");
    if (session_prune_through(s, o, k, &r->prune)) return 1;
    if (graft_model_cut(s->model, o->cut, o->pooling) != GRAFT_OK)
        return session_fail(s, "cutting");
    if (session_apply_uint8(s)) return 1;
    /* best is per round: a less pruned round's head does not fit this backbone */
    r->best_val_loss = 1e300, r->best_val_acc = r->last_val_acc = -1, r->best_epoch = 0;
    r->round = k;
    return make_trainer(s, o, r);
}

/* One line per round: the sparsity reached against the schedule's, what is left, accuracy. */
static void round_line(const run *r, const finetune_opts *o, int k) {
    const graft_prune_report *p = &r->prune;
    printf("prune round %d/%d: sparsity %.4f (schedule %.4f), non-zero weights %lld of %lld, "
           "FLOPs %.4g of %.4g, val acc ",
           k, o->prune_rounds, p->sparsity,
           graft_prune_schedule(o->prune_sparsity, k, o->prune_rounds), (long long)p->nonzero_after,
           (long long)p->nonzero_before, p->flops_after, p->flops_before);
    if (r->last_val_acc >= 0)
        printf("%.4f\n", r->last_val_acc);
    else
        printf("- (no validation data)\n");
    fflush(stdout);
    if (r->log) {
        run_log_scalar(r->log, "prune/sparsity", k, p->sparsity);
        if (r->last_val_acc >= 0) run_log_scalar(r->log, "prune/val_accuracy", k, r->last_val_acc);
    }
}

/* Ctrl-C: the step in progress has ended; write the last checkpoint if training has moved on
 * since it was written, and say exactly what was and was not saved. Returns 130. */
static int interrupted(session *s, run *r) {
    if (r->tty) progress_clear();
    const graft_train_report *p = &r->last;
    if (r->phase != PHASE_TRAIN) {
        printf("\ninterrupted before training%s: no checkpoint written",
               r->phase == PHASE_BACKBONE ? " (in the backbone phase)" : "");
        if (s->cache[0]) printf("; the features computed so far are kept in %s/", s->cache);
        if (r->o->resume) printf("; %s is as it was", r->last_path);
        printf("\n");
    } else if (!r->last_path[0]) {
        printf("\ninterrupted: no --checkpoint given, nothing saved\n");
    } else if (r->unsaved && !finetune_save(r, r->last_path, "last", -1)) {
        printf("\ninterrupted: the checkpoint could not be written (see above)\n");
    } else {
        if (p->epoch_end)
            printf("\ninterrupted after epoch %lld", (long long)p->epoch);
        else
            printf("\ninterrupted in epoch %lld at sample %lld of %lld", (long long)p->epoch + 1,
                   (long long)p->epoch_samples, (long long)r->n_train);
        printf(": checkpoint written to %s; continue with --resume\n", r->last_path);
    }
    fflush(stdout);
    return 130;
}

/* finetune's options from the command line; NULL with the exit status in *rc (0 after --help,
 * 2 for a bad option, 1 out of memory). */
static finetune_opts *parse_options(int argc, char **argv, int *rc) {
    finetune_opts *o = calloc(1, sizeof *o);
    *rc = 1;
    if (!o) return NULL;
    *rc = finetune_parse(o, argc, argv);
    if (!*rc) return o;
    *rc = *rc == 1 ? 0 : 2;
    free(o);
    return NULL;
}

int cmd_finetune(int argc, char **argv) {
    int rc;
    finetune_opts *o = parse_options(argc, argv, &rc);
    if (!o) return rc;
    if (launch_relaunch(o->nproc, argc, argv, &rc)) { /* --nproc N: the ranks ran under mpirun */
        free(o);
        return rc;
    }
    session s = {.cmd = "finetune", .allow_uint8 = true};
    run r = {.o = o,
             .tty = isatty(1) != 0,
             .best_val_loss = 1e300,
             .best_val_acc = -1,
             .last_val_acc = -1,
             .round = 1};
    finetune_catch_sigint();
    double before_main = progress_since_exec(); /* the libraries' loading and relocation */
    r.t_start = progress_now();
    rc = prepare(&s, o, &r, argc, argv);
    r.t_loaded = progress_now();
    int rounds = o->prune ? o->prune_rounds : 1;
    for (int k = 1; !rc && !finetune_interrupted && k <= rounds; k++) {
        if (k > 1) rc = next_round(&s, o, &r, k);
        if (!rc) rc = fit(&s, o, &r);
        if (!rc && !finetune_interrupted && rounds > 1) round_line(&r, o, k);
    }
    r.t_fitted = progress_now();
    if (!rc && finetune_interrupted)
        rc = interrupted(&s, &r);
    else if (!rc)
        rc = finish(&s, o, &r);
    if (s.log) {
        char err[512];
        run_log_status how = rc == 0     ? RUN_LOG_COMPLETED
                             : rc == 130 ? RUN_LOG_INTERRUPTED
                                         : RUN_LOG_FAILED;
        if (run_log_close(s.log, how, err, sizeof err) != 0)
            fprintf(stderr, "graft finetune: %s\n", err);
    }
    run_record_free(&r.record);
    /* data-parallel: a rank that failed leaves at once (mpirun then ends the others) */
    graft_ctx_leave(s.ctx, rc != 0 && rc != 130);
    double t_free = progress_now();
    session_free(&s);
    if (debug_wanted()) /* what the process's wall time adds to graft's own */
        fprintf(stderr,
                "graft finetune: debug: %.3fs from the process's start to main (loading the "
                "libraries), %.3fs freeing the model, trainer and context\n",
                before_main, progress_now() - t_free);
    free(o);
    return rc;
}
