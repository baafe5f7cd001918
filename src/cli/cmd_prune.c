/* cmd_prune.c: `graft prune`: prune a model (magnitude, channels, heads, 2:4), export it, and
 * report parameters, FLOPs, file size, measured latency and (with labelled data) accuracy
 * before and after; with --refit the classifier head is fitted again on the pruned backbone's
 * features, as `graft finetune --prune` fits it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli_args.h"
#include "cli_util.h"
#include "commands.h"
#include "finetune.h"
#include "graft.h"
#include "image_prep.h"
#include "session.h"
#include "../core/clock.h"

#define CMD "prune"

typedef struct prune_args {
    const char *model, *out, *data;
    graft_prune_options o;
    const char *exclude[64];
    int threads, refit;
    long iters;
    const char *borrowed; /* the first of finetune's options given (they need --refit) */
    finetune_opts ft;     /* --refit: the head, its training and the data, as finetune's */
} prune_args;

/* The options of `graft finetune` that --refit takes, with finetune's meanings and defaults. */
static const char *const refit_options[] = {
    "val",    "val-split", "resize", "crop",         "grayscale", "mean", "std",
    "epochs", "batch",     "lr",     "weight-decay", "seed",      NULL};

static const char *const methods[] = {"magnitude", "channels", "heads", "2:4", NULL};
static const char *const importances[] = {"l1", "l2", "bn", NULL};
static const char *const scopes[] = {"all", "inner", NULL};

static const cli_option prune_options[] = {
    {"model", "M.onnx", NULL, NULL, "model and output", "the model to prune (required)"},
    {"out", "P.onnx", NULL, NULL, NULL, "where to write the pruned model (required)"},
    {"method", "magnitude|channels|heads|2:4", "magnitude", methods, "pruning",
     "what to remove (see above)"},
    {"sparsity", "S", "0.5", NULL, NULL, "fraction removed, in [0, 1) (ignored by 2:4)"},
    {"global", NULL, NULL, NULL, NULL, "magnitude: one threshold over all layers"},
    {"importance", "l1|l2|bn", "l1", importances, NULL,
     "how channels and heads are ranked; bn: channels by |gamma| of the BatchNormalization "
     "after each convolution"},
    {"scope", "all|inner", "all", scopes, NULL,
     "channels: every prunable group, or only groups no residual Add ties to another (ResNet: "
     "the bottlenecks' insides)"},
    {"exclude", "A[,B..]", NULL, NULL, NULL, "node names or op types left dense"},
    {"prune-ends", NULL, NULL, NULL, NULL, "also prune the first convolution and the classifier"},
    {"data", "DIR", NULL, NULL, "measuring",
     "labelled image folder for accuracy before and after (the model's classes and "
     "preprocessing from its metadata)"},
    {"iters", "N", "20", NULL, NULL, "timed runs for the latency"},
    {"threads", "N", "0: all cores", NULL, NULL, "threads"},
    {"refit", NULL, NULL, NULL, "refitting the head (as in graft finetune)",
     "after pruning, fit a new linear head on the pruned backbone's features from --data (as "
     "graft finetune --prune does) and export backbone + head; accuracy is then on the "
     "validation split: before, the dense backbone with a head fitted the same way"},
    {"val", "DIR", NULL, NULL, NULL, "with --refit: validation data (else --val-split)"},
    {"val-split", "F", "0.2", NULL, NULL, "with --refit: fraction of --data held out"},
    {"resize", "N", NULL, NULL, NULL,
     "with --refit: resize the shorter side to N (0: no resize; default: the model's "
     "metadata)"},
    {"crop", "N", NULL, NULL, NULL,
     "with --refit: center crop N x N (default: the model's metadata)"},
    {"grayscale", NULL, NULL, NULL, NULL, "with --refit: one gray channel"},
    {"mean", "R,G,B", NULL, NULL, NULL,
     "with --refit: normalisation mean of pixel/255 (default: the model's metadata)"},
    {"std", "R,G,B", NULL, NULL, NULL,
     "with --refit: normalisation std of pixel/255 (default: the model's metadata)"},
    {"epochs", "N", "10", NULL, NULL, "with --refit: passes over the training data"},
    {"batch", "N", "32", NULL, NULL, "with --refit: samples per batch"},
    {"lr", "RATE", "0.001", NULL, NULL, "with --refit: learning rate"},
    {"weight-decay", "WD", "0.01", NULL, NULL, "with --refit: weight decay"},
    {"seed", "N", "0", NULL, NULL, "with --refit: seed for the split, order and initialisation"},
};

static const cli_command prune_command = {
    .name = CMD,
    .usage = "--model M.onnx --method magnitude|channels|heads|2:4 --sparsity S --out P.onnx "
             "[options]",
    .about = "Prunes M and writes the pruned model to P.onnx, then reports parameters (and "
             "non-zeros), FLOPs per sample, file size and measured latency before and after, "
             "and with --data the accuracy on a labelled image folder.\n\n"
             "methods:\n"
             "  magnitude  zero the smallest weights (unstructured; --global: one threshold)\n"
             "  channels  remove whole convolution channels: a smaller, faster dense model\n"
             "  heads  remove attention heads and feed-forward neurons of a BERT encoder\n"
             "  2:4  two of every four consecutive input weights zero (sparse tensor cores)",
    .options = prune_options,
    .n_options = CLI_COUNT(prune_options),
    .examples = "graft prune --model grafted.onnx --method channels --sparsity 0.5 --out "
                "small.onnx\n"
                "# prune the digits demo's backbone, then fit a new head on its features:\n"
                "graft prune --model models/digits_cnn.onnx --method=channels --sparsity=0.5 "
                "--refit --data examples/digits/train --val examples/digits/val --resize 0 "
                "--crop 8 --grayscale --lr 0.01 --out small.onnx",
    .writes = "P.onnx (with --refit: the pruned backbone with the new head, the class names and "
              "preprocessing in its metadata); the report on stdout.",
    .exit_status = "0 on success, 1 when loading, pruning, measuring or writing fails, 2 for "
                   "bad usage.",
};

/* Index of v in the NULL-terminated names, -1 when absent. */
static int choice(const char *const *names, const char *v) {
    for (int k = 0; names[k]; k++)
        if (!strcmp(names[k], v)) return k;
    return -1;
}

/* One of prune's own options; 0, or 2 after printing the error. */
static int own_option(prune_args *a, const cli_option *o, const char *v) {
    const char *n = o->name;
    long x;
    if (!strcmp(n, "refit")) return a->refit = 1, 0;
    if (!strcmp(n, "global")) return a->o.global = 1, 0;
    if (!strcmp(n, "prune-ends")) return a->o.keep_ends = 0, 0;
    if (!strcmp(n, "model")) return a->model = v, 0;
    if (!strcmp(n, "out")) return a->out = v, 0;
    if (!strcmp(n, "data")) return a->data = v, 0;
    if (!strcmp(n, "method")) return a->o.method = (graft_prune_method)choice(methods, v), 0;
    if (!strcmp(n, "importance"))
        return a->o.importance = (graft_importance)choice(importances, v), 0;
    if (!strcmp(n, "scope")) return a->o.scope = (graft_prune_scope)choice(scopes, v), 0;
    if (!strcmp(n, "sparsity")) {
        char *end;
        a->o.sparsity = strtod(v, &end);
        if (end == v || *end || !(a->o.sparsity >= 0 && a->o.sparsity < 1))
            return cli_error(CMD, "--sparsity %s: expected a number in [0, 1)", v);
        return 0;
    }
    if (!strcmp(n, "exclude")) {
        char *copy = strdup(v); /* lives until exit */
        for (char *t = strtok(copy, ","); t && a->o.n_exclude < 64; t = strtok(NULL, ","))
            a->exclude[a->o.n_exclude++] = t;
        a->o.exclude = a->exclude;
        return 0;
    }
    if (!strcmp(n, "iters")) return cli_int(CMD, "--iters", v, 1, 1000000, &a->iters) ? 2 : 0;
    if (cli_int(CMD, "--threads", v, 0, 4096, &x)) return 2;
    a->threads = (int)x;
    return 0;
}

static int parse(prune_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->o = (graft_prune_options)GRAFT_PRUNE_OPTIONS_INIT;
    a->iters = 20;
    finetune_defaults(&a->ft, CMD);
    const cli_option *o;
    const char *v;
    cli_parser p;
    int k;
    cli_parser_init(&p, &prune_command, NULL, argc, argv);
    while ((k = cli_next(&p, &o, &v)) > 0) {
        if (k == CLI_POSITIONAL)
            return cli_error(CMD, "unexpected argument '%s' (options start with --)", v);
        if (choice(refit_options, o->name) >= 0) {
            if (finetune_option(&a->ft, o->name, v)) return 2;
            if (!a->borrowed) a->borrowed = o->name;
        } else if (own_option(a, o, v)) {
            return 2;
        }
    }
    if (k < 0) return k == CLI_HELP ? 1 : 2;
    if (!a->model || !a->out) return cli_error(CMD, "--model and --out are required (see --help)");
    if (a->refit && !a->data)
        return cli_error(CMD, "--refit needs --data DIR (the labelled images to fit the head on)");
    if (a->borrowed && !a->refit) return cli_error(CMD, "--%s is for --refit", a->borrowed);
    if (a->ft.val && a->ft.val_split != 0.2 && a->ft.val_split > 0)
        return cli_error(CMD, "give --val or --val-split, not both");
    a->ft.model = a->model, a->ft.data = a->data, a->ft.out = a->out, a->ft.threads = a->threads;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median milliseconds of one run on zero inputs (symbolic dims: batch 1, others 128). */
static double latency_ms(graft_model *m, long iters) {
    int n = graft_model_input_count(m);
    graft_named_tensor in[16];
    if (n > 16) return -1;
    for (int i = 0; i < n; i++) {
        graft_value_info v;
        graft_model_input_info(m, i, &v);
        in[i].name = v.name;
        in[i].tensor = (graft_tensor){v.dtype, v.ndim, {0}, NULL};
        int64_t numel = 1;
        for (int d = 0; d < v.ndim; d++) {
            in[i].tensor.dims[d] = v.dims[d] >= 0 ? v.dims[d] : (d == 0 ? 1 : 128);
            numel *= in[i].tensor.dims[d];
        }
        in[i].tensor.data = calloc((size_t)numel, graft_dtype_size(v.dtype));
    }
    double *t = calloc((size_t)iters, sizeof *t), ms = -1;
    if (t && graft_model_run(m, in, n) == GRAFT_OK) {
        for (long k = 0; k < iters; k++) {
            double t0 = clock_seconds();
            graft_model_run(m, in, n);
            t[k] = (clock_seconds() - t0) * 1e3;
        }
        qsort(t, (size_t)iters, sizeof *t, cmp_double);
        ms = t[iters / 2];
    }
    for (int i = 0; i < n; i++) free(in[i].tensor.data);
    free(t);
    return ms;
}

/* Top-1 accuracy of m on a labelled data set (-1 when not measured). */
static double accuracy_on(graft_model *m, graft_dataset *ds, int threads) {
    graft_batch_source src;
    int64_t right = 0, total = 0;
    unsigned char kept[32];
    if (graft_dataset_source(ds, threads, 2, 0, &src) == GRAFT_OK)
        for (int64_t at = 0; at < src.n_samples; at += 32) {
            int64_t b = src.n_samples - at < 32 ? src.n_samples - at : 32;
            graft_named_tensor in[4];
            graft_tensor labels;
            const graft_tensor *out;
            if (src.read(src.user, at, b, in, &labels, kept) != GRAFT_OK ||
                graft_model_run(m, in, src.n_inputs) != GRAFT_OK ||
                graft_model_output(m, 0, &out) != GRAFT_OK)
                break;
            int64_t c = out->dims[1];
            for (int64_t r = 0; r < labels.dims[0]; r++) {
                int best;
                cli_top_k((const float *)out->data + r * c, c, 1, &best);
                right += best == ((const int64_t *)labels.data)[r];
                total++;
            }
        }
    return total ? (double)right / (double)total : -1;
}

/* Top-1 accuracy on a labelled image folder, preprocessed as image_prep_resolve says. */
static double accuracy(graft_ctx *ctx, graft_model *m, const char *dir, int threads) {
    image_prep prep;
    graft_dataset *ds = NULL;
    if (image_prep_resolve(&prep, ctx, m, NULL, NULL) != 0)
        return cli_error(CMD, "%s", prep.error), -1;
    if (graft_dataset_open_images(ctx, dir, &prep.o, &ds) != GRAFT_OK) return -1;
    double acc = accuracy_on(m, ds, threads);
    graft_dataset_free(ds);
    return acc;
}

/* --refit: cut the (pruned or dense) backbone, fit a head on the training data, attach it;
 * *acc: the validation accuracy of backbone + head (-1 without validation data). */
static int fit_head(session *s, finetune_opts *o, double *acc) {
    if (graft_model_cut(s->model, o->cut, o->pooling) != GRAFT_OK)
        return session_fail(s, "cutting");
    if (session_make_trainer(s, o) || session_fit(s, o)) return 1;
    if (graft_trainer_attach(s->trainer, o->softmax) != GRAFT_OK)
        return session_fail(s, "attaching the head");
    *acc = s->val ? accuracy_on(s->model, s->val, o->threads) : -1;
    return 0;
}

/* --refit, before pruning: the accuracy of the dense backbone with a head fitted the same way;
 * then the model is loaded again, uncut, for pruning. */
static int dense_baseline(session *s, finetune_opts *o, double *acc) {
    if (session_open_data(s, o) || fit_head(s, o, acc)) return 1;
    graft_trainer_free(s->trainer);
    graft_model_free(s->model);
    s->trainer = NULL, s->model = NULL;
    return graft_model_load(s->ctx, o->model, &s->model) != GRAFT_OK ? session_fail(s, "loading")
                                                                     : 0;
}

static long long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

static void row(const char *what, double before, double after, const char *fmt) {
    char b[64], a[64];
    snprintf(b, sizeof b, before < 0 ? "-" : fmt, before);
    snprintf(a, sizeof a, after < 0 ? "-" : fmt, after);
    printf("  %-22s %16s %16s", what, b, a);
    if (before > 0 && after >= 0) printf("   %6.1f%%", 100.0 * after / before);
    printf("\n");
}

int cmd_prune(int argc, char **argv) {
    prune_args a;
    int rc = parse(&a, argc, argv);
    if (rc) return rc == 1 ? 0 : rc;
    session s = {.cmd = CMD};
    if (!(s.ctx = cli_ctx(CMD, a.threads, NULL))) return 1;
    if (graft_model_load(s.ctx, a.model, &s.model) != GRAFT_OK) {
        rc = session_fail(&s, "loading");
        session_free(&s);
        return rc;
    }
    double lat0 = latency_ms(s.model, a.iters), acc0 = -1, acc1 = -1;
    if (a.refit)
        rc = dense_baseline(&s, &a.ft, &acc0);
    else if (a.data)
        acc0 = accuracy(s.ctx, s.model, a.data, a.threads);
    graft_prune_report r;
    if (!rc && graft_model_prune(s.model, &a.o, &r) != GRAFT_OK) rc = session_fail(&s, "pruning");
    if (!rc && a.refit) rc = fit_head(&s, &a.ft, &acc1);
    if (!rc && a.refit) rc = session_export(&s, &a.ft);
    if (!rc && !a.refit && graft_model_export(s.model, a.out, NULL) != GRAFT_OK)
        rc = session_fail(&s, "exporting");
    if (rc) {
        session_free(&s);
        return rc;
    }
    double lat1 = latency_ms(s.model, a.iters);
    if (a.data && !a.refit) acc1 = accuracy(s.ctx, s.model, a.data, a.threads);
    printf("pruned %s -> %s\n  %-22s %16s %16s\n", a.model, a.out, "", "before", "after");
    row("parameters", (double)r.params_before, (double)r.params_after, "%.0f");
    row("non-zero parameters", (double)r.nonzero_before, (double)r.nonzero_after, "%.0f");
    row("FLOPs per sample", r.flops_before, r.flops_after, "%.4g");
    row("file bytes", (double)file_size(a.model), (double)file_size(a.out), "%.0f");
    row("latency ms (batch 1)", lat0, lat1, "%.3f");
    if (a.data) row("accuracy", acc0, acc1, "%.4f");
    if (a.refit)
        printf("  (refit: a new head on each backbone, %lld training and %lld validation images,\n"
               "   %d epochs; accuracy on the validation split: dense + head, pruned + head)\n",
               (long long)graft_dataset_size(s.train),
               (long long)(s.val ? graft_dataset_size(s.val) : 0), a.ft.train.epochs);
    if (r.units_removed) printf("  units removed          %lld\n", (long long)r.units_removed);
    printf("  sparsity reached       %.4f (of what --method prunes)\n", r.sparsity);
    session_free(&s);
    return 0;
}
