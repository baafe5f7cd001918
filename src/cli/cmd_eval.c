/* cmd_eval.c: `graft eval --model M.onnx --data DIR`: accuracy, per-class metrics, confusion, on
 * images or (a text model, see text_model.c) texts. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_args.h"
#include "cli_util.h"
#include "commands.h"
#include "image_prep.h"
#include "text_model.h"

#define CMD "eval"

typedef struct {
    const char *model, *data;
    long batch, threads;
    int json;
    text_overrides text;
    const char *text_column, *label_column;
    int pad_max;     /* --pad max */
    int fast_decode; /* --fast-decode */
    int text_only;   /* an option only a text model takes was given */
} eval_args;

typedef struct {
    graft_ctx *ctx;
    graft_model *model;
    graft_dataset *ds;
    char **classes;     /* the model's names (graft.classes), or NULL */
    int n_names;        /* entries of classes */
    int n_classes;      /* the model's output width */
    int *map;           /* data set class -> model class */
    int64_t *confusion; /* (n_classes, n_classes): rows true, columns predicted */
    int64_t n, correct, top5;
    double seconds;
    int is_text;     /* the model takes token ids: the data is text */
    text_model text; /* its tokenizer and inputs */
} evaluation;

static const char *const paddings[] = {"longest", "max", NULL};

static const cli_option eval_options[] = {
    {"model", "M.onnx", NULL, NULL, NULL, "the model (required)"},
    {"data", "DIR", NULL, NULL, NULL,
     "the labelled folder, or for a text model a .csv/.tsv file with text and label columns "
     "(required)"},
    {"batch", "N", "32", NULL, NULL, "images or texts per model run"},
    {"threads", "N", "0: all cores", NULL, NULL, "decoding and compute threads"},
    {"json", NULL, NULL, NULL, NULL,
     "one JSON object instead of tables: samples, correct, accuracy, top5_accuracy (null under "
     "5 classes), classes [{name, precision, recall, f1, support}], macro {precision, recall, "
     "f1}, confusion (rows: true class, columns: predicted), skipped [{path, reason}]"},
    {"fast-decode", NULL, NULL, NULL, "image models",
     "decode large JPEGs at reduced size (faster, not Pillow's pixels; see graft finetune --help)"},
    {"text-column", "NAME", "text", NULL, "text models", "the texts' column of a .csv/.tsv file"},
    {"label-column", "NAME", "label", NULL, NULL, "the labels' column of a .csv/.tsv file"},
    {"vocab", "FILE", NULL, NULL, NULL,
     "the tokenizer, for a model that carries none: BERT's vocab.txt, a Hugging Face "
     "tokenizer.json, vocab.json + merges.txt, a SentencePiece .model or their folder (default: "
     "the one the model carries, graft.text.*)"},
    {"tokenizer", "FILE", NULL, NULL, NULL, "the same as --vocab"},
    {"cased", NULL, NULL, NULL, NULL, "keep case and accents (default: as the model says)"},
    {"max-len", "N", NULL, NULL, NULL,
     "tokens per text, [CLS] and [SEP] included (default: the model's graft.text.max_len)"},
    {"pad", "longest|max", "longest", paddings, NULL,
     "pad each batch to its longest text, or every text to --max-len (the same results up to "
     "float rounding; a model whose input takes a fixed length always gets max)"},
};

static const cli_command eval_command = {
    .name = "eval",
    .usage = "--model M.onnx --data DIR [options]",
    .about = "Measures an exported classifier on a labelled image folder in the ImageFolder "
             "layout (DIR/<class>/<image>): accuracy, top-5 accuracy (models with 5 or more "
             "classes), precision, recall and F1 per class with their macro averages, and the "
             "confusion matrix.\n\n"
             "Class folders are searched recursively and images preprocessed as graft predict "
             "--help says (`graft info` shows the preprocessing). The folder's class names must "
             "be the model's (metadata graft.classes; their order may differ); a model without "
             "class names must have as many outputs as the folder has classes, matched by "
             "sorted folder name. Files that cannot be read, or are in image formats graft does "
             "not decode, are skipped and listed.\n\n"
             "A model whose inputs are token ids (one `graft finetune --vocab` wrote) is measured "
             "on labelled text instead: a folder DIR/<class>/*.txt or a .csv/.tsv file with text "
             "and label columns, tokenized as the model's metadata says (graft.text.*; see graft "
             "predict --help); rows that cannot be read are skipped and listed.",
    .options = eval_options,
    .n_options = CLI_COUNT(eval_options),
    .examples = "graft eval --model digits.onnx --data examples/digits/val\n"
                "graft eval --model pets.onnx --data=pets/test --json > metrics.json\n"
                "graft eval --model reviews.onnx --data reviews_test.csv",
    .writes = "The tables (or the JSON object) on stdout, the same whether or not it is a "
              "terminal; no files.",
    .exit_status = "0 on success, 1 when the model or data cannot be used, 2 for bad usage.",
};

/* The options only a text model takes: 1 when name is one, -1 after a bad value, else 0. */
static int text_option(eval_args *a, const char *name, const char *v) {
    if (strcmp(name, "vocab") == 0 || strcmp(name, "tokenizer") == 0)
        a->text.vocab = v;
    else if (strcmp(name, "cased") == 0)
        a->text.cased = 1;
    else if (strcmp(name, "text-column") == 0)
        a->text_column = v;
    else if (strcmp(name, "label-column") == 0)
        a->label_column = v;
    else if (strcmp(name, "pad") == 0)
        a->pad_max = strcmp(v, "max") == 0;
    else if (strcmp(name, "max-len") == 0) {
        if (cli_int(CMD, "--max-len", v, 3, 8192, &a->text.max_len)) return -1;
    } else
        return 0;
    a->text_only = 1;
    return 1;
}

static int parse_args(int argc, char **argv, eval_args *a) {
    *a = (eval_args){NULL, NULL, 32, 0, 0, {NULL, 0, 0}, "text", "label", 0, 0, 0};
    const cli_option *o;
    const char *v;
    cli_parser p;
    int k, bad;
    cli_parser_init(&p, &eval_command, NULL, argc, argv);
    while ((k = cli_next(&p, &o, &v)) > 0) {
        if (k == CLI_POSITIONAL)
            return cli_error(CMD, "unexpected argument '%s' (see graft eval --help)", v);
        if (strcmp(o->name, "json") == 0)
            a->json = 1;
        else if (strcmp(o->name, "fast-decode") == 0)
            a->fast_decode = 1;
        else if (strcmp(o->name, "model") == 0)
            a->model = v;
        else if (strcmp(o->name, "data") == 0)
            a->data = v;
        else if ((bad = text_option(a, o->name, v)) != 0) {
            if (bad < 0) return 2;
        } else if (strcmp(o->name, "batch") == 0) {
            if (cli_int(CMD, "--batch", v, 1, 65536, &a->batch)) return 2;
        } else if (cli_int(CMD, "--threads", v, 0, 4096, &a->threads))
            return 2;
    }
    if (k < 0) return cli_stop_status(k);
    if (!a->model) return cli_error(CMD, "no --model given (see graft eval --help)");
    if (!a->data) return cli_error(CMD, "no --data folder given (see graft eval --help)");
    return -1;
}

/* The model's output width, from its declared shape or the class list. */
static int output_width(const evaluation *e) {
    graft_value_info v;
    if (graft_model_output_count(e->model) < 1 ||
        graft_model_output_info(e->model, 0, &v) != GRAFT_OK)
        return cli_error(CMD, "the model has no outputs"), -1;
    if (v.ndim != 2) return cli_error(CMD, "output '%s' is not (batch, classes)", v.name), -1;
    if (v.dims[1] > 0 && e->classes && v.dims[1] != e->n_names)
        return cli_error(CMD, "the model's metadata names %d classes but output '%s' has %lld",
                         e->n_names, v.name, (long long)v.dims[1]),
               -1;
    if (v.dims[1] <= 0 && !e->classes)
        return cli_error(CMD,
                         "output '%s' has no fixed class count and the model no class "
                         "names",
                         v.name),
               -1;
    return v.dims[1] > 0 ? (int)v.dims[1] : e->n_names;
}

static int find_name(char **names, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return i;
    return -1;
}

/* Map the data set's classes onto the model's; a difference is an error naming it. */
static int match_classes(evaluation *e) {
    int k = graft_dataset_class_count(e->ds);
    if (!(e->map = malloc(sizeof *e->map * (size_t)k))) return cli_error(CMD, "out of memory"), -1;
    if (!e->classes) {
        for (int c = 0; c < k; c++) e->map[c] = c;
        if (k == e->n_classes) return 0;
        return cli_error(CMD, "the data has %d classes but the model outputs %d (and names none)",
                         k, e->n_classes),
               -1;
    }
    for (int c = 0; c < k; c++) {
        const char *name = graft_dataset_class_name(e->ds, c);
        if ((e->map[c] = find_name(e->classes, e->n_classes, name)) < 0)
            return cli_error(CMD, "the data's class '%s' is not one of the model's classes", name),
                   -1;
    }
    for (int c = 0; c < e->n_classes; c++) {
        int found = 0;
        for (int d = 0; d < k && !found; d++) found = e->map[d] == c;
        if (!found)
            return cli_error(CMD, "the model's class '%s' has no folder in the data",
                             e->classes[c]),
                   -1;
    }
    return 0;
}

static int64_t label_at(const graft_tensor *labels, int64_t i) {
    if (labels->dtype == GRAFT_DTYPE_I32) return ((const int32_t *)labels->data)[i];
    return ((const int64_t *)labels->data)[i];
}

/* Count one batch's predictions into the confusion matrix. */
static int score_batch(evaluation *e, const graft_tensor *labels, int64_t rows) {
    const graft_tensor *out;
    if (graft_model_output(e->model, 0, &out) != GRAFT_OK)
        return cli_error(CMD, "%s", graft_last_error(e->ctx)), -1;
    if (out->dtype != GRAFT_DTYPE_F32 || out->ndim != 2 || out->dims[0] != rows ||
        out->dims[1] != e->n_classes)
        return cli_error(CMD, "the model's output is not (%lld, %d) float32 scores",
                         (long long)rows, e->n_classes),
               -1;
    int k = e->n_classes < 5 ? e->n_classes : 5, top[5];
    for (int64_t i = 0; i < rows; i++) {
        const float *row = (const float *)out->data + i * e->n_classes;
        int64_t data_label = label_at(labels, i);
        int truth = e->map[data_label];
        cli_top_k(row, e->n_classes, k, top);
        e->confusion[(int64_t)truth * e->n_classes + top[0]]++;
        e->correct += top[0] == truth;
        for (int j = 0; j < k; j++) e->top5 += top[j] == truth;
        e->n++;
    }
    return 0;
}

static int run_all(evaluation *e, const eval_args *a) {
    graft_batch_source src;
    if (graft_dataset_source(e->ds, (int)a->threads, 2, 0, &src) != GRAFT_OK)
        return cli_error(CMD, "%s", graft_last_error(e->ctx)), -1;
    graft_named_tensor *inputs = calloc((size_t)(src.n_inputs ? src.n_inputs : 1), sizeof *inputs);
    unsigned char *kept = malloc((size_t)a->batch);
    int rc = inputs && kept ? 0 : (cli_error(CMD, "out of memory"), -1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int64_t start = 0; rc == 0 && start < src.n_samples; start += a->batch) {
        int64_t count = src.n_samples - start < a->batch ? src.n_samples - start : a->batch;
        graft_tensor labels;
        if (src.read(src.user, start, count, inputs, &labels, kept) != GRAFT_OK) {
            cli_error(CMD, "%s", graft_last_error(e->ctx));
            rc = -1;
            break;
        }
        int64_t got = 0;
        for (int64_t i = 0; i < count; i++) got += kept[i] != 0;
        if (!got) continue;
        if (graft_model_run(e->model, inputs, src.n_inputs) != GRAFT_OK) {
            cli_error(CMD, "%s", graft_last_error(e->ctx));
            rc = -1;
        } else
            rc = score_batch(e, &labels, got);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    e->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    free(inputs);
    free(kept);
    return rc;
}

static const char *name_of(const evaluation *e, int c) {
    return e->classes ? e->classes[c] : graft_dataset_class_name(e->ds, c);
}

/* Precision, recall and F1 of class c; *support gets its true count. */
static void class_metrics(const evaluation *e, int c, double m[3], int64_t *support) {
    int64_t tp = e->confusion[(int64_t)c * e->n_classes + c], pred = 0, truth = 0;
    for (int j = 0; j < e->n_classes; j++) {
        pred += e->confusion[(int64_t)j * e->n_classes + c];
        truth += e->confusion[(int64_t)c * e->n_classes + j];
    }
    m[0] = pred ? (double)tp / (double)pred : 0;
    m[1] = truth ? (double)tp / (double)truth : 0;
    m[2] = m[0] + m[1] > 0 ? 2 * m[0] * m[1] / (m[0] + m[1]) : 0;
    *support = truth;
}

static void print_json(const evaluation *e) {
    double acc = e->n ? (double)e->correct / (double)e->n : 0, macro[3] = {0};
    printf("{\n  \"samples\": %lld,\n  \"correct\": %lld,\n  \"accuracy\": %.6f,\n",
           (long long)e->n, (long long)e->correct, acc);
    if (e->n_classes >= 5)
        printf("  \"top5_accuracy\": %.6f,\n", e->n ? (double)e->top5 / (double)e->n : 0);
    else
        printf("  \"top5_accuracy\": null,\n");
    printf("  \"seconds\": %.3f,\n  \"classes\": [", e->seconds);
    for (int c = 0; c < e->n_classes; c++) {
        double m[3];
        int64_t support;
        class_metrics(e, c, m, &support);
        for (int j = 0; j < 3; j++) macro[j] += m[j] / e->n_classes;
        printf("%s\n    {\"name\": ", c ? "," : "");
        cli_json_string(stdout, name_of(e, c));
        printf(", \"precision\": %.6f, \"recall\": %.6f, \"f1\": %.6f, \"support\": %lld}", m[0],
               m[1], m[2], (long long)support);
    }
    printf("\n  ],\n  \"macro\": {\"precision\": %.6f, \"recall\": %.6f, \"f1\": %.6f},\n",
           macro[0], macro[1], macro[2]);
    printf("  \"confusion\": [");
    for (int r = 0; r < e->n_classes; r++) {
        printf("%s\n    [", r ? "," : "");
        for (int c = 0; c < e->n_classes; c++)
            printf("%s%lld", c ? ", " : "", (long long)e->confusion[(int64_t)r * e->n_classes + c]);
        printf("]");
    }
    printf("\n  ],\n  \"skipped\": [");
    for (int64_t i = 0; i < graft_dataset_skipped_count(e->ds); i++) {
        const char *path = "", *why = "";
        graft_dataset_skipped(e->ds, i, &path, &why);
        printf("%s\n    {\"path\": ", i ? "," : "");
        cli_json_string(stdout, path);
        printf(", \"reason\": ");
        cli_json_string(stdout, why);
        printf("}");
    }
    printf("%s]\n}\n", graft_dataset_skipped_count(e->ds) ? "\n  " : "");
}

static int name_width(const evaluation *e) {
    int w = 5;
    for (int c = 0; c < e->n_classes; c++) {
        int len = (int)strlen(name_of(e, c));
        if (len > w) w = len;
    }
    return w;
}

static void print_confusion(const evaluation *e, int w) {
    int cw = 5;
    for (int c = 0; c < e->n_classes; c++) {
        int len = (int)strlen(name_of(e, c));
        if (len + 1 > cw) cw = len + 1;
    }
    printf("\nconfusion matrix (rows: true class, columns: predicted class)\n%-*s", w, "");
    for (int c = 0; c < e->n_classes; c++) printf(" %*s", cw, name_of(e, c));
    printf("\n");
    for (int r = 0; r < e->n_classes; r++) {
        printf("%-*s", w, name_of(e, r));
        for (int c = 0; c < e->n_classes; c++)
            printf(" %*lld", cw, (long long)e->confusion[(int64_t)r * e->n_classes + c]);
        printf("\n");
    }
}

static void print_text(const evaluation *e, const eval_args *a) {
    int64_t skipped = graft_dataset_skipped_count(e->ds);
    const char *what = e->is_text ? "texts" : "images";
    printf("model      %s\ndata       %s: %lld %s in %d classes, %lld skipped\n", a->model, a->data,
           (long long)e->n, what, graft_dataset_class_count(e->ds), (long long)skipped);
    printf("accuracy   %.4f (%lld of %lld)\n", e->n ? (double)e->correct / (double)e->n : 0,
           (long long)e->correct, (long long)e->n);
    if (e->n_classes >= 5) printf("top-5      %.4f\n", e->n ? (double)e->top5 / (double)e->n : 0);
    printf("time       %.2f s (%.0f %s/s)\n\n", e->seconds,
           e->seconds > 0 ? (double)e->n / e->seconds : 0, what);
    int w = name_width(e);
    double macro[3] = {0};
    printf("%-*s  precision  recall      f1  support\n", w, "class");
    for (int c = 0; c < e->n_classes; c++) {
        double m[3];
        int64_t support;
        class_metrics(e, c, m, &support);
        for (int j = 0; j < 3; j++) macro[j] += m[j] / e->n_classes;
        printf("%-*s  %9.4f  %6.4f  %6.4f  %7lld\n", w, name_of(e, c), m[0], m[1], m[2],
               (long long)support);
    }
    printf("%-*s  %9.4f  %6.4f  %6.4f  %7lld\n", w, "macro", macro[0], macro[1], macro[2],
           (long long)e->n);
    print_confusion(e, w);
    for (int64_t i = 0; i < skipped; i++) {
        const char *path = "", *why = "";
        graft_dataset_skipped(e->ds, i, &path, &why);
        printf("%sskipped %s: %s\n", i ? "" : "\n", path, why);
    }
}

/* The labelled texts, tokenized as the model says. */
static int open_text(evaluation *e, const eval_args *a) {
    if (text_model_open(CMD, e->ctx, e->model, &a->text, &e->text) != 0) return -1;
    graft_text_options t = e->text.data;
    t.text_column = a->text_column, t.label_column = a->label_column;
    if (a->pad_max) t.pad_to_longest = 0;
    /* Texts padded per batch run in order of length (the metrics do not depend on it). */
    if (graft_dataset_open_text(e->ctx, a->data, &t, &e->ds) != GRAFT_OK ||
        graft_dataset_set_input_names(e->ds, e->text.input, TEXT_ROLES) != GRAFT_OK ||
        (t.pad_to_longest && graft_dataset_sort_by_length(e->ds, (int)a->threads) != GRAFT_OK))
        return cli_error(CMD, "%s", graft_last_error(e->ctx)), -1;
    return 0;
}

static int setup(evaluation *e, const eval_args *a) {
    image_prep prep;
    if (!(e->ctx = cli_ctx(CMD, (int)a->threads, NULL))) return -1;
    if (graft_model_load(e->ctx, a->model, &e->model) != GRAFT_OK)
        return cli_error(CMD, "%s", graft_last_error(e->ctx)), -1;
    e->is_text = text_model_detect(e->model);
    if (!e->is_text && image_prep_resolve(&prep, e->ctx, e->model, NULL, NULL) != 0)
        return cli_error(CMD, "%s", prep.error), -1;
    if (!e->is_text) prep.o.fast_decode = a->fast_decode;
    if (cli_model_classes(CMD, e->model, &e->classes, &e->n_names) != 0 ||
        (e->n_classes = output_width(e)) < 0)
        return -1;
    if (e->is_text) {
        if (open_text(e, a) != 0) return -1;
    } else if (a->text_only) {
        return cli_error(CMD,
                         "--text-column, --label-column, --vocab, --cased, --max-len and --pad "
                         "are for text models; %s takes images",
                         a->model),
               -1;
    } else if (graft_dataset_open_images(e->ctx, a->data, &prep.o, &e->ds) != GRAFT_OK) {
        return cli_error(CMD, "%s", graft_last_error(e->ctx)), -1;
    }
    if (match_classes(e) != 0) return -1;
    e->confusion = calloc((size_t)e->n_classes * (size_t)e->n_classes, sizeof *e->confusion);
    if (!e->confusion) return cli_error(CMD, "out of memory"), -1;
    return 0;
}

int cmd_eval(int argc, char **argv) {
    eval_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != -1) return rc;
    evaluation e = {0};
    rc = 1;
    if (setup(&e, &a) == 0 && run_all(&e, &a) == 0) {
        if (a.json)
            print_json(&e);
        else
            print_text(&e, &a);
        rc = 0;
    }
    free(e.confusion);
    free(e.map);
    graft_dataset_free(e.ds);
    text_model_close(&e.text);
    cli_free_classes(e.classes, e.n_names);
    graft_model_free(e.model);
    graft_ctx_free(e.ctx);
    return rc;
}
