/* cmd_export.c: `graft export`: the grafted model of a finetune run rebuilt from its checkpoint
 * alone (the checkpoint records the run's options, class names and preprocessing), without
 * training. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "commands.h"
#include "finetune.h"
#include "finetune_run.h"
#include "run_record.h"
#include "session.h"

static void export_usage(void) {
    printf("usage: graft export --checkpoint DIR --out OUT.onnx [--which best|last] [options]\n\n"
           "Rebuilds the grafted model of a finetune run from its checkpoint, without training:\n"
           "the checkpoint records the run's options (model, cut, head, pooling, pruning,\n"
           "vocabulary), its class names and its preprocessing, so nothing else is needed. The\n"
           "backbone is loaded, pruned and cut as in the run, the head restored, attached and\n"
           "exported to OUT.onnx with the class names and preprocessing.\n\n"
           "  --checkpoint DIR     the run's --checkpoint folder (required)\n"
           "  --out OUT.onnx       where to write the model (required)\n"
           "  --which best|last    DIR/" CHECKPOINT_BEST " (the epoch of the lowest validation\n"
           "                       loss; the default) or DIR/" CHECKPOINT_LAST
           " (the latest epoch, or\n"
           "                       where Ctrl-C stopped the run)\n"
           "  --fp16-weights       export float weights as float16\n\n"
           "  --config FILE        options from FILE (over the recorded ones)\n\n"
           "Any other finetune option given here overrides the recorded one (e.g. --model when\n"
           "the backbone has moved). A checkpoint from an older graft (DIR/" CHECKPOINT_LEGACY ")\n"
           "records no options: give the run's own options too (its command line or --config).\n\n"
           "example:\n"
           "  graft export --checkpoint runs/digits --out digits_best.onnx\n");
}

/* What export reads before the options: where the checkpoint is, which one, on what device. */
typedef struct export_args {
    const char *dir, *which, *config;
    char device[32];
} export_args;

/* The first pass over the command line: --checkpoint, --which, --config, --device and --help.
 * 0, 1 after --help, 2 after an error. */
static int first_pass(export_args *a, int argc, char **argv) {
    a->which = "best";
    snprintf(a->device, sizeof a->device, "auto");
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) return export_usage(), 1;
        const char **slot = !strcmp(arg, "--checkpoint") ? &a->dir
                            : !strcmp(arg, "--which")    ? &a->which
                            : !strcmp(arg, "--config")   ? &a->config
                                                         : NULL;
        if (slot && !(*slot = cli_value("export", argc, argv, &i, "a value"))) return 2;
        if (!strcmp(arg, "--device")) {
            const char *v = cli_value("export", argc, argv, &i, "DEVICE");
            if (!v || cli_device("export", v, a->device, sizeof a->device)) return 2;
        }
    }
    if (strcmp(a->which, "best") && strcmp(a->which, "last"))
        return cli_error("export", "--which %s: expected best or last", a->which);
    if (!a->dir) return cli_error("export", "--checkpoint DIR is required (the finetune run's)");
    return 0;
}

/* The options in layers: the checkpoint's record, then --config FILE, then the command line
 * (each wins over the one before). 0, or 2 after an error. */
static int layered_options(finetune_opts *o, const run_saved *saved, const export_args *a, int argc,
                           char **argv, const char *path) {
    finetune_defaults(o, "export");
    int rc = saved->has_options ? run_saved_apply(saved, o, NULL, NULL) : 0;
    if (!rc && a->config) rc = finetune_read_config(o, a->config);
    for (int i = 1; !rc && i < argc; i++) {
        const char *name = argv[i] + 2;
        if (strncmp(argv[i], "--", 2) != 0)
            return cli_error("export", "unexpected argument '%s' (options start with --)", argv[i]);
        if (!strcmp(name, "which") || !strcmp(name, "config")) {
            i++;
            continue;
        }
        const char *value = finetune_takes_value(name) == 1 && i + 1 < argc ? argv[++i] : NULL;
        rc = finetune_option(o, name, value);
    }
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
    if (graft_model_cut(s->model, o->cut, o->pooling) != GRAFT_OK)
        return session_fail(s, "cutting");
    return session_make_trainer(s, o);
}

int cmd_export(int argc, char **argv) {
    export_args a = {0};
    int rc = first_pass(&a, argc, argv);
    char path[4200];
    if (!rc) rc = find_checkpoint(a.dir, a.which, path, sizeof path);
    if (rc) return rc == 1 ? 0 : rc;
    finetune_opts *o = calloc(1, sizeof *o);
    if (!o) return 1;
    session s = {.cmd = "export"};
    run_saved saved = {0};
    if (!(s.ctx = cli_ctx("export", 0, a.device)) || run_saved_read(&saved, s.ctx, "export", path))
        rc = 1;
    if (!rc) rc = layered_options(o, &saved, &a, argc, argv, path);
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
