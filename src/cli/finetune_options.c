/* finetune_options.c: `graft finetune`'s options: one table gives each option's name, value,
 * default and help; values come from the command line and a --config file; everything is
 * checked before any work starts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "finetune.h"

typedef struct option_def {
    const char *name;
    const char *value; /* NULL for a flag */
    const char *dflt;
    const char *help;
} option_def;

static const option_def options[] = {
    {"model", "M.onnx", NULL, "the pretrained model (ONNX) to graft a head onto (required)"},
    {"data", "DIR", NULL,
     "labelled data: an image folder DIR/<class>/<image>, a text folder "
     "DIR/<class>/<n>.txt, or a .csv/.tsv file with --vocab (required)"},
    {"val", "DIR", NULL, "validation data with the same classes (else --val-split)"},
    {"val-split", "F", "0.2", "fraction of --data held out for validation, stratified, seeded"},
    {"out", "OUT.onnx", NULL, "where to write the grafted model (required)"},
    {"cut", "auto|NAME", "auto", "the tensor to cut the backbone at"},
    {"pooling", "cls|pooler|mean", "cls", "how a text encoder's tokens become one vector"},
    {"head", "linear|mlp:H1[,H2..]", "linear", "the new head: linear, or an MLP with these widths"},
    {"activation", "relu|gelu|tanh", "relu", "the MLP head's activation"},
    {"dropout", "P", "0", "dropout after each MLP hidden layer while training"},
    {"epochs", "N", "10", "passes over the training data"},
    {"batch", "N", "32", "samples per batch"},
    {"lr", "RATE", "0.001", "learning rate (peak rate for cosine and one-cycle)"},
    {"optimizer", "sgd|adam|adamw|lamb", "adamw", "optimizer"},
    {"momentum", "M", "0.9", "SGD momentum"},
    {"scheduler", "constant|step|cosine|onecycle|plateau", "constant", "learning-rate schedule"},
    {"warmup", "STEPS", "0", "linear warm-up steps for cosine"},
    {"weight-decay", "WD", "0.01", "weight decay (not applied to biases)"},
    {"label-smoothing", "E", "0", "cross-entropy label smoothing"},
    {"clip", "NORM", "0", "clip gradients to this global norm (0: off)"},
    {"accumulate", "K", "1", "accumulate gradients over K batches"},
    {"precision", "fp32|bf16|fp16|auto", "auto",
     "compute precision of the head (and on a GPU of the backbone); auto: fp32"},
    {"device", "auto|cpu|cuda[:N]", "auto", "where the backbone runs (auto: a GPU when usable)"},
    {"augment", NULL, NULL, "random-resized-crop and flip (one fixed augmented view is cached)"},
    {"ridge", NULL, NULL, "start a linear head from the ridge-regression solution"},
    {"prune", "magnitude|channels|heads|2:4", NULL,
     "prune the backbone first (the head is then fitted to the pruned features)"},
    {"prune-sparsity", "S", "0.5", "fraction --prune removes"},
    {"prune-rounds", "N", "1",
     "prune gradually: N rounds on the cubic schedule S*(1-(1-k/N)^3), the head refit after "
     "each (magnitude, channels; one line per round)"},
    {"prune-importance", "l1|l2|bn", "l1",
     "how channels and heads are ranked (bn: |gamma| of each convolution's BatchNormalization)"},
    {"prune-scope", "all|inner", "all",
     "channels: every group, or only those no residual Add ties to another"},
    {"cache", "DIR", NULL, "keep backbone features in DIR (reused by later runs)"},
    {"no-cache", NULL, NULL, "do not keep features on disk"},
    {"seed", "N", "0", "seed for the split, data order, initialisation and dropout"},
    {"threads", "N", "0", "decoding threads (0: all cores)"},
    {"checkpoint", "DIR", NULL,
     "write DIR/last.safetensors after every epoch and on Ctrl-C, DIR/best.safetensors at the "
     "best validation loss"},
    {"resume", NULL, NULL, "continue from DIR/last.safetensors (mid-epoch after a Ctrl-C)"},
    {"early-stop", "N", "0", "stop after N epochs without a better validation loss (0: off)"},
    {"vocab", "vocab.txt", NULL, "BERT vocabulary: the data is text"},
    {"cased", NULL, NULL, "keep case and accents (cased vocabularies)"},
    {"max-len", "N", "128", "tokens per text, [CLS] and [SEP] included"},
    {"resize", "N", "256", "images: resize the shorter side to N (0: no resize)"},
    {"crop", "N", "224", "images: center crop N x N"},
    {"grayscale", NULL, NULL, "images: one gray channel"},
    {"mean", "R,G,B", "0.485,0.456,0.406", "images: normalisation mean of pixel/255"},
    {"std", "R,G,B", "0.229,0.224,0.225", "images: normalisation std of pixel/255"},
    {"no-softmax", NULL, NULL, "export logits instead of probabilities"},
    {"fp16-weights", NULL, NULL, "export float weights as float16 (half the file)"},
    {"report", "DIR", NULL, "write metrics.jsonl, TensorBoard events and report.html to DIR"},
    {"config", "FILE", NULL, "read options from FILE: one `option value` per line, # comments"},
    {"help", NULL, NULL, "show this help"},
};

#define N_OPTIONS ((int)(sizeof options / sizeof options[0]))

/* The name in messages: "graft finetune: ..." (prune borrows some of these options). */
static const char *tool = "finetune";

void finetune_usage_options(void) {
    printf("options:\n");
    for (int i = 0; i < N_OPTIONS; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", options[i].name, options[i].value ? " " : "",
                 options[i].value ? options[i].value : "");
        printf("  %-34s %s", left, options[i].help);
        if (options[i].dflt) printf(" (default %s)", options[i].dflt);
        printf("\n");
    }
}

void finetune_usage(void) {
    printf("usage: graft finetune --model M.onnx --data DIR --out OUT.onnx [options]\n\n"
           "Grafts a new head onto a pretrained model: cuts the backbone at its features,\n"
           "runs it once per sample (features are cached), trains the head, and exports\n"
           "backbone + head as one ONNX model with the class names and preprocessing.\n"
           "Image preprocessing defaults come from the model's metadata when it has them.\n\n");
    finetune_usage_options();
    printf(
        "\nexample:\n  graft finetune --model models/digits_cnn.onnx --data examples/digits/train"
        " \\\n      --val examples/digits/val --out digits_grafted.onnx --resize 0 --crop 8"
        " --grayscale\n\nwrites OUT.onnx; with --report DIR also DIR/metrics.jsonl, "
        "DIR/events.out.tfevents.*\nand DIR/report.html; with --checkpoint DIR, "
        "DIR/best.safetensors\nand DIR/last.safetensors (graft export --checkpoint DIR rebuilds "
        "the model from them).\n");
}

static const option_def *find_option(const char *name) {
    for (int i = 0; i < N_OPTIONS; i++)
        if (strcmp(options[i].name, name) == 0) return &options[i];
    return NULL;
}

static int bad(const char *name, const char *value, const char *why) {
    fprintf(stderr, "graft %s: --%s %s: %s\n", tool, name, value ? value : "", why);
    return 2;
}

static int parse_int(const char *name, const char *v, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        char why[96];
        snprintf(why, sizeof why, "expected a whole number from %d to %d", lo, hi);
        return bad(name, v, why);
    }
    *out = (int)x;
    return 0;
}

static int parse_double(const char *name, const char *v, double lo, double hi, double *out) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= lo && x <= hi)) {
        char why[96];
        snprintf(why, sizeof why, "expected a number from %g to %g", lo, hi);
        return bad(name, v, why);
    }
    *out = x;
    return 0;
}

static int parse_three(const char *name, const char *v, float *out) {
    const char *p = v;
    for (int c = 0; c < 3; c++) {
        char *end;
        double x = strtod(p, &end);
        if (end == p || (c < 2 && *end != ',') || (c == 2 && *end))
            return bad(name, v, "expected three comma-separated numbers");
        out[c] = (float)x;
        p = end + 1;
    }
    return 0;
}

static int pick(const char *name, const char *v, const char *const *choices, int *out) {
    for (int i = 0; choices[i]; i++)
        if (strcmp(v, choices[i]) == 0) {
            *out = i;
            return 0;
        }
    return bad(name, v, "not one of the choices (see --help)");
}

static int parse_head(finetune_opts *o, const char *v) {
    if (strcmp(v, "linear") == 0) {
        o->head.n_hidden = 0;
        return 0;
    }
    if (strncmp(v, "mlp:", 4) != 0) return bad("head", v, "expected linear or mlp:H1[,H2..]");
    const char *p = v + 4;
    o->head.n_hidden = 0;
    while (*p) {
        char *end;
        long h = strtol(p, &end, 10);
        if (end == p || h < 1 || h > 1 << 20 || o->head.n_hidden == GRAFT_MAX_HIDDEN ||
            (*end && *end != ','))
            return bad("head", v, "expected mlp: followed by up to 8 positive widths");
        o->head.hidden[o->head.n_hidden++] = (int)h;
        p = *end ? end + 1 : end;
    }
    return o->head.n_hidden ? 0 : bad("head", v, "an MLP needs at least one width");
}

/* Numbers and choices of the training options. */
static int apply_train(finetune_opts *o, const char *n, const char *v) {
    static const char *const optimizers[] = {"sgd", "adam", "adamw", "lamb", NULL};
    static const char *const schedulers[] = {"constant", "step",    "cosine",
                                             "onecycle", "plateau", NULL};
    static const char *const acts[] = {"relu", "gelu", "tanh", NULL};
    graft_train_options *t = &o->train;
    int i = 0;
    double d = 0;
    if (!strcmp(n, "epochs")) return parse_int(n, v, 1, 1000000, &t->epochs);
    if (!strcmp(n, "batch")) return parse_int(n, v, 1, 1 << 20, &t->batch_size);
    if (!strcmp(n, "accumulate")) return parse_int(n, v, 1, 1 << 20, &t->accumulate);
    if (!strcmp(n, "early-stop")) return parse_int(n, v, 0, 1000000, &t->early_stop);
    if (!strcmp(n, "lr")) return parse_double(n, v, 1e-12, 1e6, &t->lr);
    if (!strcmp(n, "momentum")) return parse_double(n, v, 0, 1, &t->momentum);
    if (!strcmp(n, "weight-decay")) return parse_double(n, v, 0, 1e3, &t->weight_decay);
    if (!strcmp(n, "clip")) return parse_double(n, v, 0, 1e12, &t->clip_norm);
    if (!strcmp(n, "label-smoothing")) {
        int r = parse_double(n, v, 0, 1, &d);
        t->label_smoothing = (float)d;
        return r;
    }
    if (!strcmp(n, "dropout")) {
        int r = parse_double(n, v, 0, 0.99, &d);
        o->head.dropout = (float)d;
        return r;
    }
    if (!strcmp(n, "warmup")) {
        int w = 0, r = parse_int(n, v, 0, 1 << 30, &w);
        t->warmup_steps = w;
        return r;
    }
    if (!strcmp(n, "seed")) {
        int r = parse_double(n, v, 0, 9007199254740992.0, &d);
        t->seed = (uint64_t)d, o->head.seed = (uint64_t)d;
        return r;
    }
    if (!strcmp(n, "optimizer")) return pick(n, v, optimizers, &i) ? 2 : (t->optimizer = i, 0);
    if (!strcmp(n, "scheduler")) return pick(n, v, schedulers, &i) ? 2 : (t->scheduler = i, 0);
    if (!strcmp(n, "activation")) return pick(n, v, acts, &i) ? 2 : (o->head.activation = i, 0);
    return -1;
}

/* Everything else that takes a value. */
static int apply_value(finetune_opts *o, const char *n, const char *v) {
    static const char *const poolings[] = {"cls", "pooler", "mean", NULL};
    static const char *const precisions[] = {"fp32", "bf16", "fp16", "auto", NULL};
    int r = apply_train(o, n, v), i = 0;
    if (r >= 0) return r;
    const char **s = !strcmp(n, "model")        ? &o->model
                     : !strcmp(n, "data")       ? &o->data
                     : !strcmp(n, "val")        ? &o->val
                     : !strcmp(n, "out")        ? &o->out
                     : !strcmp(n, "cut")        ? &o->cut
                     : !strcmp(n, "cache")      ? &o->cache_dir
                     : !strcmp(n, "checkpoint") ? &o->checkpoint_dir
                     : !strcmp(n, "report")     ? &o->report_dir
                     : !strcmp(n, "vocab")      ? &o->vocab
                                                : NULL;
    if (s) return (*s = v, 0);
    if (!strcmp(n, "val-split")) return parse_double(n, v, 0.0, 0.95, &o->val_split);
    if (!strcmp(n, "prune-sparsity")) return parse_double(n, v, 0.0, 0.99, &o->prune_sparsity);
    if (!strcmp(n, "prune")) {
        static const char *const methods[] = {"magnitude", "channels", "heads", "2:4", NULL};
        return pick(n, v, methods, &o->prune_method) ? 2 : (o->prune = 1, 0);
    }
    if (!strcmp(n, "prune-rounds")) return parse_int(n, v, 1, 100, &o->prune_rounds);
    if (!strcmp(n, "prune-importance")) {
        static const char *const kinds[] = {"l1", "l2", "bn", NULL};
        return pick(n, v, kinds, &o->prune_importance);
    }
    if (!strcmp(n, "prune-scope")) {
        static const char *const scopes[] = {"all", "inner", NULL};
        return pick(n, v, scopes, &o->prune_scope);
    }
    if (!strcmp(n, "threads")) return parse_int(n, v, 0, 4096, &o->threads);
    if (!strcmp(n, "max-len")) return parse_int(n, v, 3, 8192, &o->max_len);
    if (!strcmp(n, "head")) return parse_head(o, v);
    if (!strcmp(n, "pooling")) return pick(n, v, poolings, &i) ? 2 : (o->pooling = i + 2, 0);
    if (!strcmp(n, "precision"))
        return pick(n, v, precisions, &i)
                   ? 2
                   : (snprintf(o->precision, sizeof o->precision, "%s", v), 0);
    if (!strcmp(n, "device")) {
        if (strcmp(v, "auto") && strcmp(v, "cpu") && strncmp(v, "cuda", 4))
            return bad(n, v, "expected auto, cpu or cuda[:N]");
        snprintf(o->device, sizeof o->device, "%s", v);
        return 0;
    }
    if (!strcmp(n, "resize"))
        return o->image_set[0] = 1, parse_int(n, v, 0, 16384, &o->image.resize);
    if (!strcmp(n, "crop")) return o->image_set[1] = 1, parse_int(n, v, 1, 16384, &o->image.crop);
    if (!strcmp(n, "mean")) return o->image_set[3] = 1, parse_three(n, v, o->image.mean);
    if (!strcmp(n, "std")) return o->image_set[4] = 1, parse_three(n, v, o->image.std);
    return bad(n, v, "internal: unhandled option");
}

static int apply_flag(finetune_opts *o, const char *n) {
    if (!strcmp(n, "augment"))
        o->image.augment = 1;
    else if (!strcmp(n, "ridge"))
        o->train.ridge_warm_start = 1;
    else if (!strcmp(n, "no-cache"))
        o->no_cache = 1;
    else if (!strcmp(n, "resume"))
        o->resume = 1;
    else if (!strcmp(n, "cased"))
        o->cased = 1;
    else if (!strcmp(n, "grayscale"))
        o->image.grayscale = 1, o->image_set[2] = 1;
    else if (!strcmp(n, "no-softmax"))
        o->softmax = 0;
    else if (!strcmp(n, "fp16-weights"))
        o->fp16_weights = 1;
    else
        return bad(n, NULL, "internal: unhandled flag");
    return 0;
}

static int apply(finetune_opts *o, const char *name, const char *value) {
    const option_def *d = find_option(name);
    if (!d) return fprintf(stderr, "graft %s: unknown option --%s (see --help)\n", tool, name), 2;
    if (!d->value) return apply_flag(o, name);
    if (!value) return bad(name, NULL, "needs a value");
    return apply_value(o, name, value);
}

/* `option value` lines (or `--option value`; flags alone), # comments and blank lines. */
static int read_config(finetune_opts *o, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return bad("config", path, strerror(errno));
    char line[1024];
    int rc = 0, line_no = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        line_no++;
        char *p = line + strspn(line, " \t");
        p[strcspn(p, "#\r\n")] = 0;
        if (!*p) continue;
        while (*p == '-') p++;
        char *name = p, *value = NULL;
        p += strcspn(p, " \t=");
        if (*p) {
            *p++ = 0;
            p += strspn(p, " \t=");
            size_t n = strlen(p);
            while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) p[--n] = 0;
            if (*p) value = p;
        }
        if (value) {
            if (o->n_strings == 64) {
                rc = bad("config", path, "more than 64 options");
                break;
            }
            snprintf(o->strings[o->n_strings], sizeof o->strings[0], "%s", value);
            value = o->strings[o->n_strings++];
        }
        if (!strcmp(name, "config"))
            rc = bad("config", path, "a config file cannot include another");
        else if ((rc = apply(o, name, value)) != 0)
            fprintf(stderr, "graft finetune: (in %s, line %d)\n", path, line_no);
    }
    fclose(f);
    return rc;
}

static void defaults(finetune_opts *o) {
    memset(o, 0, sizeof *o);
    o->head = (graft_head_options)GRAFT_HEAD_OPTIONS_INIT;
    o->train = (graft_train_options)GRAFT_TRAIN_OPTIONS_INIT;
    o->image = (graft_image_options)GRAFT_IMAGE_OPTIONS_INIT;
    o->train.epochs = 10;
    o->val_split = 0.2;
    o->prune_sparsity = 0.5;
    o->prune_rounds = 1;
    o->cut = "auto";
    o->pooling = GRAFT_POOLING_AUTO;
    o->max_len = 128;
    o->softmax = 1;
    snprintf(o->device, sizeof o->device, "auto");
    snprintf(o->precision, sizeof o->precision, "auto");
}

static bool exists(const char *path, bool dir) {
    struct stat sb;
    return path && stat(path, &sb) == 0 && (dir ? S_ISDIR(sb.st_mode) : 1);
}

/* The pruning options that need --prune, or a method they work with. */
static int check_prune(const finetune_opts *o) {
    char n[16];
    snprintf(n, sizeof n, "%d", o->prune_rounds);
    if (o->prune_rounds > 1 && !o->prune) return bad("prune-rounds", n, "needs --prune METHOD");
    if (o->prune_rounds > 1 && o->prune_method != GRAFT_PRUNE_MAGNITUDE &&
        o->prune_method != GRAFT_PRUNE_CHANNELS)
        return bad("prune-rounds", n,
                   "rounds are for magnitude and channels (2:4 is one fixed pattern; heads count "
                   "from the current model, not the loaded one)");
    if (o->prune_rounds > 1 && o->resume)
        return bad("prune-rounds", n, "cannot resume a run of several prune rounds");
    if (o->prune_importance == GRAFT_IMPORTANCE_BN && o->prune_method != GRAFT_PRUNE_CHANNELS)
        return bad("prune-importance", "bn", "ranks convolution channels: needs --prune channels");
    return 0;
}

/* Missing files and choices that do not go together, before any work. */
static int check(const finetune_opts *o) {
    if (!o->model || !o->data || !o->out)
        return fprintf(stderr, "graft finetune: --model, --data and --out are required (see "
                               "--help)\n"),
               2;
    if (!exists(o->model, false)) return bad("model", o->model, "no such file");
    if (!exists(o->data, false)) return bad("data", o->data, "no such file or folder");
    if (o->val && !exists(o->val, false)) return bad("val", o->val, "no such file or folder");
    if (o->val && o->val_split != 0.2 && o->val_split > 0)
        return bad("val-split", "", "give --val or --val-split, not both");
    if (o->vocab && !exists(o->vocab, false)) return bad("vocab", o->vocab, "no such file");
    if (!o->vocab && !exists(o->data, true))
        return bad("data", o->data, "a file needs --vocab (text); images come in a folder");
    if (o->resume && !o->checkpoint_dir) return bad("resume", "", "needs --checkpoint DIR");
    if (o->cache_dir && o->no_cache) return bad("no-cache", "", "conflicts with --cache");
    if (!strncmp(o->device, "cuda", 4) && !graft_cuda_built())
        return bad("device", o->device, "this graft was built without CUDA (try --device cpu)");
    if (o->train.ridge_warm_start && o->head.n_hidden)
        return bad("ridge", "", "the ridge warm start needs --head linear");
    if (o->image.augment && o->vocab) return bad("augment", "", "is for images, not text");
    return check_prune(o);
}

void finetune_defaults(finetune_opts *o, const char *cmd) {
    tool = cmd;
    defaults(o);
}

int finetune_takes_value(const char *name) {
    const option_def *d = find_option(name);
    return d ? d->value != NULL : -1;
}

int finetune_option(finetune_opts *o, const char *name, const char *value) {
    return apply(o, name, value);
}

int finetune_read_config(finetune_opts *o, const char *path) {
    o->config = path;
    return read_config(o, path);
}

int finetune_parse(finetune_opts *o, int argc, char **argv) {
    tool = "finetune";
    defaults(o);
    for (int i = 1; i < argc; i++) /* the config file first: the command line wins */
        if (!strcmp(argv[i], "--config")) {
            if (i + 1 >= argc) return bad("config", NULL, "needs a file");
            o->config = argv[i + 1];
            int rc = read_config(o, o->config);
            if (rc) return rc;
        }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            finetune_usage();
            return 1;
        }
        if (strncmp(a, "--", 2) != 0)
            return fprintf(stderr,
                           "graft finetune: unexpected argument '%s' (options start with "
                           "--)\n",
                           a),
                   2;
        const option_def *d = find_option(a + 2);
        const char *value = d && d->value && i + 1 < argc ? argv[++i] : NULL;
        if (!strcmp(a, "--config")) continue;
        int rc = apply(o, a + 2, value);
        if (rc) return rc;
    }
    return check(o);
}
