/* text_model.h: a text classifier's tokenizer settings, recorded in its metadata by `graft
 * finetune --vocab` and read back by `graft predict` and `graft eval`: the vocabulary, cased,
 * max_len, the special tokens' ids and which model input takes the ids, mask and type ids. */
#ifndef GRAFT_CLI_TEXT_MODEL_H
#define GRAFT_CLI_TEXT_MODEL_H

#include <stdint.h>

#include "finetune.h"
#include "graft.h"

/* The three arrays BERT takes, in the order the text data set feeds them. */
enum {
    TEXT_IDS = GRAFT_TEXT_INPUT_IDS,
    TEXT_MASK = GRAFT_TEXT_INPUT_MASK,
    TEXT_TYPE_IDS = GRAFT_TEXT_INPUT_TYPE_IDS,
    TEXT_ROLES = GRAFT_TEXT_INPUT_COUNT
};

/* What the command line says; unset fields come from the model. */
typedef struct text_overrides {
    const char *vocab; /* --vocab FILE, or NULL: the model's graft.text.vocab */
    int cased;         /* 1: --cased given */
    long max_len;      /* 0: not given */
} text_overrides;

typedef struct text_model {
    graft_tokenizer *tok;
    graft_text_options data;       /* for graft_dataset_open_text: the vocabulary, cased, max_len,
                                      pad_to_longest (unless the ids input takes a fixed length) */
    const char *input[TEXT_ROLES]; /* the model's input for each role; NULL: it has none */
    char *owned;                   /* the carried tokenizer's bytes when decoded (base64) */
} text_model;

/* 1 when the model takes token ids (every input an integer tensor) rather than images. */
int text_model_detect(const graft_model *m);

/* The tokenizer and settings for m: the overrides, then the model's graft.text.* metadata, then
 * uncased and the input's declared length (else 128). A model without a vocabulary and no
 * --vocab, a --vocab whose special tokens have other ids than the model was trained with, and
 * inputs whose role cannot be told are errors. Returns 0, or 1 after printing the error. */
int text_model_open(const char *cmd, graft_ctx *ctx, const graft_model *m, const text_overrides *o,
                    text_model *out);
void text_model_close(text_model *tm);

/* For a model whose token-id input takes exactly `fixed` tokens (0 or less: any): a longer
 * *max_len becomes `fixed` (with a note on stderr), a shorter one stays (texts cut at it) and
 * *pad_len gets `fixed` (rows padded to it); otherwise *pad_len is 0. */
void text_fit_fixed_len(const char *cmd, const char *input, long fixed, long *max_len,
                        int *pad_len);

/* Record the run's tokenizer settings and the vocabulary itself in the model's metadata, so that
 * the export is all predict and eval need. Returns 0, or 1 after printing the error. */
int text_model_record(const char *cmd, graft_ctx *ctx, graft_model *m, const finetune_opts *o);

#endif
