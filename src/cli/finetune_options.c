/* finetune_options.c: `graft finetune`'s options (`graft export` and `prune --refit` borrow them):
 * one table gives each option's name, value, default, choices, topic and help; values come from the
 * command line and a --config file; everything is checked before any work starts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_args.h"
#include "finetune.h"

static const char *const poolings[] = {"cls", "pooler", "mean", "spatial", NULL};
static const char *const activations[] = {"relu", "gelu", "tanh", NULL};
static const char *const optimizers[] = {"sgd", "adam", "adamw", "lamb", NULL};
static const char *const schedulers[] = {"constant", "step", "cosine", "onecycle", "plateau", NULL};
static const char *const precisions[] = {"fp32", "bf16", "fp16", "auto", NULL};
static const char *const methods[] = {"magnitude", "channels", "heads", "2:4", NULL};
static const char *const importances[] = {"l1", "l2", "bn", NULL};
static const char *const scopes[] = {"all", "inner", NULL};
static const char *const paddings[] = {"longest", "max", NULL};
static const char *const uint8_modes[] = {"auto", "on", "off", NULL};
static const char *const decode_modes[] = {"cpu", "gpu", "gpu+cpu", NULL};

/* By topic, in the order help lists them. */
static const cli_option options[] = {
    {"data", "DIR", NULL, NULL, "data",
     "labelled data: an image folder DIR/<class>/<image>, a text folder DIR/<class>/<n>.txt, or "
     "a .csv/.tsv file with --vocab (required)"},
    {"val", "DIR", NULL, NULL, NULL, "validation data with the same classes (else --val-split)"},
    {"val-split", "F", "0.2", NULL, NULL,
     "fraction of --data held out for validation, stratified, seeded"},
    {"cache", "DIR", NULL, NULL, NULL, "keep backbone features in DIR (reused by later runs)"},
    {"no-cache", NULL, NULL, NULL, NULL, "do not keep features on disk"},
    {"model", "M.onnx", NULL, NULL, "model and cut",
     "the pretrained model (ONNX) to graft a head onto (required)"},
    {"cut", "auto|NAME", "auto", NULL, NULL,
     "the tensor to cut the backbone at (auto: the pooled features of a CNN, the [CLS] token of "
     "a BERT; graft info shows its pick)"},
    {"unfreeze", "N", "0", NULL, NULL,
     "fine-tune the last N stages of a CNN (layers of an encoder) with the head, from the "
     "tensor `graft info` lists for N; the part before it still runs once per sample (CPU, "
     "fp32; 0: the head alone)"},
    {"blocks-lr", "RATE", "--lr", NULL, NULL,
     "the learning rate of the blocks --unfreeze or --train-from trains (scheduled as --lr is); "
     "pretrained blocks usually want less than the new head"},
    {"train-from", "TENSOR", NULL, NULL, NULL,
     "fine-tune everything after TENSOR (upstream of the cut) with the head, as --unfreeze "
     "does from its tensor"},
    {"head", "linear|mlp:H1[,H2..]", "linear", NULL, "head",
     "the new head: linear, or an MLP with these hidden widths"},
    {"activation", "relu|gelu|tanh", "relu", activations, NULL, "the MLP head's activation"},
    {"dropout", "P", "0", NULL, NULL, "dropout after each MLP hidden layer while training"},
    {"ridge", NULL, NULL, NULL, NULL, "start a linear head from the ridge-regression solution"},
    {"epochs", "N", "10", NULL, "optimisation", "passes over the training data"},
    {"batch", "N", "32", NULL, NULL, "samples per batch"},
    {"lr", "RATE", "0.001", NULL, NULL, "learning rate (the peak rate for cosine and onecycle)"},
    {"optimizer", "NAME", "adamw", optimizers, NULL, "the optimizer"},
    {"momentum", "M", "0.9", NULL, NULL, "SGD momentum"},
    {"scheduler", "NAME", "constant", schedulers, NULL, "the learning-rate schedule"},
    {"warmup", "STEPS", "0", NULL, NULL, "linear warm-up steps for cosine"},
    {"weight-decay", "WD", "0.01", NULL, NULL, "weight decay (not applied to biases)"},
    {"label-smoothing", "E", "0", NULL, NULL, "cross-entropy label smoothing"},
    {"clip", "NORM", "0", NULL, NULL, "clip gradients to this global norm (0: off)"},
    {"accumulate", "K", "1", NULL, NULL, "accumulate gradients over K batches"},
    {"early-stop", "N", "0", NULL, NULL,
     "stop after N epochs without a better validation loss (0: off)"},
    {"seed", "N", "0", NULL, NULL, "seed for the split, data order, initialisation and dropout"},
    {"precision", "fp32|bf16|fp16|auto", "auto", precisions, "precision and device",
     "compute precision of the head (and on a GPU of the backbone); auto: fp32"},
    {"device", "auto|cpu|cuda[:N]", "auto", NULL, NULL,
     "where the backbone runs (auto: a GPU when usable)"},
    {"input-uint8", "auto|on|off", "off", uint8_modes, NULL,
     "feed images as uint8 pixels and normalise inside the model (4x less to copy to a GPU; "
     "the exported model then takes uint8 NHWC, not float); auto: on for a cuda device"},
    {"decode", "cpu|gpu|gpu+cpu", "cpu", decode_modes, NULL,
     "where the images' JPEGs are decoded for the backbone: gpu: nvJPEG on the model's GPU "
     "(the hardware decoder where there is one; PNG, CMYK, rotated or damaged files fall back to "
     "the CPU), features cached apart from the CPU decoder's; gpu+cpu: CPU threads decode a "
     "share of every batch beside nvJPEG"},
    {"threads", "N", "0", NULL, NULL,
     "decoding threads (0: all cores; with --decode gpu+cpu nvJPEG's thread and N - 1 CPU "
     "threads beside it, by default every core but three)"},
    {"nproc", "N", "1", NULL, NULL,
     "data-parallel over N processes on this host: graft re-launches itself under `mpirun -np "
     "N` (each rank extracts the features of its share and trains on its slice of every batch; "
     "the result equals one process's; docs/distributed.md)"},
    {"resize", "N", "model, else 256", NULL, "images",
     "resize the shorter side to N (0: no resize); an image option not given comes from the "
     "model's metadata, else its input's fixed size (as timm does), else ImageNet's: graft "
     "info shows them"},
    {"crop", "N", "model, else 224", NULL, NULL, "center crop N x N"},
    {"grayscale", NULL, NULL, NULL, NULL, "one gray channel"},
    {"mean", "R,G,B", "0.485,0.456,0.406", NULL, NULL, "normalisation mean of pixel/255"},
    {"std", "R,G,B", "0.229,0.224,0.225", NULL, NULL, "normalisation std of pixel/255"},
    {"augment", NULL, NULL, NULL, NULL,
     "random-resized-crop and flip (one fixed augmented view is cached)"},
    {"fast-decode", NULL, NULL, NULL, NULL,
     "decode large JPEGs at 1/2, 1/4 or 1/8 size when at least twice the resize target: faster, "
     "but not Pillow's pixels (default: full size, as torchvision with PIL)"},
    {"vocab", "FILE", NULL, NULL, "text",
     "the tokenizer: BERT's vocab.txt or a Hugging Face tokenizer.json (WordPiece, byte-level "
     "BPE, Unigram: RoBERTa, XLM-R, ALBERT, ...); the data is text"},
    {"tokenizer", "FILE", NULL, NULL, NULL, "the same as --vocab"},
    {"cased", NULL, NULL, NULL, NULL,
     "keep case and accents (cased vocab.txt; a tokenizer.json normalizes as it says)"},
    {"max-len", "N", "128", NULL, NULL,
     "tokens per text, [CLS] and [SEP] included (a model whose input takes fewer, exactly L, "
     "cuts them to L)"},
    {"pad", "longest|max", "longest", paddings, NULL,
     "pad each batch to its longest text, or every text to --max-len (a model whose input "
     "takes a fixed length always gets max)"},
    {"text-column", "NAME", "text", NULL, NULL, "the texts' column of a .csv/.tsv file"},
    {"label-column", "NAME", "label", NULL, NULL, "the labels' column of a .csv/.tsv file"},
    {"pooling", "cls|pooler|mean|spatial", NULL, poolings, NULL,
     "how the cut tensor becomes one vector: a text encoder's tokens (cls, the pooler output, "
     "mean over the mask) or a CNN's (N, C, H, W) map (spatial: its mean over H and W); "
     "by default what --cut auto's rule says (graft info prints it), for a named cut cls on "
     "an encoder's hidden state"},
    {"prune", "METHOD", NULL, methods, "pruning",
     "prune the backbone first (the head is then fitted to the pruned features)"},
    {"prune-sparsity", "S", "0.5", NULL, NULL, "fraction --prune removes"},
    {"prune-rounds", "N", "1", NULL, NULL,
     "prune gradually: N rounds on the cubic schedule S*(1-(1-k/N)^3), the head refit after "
     "each (magnitude, channels; one line per round)"},
    {"prune-importance", "l1|l2|bn", "l1", importances, NULL,
     "how channels and heads are ranked (bn: |gamma| of each convolution's BatchNormalization)"},
    {"prune-scope", "all|inner", "all", scopes, NULL,
     "channels: every group, or only those no residual Add ties to another"},
    {"out", "OUT.onnx", NULL, NULL, "output, logging and checkpoints",
     "where to write the grafted model (required)"},
    {"no-softmax", NULL, NULL, NULL, NULL, "export logits instead of probabilities"},
    {"fp16-weights", NULL, NULL, NULL, NULL, "export float weights as float16 (half the file)"},
    {"report", "DIR", NULL, NULL, NULL,
     "write metrics.jsonl, TensorBoard events and report.html to DIR"},
    {"checkpoint", "DIR", NULL, NULL, NULL,
     "write DIR/last.safetensors after every epoch and on Ctrl-C, DIR/best.safetensors at the "
     "best validation loss"},
    {"resume", NULL, NULL, NULL, NULL,
     "continue from DIR/last.safetensors (mid-epoch after a Ctrl-C)"},
    {"config", "FILE", NULL, NULL, "general",
     "read options from FILE: one `option value` or `option=value` a line, # comments; the "
     "command line wins"},
};

static const cli_command finetune_command = {
    .name = "finetune",
    .usage = "--model M.onnx --data DIR --out OUT.onnx [options]",
    .about = "Grafts a new head onto a pretrained model: cuts the backbone at its features, "
             "runs it once per sample (features are cached), trains the head, and exports "
             "backbone + head as one ONNX model with the class names and preprocessing. Image "
             "preprocessing defaults come from the model's metadata when it has them.",
    .options = options,
    .n_options = CLI_COUNT(options),
    .examples =
        "graft finetune --model models/digits_cnn.onnx --data examples/digits/train --val "
        "examples/digits/val --out digits.onnx --resize 0 --crop 8 --grayscale --mean "
        "0.3053,0.3053,0.3053 --std 0.376,0.376,0.376 --lr=0.01 --epochs=200 --report run "
        "--checkpoint run/ckpt\n"
        "# the options from a file (lines such as `epochs 50` or `lr=0.01`), one changed:\n"
        "graft finetune --config run.conf --epochs 20\n"
        "# text: a BERT encoder on a CSV file with text and label columns:\n"
        "graft finetune --model bert.onnx --vocab vocab.txt --data reviews.csv --max-len 128 "
        "--out reviews.onnx",
    .writes = "OUT.onnx: backbone + head, the class names and preprocessing in its metadata. "
              "With --report DIR also DIR/metrics.jsonl, DIR/events.out.tfevents.* (TensorBoard) "
              "and DIR/report.html; with --checkpoint DIR, DIR/last.safetensors and "
              "DIR/best.safetensors (graft export --checkpoint DIR rebuilds the model from "
              "them); with --cache "
              "DIR, the backbone's features. On stdout: a progress bar on a terminal, one line "
              "per epoch otherwise, and a summary.",
    .exit_status = "0 on success, 1 when the run fails, 2 for bad usage (checked before any "
                   "work), 130 after Ctrl-C (which finishes the current step and checkpoints).",
};

/* The name in messages, "graft finetune: ..." (export and prune borrow these options; a config
 * file's line is named too: "graft finetune: run.conf:3: ..."). */
static const char *tool = "finetune";
static char tool_where[512];

static const cli_option *find_option(const char *name) {
    return cli_find(&finetune_command, name, strlen(name));
}

int finetune_takes_value(const char *name) {
    const cli_option *d = find_option(name);
    return d ? d->value != NULL : -1;
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

/* Numbers and choices (c: the value's index among the option's choices) of the training
 * options; -1 for another option. */
static int apply_train(finetune_opts *o, const char *n, const char *v, int c) {
    graft_train_options *t = &o->train;
    double d = 0;
    if (!strcmp(n, "epochs")) return parse_int(n, v, 1, 1000000, &t->epochs);
    if (!strcmp(n, "batch")) return parse_int(n, v, 1, 1 << 20, &t->batch_size);
    if (!strcmp(n, "accumulate")) return parse_int(n, v, 1, 1 << 20, &t->accumulate);
    if (!strcmp(n, "early-stop")) return parse_int(n, v, 0, 1000000, &t->early_stop);
    if (!strcmp(n, "lr")) return parse_double(n, v, 1e-12, 1e6, &t->lr);
    if (!strcmp(n, "blocks-lr")) return parse_double(n, v, 1e-12, 1e6, &t->blocks_lr);
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
    if (!strcmp(n, "optimizer")) return t->optimizer = c, 0;
    if (!strcmp(n, "scheduler")) return t->scheduler = c, 0;
    if (!strcmp(n, "activation")) return o->head.activation = c, 0;
    return -1;
}

/* Everything else that takes a value. */
static int apply_value(finetune_opts *o, const char *n, const char *v, int c) {
    int r = apply_train(o, n, v, c);
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
                     : !strcmp(n, "tokenizer")  ? &o->vocab
                                                : NULL;
    if (!strcmp(n, "train-from")) s = &o->train.train_from;
    if (!strcmp(n, "unfreeze")) return parse_int(n, v, 0, 1000, &o->unfreeze);
    if (!strcmp(n, "nproc")) return parse_int(n, v, 1, 4096, &o->nproc);
    if (!strcmp(n, "text-column")) s = &o->text_column;
    if (!strcmp(n, "label-column")) s = &o->label_column;
    if (s) return (*s = v, 0);
    if (!strcmp(n, "val-split")) return parse_double(n, v, 0.0, 0.95, &o->val_split);
    if (!strcmp(n, "prune-sparsity")) return parse_double(n, v, 0.0, 0.99, &o->prune_sparsity);
    if (!strcmp(n, "prune")) return o->prune_method = c, o->prune = 1, 0;
    if (!strcmp(n, "prune-rounds")) return parse_int(n, v, 1, 100, &o->prune_rounds);
    if (!strcmp(n, "prune-importance")) return o->prune_importance = c, 0;
    if (!strcmp(n, "prune-scope")) return o->prune_scope = c, 0;
    if (!strcmp(n, "threads")) return parse_int(n, v, 0, 4096, &o->threads);
    if (!strcmp(n, "max-len")) return parse_int(n, v, 3, 8192, &o->max_len);
    if (!strcmp(n, "head")) return parse_head(o, v);
    if (!strcmp(n, "pooling")) return o->pooling = c + 2, 0; /* GRAFT_POOLING_CLS is 2 */
    if (!strcmp(n, "pad")) return o->pad_max = c == 1, 0;
    if (!strcmp(n, "input-uint8")) return o->input_uint8 = c == 0 ? -1 : c == 1, 0;
    if (!strcmp(n, "decode")) return o->decode_gpu = c, 0; /* 1 gpu, 2 gpu+cpu */
    if (!strcmp(n, "precision")) return snprintf(o->precision, sizeof o->precision, "%s", v), 0;
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
    else if (!strcmp(n, "fast-decode"))
        o->image.fast_decode = 1;
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

/* One option, from the command line or a config file (where nothing is checked yet). */
static int apply(finetune_opts *o, const char *name, const char *value) {
    const cli_option *d = find_option(name);
    if (!d) return cli_unknown_option(tool, &finetune_command, name, strlen(name));
    if (!d->value && value) return bad(name, value, "takes no value");
    if (!d->value) return apply_flag(o, name);
    if (!value) return bad(name, NULL, "needs a value");
    int c = d->choices ? cli_choice(tool, d, value) : 0;
    return c < 0 ? 2 : apply_value(o, name, value, c);
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
            if (strlen(value) >= sizeof o->strings[0]) {
                rc = bad("config", path, "a value longer than 255 characters");
                break;
            }
            snprintf(o->strings[o->n_strings], sizeof o->strings[0], "%s", value);
            value = o->strings[o->n_strings++];
        }
        const char *cmd = tool;
        snprintf(tool_where, sizeof tool_where, "%s: %s:%d", cmd, path, line_no);
        tool = tool_where; /* messages name the file and line */
        if (!strcmp(name, "config"))
            rc = bad("config", path, "a config file cannot include another");
        else
            rc = apply(o, name, value);
        tool = cmd;
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
    o->input_uint8 = 0; /* off: the export keeps the float input users feed */
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
        return fprintf(stderr,
                       "graft %s: --model, --data and --out are required (see graft %s "
                       "--help)\n",
                       tool, tool),
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
    if (o->train.blocks_lr > 0 && !o->unfreeze && !o->train.train_from)
        return bad("blocks-lr", "", "needs --unfreeze N or --train-from TENSOR");
    if (o->unfreeze && o->train.train_from)
        return bad("unfreeze", "", "give --unfreeze N or --train-from TENSOR, not both");
    if ((o->unfreeze || o->train.train_from) && o->train.ridge_warm_start)
        return bad("ridge", "",
                   "solves for a head on fixed features: not with --unfreeze or "
                   "--train-from, whose blocks train too");
    if (!o->vocab && (o->text_column || o->label_column))
        return bad(o->text_column ? "text-column" : "label-column",
                   o->text_column ? o->text_column : o->label_column,
                   "is for text data (with --vocab)");
    return check_prune(o);
}

void finetune_defaults(finetune_opts *o, const char *cmd) {
    tool = cmd;
    defaults(o);
}

int finetune_option(finetune_opts *o, const char *name, const char *value) {
    return apply(o, name, value);
}

int finetune_read_config(finetune_opts *o, const char *path) {
    o->config = path;
    return read_config(o, path);
}

const cli_option *finetune_option_table(int *n) {
    *n = CLI_COUNT(options);
    return options;
}

enum { CHECK_ARGS, APPLY_CONFIGS, APPLY_OTHERS };

/* One pass over argv: check every argument (printing --help), read the --config files, or
 * apply the other options. 0, 1 after --help, 2 after an error. */
static int args_pass(finetune_opts *o, const cli_command *c, int argc, char **argv, int pass) {
    const cli_option *d;
    const char *v;
    cli_parser p;
    int k;
    cli_parser_init(&p, c, tool, argc, argv);
    while ((k = cli_next(&p, &d, &v)) > 0) {
        if (k == CLI_POSITIONAL)
            return fprintf(stderr, "graft %s: unexpected argument '%s' (options start with --)\n",
                           tool, v),
                   2;
        int config = !strcmp(d->name, "config"), rc = 0;
        if (pass == APPLY_CONFIGS && config)
            rc = read_config(o, o->config = v);
        else if (pass == APPLY_OTHERS && !config)
            rc = apply(o, d->name, v);
        if (rc) return rc;
    }
    return k == CLI_DONE ? 0 : k == CLI_HELP ? 1 : 2;
}

int finetune_parse(finetune_opts *o, int argc, char **argv) {
    const cli_command *c = &finetune_command;
    tool = c->name;
    defaults(o);
    int rc = args_pass(o, c, argc, argv, CHECK_ARGS);         /* help and syntax before any file */
    if (!rc) rc = args_pass(o, c, argc, argv, APPLY_CONFIGS); /* then the command line wins */
    if (!rc) rc = args_pass(o, c, argc, argv, APPLY_OTHERS);
    return rc ? rc : check(o);
}
