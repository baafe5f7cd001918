/* text_dataset.c: text data sets (a DIR/<class>/<n>.txt folder or a CSV/TSV file): the labelled
 * table, the tokenizer (vocab.txt or tokenizer.json), and loading one sample as BERT's three
 * int64 inputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/hash.h"
#include "dataset.h"
#include "text_table.h"
#include "tokenizer.h"

typedef struct text_data {
    text_table *table;
    graft_tokenizer *tok;
    graft_text_options o;
    char *vocab_path; /* NULL when the vocabulary came in memory: o.vocab_data is then ours */
    char *path;
} text_data;

static const dataset_kind text_kind;

/* Tokens per row: max_len, or pad_len when the model takes rows that wide. */
static int row_width(const graft_text_options *o) {
    return o->pad_len > o->max_len ? o->pad_len : o->max_len;
}

static graft_status load_text(void *impl, int64_t item, void *const *dst, uint64_t seed,
                              graft_err *e) {
    (void)seed;
    text_data *d = impl;
    size_t len;
    TRY(tokenizer_encode(d->tok, text_table_text(d->table, item),
                         text_table_text_pair(d->table, item), d->o.max_len, true, dst[0],
                         dst[2], dst[1], (size_t)d->o.max_len, &len, e));
    int64_t *ids = dst[0], *mask = dst[1], *types = dst[2];
    int64_t pad = graft_tokenizer_special_id(d->tok, GRAFT_TOKEN_PAD);
    for (int i = d->o.max_len; i < row_width(&d->o); i++)
        ids[i] = pad < 0 ? 0 : pad, mask[i] = 0, types[i] = 0;
    return GRAFT_OK;
}

static const char *text_path(void *impl, int64_t item) {
    (void)item;
    return ((text_data *)impl)->path;
}

static void free_text(void *impl) {
    text_data *d = impl;
    if (!d) return;
    text_table_free(d->table);
    tokenizer_free(d->tok);
    free(d->vocab_path);
    free((char *)d->o.vocab_data);
    free(d->path);
    free(d);
}

static uint64_t file_stamp(const char *path, uint64_t seed) {
    hash64_state h;
    struct stat sb;
    hash64_init(&h, seed);
    hash64_update_str(&h, path);
    if (stat(path, &sb) == 0) {
        hash64_update_u64(&h, (uint64_t)sb.st_size);
        hash64_update_u64(&h, (uint64_t)sb.st_mtime);
    }
    return hash64_final(&h);
}

/* The tokenizer over the vocabulary file or the bytes in memory. */
static graft_status load_vocab(text_data *d, graft_err *e) {
    if (d->o.vocab_data)
        return tokenizer_load_memory(&d->tok, d->o.vocab_data, d->o.vocab_size, "the vocabulary",
                                     !d->o.cased, e);
    return tokenizer_load(&d->tok, d->vocab_path, !d->o.cased, e);
}

/* What identifies the vocabulary for the feature cache: the file's stamp or the bytes' hash. */
static uint64_t vocab_stamp(const text_data *d) {
    if (!d->o.vocab_data) return file_stamp(d->vocab_path, 2);
    hash64_state h;
    hash64_init(&h, 3);
    hash64_update(&h, d->o.vocab_data, d->o.vocab_size);
    return hash64_final(&h);
}

/* Labels per row: a class index (I64), a 0/1 vector over the classes or a number (F32). */
static graft_status make_labels(const text_table *t, dataset_shared *sh, void **labels,
                                graft_err *e) {
    int64_t n = text_table_count(t);
    text_label_mode mode = text_table_label_mode(t);
    sh->label_dtype = mode == TEXT_LABEL_CLASS ? GRAFT_DTYPE_I64 : GRAFT_DTYPE_F32;
    sh->label_width = mode == TEXT_LABEL_MULTI ? text_table_class_count(t) : 1;
    *labels = malloc(dataset_label_size(sh) * (size_t)(n ? n : 1));
    if (!*labels) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for labels");
    for (int64_t i = 0; i < n; i++) {
        if (mode == TEXT_LABEL_CLASS)
            ((int64_t *)*labels)[i] = text_table_label(t, i);
        else if (mode == TEXT_LABEL_MULTI)
            text_table_label_vector(t, i, (float *)*labels + i * sh->label_width);
        else
            ((float *)*labels)[i] = (float)text_table_target(t, i);
    }
    return GRAFT_OK;
}

/* Wrap a loaded table (and tokenizer) as a data set. Takes ownership of d. */
static graft_status wrap(graft_ctx *ctx, text_data *d, graft_dataset **out, graft_err *e) {
    const text_table *t = d->table;
    int64_t n = text_table_count(t);
    int n_classes = text_table_class_count(t);
    char **classes = calloc((size_t)n_classes + 1, sizeof *classes);
    int64_t *items = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!classes || !items) {
        free(classes), free(items), free_text(d);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    }
    for (int c = 0; c < n_classes; c++) classes[c] = strdup(text_table_class_name(t, c));
    for (int64_t i = 0; i < n; i++) items[i] = i;
    graft_status st =
        dataset_create(ctx, &text_kind, d, classes, n_classes, n, items, NULL, out, e);
    if (st != GRAFT_OK) {
        for (int c = 0; c < n_classes; c++) free(classes[c]);
        free(classes), free(items), free_text(d);
        return st;
    }
    dataset_shared *sh = (*out)->sh;
    static const char *const names[3] = {"input_ids", "attention_mask", "token_type_ids"};
    sh->n_inputs = 3;
    for (int k = 0; k < 3; k++) {
        snprintf(sh->input_names[k], sizeof sh->input_names[k], "%s", names[k]);
        sh->input_dtype[k] = GRAFT_DTYPE_I64;
        sh->input_ndim[k] = 1;
        sh->input_dims[k][0] = row_width(&d->o);
    }
    sh->pad_to_longest = d->o.pad_to_longest != 0;
    sh->mask_input = 1;
    for (int64_t i = 0; i < text_table_skipped_count(t); i++) {
        const text_skip *s = text_table_skipped(t, i);
        char where[4200];
        snprintf(where, sizeof where, s->line ? "%s:%lld" : "%s", s->path, (long long)s->line);
        dataset_skip(sh, where, s->reason);
    }
    snprintf(
        sh->identity, sizeof sh->identity,
        "text:%016llx;vocab=%016llx;cased=%d;max_len=%d;longest=%d;columns=%s,%s,%s;sep=%d;reg=%d"
        "%s%.0d",
        (unsigned long long)file_stamp(d->path, 1), (unsigned long long)vocab_stamp(d), d->o.cased,
        d->o.max_len, d->o.pad_to_longest, d->o.text_column ? d->o.text_column : "",
        d->o.text_pair_column ? d->o.text_pair_column : "",
        d->o.label_column ? d->o.label_column : "", d->o.label_separator, d->o.regression,
        d->o.pad_len > d->o.max_len ? ";width=" : "",
        d->o.pad_len > d->o.max_len ? d->o.pad_len : 0);
    return make_labels(t, sh, &(*out)->labels, e);
}

static text_table_options table_options(const graft_text_options *o) {
    text_table_options t = TEXT_TABLE_OPTIONS_INIT;
    t.text_column = o->text_column ? o->text_column : "text";
    t.text_pair_column = o->text_pair_column;
    t.label_column = o->label_column ? o->label_column : "label";
    t.label_mode = o->regression        ? TEXT_LABEL_REGRESSION
                   : o->label_separator ? TEXT_LABEL_MULTI
                                        : TEXT_LABEL_CLASS;
    t.label_separator = o->label_separator;
    return t;
}

static text_data *new_text_data(const graft_text_options *o, const char *path) {
    text_data *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->o = *o;
    d->o.vocab_data = NULL;
    if (o->vocab_data) {
        char *copy = malloc(o->vocab_size ? o->vocab_size : 1);
        if (copy) memcpy(copy, o->vocab_data, o->vocab_size);
        d->o.vocab_data = copy;
    } else {
        d->vocab_path = strdup(o->vocab_path);
        d->o.vocab_path = d->vocab_path; /* o's string may not outlive the data set */
    }
    d->path = strdup(path);
    if (!(d->vocab_path || d->o.vocab_data) || !d->path) {
        free_text(d);
        return NULL;
    }
    return d;
}

graft_status graft_dataset_open_text(graft_ctx *ctx, const char *path,
                                     const graft_text_options *options, graft_dataset **out) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ctx->err;
    err_clear(e);
    if (!path || !out || !options || !(options->vocab_path || options->vocab_data))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "open_text needs a path and a vocabulary");
    if (options->max_len < 3 || options->max_len > 8192)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "max_len must be 3..8192 (got %d)",
                       options->max_len);
    if (options->pad_len < 0 || options->pad_len > 8192)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "pad_len must be 0..8192 (got %d)",
                       options->pad_len);
    text_data *d = new_text_data(options, path);
    if (!d) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    text_table_options to = table_options(options);
    graft_status st = load_vocab(d, e);
    if (st == GRAFT_OK) st = text_table_load(&d->table, path, &to, e);
    if (st != GRAFT_OK) {
        free_text(d);
        return st;
    }
    return wrap(ctx, d, out, e);
}

static graft_status open_text_like(const graft_dataset *like, const char *path,
                                   graft_dataset **out) {
    graft_err *e = &like->ctx->err;
    const text_data *ld = like->sh->impl;
    text_data *d = new_text_data(&ld->o, path);
    if (!d) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    text_table_options to = table_options(&ld->o);
    graft_status st = load_vocab(d, e);
    if (st == GRAFT_OK) st = text_table_load_like(&d->table, ld->table, path, &to, e);
    if (st != GRAFT_OK) {
        free_text(d);
        return st;
    }
    return wrap(like->ctx, d, out, e);
}

static const dataset_kind text_kind = {"text", load_text, text_path, open_text_like, free_text};
