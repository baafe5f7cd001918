/* tokenizer.h: the tokenizer behind graft_tokenizer: BERT WordPiece over a vocab.txt, or a
 * Hugging Face tokenizer.json pipeline (told apart by content). */
#ifndef GRAFT_DATA_TOKENIZER_H
#define GRAFT_DATA_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* A file is read as tokenizer.json when its first non-blank byte is '{' and it has a "model"
 * member; anything else is a vocab.txt. */
bool tokenizer_is_json(const char *data, size_t size);

/* From a file, or from bytes in memory (copied; name stands for them in messages). lowercase
 * applies to vocab.txt only: a tokenizer.json says itself how it normalizes. */
graft_status tokenizer_load(graft_tokenizer **out, const char *path, bool lowercase, graft_err *e);
graft_status tokenizer_load_memory(graft_tokenizer **out, const char *data, size_t size,
                                   const char *name, bool lowercase, graft_err *e);
void tokenizer_free(graft_tokenizer *t);

/* See wordpiece_encode: the special tokens are the tokenizer's (its post-processor's). */
graft_status tokenizer_encode(const graft_tokenizer *t, const char *a, const char *b, int max_len,
                              bool pad, int64_t *input_ids, int64_t *type_ids, int64_t *mask,
                              size_t cap, size_t *out_len, graft_err *e);

#endif
