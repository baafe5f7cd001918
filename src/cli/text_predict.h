/* text_predict.h: the texts `graft predict` classifies with a text model: .txt files, folders of
 * them, a CSV/TSV column, lines of a file or of standard input, texts given on the command line;
 * tokenized as the model says and run in batches. */
#ifndef GRAFT_CLI_TEXT_PREDICT_H
#define GRAFT_CLI_TEXT_PREDICT_H

#include "graft.h"
#include "text_model.h"

typedef enum text_source_kind {
    TEXT_FROM_PATH,  /* a .txt file (one text), a folder of them, a .csv/.tsv, or - (lines) */
    TEXT_FROM_LINES, /* --lines FILE|-: one text per line */
    TEXT_FROM_ARG    /* --text STRING */
} text_source_kind;

typedef struct text_source {
    text_source_kind kind;
    const char *value;
} text_source;

typedef struct text_predict_args {
    const text_source *sources; /* in command-line order; none: the lines of standard input */
    int n_sources;
    const char *text_column; /* of a CSV/TSV */
    long batch;
    int pad_max; /* --pad max: every text padded to max_len (else to its batch's longest) */
} text_predict_args;

/* Called after each model run on n texts (names: "FILE", "FILE:LINE", "text:N"); the model's
 * outputs hold their scores. Returns 0, or non-zero to stop. */
typedef int (*text_emit_fn)(void *user, char **names, int n);

/* Read, tokenize and run every text, in order. A text that is empty or cannot be tokenized, and
 * a CSV row that cannot be read, gets a warning naming it and is left out. Returns the exit
 * status: 0, 1 when some text was left out or the model failed, 2 for a path that does not exist
 * or a folder without .txt files (before any work). */
int text_predict(const char *cmd, graft_ctx *ctx, graft_model *m, const text_model *tm,
                 const text_predict_args *a, text_emit_fn emit, void *user);

#endif
