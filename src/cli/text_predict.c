/* text_predict.c: `graft predict` on a text model: reading the texts, tokenizing them into
 * batches and running the model. */
#include "text_predict.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"
#include "../core/files.h"
#include "../data/text_pad.h"
#include "../data/text_table.h"

/* One thing to read, after folders are expanded into their files. */
typedef enum { ITEM_FILE, ITEM_CSV, ITEM_LINES, ITEM_ARG } item_kind;
typedef struct item {
    item_kind kind;
    char *value; /* a path ("-": standard input) or the text */
} item;

typedef struct item_list {
    item *v;
    size_t n, cap;
} item_list;

/* Texts tokenized into a batch of rows, run when full. */
typedef struct batcher {
    const char *cmd;
    graft_ctx *ctx;
    graft_model *model;
    const text_model *tm;
    int64_t *rows[TEXT_ROLES]; /* (cap, len) ids, mask, type ids */
    char **names;              /* (cap,) */
    int n, cap, len;           /* len: tokens per row */
    int cut; /* texts cut at this many tokens (max_len; the rest of a row is [PAD]) */
    int pad_to_longest, longest; /* run each batch as long as its longest text (in tokens) */
    text_emit_fn emit;
    void *user;
    int left_out, failed;
} batcher;

static int items_add(item_list *l, item_kind kind, const char *value) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        item *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v, l->cap = cap;
    }
    if (!(l->v[l->n].value = strdup(value))) return -1;
    l->v[l->n++].kind = kind;
    return 0;
}

static void items_free(item_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i].value);
    free(l->v);
}

static int has_ext(const char *path, const char *ext) {
    size_t n = strlen(path), k = strlen(ext);
    return n > k && strcasecmp(path + n - k, ext) == 0;
}

/* Every .txt file under dir (graft_text_files: links followed, no folder entered twice, no
 * file listed twice), in depth-first name order. What the listing left out is a warning each;
 * *left_out becomes 1 when something that may hold a text was skipped (not for a repeat). */
static int list_dir(const char *cmd, graft_ctx *ctx, const char *dir, item_list *out,
                    int *left_out) {
    graft_file_list *l;
    if (graft_text_files(ctx, dir, &l) != GRAFT_OK)
        return cli_error(cmd, "%s", graft_last_error(ctx)), 2;
    for (int64_t i = 0; i < graft_file_list_note_count(l); i++) {
        const char *path, *why;
        int skipped;
        graft_file_list_note(l, i, &path, &why, &skipped);
        fprintf(stderr, "graft %s: warning: skipped %s: %s\n", cmd, path, why);
        *left_out |= skipped;
    }
    int rc = 0;
    for (int64_t i = 0; i < graft_file_list_count(l) && rc == 0; i++)
        if (items_add(out, ITEM_FILE, graft_file_list_path(l, i)) != 0)
            rc = (cli_error(cmd, "out of memory"), 1);
    graft_file_list_free(l);
    return rc;
}

/* The sources as items, every path checked (exit status 2 when one is missing). */
static int collect(const char *cmd, graft_ctx *ctx, const text_predict_args *a, item_list *out,
                   int *left_out) {
    if (a->n_sources == 0) {
        if (isatty(STDIN_FILENO))
            return cli_error(cmd, "no texts given: .txt files, folders, a .csv/.tsv file, --lines "
                                  "FILE, --text STRING, or - for lines on standard input");
        return items_add(out, ITEM_LINES, "-") ? (cli_error(cmd, "out of memory"), 1) : 0;
    }
    for (int i = 0; i < a->n_sources; i++) {
        const text_source *s = &a->sources[i];
        struct stat st;
        int rc = 0;
        if (s->kind == TEXT_FROM_ARG || !strcmp(s->value, "-")) {
            rc = items_add(out, s->kind == TEXT_FROM_ARG ? ITEM_ARG : ITEM_LINES, s->value);
        } else if (stat(s->value, &st) != 0) {
            return cli_error(cmd, "cannot read '%s': %s", s->value, strerror(errno));
        } else if (s->kind == TEXT_FROM_LINES) {
            rc = items_add(out, ITEM_LINES, s->value);
        } else if (S_ISDIR(st.st_mode)) {
            size_t before = out->n;
            if ((rc = list_dir(cmd, ctx, s->value, out, left_out)) != 0) return rc;
            if (out->n == before) return cli_error(cmd, "no .txt files under '%s'", s->value);
        } else {
            int csv = has_ext(s->value, ".csv") || has_ext(s->value, ".tsv");
            rc = items_add(out, csv ? ITEM_CSV : ITEM_FILE, s->value);
        }
        if (rc) return cli_error(cmd, "out of memory"), 1;
    }
    return 0;
}

static void leave_out(batcher *b, const char *name, const char *why) {
    fprintf(stderr, "graft %s: warning: skipped %s: %s\n", b->cmd, name, why);
    b->left_out = 1;
}

/* Rows of b->len tokens cut to the batch's longest text rounded up to a multiple of 8
 * (text_pad.h), packed in place (the padding after it is masked out, so the outputs are the same
 * up to float rounding). Returns the new width. */
static int shorten(batcher *b) {
    int width = (int)text_padded_width(b->longest > 0 ? b->longest : 1, b->len);
    for (int r = 0; r < TEXT_ROLES; r++)
        for (int i = 1; i < b->n; i++)
            memmove(b->rows[r] + (size_t)i * (size_t)width, b->rows[r] + (size_t)i * (size_t)b->len,
                    (size_t)width * sizeof *b->rows[r]);
    return width;
}

/* Run the model on the batch and hand the outputs on. */
static void flush(batcher *b) {
    if (!b->n || b->failed) return;
    graft_named_tensor in[TEXT_ROLES];
    int k = 0, width = b->pad_to_longest ? shorten(b) : b->len;
    for (int r = 0; r < TEXT_ROLES; r++)
        if (b->tm->input[r])
            in[k++] = (graft_named_tensor){b->tm->input[r],
                                           {GRAFT_DTYPE_I64, 2, {b->n, width}, b->rows[r]}};
    if (graft_model_run(b->model, in, k) != GRAFT_OK) {
        cli_error(b->cmd, "%s", graft_last_error(b->ctx));
        b->failed = 1;
    } else if (b->emit(b->user, b->names, b->n) != 0) {
        b->failed = 1;
    }
    for (int i = 0; i < b->n; i++) free(b->names[i]);
    b->n = 0, b->longest = 0;
}

static void add_text(batcher *b, const char *name, const char *text) {
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    if (!*p) return leave_out(b, name, "empty text");
    size_t at = (size_t)b->n * (size_t)b->len, got;
    if (graft_tokenizer_encode(b->ctx, b->tm->tok, text, NULL, b->cut, 1, b->rows[TEXT_IDS] + at,
                               b->rows[TEXT_TYPE_IDS] + at, b->rows[TEXT_MASK] + at, (size_t)b->cut,
                               &got) != GRAFT_OK)
        return leave_out(b, name, graft_last_error(b->ctx));
    int64_t pad = graft_tokenizer_token_id(b->tm->tok, "[PAD]");
    for (size_t i = at + (size_t)b->cut; i < at + (size_t)b->len; i++)
        b->rows[TEXT_IDS][i] = pad >= 0 ? pad : 0, b->rows[TEXT_TYPE_IDS][i] = 0,
        b->rows[TEXT_MASK][i] = 0;
    if ((int)got > b->longest) b->longest = (int)got;
    if (!(b->names[b->n] = strdup(name))) {
        cli_error(b->cmd, "out of memory");
        b->failed = 1;
        return;
    }
    if (++b->n == b->cap) flush(b);
}

static void read_lines(batcher *b, const char *path) {
    int is_stdin = !strcmp(path, "-");
    const char *why = NULL;
    FILE *f = is_stdin ? stdin : file_open_regular(path, &why);
    if (!f) return leave_out(b, path, why);
    char *line = NULL, name[4200];
    size_t cap = 0;
    ssize_t n;
    for (long no = 1; !b->failed && (n = getline(&line, &cap, f)) >= 0; no++) {
        snprintf(name, sizeof name, "%s:%ld", is_stdin ? "stdin" : path, no);
        if (memchr(line, 0, (size_t)n)) {
            leave_out(b, name, "NUL byte in the line");
            continue;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        add_text(b, name, line);
    }
    if (ferror(f)) leave_out(b, path, "read error");
    free(line);
    if (!is_stdin) fclose(f);
}

/* A whole file as one text (as a text folder's samples are read, with the same limit). */
static void read_file(batcher *b, const char *path) {
    const char *why = NULL;
    char *buf = NULL;
    size_t n = 0;
    int too_big = 0;
    if (file_read_all(path, TEXT_SAMPLE_MAX_BYTES, &buf, &n, &why, &too_big) != 0)
        return leave_out(b, path, too_big ? "over graft's limit of 64 MiB for one text" : why);
    if (strlen(buf) != n)
        leave_out(b, path, "NUL byte in the file");
    else
        add_text(b, path, buf);
    free(buf);
}

/* Every row of the CSV/TSV's text column; the rows it cannot read are named first. */
static void read_csv(batcher *b, const char *path, const char *column) {
    graft_text_list *l;
    if (graft_text_list_open_csv(b->ctx, path, column, &l) != GRAFT_OK) {
        cli_error(b->cmd, "%s", graft_last_error(b->ctx));
        b->failed = 1;
        return;
    }
    char name[4200];
    for (int64_t i = 0; i < graft_text_list_skipped_count(l); i++) {
        int64_t line;
        const char *why;
        graft_text_list_skipped(l, i, &line, &why);
        snprintf(name, sizeof name, "%s:%lld", path, (long long)line);
        leave_out(b, name, why);
    }
    for (int64_t i = 0; !b->failed && i < graft_text_list_count(l); i++) {
        snprintf(name, sizeof name, "%s:%lld", path, (long long)graft_text_list_line(l, i));
        add_text(b, name, graft_text_list_text(l, i));
    }
    graft_text_list_free(l);
}

static void run_items(batcher *b, const item_list *items, const char *column) {
    int literal = 0;
    char name[32];
    for (size_t i = 0; i < items->n && !b->failed; i++) {
        const item *it = &items->v[i];
        if (it->kind == ITEM_FILE)
            read_file(b, it->value);
        else if (it->kind == ITEM_CSV)
            read_csv(b, it->value, column);
        else if (it->kind == ITEM_LINES)
            read_lines(b, it->value);
        else {
            snprintf(name, sizeof name, "text:%d", ++literal);
            add_text(b, name, it->value);
        }
    }
    flush(b);
}

int text_predict(const char *cmd, graft_ctx *ctx, graft_model *m, const text_model *tm,
                 const text_predict_args *a, text_emit_fn emit, void *user) {
    item_list items = {0};
    int left_out = 0;
    int rc = collect(cmd, ctx, a, &items, &left_out);
    batcher b = {.cmd = cmd,
                 .ctx = ctx,
                 .model = m,
                 .tm = tm,
                 .cap = (int)a->batch,
                 .len = tm->data.pad_len > tm->data.max_len ? tm->data.pad_len : tm->data.max_len,
                 .cut = tm->data.max_len,
                 .pad_to_longest = tm->data.pad_to_longest && !a->pad_max,
                 .emit = emit,
                 .user = user,
                 .left_out = left_out};
    size_t cells = (size_t)b.cap * (size_t)b.len;
    int have = rc == 0 && (b.names = malloc((size_t)b.cap * sizeof *b.names)) != NULL;
    for (int r = 0; have && r < TEXT_ROLES; r++)
        have = (b.rows[r] = malloc(cells * sizeof *b.rows[r])) != NULL;
    if (rc == 0 && !have) rc = 1, cli_error(cmd, "out of memory");
    if (rc == 0) {
        run_items(&b, &items, a->text_column);
        rc = b.failed || b.left_out ? 1 : 0;
    }
    for (int r = 0; r < TEXT_ROLES; r++) free(b.rows[r]);
    free(b.names);
    items_free(&items);
    return rc;
}
