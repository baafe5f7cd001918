/* cmd_predict.c: `graft predict --model M.onnx FILE_OR_DIR...`: top-k classes of image files or
 * of texts (text_predict.c reads and runs those). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_args.h"
#include "cli_util.h"
#include "commands.h"
#include "image_prep.h"
#include "text_predict.h"

#define CMD "predict"

enum { FORMAT_TEXT, FORMAT_CSV, FORMAT_JSONL };

typedef struct {
    const char *model;
    long top_k, batch, threads;
    int format;
    char **paths; /* FILE_OR_DIR arguments (argv entries) */
    int n_paths;
    text_overrides text;      /* --vocab, --cased, --max-len */
    const char *text_column;  /* --text-column */
    int pad_max;              /* --pad max */
    int fast_decode;          /* --fast-decode */
    text_source *sources;     /* for a text model: the arguments, --lines and --text in order */
    int n_sources, text_only; /* text_only: an option only a text model takes was given */
} predict_args;

typedef struct {
    char **v;
    size_t n, cap;
} file_list;

typedef struct {
    graft_ctx *ctx;
    graft_model *model;
    image_prep prep; /* prep.o: the preprocessing; prep.sample: elements of one image */
    char **classes;
    int n_classes;
    const predict_args *a;
    int64_t printed;
} predictor;

static const char *const formats[] = {"text", "csv", "jsonl", NULL};
static const char *const paddings[] = {"longest", "max", NULL};

static const cli_option predict_options[] = {
    {"model", "M.onnx", NULL, NULL, NULL, "the model (required)"},
    {"top-k", "K", "5", NULL, NULL,
     "classes to print per image, 1 or more (at most the number of classes)"},
    {"format", "FMT", "text", formats, NULL,
     "text: 'FILE: CLASS P%, CLASS P%, ...' per image; csv: a header "
     "'file,rank,class,index,probability', then one row per image and rank; jsonl: one JSON "
     "object per image: {\"file\": ..., \"top\": [{\"class\": ..., \"index\": I, "
     "\"probability\": P}]}"},
    {"batch", "N", "32", NULL, NULL, "images or texts per model run"},
    {"threads", "N", "0: all cores", NULL, NULL, "compute threads"},
    {"fast-decode", NULL, NULL, NULL, "image models",
     "decode large JPEGs at reduced size (faster, not Pillow's pixels; see graft finetune --help)"},
    {"lines", "FILE|-", NULL, NULL, "text models",
     "classify each line of FILE (- : standard input) as one text"},
    {"text", "STRING", NULL, NULL, NULL, "classify STRING (may be given several times)"},
    {"text-column", "NAME", "text", NULL, NULL, "the column of a .csv/.tsv file's texts"},
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

static const cli_command predict_command = {
    .name = "predict",
    .usage = "--model M.onnx [options] FILE_OR_DIR...\n"
             "--model TEXT.onnx [options] [FILE.txt|DIR|FILE.csv|-]... [--lines FILE] "
             "[--text STRING]",
    .about =
        "Classifies images with an exported model (one `graft finetune` or `graft export` "
        "wrote) and prints the K most likely classes of each, with their probabilities.\n\n"
        "Each FILE is read as an image (JPEG or PNG); each DIR is searched recursively as "
        "torchvision's ImageFolder does: files named *.jpg, *.jpeg, *.png (any case; .bmp, "
        ".ppm, .pgm, .tif, .tiff and .webp are skipped with a warning), sorted by folder then "
        "name, hidden files and folders left out, a folder reached again through a link not "
        "entered. Images are preprocessed as the model's metadata says (graft.image.resize, "
        ".crop, .grayscale, .mean, .std), else as its input shape fixes (crop H, resize "
        "H/0.875 as timm does), else ImageNet's 256/224; `graft info` shows which. Class names "
        "come from the metadata "
        "graft.classes; a model without them gets class indices. A model whose output is logits "
        "gets a softmax; one whose output is named \"probabilities\" (or whose rows sum to 1) "
        "is taken as it is.\n\n"
        "A model whose inputs are token ids (one `graft finetune --vocab` wrote) classifies "
        "texts instead, tokenized as its metadata says (graft.text.vocab, .tokenizer, .bpe or "
        ".sentencepiece, .cased, .max_len, .inputs): each FILE is one text, each DIR is searched "
        "recursively for *.txt "
        "files, a "
        ".csv or .tsv file gives the texts of its --text-column, and - (or no argument at all, "
        "with standard input not a terminal) the lines of standard input, one text each. Texts "
        "are named FILE, FILE:LINE (CSV rows and lines; stdin:LINE) or text:N (--text) in the "
        "output.",
    .options = predict_options,
    .n_options = CLI_COUNT(predict_options),
    .examples =
        "graft predict --model digits.onnx examples/digits/val\n"
        "graft predict --model pets.onnx --top-k=1 --format csv photos/ > predictions.csv\n"
        "graft predict --model reviews.onnx --text 'Great value, would buy again'\n"
        "graft predict --model reviews.onnx --format jsonl new_reviews.csv > predictions.jsonl",
    .writes = "The predictions on stdout, the same whether or not it is a terminal; no files. A "
              "file that cannot be read or decoded (or an empty text, a CSV row that cannot be "
              "read) gets a warning on stderr naming it and is left out; the rest go on.",
    .exit_status = "0 when every image was classified, 1 when some could not be read or the "
                   "model failed, 2 for bad usage (unknown option, bad value, missing file).",
};

/* The options only a text model takes: 1 when n is one (*bad set on a bad value), else 0. */
static int text_option(predict_args *a, const char *n, const char *v, int *bad) {
    text_source_kind kind = !strcmp(n, "lines") ? TEXT_FROM_LINES : TEXT_FROM_ARG;
    if (!strcmp(n, "vocab") || !strcmp(n, "tokenizer"))
        a->text.vocab = v;
    else if (!strcmp(n, "cased"))
        a->text.cased = 1;
    else if (!strcmp(n, "max-len"))
        *bad = cli_int(CMD, "--max-len", v, 3, 8192, &a->text.max_len) != 0;
    else if (!strcmp(n, "text-column"))
        a->text_column = v;
    else if (!strcmp(n, "pad"))
        a->pad_max = !strcmp(v, "max");
    else if (!strcmp(n, "lines") || !strcmp(n, "text"))
        a->sources[a->n_sources++] = (text_source){kind, v};
    else
        return 0;
    a->text_only = 1;
    return 1;
}

/* Returns -1 to go on, else the exit status (0 after --help). */
static int parse_args(int argc, char **argv, predict_args *a, char **paths, text_source *sources) {
    *a = (predict_args){.top_k = 5,
                        .batch = 32,
                        .format = FORMAT_TEXT,
                        .paths = paths,
                        .text_column = "text",
                        .sources = sources};
    const cli_option *o;
    const char *v;
    cli_parser p;
    int k;
    cli_parser_init(&p, &predict_command, NULL, argc, argv);
    while ((k = cli_next(&p, &o, &v)) > 0) {
        const char *n = o ? o->name : "";
        int bad = 0;
        if (k == CLI_POSITIONAL) {
            a->paths[a->n_paths++] = (char *)v;
            a->sources[a->n_sources++] = (text_source){TEXT_FROM_PATH, v};
        } else if (text_option(a, n, v, &bad)) {
            if (bad) return 2;
        } else if (strcmp(n, "model") == 0)
            a->model = v;
        else if (strcmp(n, "top-k") == 0) {
            if (cli_int(CMD, "--top-k", v, 1, 1000000, &a->top_k)) return 2;
        } else if (strcmp(n, "batch") == 0) {
            if (cli_int(CMD, "--batch", v, 1, 65536, &a->batch)) return 2;
        } else if (strcmp(n, "threads") == 0) {
            if (cli_int(CMD, "--threads", v, 0, 4096, &a->threads)) return 2;
        } else if (strcmp(n, "fast-decode") == 0) {
            a->fast_decode = 1;
        } else {
            a->format = cli_choice(CMD, o, v); /* FORMAT_* in the order of formats[] */
        }
    }
    if (k < 0) return cli_stop_status(k);
    if (!a->model) return cli_error(CMD, "no --model given (see graft predict --help)");
    return -1;
}

static int list_add(file_list *l, const char *path) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v, l->cap = cap;
    }
    return (l->v[l->n] = strdup(path)) ? (int)(++l->n, 0) : -1;
}

/* The files of one folder argument (graft_image_files: ImageFolder's rules); what it left out
 * is a warning each; what may hold an image makes *some_skipped 1 (a repeat, a link loop or a
 * file reached twice, does not: nothing is lost). */
static int add_folder(graft_ctx *ctx, const char *dir, file_list *out, int *some_skipped) {
    graft_file_list *l;
    if (graft_image_files(ctx, dir, &l) != GRAFT_OK)
        return cli_error(CMD, "%s", graft_last_error(ctx)), -1;
    int rc = 0;
    for (int64_t i = 0; i < graft_file_list_note_count(l); i++) {
        const char *path, *why;
        int skipped;
        graft_file_list_note(l, i, &path, &why, &skipped);
        fprintf(stderr, "graft predict: warning: skipped '%s': %s\n", path, why);
        *some_skipped |= skipped;
    }
    for (int64_t i = 0; i < graft_file_list_count(l) && rc == 0; i++)
        if (list_add(out, graft_file_list_path(l, i)) != 0)
            rc = (cli_error(CMD, "out of memory"), -1);
    if (rc == 0 && graft_file_list_count(l) == 0)
        rc = (cli_error(CMD, "no image files under '%s'", dir), -1);
    graft_file_list_free(l);
    return rc;
}

/* A FILE argument is read whatever its name; a DIR gives its image files. */
static int collect_files(graft_ctx *ctx, const predict_args *a, file_list *out, int *some_skipped) {
    for (int i = 0; i < a->n_paths; i++) {
        struct stat st;
        if (stat(a->paths[i], &st) != 0)
            return cli_error(CMD, "cannot read '%s': %s", a->paths[i], strerror(errno)), -1;
        if (S_ISDIR(st.st_mode)) {
            if (add_folder(ctx, a->paths[i], out, some_skipped) != 0) return -1;
        } else if (list_add(out, a->paths[i]) != 0) {
            return cli_error(CMD, "out of memory"), -1;
        }
    }
    return 0;
}

static const char *class_name(const predictor *p, int c, char *buf, size_t size) {
    if (c < p->n_classes) return p->classes[c];
    snprintf(buf, size, "%d", c);
    return buf;
}

static void print_csv_field(const char *s) {
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, stdout);
        return;
    }
    putchar('"');
    for (; *s; s++) {
        if (*s == '"') putchar('"');
        putchar(*s);
    }
    putchar('"');
}

static void print_one(predictor *p, const char *file, const float *probs, const int *top, int k) {
    char buf[32];
    if (p->a->format == FORMAT_CSV && p->printed++ == 0)
        printf("file,rank,class,index,probability\n");
    if (p->a->format == FORMAT_TEXT) printf("%s:", file);
    if (p->a->format == FORMAT_JSONL) {
        printf("{\"file\": ");
        cli_json_string(stdout, file);
        printf(", \"top\": [");
    }
    for (int r = 0; r < k; r++) {
        const char *name = class_name(p, top[r], buf, sizeof buf);
        double pr = probs[top[r]];
        if (p->a->format == FORMAT_TEXT) {
            printf("%s %s %.1f%%", r ? "," : "", name, 100 * pr);
        } else if (p->a->format == FORMAT_CSV) {
            print_csv_field(file);
            printf(",%d,", r + 1);
            print_csv_field(name);
            printf(",%d,%.6g\n", top[r], pr);
        } else {
            printf("%s{\"class\": ", r ? ", " : "");
            cli_json_string(stdout, name);
            printf(", \"index\": %d, \"probability\": %.6g}", top[r], pr);
        }
    }
    if (p->a->format == FORMAT_TEXT) printf("\n");
    if (p->a->format == FORMAT_JSONL) printf("]}\n");
}

/* Print the top classes of the n inputs (images or texts) the model has just run on. */
static int print_outputs(predictor *p, char **files, int n) {
    const graft_tensor *out;
    graft_value_info info;
    if (graft_model_output(p->model, 0, &out) != GRAFT_OK) {
        fprintf(stderr, "graft predict: %s\n", graft_last_error(p->ctx));
        return 1;
    }
    graft_model_output_info(p->model, 0, &info);
    if (out->dtype != GRAFT_DTYPE_F32 || out->ndim != 2 || out->dims[0] != n) {
        fprintf(stderr, "graft predict: output '%s' is not (batch, classes) float32 scores\n",
                info.name);
        return 1;
    }
    int64_t cols = out->dims[1];
    const float *scores = out->data;
    int is_probs = cli_output_is_probabilities(info.name, scores, n, cols);
    int k = p->a->top_k < cols ? (int)p->a->top_k : (int)cols;
    float *probs = malloc(sizeof *probs * (size_t)cols);
    int *top = malloc(sizeof *top * (size_t)(k ? k : 1));
    if (!probs || !top) {
        free(probs), free(top);
        return fprintf(stderr, "graft predict: out of memory\n"), 1;
    }
    for (int i = 0; i < n; i++) {
        cli_row_probabilities(scores + (int64_t)i * cols, cols, is_probs, probs);
        cli_top_k(probs, cols, k, top);
        print_one(p, files[i], probs, top, k);
    }
    free(probs), free(top);
    return 0;
}

/* Run the model on n loaded images and print their top classes. */
static int run_batch(predictor *p, void *data, char **files, int n) {
    graft_named_tensor in = {p->prep.o.input_name, {p->prep.o.dtype, 4, {0}, data}};
    int c = p->prep.o.grayscale ? 1 : 3;
    int64_t s = p->prep.o.crop;
    int64_t dims[4] = {n, c, s, s}, nhwc[4] = {n, s, s, c};
    memcpy(in.tensor.dims, p->prep.o.nhwc ? nhwc : dims, sizeof dims);
    if (graft_model_run(p->model, &in, 1) != GRAFT_OK) {
        fprintf(stderr, "graft predict: %s\n", graft_last_error(p->ctx));
        return 1;
    }
    return print_outputs(p, files, n);
}

static int print_text_batch(void *user, char **names, int n) {
    int rc = print_outputs(user, names, n);
    fflush(stdout);
    return rc;
}

/* Load, run and print every file, batch by batch; returns the exit status. */
static int predict_all(predictor *p, const file_list *files) {
    size_t esize = graft_dtype_size(p->prep.o.dtype), bytes = esize * (size_t)p->prep.sample;
    char *data = malloc(bytes * (size_t)p->a->batch);
    char **names = malloc(sizeof *names * (size_t)p->a->batch);
    int rc = 0;
    if (!data || !names) rc = 1, fprintf(stderr, "graft predict: out of memory\n");
    for (size_t at = 0; !(rc & 2) && data && names && at < files->n;) {
        int n = 0;
        for (; at < files->n && n < p->a->batch; at++) {
            if (graft_image_load(p->ctx, files->v[at], &p->prep.o, data + bytes * (size_t)n,
                                 bytes) != GRAFT_OK) {
                const char *why = graft_last_error(p->ctx);
                if (strstr(why, files->v[at]))
                    fprintf(stderr, "graft predict: warning: skipped: %s\n", why);
                else
                    fprintf(stderr, "graft predict: warning: skipped '%s': %s\n", files->v[at],
                            why);
                rc |= 1;
                continue;
            }
            names[n++] = files->v[at];
        }
        if (n && run_batch(p, data, names, n) != 0) rc |= 3;
        fflush(stdout);
    }
    free(data);
    free(names);
    return rc ? 1 : 0;
}

static int check_classes(const predictor *p) {
    graft_value_info v;
    if (graft_model_output_count(p->model) < 1 ||
        graft_model_output_info(p->model, 0, &v) != GRAFT_OK)
        return cli_error(CMD, "the model has no outputs"), -1;
    if (v.ndim == 2 && v.dims[1] > 0 && p->n_classes && v.dims[1] != p->n_classes)
        return cli_error(CMD, "the model's metadata names %d classes but output '%s' has %lld",
                         p->n_classes, v.name, (long long)v.dims[1]),
               -1;
    return 0;
}

/* A text model: the texts of the arguments, --lines and --text; returns the exit status. */
static int predict_text(predictor *p) {
    text_model tm = {0};
    int rc = 1;
    if (cli_model_classes(CMD, p->model, &p->classes, &p->n_classes) == 0 &&
        check_classes(p) == 0 && text_model_open(CMD, p->ctx, p->model, &p->a->text, &tm) == 0) {
        text_predict_args ta = {p->a->sources, p->a->n_sources, p->a->text_column, p->a->batch,
                                p->a->pad_max};
        rc = text_predict(CMD, p->ctx, p->model, &tm, &ta, print_text_batch, p);
    }
    text_model_close(&tm);
    return rc;
}

/* An image model: the image files of the arguments; returns the exit status. */
static int predict_images(predictor *p, file_list *files) {
    if (p->a->text_only)
        return cli_error(CMD,
                         "--lines, --text, --text-column, --vocab, --cased, --max-len and --pad "
                         "are for text models; %s takes images",
                         p->a->model);
    if (!p->a->n_paths) return cli_error(CMD, "no image files or folders given");
    int some_skipped = 0;
    if (collect_files(p->ctx, p->a, files, &some_skipped) != 0) return 2;
    if (image_prep_resolve(&p->prep, p->ctx, p->model, NULL, NULL) != 0)
        return cli_error(CMD, "%s", p->prep.error), 1;
    p->prep.o.fast_decode = p->a->fast_decode;
    if (cli_model_classes(CMD, p->model, &p->classes, &p->n_classes) != 0 || check_classes(p) != 0)
        return 1;
    return predict_all(p, files) | some_skipped;
}

int cmd_predict(int argc, char **argv) {
    predict_args a;
    size_t slots = (size_t)(argc > 1 ? argc : 1);
    char **paths = malloc(sizeof *paths * slots);
    text_source *sources = malloc(sizeof *sources * slots);
    if (!paths || !sources) return free(paths), free(sources), cli_error(CMD, "out of memory"), 1;
    int rc = parse_args(argc, argv, &a, paths, sources);
    file_list files = {0};
    predictor p = {.a = &a};
    if (rc == -1 && !(p.ctx = cli_ctx(CMD, (int)a.threads, NULL))) rc = 1;
    if (rc == -1 && graft_model_load(p.ctx, a.model, &p.model) != GRAFT_OK) {
        cli_error(CMD, "%s", graft_last_error(p.ctx));
        rc = 1;
    }
    if (rc == -1) rc = text_model_detect(p.model) ? predict_text(&p) : predict_images(&p, &files);
    cli_free_classes(p.classes, p.n_classes);
    graft_model_free(p.model);
    graft_ctx_free(p.ctx);
    for (size_t i = 0; i < files.n; i++) free(files.v[i]);
    free(files.v);
    free(paths);
    free(sources);
    return rc;
}
