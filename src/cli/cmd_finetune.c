/* cmd_finetune.c: `graft finetune`: data, cut, head training with progress, logs and
 * checkpoints, a summary, and the grafted export. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "cli_util.h"
#include "finetune.h"
#include "run_log.h"
#include "session.h"

/* Ctrl-C: finish the current step, checkpoint, exit cleanly. A signal handler can only set a
 * flag, so this one piece of state is global (in the tool, never in the library). */
static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

typedef struct run {
    const finetune_opts *o;
    graft_trainer *trainer;
    run_log *log;
    bool tty;
    int64_t n_train, epoch_samples, best_epoch;
    double epoch_t0, best_val_loss, best_val_acc, last_val_acc;
    char checkpoint[4096];
    graft_train_report last;
    graft_prune_report prune; /* the backbone as pruned for this round: dense before, then after */
} run;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void progress(run *r, const graft_train_report *p) {
    int64_t per_epoch = (r->n_train + r->o->train.batch_size - 1) / r->o->train.batch_size;
    int64_t done = p->step % per_epoch ? p->step % per_epoch : per_epoch;
    r->epoch_samples = done * r->o->train.batch_size;
    if (r->epoch_samples > r->n_train) r->epoch_samples = r->n_train;
    if (!r->tty) return;
    double dt = now() - r->epoch_t0, rate = dt > 0 ? (double)r->epoch_samples / dt : 0;
    double eta = rate > 0 ? (double)(r->n_train - r->epoch_samples) / rate : 0;
    int width = 24, fill = (int)(width * done / per_epoch);
    printf("\repoch %lld/%d [", (long long)p->epoch + 1, r->o->train.epochs);
    for (int i = 0; i < width; i++) putchar(i < fill ? '#' : ' ');
    printf("] %lld/%lld %.0f samples/s ETA %.0fs loss %.4f", (long long)r->epoch_samples,
           (long long)r->n_train, rate, eta, p->loss);
    if (p->accuracy >= 0) printf(" acc %.3f", p->accuracy);
    fflush(stdout);
}

static void epoch_line(run *r, const graft_train_report *p) {
    if (r->tty) printf("\r\033[K");
    printf("epoch %lld/%d: loss %.4f", (long long)p->epoch, r->o->train.epochs, p->loss);
    if (p->accuracy >= 0) printf(" acc %.3f", p->accuracy);
    if (p->val_loss >= 0) printf(", val loss %.4f", p->val_loss);
    if (p->val_accuracy >= 0) printf(" val acc %.3f", p->val_accuracy);
    printf(", lr %.3g, %.1fs\n", p->lr, now() - r->epoch_t0);
    fflush(stdout);
}

static int on_report(const graft_train_report *p, void *user) {
    run *r = user;
    r->last = *p;
    if (r->log && p->epoch_end) {
        run_log_epoch(r->log, p);
    } else if (r->log) {
        run_log_scalar(r->log, "train/loss", p->step, p->loss);
        run_log_scalar(r->log, "train/lr", p->step, p->lr);
        if (r->o->train.precision == GRAFT_PRECISION_FP16)
            run_log_scalar(r->log, "train/loss_scale", p->step, p->loss_scale);
    }
    if (!p->epoch_end) {
        progress(r, p);
        return interrupted != 0;
    }
    epoch_line(r, p);
    if (p->val_loss >= 0 && p->val_loss < r->best_val_loss) {
        r->best_val_loss = p->val_loss;
        r->best_val_acc = p->val_accuracy;
        r->best_epoch = p->epoch;
    }
    r->last_val_acc = p->val_accuracy;
    if (r->checkpoint[0] && graft_trainer_save(r->trainer, r->checkpoint) != GRAFT_OK)
        fprintf(stderr, "graft finetune: warning: checkpoint not written\n");
    r->epoch_t0 = now();
    return interrupted != 0;
}

/* After attaching the head: the validation confusion matrix through the grafted model. */
static int confusion(session *s, const finetune_opts *o, int64_t *counts, int n_classes) {
    graft_batch_source src;
    if (!s->val || graft_dataset_source(s->val, o->threads, 2, 0, &src) != GRAFT_OK) return 0;
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
        printf("  val accuracy      %.4f (%lld of %lld, exported model)\n", (double)right / total,
               (long long)right, (long long)total);
    printf("  device            %s\n", graft_model_device(s->model));
    printf("  time              backbone %.1fs (%lld samples run; the rest from the cache), head "
           "%.1fs\n",
           r->last.backbone_seconds, (long long)r->last.backbone_samples, r->last.head_seconds);
    int64_t skipped =
        graft_dataset_skipped_count(s->train) + (s->val ? graft_dataset_skipped_count(s->val) : 0);
    printf("  skipped files     %lld\n", (long long)skipped);
    for (int64_t i = 0; i < skipped && i < 10; i++) {
        const char *path, *why;
        graft_dataset *d = i < graft_dataset_skipped_count(s->train) ? s->train : s->val;
        int64_t k = d == s->train ? i : i - graft_dataset_skipped_count(s->train);
        if (graft_dataset_skipped(d, k, &path, &why) == GRAFT_OK) printf("    %s: %s\n", path, why);
    }
    if (s->log && total) {
        run_log_summary(s->log, "val_accuracy", run_log_float((double)right / total));
        run_log_summary(s->log, "best_epoch", run_log_int(r->best_epoch));
        run_log_summary(s->log, "skipped_files", run_log_int(skipped));
    }
}

/* The command line's options, typed: flags true, numbers as numbers, paths and names as text
 * (a tensor named "191" stays a name). */
static void log_config(run_log *log, int argc, char **argv) {
    static const char *const text_options[] = {"model", "data",   "val",        "out",
                                               "cut",   "cache",  "checkpoint", "report",
                                               "vocab", "config", NULL};
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

/* mkdir -p of path's folder part (its whole path when `whole`). */
static void make_dirs(const char *path, bool whole) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    if (!whole) {
        char *slash = strrchr(buf, '/');
        if (!slash) return;
        *slash = 0;
    }
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(buf, 0777);
            *p = '/';
        }
    mkdir(buf, 0777);
}

/* The pruning options of round k (1..rounds) of the schedule. */
static graft_prune_options round_options(const finetune_opts *o, int k) {
    graft_prune_options po = GRAFT_PRUNE_OPTIONS_INIT;
    po.method = (graft_prune_method)o->prune_method;
    po.importance = (graft_importance)o->prune_importance;
    po.scope = (graft_prune_scope)o->prune_scope;
    po.sparsity = graft_prune_schedule(o->prune_sparsity, k, o->prune_rounds);
    return po;
}

/* Prune the freshly loaded (uncut) model through rounds 1..k of the schedule: each round prunes
 * to its sparsity, counting what the rounds before removed, so it only removes more. The head
 * never changes the frozen backbone, so replaying the rounds on a fresh load gives the backbone
 * the previous round left. r->prune: dense before, round k after. */
static int prune_through(session *s, const finetune_opts *o, int k, run *r) {
    for (int j = 1; j <= k; j++) {
        graft_prune_options po = round_options(o, j);
        graft_prune_report pr;
        if (graft_model_prune(s->model, &po, &pr) != GRAFT_OK) return session_fail(s, "pruning");
        if (j > 1) {
            pr.params_before = r->prune.params_before, pr.flops_before = r->prune.flops_before;
            pr.nonzero_before = r->prune.nonzero_before;
        }
        r->prune = pr;
    }
    return 0;
}

/* The trainer for the cut model (resuming when asked). */
static int make_trainer(session *s, finetune_opts *o, run *r) {
    if (o->cache_dir && !o->no_cache) {
        mkdir(o->cache_dir, 0777);
        snprintf(s->cache, sizeof s->cache, "%s/features.cache", o->cache_dir);
        o->train.cache_path = s->cache;
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
    o->train.callback = on_report, o->train.callback_user = r;
    if (session_make_trainer(s, o)) return 1;
    r->trainer = s->trainer;
    if (o->checkpoint_dir) {
        mkdir(o->checkpoint_dir, 0777);
        snprintf(r->checkpoint, sizeof r->checkpoint, "%s/trainer.safetensors", o->checkpoint_dir);
        if (o->resume && access(r->checkpoint, R_OK) == 0) {
            if (graft_trainer_load(s->trainer, r->checkpoint) != GRAFT_OK)
                return session_fail(s, "resuming");
            printf("resuming from %s\n", r->checkpoint);
        }
    }
    return 0;
}

/* Load, open the data, prune (the first round of several; every round when resuming or
 * exporting), cut, make the trainer. */
static int prepare(session *s, finetune_opts *o, run *r, int argc, char **argv) {
    if (!(s->ctx = cli_ctx("finetune", 0, o->device))) return 1;
    make_dirs(o->out, false);
    if (o->report_dir) make_dirs(o->report_dir, true);
    if (o->checkpoint_dir) make_dirs(o->checkpoint_dir, true);
    if (o->cache_dir && !o->no_cache) make_dirs(o->cache_dir, true);
    if (graft_model_load(s->ctx, o->model, &s->model) != GRAFT_OK)
        return session_fail(s, "loading");
    if (session_open_data(s, o)) return 1;
    if (o->prune) {
        if (prune_through(s, o, o->resume ? o->prune_rounds : 1, r)) return 1;
        const graft_prune_report *pr = &r->prune;
        if (o->prune_rounds == 1)
            printf("pruned the backbone: %lld -> %lld non-zero weights, %.3g -> %.3g FLOPs per "
                   "sample\n",
                   (long long)pr->nonzero_before, (long long)pr->nonzero_after, pr->flops_before,
                   pr->flops_after);
    }
    if (graft_model_cut(s->model, o->cut, o->pooling) != GRAFT_OK)
        return session_fail(s, "cutting");
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
    if (!rc) print_summary(s, r, counts, n);
    if (!rc && s->log) run_log_confusion(s->log, n, names, counts);
    if (!rc) rc = session_export(s, o);
    if (!rc) printf("  exported          %s\n", o->out);
    free(counts), free(names);
    return rc;
}

/* Fit the head on the current backbone. */
static int fit(session *s, const finetune_opts *o, run *r) {
    r->n_train = graft_dataset_size(s->train);
    r->epoch_t0 = now();
    return session_fit(s, o);
}

/* Round k > 1: a fresh backbone pruned through round k, cut, and a new head (the features may
 * have narrowed). */
static int next_round(session *s, finetune_opts *o, run *r, int k) {
    graft_trainer_free(s->trainer);
    graft_model_free(s->model);
    s->trainer = NULL, r->trainer = NULL, s->model = NULL;
    if (graft_model_load(s->ctx, o->model, &s->model) != GRAFT_OK)
        return session_fail(s, "loading");
    if (prune_through(s, o, k, r)) return 1;
    if (graft_model_cut(s->model, o->cut, o->pooling) != GRAFT_OK)
        return session_fail(s, "cutting");
    r->best_val_loss = 1e300, r->best_val_acc = r->last_val_acc = -1, r->best_epoch = 0;
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
    session s = {.cmd = "finetune"};
    run r = {o, NULL, NULL, isatty(1) != 0, 0, 0, 0, 0, 1e300, -1, -1, "", {0}, {0}};
    signal(SIGINT, on_sigint);
    rc = prepare(&s, o, &r, argc, argv);
    int rounds = o->prune ? o->prune_rounds : 1;
    for (int k = 1; !rc && !interrupted && k <= rounds; k++) {
        if (k > 1) rc = next_round(&s, o, &r, k);
        if (!rc) rc = fit(&s, o, &r);
        if (!rc && !interrupted && rounds > 1) round_line(&r, o, k);
    }
    if (!rc && interrupted) {
        printf("\ninterrupted: %s\n", r.checkpoint[0] ? "checkpoint written; continue with --resume"
                                                      : "no --checkpoint given, nothing saved");
        rc = 130;
    } else if (!rc) {
        rc = finish(&s, o, &r);
    }
    if (s.log) {
        char err[512];
        run_log_status how = rc == 0     ? RUN_LOG_COMPLETED
                             : rc == 130 ? RUN_LOG_INTERRUPTED
                                         : RUN_LOG_FAILED;
        if (run_log_close(s.log, how, err, sizeof err) != 0)
            fprintf(stderr, "graft finetune: %s\n", err);
    }
    session_free(&s);
    free(o);
    return rc;
}

/* `graft export`: the run's options (the same command line or --config as the finetune run)
 * and its --checkpoint: rebuild the head from the checkpoint, attach it, export. */
int cmd_export(int argc, char **argv) {
    int rc;
    finetune_opts *o = parse_options(argc, argv, &rc);
    if (!o) return rc;
    session s = {.cmd = "finetune"};
    run r = {o, NULL, NULL, false, 0, 0, 0, 0, 1e300, -1, -1, "", {0}, {0}};
    if (!o->checkpoint_dir) {
        fprintf(stderr, "graft export: --checkpoint DIR is required (the finetune run's)\n");
        free(o);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/trainer.safetensors", o->checkpoint_dir);
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "graft export: no checkpoint at %s\n", path);
        free(o);
        return 2;
    }
    o->resume = 1;
    o->report_dir = NULL;
    rc = prepare(&s, o, &r, argc, argv);
    if (!rc) rc = finish(&s, o, &r);
    session_free(&s);
    free(o);
    return rc;
}
