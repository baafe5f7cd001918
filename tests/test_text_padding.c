/* test_text_padding.c: a BERT's [CLS], pooler and mean-pooled features are the same (up to float
 * rounding) whether each batch is padded to its longest text or every text to max_len: the
 * attention mask hides the padding. argv[1]: the generated models (bert_tiny_decomposed.onnx),
 * argv[2]: a vocab.txt (its first 1000 entries: the tiny BERT's embedding rows). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graft.h"
#include "test_util.h"

enum { MAX_LEN = 24, BATCH = 4, VOCAB_ROWS = 1000 };

/* Texts of very different lengths, so batches are cut to different widths. */
static const char *const texts[] = {
    "good",    "a good movie with a long story that goes on and on and on",
    "bad",     "the day was fine",
    "sad",     "an awful film dull and long and slow and sad and poor in every way",
    "nice",    "happy day",
    "the end",
};
enum { N_TEXTS = sizeof texts / sizeof *texts };

/* The first VOCAB_ROWS lines of the vocabulary, in memory (*size bytes). */
static char *read_vocab(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap), line[1024];
    for (int lines = 0; buf && lines < VOCAB_ROWS && fgets(line, sizeof line, f); lines++) {
        size_t k = strlen(line);
        if (n + k + 1 > cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) break;
            buf = b;
        }
        memcpy(buf + n, line, k), n += k;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    *size = n;
    return buf;
}

/* Every sample's features (N_TEXTS, dim) into *out through the cut model; *widest gets the
 * widest batch's token count. */
/* The batches' widths: the narrowest, the widest, and whether each is a multiple of 8 or MAX_LEN
 * (padding to the longest text rounds up to a multiple of 8: src/data/text_pad.h). */
typedef struct widths {
    int64_t narrowest, widest;
    int rounded;
} widths;

static graft_status features(graft_ctx *ctx, graft_model *m, graft_dataset *ds, float **out,
                             int64_t *dim, widths *w) {
    graft_batch_source src;
    graft_named_tensor in[3];
    graft_tensor labels;
    unsigned char kept[BATCH];
    graft_status st = graft_dataset_source(ds, 1, 2, 0, &src);
    *out = NULL;
    *w = (widths){MAX_LEN + 1, 0, 1};
    for (int64_t at = 0; st == GRAFT_OK && at < src.n_samples; at += BATCH) {
        int64_t k = src.n_samples - at < BATCH ? src.n_samples - at : BATCH;
        const graft_tensor *f;
        st = src.read(src.user, at, k, in, &labels, kept);
        if (st == GRAFT_OK) st = graft_model_run(m, in, src.n_inputs);
        if (st == GRAFT_OK) st = graft_model_output(m, 0, &f);
        if (st != GRAFT_OK) break;
        int64_t width = in[0].tensor.dims[1];
        if (width > w->widest) w->widest = width;
        if (width < w->narrowest) w->narrowest = width;
        w->rounded &= width % 8 == 0 || width == MAX_LEN;
        *dim = f->dims[1];
        if (!*out && !(*out = malloc(sizeof(float) * (size_t)(N_TEXTS * *dim))))
            return GRAFT_E_OUT_OF_MEMORY;
        memcpy(*out + at * *dim, f->data, sizeof(float) * (size_t)(k * *dim));
    }
    (void)ctx;
    return st;
}

static double max_rel_diff(const float *a, const float *b, int64_t n) {
    double diff = 0, ref = 1e-12;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= diff)) diff = d;
        if (fabs(b[i]) > ref) ref = fabs(b[i]);
    }
    return diff / ref;
}

static void compare(graft_ctx *ctx, const char *model, const char *csv, const char *vocab,
                    size_t vocab_size, graft_pooling pooling, const char *name) {
    float *feat[2] = {NULL, NULL};
    int64_t dim = 0;
    widths widest[2] = {{0, 0, 0}, {0, 0, 0}};
    graft_status st = GRAFT_OK;
    for (int longest = 0; longest < 2 && st == GRAFT_OK; longest++) {
        graft_model *m = NULL;
        graft_dataset *ds = NULL;
        graft_text_options o = GRAFT_TEXT_OPTIONS_INIT;
        o.vocab_data = vocab, o.vocab_size = vocab_size, o.max_len = MAX_LEN;
        o.pad_to_longest = longest;
        st = graft_model_load(ctx, model, &m);
        if (st == GRAFT_OK) st = graft_model_cut(m, "auto", pooling);
        if (st == GRAFT_OK) st = graft_dataset_open_text(ctx, csv, &o, &ds);
        if (st == GRAFT_OK) st = features(ctx, m, ds, &feat[longest], &dim, &widest[longest]);
        graft_dataset_free(ds);
        graft_model_free(m);
    }
    char check[96];
    snprintf(check, sizeof check, "padding_%s_equal", name);
    double d = st == GRAFT_OK ? max_rel_diff(feat[1], feat[0], N_TEXTS * dim) : -1;
    printf("  %s: batches %lld and %lld..%lld tokens wide, max relative difference %g\n", name,
           (long long)widest[0].widest, (long long)widest[1].narrowest, (long long)widest[1].widest,
           d);
    /* The padded run must really be shorter, or the check compares a thing with itself. */
    CHECK(check,
          st == GRAFT_OK && widest[0].narrowest == MAX_LEN && widest[1].narrowest < MAX_LEN &&
              widest[1].rounded && d < 1e-5,
          "status %d (%s), widths %lld and %lld..%lld (multiples of 8: %d), max relative "
          "difference %g",
          st, st ? graft_last_error(ctx) : "", (long long)widest[0].widest,
          (long long)widest[1].narrowest, (long long)widest[1].widest, widest[1].rounded, d);
    free(feat[0]), free(feat[1]);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        printf("FAIL text_padding: usage: test_text_padding GEN_DIR VOCAB.txt\n");
        return 1;
    }
    char model[4096], csv[] = "/tmp/graft_text_padding_XXXXXX.csv";
    snprintf(model, sizeof model, "%s/bert_tiny_decomposed.onnx", argv[1]);
    if (access(model, R_OK) != 0) {
        MISSING("text_padding", model);
        return 1;
    }
    size_t vocab_size = 0;
    char *vocab = read_vocab(argv[2], &vocab_size);
    int fd = mkstemps(csv, 4);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!vocab || !f) {
        printf("FAIL text_padding: cannot read %s or write %s\n", argv[2], csv);
        return 1;
    }
    fprintf(f, "text,label\n");
    for (int i = 0; i < N_TEXTS; i++) fprintf(f, "%s,%s\n", texts[i], i % 2 ? "a" : "b");
    fclose(f);
    graft_ctx *ctx = NULL;
    graft_ctx_create(NULL, &ctx);
    compare(ctx, model, csv, vocab, vocab_size, GRAFT_POOLING_CLS, "cls");
    compare(ctx, model, csv, vocab, vocab_size, GRAFT_POOLING_POOLER, "pooler");
    compare(ctx, model, csv, vocab, vocab_size, GRAFT_POOLING_MEAN, "mean");
    graft_ctx_free(ctx);
    unlink(csv);
    free(vocab);
    return test_failures ? 1 : 0;
}
