/* test_text_dataset.c: text data sets through the public data API: a CSV with quoted fields and
 * bad rows and a class folder become BERT's three inputs (ids equal to the tokenizer's own
 * encoding, padded to max_len), labels per mode (class, multi-label), bad rows reported, and a
 * validation file with an unknown label has that row skipped; a vocabulary in memory works as its
 * file does; graft_text_list reads a CSV's texts without labels. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/data/wordpiece.h"
#include "graft.h"
#include "test_util.h"

enum { MAX_LEN = 16 };

static const char *data_dir = "tests/data";

static void csv_classes(graft_ctx *ctx, const char *vocab) {
    char path[1024];
    snprintf(path, sizeof path, "%s/text/basic.csv", data_dir);
    graft_text_options o = GRAFT_TEXT_OPTIONS_INIT;
    o.vocab_path = vocab, o.max_len = MAX_LEN;
    graft_dataset *ds = NULL;
    graft_status st = graft_dataset_open_text(ctx, path, &o, &ds);
    CHECK("text_csv_open",
          st == GRAFT_OK && graft_dataset_size(ds) > 0 && graft_dataset_class_count(ds) >= 2, "%s",
          graft_last_error(ctx));
    if (st != GRAFT_OK) return;
    printf("  %lld rows, %d classes, %lld skipped\n", (long long)graft_dataset_size(ds),
           graft_dataset_class_count(ds), (long long)graft_dataset_skipped_count(ds));
    for (int64_t i = 0; i < graft_dataset_skipped_count(ds); i++) {
        const char *p, *why;
        graft_dataset_skipped(ds, i, &p, &why);
        printf("  skipped %s: %s\n", p, why);
    }
    graft_batch_source src;
    graft_dataset_source(ds, 2, 2, 0, &src);
    graft_named_tensor in[3];
    graft_tensor labels;
    unsigned char kept[64];
    int64_t n = src.n_samples < 64 ? src.n_samples : 64;
    st = src.read(src.user, 0, n, in, &labels, kept);
    int ok = st == GRAFT_OK && src.n_inputs == 3 && labels.dtype == GRAFT_DTYPE_I64;
    for (int k = 0; ok && k < 3; k++)
        ok = in[k].tensor.dtype == GRAFT_DTYPE_I64 && in[k].tensor.ndim == 2 &&
             in[k].tensor.dims[1] == MAX_LEN;
    CHECK("text_csv_batches",
          ok && !strcmp(in[0].name, "input_ids") && !strcmp(in[1].name, "attention_mask") &&
              !strcmp(in[2].name, "token_type_ids"),
          "status %d", st);
    /* The first row's text is "plain text": compare with the tokenizer itself. */
    wordpiece *wp;
    graft_err e = {0};
    int64_t ids[MAX_LEN], types[MAX_LEN], mask[MAX_LEN];
    size_t len;
    if (ok && wordpiece_load(&wp, vocab, true, &e) == GRAFT_OK) {
        wordpiece_encode(wp, "plain text", NULL, MAX_LEN, true, ids, types, mask, MAX_LEN, &len,
                         &e);
        CHECK("text_ids_equal_tokenizer",
              !memcmp(ids, in[0].tensor.data, sizeof ids) &&
                  !memcmp(mask, in[1].tensor.data, sizeof mask) &&
                  !memcmp(types, in[2].tensor.data, sizeof types),
              "%s", "row 0 differs");
        wordpiece_free(wp);
    }
    graft_dataset_free(ds);
}

/* pad_to_longest: each batch is as long as its longest text rounded up to a multiple of 8,
 * rows equal the padded version's. */
static void longest(graft_ctx *ctx, const char *vocab) {
    enum { ROWS = 2 }; /* texts of 7 and 5 tokens: a batch 8 wide */
    char path[1024];
    snprintf(path, sizeof path, "%s/text/basic.csv", data_dir);
    graft_text_options o = GRAFT_TEXT_OPTIONS_INIT;
    o.vocab_path = vocab, o.max_len = MAX_LEN;
    graft_dataset *full = NULL, *cut = NULL;
    graft_status st = graft_dataset_open_text(ctx, path, &o, &full);
    o.pad_to_longest = 1;
    if (st == GRAFT_OK) st = graft_dataset_open_text(ctx, path, &o, &cut);
    graft_batch_source a, b;
    graft_named_tensor ia[3], ib[3];
    graft_tensor la, lb;
    unsigned char kept[64];
    if (st == GRAFT_OK) st = graft_dataset_source(full, 1, 2, 0, &a);
    if (st == GRAFT_OK) st = graft_dataset_source(cut, 1, 2, 0, &b);
    if (st == GRAFT_OK) st = a.read(a.user, 0, ROWS, ia, &la, kept);
    if (st == GRAFT_OK) st = b.read(b.user, 0, ROWS, ib, &lb, kept);
    int ok = st == GRAFT_OK && ib[0].tensor.dims[1] < MAX_LEN && ib[0].tensor.dims[0] == ROWS;
    int64_t len = ok ? ib[0].tensor.dims[1] : 0;
    int64_t longest_text = 0;
    for (int k = 0; ok && k < 3; k++)
        for (int64_t r = 0; r < ROWS; r++) {
            const int64_t *pa = (const int64_t *)ia[k].tensor.data + r * MAX_LEN;
            const int64_t *pb = (const int64_t *)ib[k].tensor.data + r * len;
            ok &= !memcmp(pa, pb, sizeof(int64_t) * (size_t)len);
            for (int64_t j = len; k == 1 && j < MAX_LEN; j++) ok &= pa[j] == 0;
            for (int64_t j = 0; k == 1 && j < MAX_LEN; j++)
                if (pa[j] && j + 1 > longest_text) longest_text = j + 1;
        }
    int64_t want = (longest_text + 7) / 8 * 8;
    CHECK("text_pad_to_longest", ok && longest_text > 0 && len == want,
          "status %d, length %lld for a longest text of %lld tokens (want %lld)", st,
          (long long)len, (long long)longest_text, (long long)want);
    graft_dataset_free(full), graft_dataset_free(cut);
}

static void folder_and_multi(graft_ctx *ctx, const char *vocab) {
    char path[1024];
    graft_text_options o = GRAFT_TEXT_OPTIONS_INIT;
    o.vocab_path = vocab, o.max_len = MAX_LEN, o.label_column = "tags", o.label_separator = '|';
    snprintf(path, sizeof path, "%s/text/multi.csv", data_dir);
    graft_dataset *ds = NULL;
    graft_status st = graft_dataset_open_text(ctx, path, &o, &ds);
    graft_batch_source src;
    graft_named_tensor in[3];
    graft_tensor labels = {0};
    unsigned char kept[64];
    if (st == GRAFT_OK) st = graft_dataset_source(ds, 1, 2, 0, &src);
    if (st == GRAFT_OK) st = src.read(src.user, 0, src.n_samples, in, &labels, kept);
    CHECK("text_multi_label_vectors",
          st == GRAFT_OK && labels.dtype == GRAFT_DTYPE_F32 && labels.ndim == 2 &&
              labels.dims[1] == graft_dataset_class_count(ds),
          "status %d: %s", st, graft_last_error(ctx));
    graft_dataset_free(ds);
    ds = NULL;
    graft_text_options fo = GRAFT_TEXT_OPTIONS_INIT;
    fo.vocab_path = vocab, fo.max_len = MAX_LEN;
    snprintf(path, sizeof path, "%s/text/folder/empty_class", data_dir);
    st = graft_dataset_open_text(ctx, path, &fo, &ds);
    CHECK("text_folder_empty_class_is_an_error",
          st != GRAFT_OK && strstr(graft_last_error(ctx), "empty"), "status %d: %s", st,
          graft_last_error(ctx));
    snprintf(path, sizeof path, "%s/text/folder/train", data_dir);
    st = graft_dataset_open_text(ctx, path, &fo, &ds);
    CHECK("text_folder_opens", st == GRAFT_OK && graft_dataset_size(ds) > 0, "status %d: %s", st,
          graft_last_error(ctx));
    graft_dataset *val = NULL;
    snprintf(path, sizeof path, "%s/text/folder/val_unknown", data_dir);
    graft_status vs = st == GRAFT_OK ? graft_dataset_open_like(ds, path, &val) : GRAFT_E_INTERNAL;
    CHECK("text_folder_validation_unknown_class", vs != GRAFT_OK, "status %d", vs);
    graft_dataset_free(val);
    graft_dataset_free(ds);
}

static char *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    char *buf = f ? malloc(1 << 20) : NULL;
    *size = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    if (buf) buf[*size] = 0;
    if (f) fclose(f);
    return buf;
}

/* The first batch's token ids of basic.csv, with the vocabulary as options say. */
static int first_ids(graft_ctx *ctx, const graft_text_options *o, int64_t *ids, size_t n) {
    graft_dataset *ds = NULL;
    graft_batch_source src;
    graft_named_tensor in[3];
    graft_tensor labels;
    unsigned char kept[4];
    char path[1024];
    snprintf(path, sizeof path, "%s/text/basic.csv", data_dir);
    int ok = graft_dataset_open_text(ctx, path, o, &ds) == GRAFT_OK &&
             graft_dataset_source(ds, 1, 1, 0, &src) == GRAFT_OK &&
             src.read(src.user, 0, 4, in, &labels, kept) == GRAFT_OK;
    if (ok) memcpy(ids, in[0].tensor.data, n * sizeof *ids);
    graft_dataset_free(ds);
    return ok;
}

static void vocab_in_memory(graft_ctx *ctx, const char *vocab) {
    size_t size;
    char *text = read_all(vocab, &size);
    graft_tokenizer *from_file = NULL, *from_memory = NULL;
    int ok = text && graft_tokenizer_load(ctx, vocab, 0, &from_file) == GRAFT_OK &&
             graft_tokenizer_load_memory(ctx, text, size, 0, &from_memory) == GRAFT_OK;
    int64_t a[MAX_LEN], b[MAX_LEN];
    size_t la = 0, lb = 1;
    const char *s = "Hello, World! caf\xc3\xa9 unaffable";
    ok = ok &&
         graft_tokenizer_encode(ctx, from_file, s, NULL, MAX_LEN, 1, a, NULL, NULL, MAX_LEN, &la) ==
             GRAFT_OK &&
         graft_tokenizer_encode(ctx, from_memory, s, NULL, MAX_LEN, 1, b, NULL, NULL, MAX_LEN,
                                &lb) == GRAFT_OK;
    CHECK("tokenizer_from_memory",
          ok && la == lb && !memcmp(a, b, sizeof a) &&
              graft_tokenizer_vocab_size(from_memory) == graft_tokenizer_vocab_size(from_file) &&
              graft_tokenizer_token_id(from_memory, "[CLS]") ==
                  graft_tokenizer_token_id(from_file, "[CLS]") &&
              graft_tokenizer_token_id(from_memory, "[no such token]") == -1,
          "%s", graft_last_error(ctx));
    graft_tokenizer_free(from_file);
    graft_tokenizer_free(from_memory);
    graft_text_options o = GRAFT_TEXT_OPTIONS_INIT;
    o.vocab_path = vocab, o.max_len = MAX_LEN;
    int64_t want[4 * MAX_LEN], got[4 * MAX_LEN];
    ok = first_ids(ctx, &o, want, 4 * MAX_LEN);
    o.vocab_path = NULL, o.vocab_data = text, o.vocab_size = size;
    ok = ok && first_ids(ctx, &o, got, 4 * MAX_LEN);
    CHECK("text_dataset_vocab_in_memory", ok && !memcmp(want, got, sizeof want), "%s",
          graft_last_error(ctx));
    free(text);
}

static void unlabelled_csv(graft_ctx *ctx) {
    graft_text_list *l = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/text/basic.csv", data_dir);
    graft_status st = graft_text_list_open_csv(ctx, path, "text", &l);
    int64_t n = graft_text_list_count(l), line = 0;
    const char *why = "";
    if (st == GRAFT_OK) graft_text_list_skipped(l, 0, &line, &why);
    /* Rows 2..21 less the seven bad ones; row 19 has no label, which a list does not need. */
    CHECK("text_list_csv",
          st == GRAFT_OK && n == 11 && !strcmp(graft_text_list_text(l, 0), "plain text") &&
              graft_text_list_line(l, 0) == 2 && graft_text_list_line(l, 8) == 19 &&
              !strcmp(graft_text_list_text(l, 8), "no label") &&
              graft_text_list_line(l, 10) == 21 && graft_text_list_text(l, 11) == NULL &&
              graft_text_list_skipped_count(l) == 7 && line == 13 && strstr(why, "4 fields"),
          "status %d, %lld texts, first skip line %lld: %s", st, (long long)n, (long long)line,
          st == GRAFT_OK ? why : graft_last_error(ctx));
    graft_text_list_free(l);
    l = NULL;
    st = graft_text_list_open_csv(ctx, path, "body", &l);
    CHECK("text_list_no_column",
          st == GRAFT_E_NOT_FOUND && !l && strstr(graft_last_error(ctx), "no text column 'body'"),
          "status %d: %s", st, graft_last_error(ctx));
}

/* Tokens of each sample of ds (ones in the attention mask), its label and a checksum of its ids,
 * read through a source in order; -1 lengths for samples the source skipped. */
static graft_status lengths_and_labels(graft_dataset *ds, int64_t *len, int64_t *label,
                                       uint64_t *ids_sum) {
    graft_batch_source src;
    graft_status st = graft_dataset_source(ds, 1, 2, 0, &src);
    graft_named_tensor in[3];
    graft_tensor labels;
    unsigned char kept[1];
    for (int64_t i = 0; st == GRAFT_OK && i < src.n_samples; i++) {
        st = src.read(src.user, i, 1, in, &labels, kept);
        if (st != GRAFT_OK) break;
        len[i] = -1, label[i] = -1;
        if (!kept[0]) continue;
        const int64_t *mask = in[1].tensor.data, *ids = in[0].tensor.data;
        len[i] = 0, ids_sum[i] = 0;
        for (int64_t j = 0; j < in[1].tensor.dims[1]; j++) len[i] += mask[j] != 0;
        for (int64_t j = 0; j < in[0].tensor.dims[1]; j++)
            ids_sum[i] = ids_sum[i] * 1000003u + (uint64_t)ids[j];
        label[i] = ((const int64_t *)labels.data)[0];
    }
    return st;
}

/* graft_dataset_sort_by_length: samples shortest first, each keeping its own label; refused
 * without pad_to_longest and once a source exists. */
static void sort_by_length(graft_ctx *ctx, const char *vocab) {
    char path[1024];
    snprintf(path, sizeof path, "%s/text/basic.csv", data_dir);
    graft_text_options o = GRAFT_TEXT_OPTIONS_INIT;
    o.vocab_path = vocab, o.max_len = MAX_LEN;
    graft_dataset *plain = NULL, *a = NULL, *b = NULL;
    graft_status st = graft_dataset_open_text(ctx, path, &o, &plain);
    CHECK("text_sort_needs_padding",
          st == GRAFT_OK && graft_dataset_sort_by_length(plain, 1) == GRAFT_E_INVALID_ARGUMENT,
          "%s", "a data set padded to max_len was sorted");
    o.pad_to_longest = 1;
    if (st == GRAFT_OK) st = graft_dataset_open_text(ctx, path, &o, &a);
    if (st == GRAFT_OK) st = graft_dataset_open_text(ctx, path, &o, &b);
    if (st == GRAFT_OK) st = graft_dataset_sort_by_length(b, 2);
    int64_t n = st == GRAFT_OK ? graft_dataset_size(a) : 0;
    int64_t la[64], ya[64], lb[64], yb[64];
    uint64_t ha[64], hb[64];
    if (n > 64) st = GRAFT_E_INVALID_ARGUMENT;
    if (st == GRAFT_OK) st = lengths_and_labels(a, la, ya, ha);
    if (st == GRAFT_OK) st = lengths_and_labels(b, lb, yb, hb);
    int ok = st == GRAFT_OK && graft_dataset_size(b) == n, moved = 0;
    for (int64_t i = 0; ok && i < n; i++) {
        if (i > 0) ok &= lb[i] >= lb[i - 1] || lb[i] < 0 || lb[i - 1] < 0;
        int64_t j = 0; /* the same text in file order */
        while (j < n && (ha[j] != hb[i] || la[j] != lb[i])) j++;
        ok &= j < n && la[j] == lb[i] && ya[j] == yb[i];
        moved += j != i;
    }
    CHECK("text_sort_by_length", ok && moved > 0,
          "status %d (%s), %lld samples, %d moved, lengths or labels not carried along", st,
          graft_last_error(ctx), (long long)n, moved);
    CHECK("text_sort_after_source",
          st == GRAFT_OK && graft_dataset_sort_by_length(b, 1) != GRAFT_OK, "%s",
          "sorted again after its source was made");
    graft_dataset_free(plain), graft_dataset_free(a), graft_dataset_free(b);
}

/* graft_dataset_set_input_names: the model's names on the batches, a left-out input gone (the
 * mask still measures pad_to_longest), split views sharing them; bad name lists refused. */
static void input_names(graft_ctx *ctx, const char *vocab) {
    char path[1024];
    snprintf(path, sizeof path, "%s/text/basic.csv", data_dir);
    graft_text_options o = GRAFT_TEXT_OPTIONS_INIT;
    o.vocab_path = vocab, o.max_len = MAX_LEN, o.pad_to_longest = 1;
    graft_dataset *ds = NULL, *train = NULL, *val = NULL;
    if (graft_dataset_open_text(ctx, path, &o, &ds) != GRAFT_OK) {
        CHECK("text_input_names", 0, "%s", graft_last_error(ctx));
        return;
    }
    const char *two[3] = {"input.3", NULL, "input.1"}, *dup[3] = {"a", "b", "a"};
    const char *none[3] = {NULL, NULL, NULL};
    CHECK("text_input_names_refused",
          graft_dataset_set_input_names(ds, two, 2) != GRAFT_OK &&
              graft_dataset_set_input_names(ds, dup, 3) != GRAFT_OK &&
              graft_dataset_set_input_names(ds, none, 3) != GRAFT_OK,
          "%s", "a bad name list was taken");
    graft_status st = graft_dataset_set_input_names(ds, two, 3);
    if (st == GRAFT_OK) st = graft_dataset_split(ds, 0.25, 1, &train, &val);
    graft_batch_source src;
    if (st == GRAFT_OK) st = graft_dataset_source(val, 1, 2, 0, &src);
    graft_named_tensor in[3] = {{0}};
    graft_tensor labels;
    unsigned char kept[64];
    if (st == GRAFT_OK) st = src.read(src.user, 0, 1, in, &labels, kept);
    int ok = st == GRAFT_OK && src.n_inputs == 2 && !strcmp(in[0].name, "input.3") &&
             !strcmp(in[1].name, "input.1") && in[0].tensor.dims[1] < MAX_LEN &&
             in[0].tensor.dims[1] == in[1].tensor.dims[1];
    CHECK("text_input_names", ok, "status %d: %s, %d inputs", st, graft_last_error(ctx),
          st == GRAFT_OK ? src.n_inputs : -1);
    graft_dataset_free(train), graft_dataset_free(val), graft_dataset_free(ds);
}

int main(int argc, char **argv) {
    if (argc > 1) data_dir = argv[1];
    char vocab[1024];
    snprintf(vocab, sizeof vocab, "%s/tokenizer/vocab.txt", data_dir);
    graft_ctx *ctx;
    graft_ctx_create(NULL, &ctx);
    csv_classes(ctx, vocab);
    folder_and_multi(ctx, vocab);
    longest(ctx, vocab);
    sort_by_length(ctx, vocab);
    vocab_in_memory(ctx, vocab);
    unlabelled_csv(ctx);
    input_names(ctx, vocab);
    graft_text_options o = GRAFT_TEXT_OPTIONS_INIT;
    graft_dataset *ds = NULL;
    o.vocab_path = "/nonexistent/vocab.txt";
    graft_status st = graft_dataset_open_text(ctx, "tests/data/text/basic.csv", &o, &ds);
    CHECK("text_missing_vocab", st != GRAFT_OK && strstr(graft_last_error(ctx), "vocab"),
          "status %d: %s", st, graft_last_error(ctx));
    graft_ctx_free(ctx);
    return test_failures ? 1 : 0;
}
