/* cmd_export.c: `graft export`: the grafted model of a finetune run rebuilt from its checkpoint
 * alone (the checkpoint records the run's options, class names and preprocessing), without
 * training. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_args.h"
#include "cli_util.h"
#include "commands.h"
#include "finetune.h"
#include "finetune_run.h"
#include "run_record.h"
#include "session.h"

static const char *const which_choices[] = {"best", "last", NULL};

/* export's own options; then finetune's (overrides of the recorded ones), less those that mean
 * something else here or nothing at all. */
static const cli_option export_own[] = {
    {"checkpoint", "DIR", NULL, NULL, "export",
     "the finetune run's --checkpoint folder (required)"},
    {"which", "best|last", "best", which_choices, NULL,
     "DIR/" CHECKPOINT_BEST " (the epoch of the lowest validation loss) or DIR/" CHECKPOINT_LAST
     " (the latest epoch, or where Ctrl-C stopped the run)"},
    {"out", "OUT.onnx", NULL, NULL, NULL, "where to write the model (required)"},
};
static const char *const not_for_export[] = {"checkpoint", "out", "resume", "report", NULL};

enum { EXPORT_MAX_OPTIONS = 96 };

typedef struct export_table {
    cli_option options[EXPORT_MAX_OPTIONS];
    cli_command command;
} export_table;

static int skipped_here(const char *name) {
    for (int i = 0; not_for_export[i]; i++)
        if (!strcmp(name, not_for_export[i])) return 1;
    return 0;
}

/* export's own options, then finetune's under a heading that says what they do here. */
static void export_table_init(export_table *t) {
    int n_ft, n = 0;
    const cli_option *ft = finetune_option_table(&n_ft);
    for (int i = 0; i < CLI_COUNT(export_own); i++) t->options[n++] = export_own[i];
    const char *pending = NULL; /* a heading carried by an option left out */
    for (int i = 0; i < n_ft && n < EXPORT_MAX_OPTIONS; i++) {
        if (ft[i].group) pending = ft[i].group;
        if (skipped_here(ft[i].name)) continue;
        t->options[n] = ft[i];
        t->options[n].group = pending;
        pending = NULL;
        n++;
    }
    t->command = (cli_command){
        .name = "export",
        .usage = "--checkpoint DIR --out OUT.onnx [--which best|last] [options]",
        .about = "Rebuilds the grafted model of a finetune run from its checkpoint, without "
                 "training: the checkpoint records the run's options (model, cut, head, pooling, "
                 "pruning, vocabulary), its class names and its preprocessing, so nothing else "
                 "is needed. The backbone is loaded, pruned and cut as in the run, the head "
                 "restored, attached and exported to OUT.onnx with the class names and "
                 "preprocessing.\n\n"
                 "The options are layered: the checkpoint's record, then --config FILE, then "
                 "the command line; any of finetune's options below overrides the recorded one "
                 "(e.g. --model when the backbone has moved, --fp16-weights). A checkpoint from "
                 "an older graft (DIR/" CHECKPOINT_LEGACY ") records no options: give the run's "
                 "own options too (its command line or --config).",
        .options = t->options,
        .n_options = n,
        .examples = "graft export --checkpoint run/ckpt --out digits_best.onnx\n"
                    "graft export --checkpoint=run/ckpt --which last --fp16-weights --out "
                    "digits_last.onnx",
        .writes = "OUT.onnx; on stdout one line naming the checkpoint used (its epoch and "
                  "validation loss).",
        .exit_status = "0 on success, 1 when the model cannot be rebuilt, 2 for bad usage (a "
                       "missing --checkpoint or --out, no checkpoint in DIR).",
    };
}

/* The command line, parsed once: export's own values, and the rest to apply over the record. */
typedef struct export_args {
    const char *dir, *which, *config;
    char device[32];
    int n;
    const char *names[EXPORT_MAX_OPTIONS * 2], *values[EXPORT_MAX_OPTIONS * 2];
} export_args;

/* 0, -1 after --help (printed), 2 after an error. */
static int parse_args(export_args *a, const export_table *t, int argc, char **argv) {
    a->which = "best";
    snprintf(a->device, sizeof a->device, "auto");
    cli_parser p;
    const cli_option *d;
    const char *v;
    int k;
    cli_parser_init(&p, &t->command, "export", argc, argv);
    while ((k = cli_next(&p, &d, &v)) > 0) {
        if (k == CLI_POSITIONAL)
            return cli_error("export", "unexpected argument '%s' (options start with --)", v);
        if (!strcmp(d->name, "checkpoint"))
            a->dir = v;
        else if (!strcmp(d->name, "which"))
            a->which = v;
        else if (!strcmp(d->name, "config"))
            a->config = v;
        else if (!strcmp(d->name, "device") && cli_device("export", v, a->device, sizeof a->device))
            return 2;
        if (strcmp(d->name, "checkpoint") && strcmp(d->name, "which") &&
            strcmp(d->name, "config") && a->n < EXPORT_MAX_OPTIONS * 2)
            a->names[a->n] = d->name, a->values[a->n++] = v;
    }
    if (k != CLI_DONE) return k == CLI_HELP ? -1 : 2;
    if (!a->dir) return cli_error("export", "--checkpoint DIR is required (the finetune run's)");
    return 0;
}

/* The options in layers: the checkpoint's record, then --config FILE, then the command line
 * (each wins over the one before). 0, or 2 after an error. */
static int layered_options(finetune_opts *o, const run_saved *saved, const export_args *a,
                           const char *path) {
    finetune_defaults(o, "export");
    int rc = saved->has_options ? run_saved_apply(saved, o, NULL, NULL) : 0;
    if (!rc && a->config) rc = finetune_read_config(o, a->config);
    for (int i = 0; !rc && i < a->n; i++) rc = finetune_option(o, a->names[i], a->values[i]);
    if (rc) return rc;
    if (!o->out) return cli_error("export", "--out OUT.onnx is required");
    if (!saved->has_options && (!o->model || !o->data))
        return cli_error("export",
                         "%s records no run options (an older graft wrote it): give the run's "
                         "options as well (--model, --data and the rest of its command line)",
                         path);
    return 0;
}

/* DIR/best.safetensors or DIR/last.safetensors, else an older graft's DIR/trainer.safetensors;
 * 2 after an error when there is none. */
static int find_checkpoint(const char *dir, const char *which, char *path, size_t size) {
    snprintf(path, size, "%s/%s.safetensors", dir, which);
    if (access(path, R_OK) == 0) return 0;
    char legacy[4200];
    snprintf(legacy, sizeof legacy, "%s/" CHECKPOINT_LEGACY, dir);
    if (access(legacy, R_OK) == 0) return snprintf(path, size, "%s", legacy), 0;
    return cli_error("export", "no checkpoint at %s (give the finetune run's --checkpoint DIR)",
                     path);
}

/* Load, prune as the run did, cut; the classes from the record, or (an older checkpoint) from
 * the data. */
static int rebuild(session *s, finetune_opts *o, const run_saved *saved) {
    if (access(o->model, R_OK) != 0)
        return cli_error("export", "--model %s: no such file", o->model);
    session_make_dirs(o->out, false);
    if (o->unfreeze || o->train.train_from) cli_ctx_keep_batchnorm(s->ctx, 1);
    if (graft_model_load(s->ctx, o->model, &s->model) != GRAFT_OK)
        return session_fail(s, "loading");
    if (saved->has_options) {
        s->class_names = saved->class_names, s->n_classes = saved->n_classes;
    } else if (session_open_data(s, o)) {
        return 1;
    }
    graft_prune_report pr;
    if (o->prune &&
        session_prune_through(s, o, saved->has_options ? saved->prune_round : o->prune_rounds, &pr))
        return 1;
    if (o->unfreeze && session_unfreeze(s, o, false)) return 1;
    if (graft_model_cut(s->model, o->cut, o->pooling) != GRAFT_OK)
        return session_fail(s, "cutting");
    /* Export trains nothing: a checkpoint further on than --epochs (given, or the default) is
     * fine, where a resumed run would refuse it. */
    if (saved->epoch > o->train.epochs && saved->epoch <= INT_MAX)
        o->train.epochs = (int)saved->epoch;
    return session_make_trainer(s, o);
}

/* Rebuild, restore the head, attach, export; a line naming the checkpoint. */
static int export_from(const export_args *a, const char *path) {
    finetune_opts *o = calloc(1, sizeof *o);
    if (!o) return 1;
    session s = {.cmd = "export"};
    run_saved saved = {0};
    int rc = 0;
    if (!(s.ctx = cli_ctx("export", 0, a->device)) || run_saved_read(&saved, s.ctx, "export", path))
        rc = 1;
    if (!rc) rc = layered_options(o, &saved, a, path);
    if (!rc) rc = rebuild(&s, o, &saved);
    if (!rc && graft_trainer_load(s.trainer, path) != GRAFT_OK)
        rc = session_fail(&s, "restoring the head");
    if (!rc && graft_trainer_attach(s.trainer, o->softmax) != GRAFT_OK)
        rc = session_fail(&s, "attaching");
    if (!rc) rc = session_export(&s, o);
    if (!rc) {
        const char *loss = run_saved_get(&saved, "graft.val_loss");
        printf("exported %s from %s (after epoch %lld", o->out, path, saved.epoch);
        if (saved.epoch_samples > 0) printf(" and %lld samples", saved.epoch_samples);
        if (loss && strcmp(loss, "none") != 0) printf(", val loss %.4f", strtod(loss, NULL));
        printf(")\n");
    }
    run_saved_free(&saved);
    session_free(&s);
    free(o);
    return rc;
}

int cmd_export(int argc, char **argv) {
    export_table *table = calloc(1, sizeof *table);
    export_args *a = calloc(1, sizeof *a);
    int rc = table && a ? 0 : 1;
    if (!rc) {
        export_table_init(table);
        rc = parse_args(a, table, argc, argv);
    }
    char path[4200];
    if (!rc) rc = find_checkpoint(a->dir, a->which, path, sizeof path);
    if (!rc) rc = export_from(a, path);
    free(table);
    free(a);
    return rc == -1 ? 0 : rc;
}
