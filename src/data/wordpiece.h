/* wordpiece.h: BERT's tokenizer (basic tokenizer + greedy WordPiece), ids equal to Hugging Face's
 * BertTokenizer. */
#ifndef GRAFT_DATA_WORDPIECE_H
#define GRAFT_DATA_WORDPIECE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* A loaded vocabulary and its settings. Read-only after wordpiece_load: one tokenizer may be
 * used by several threads at once (each call allocates its own scratch memory). */
typedef struct wordpiece wordpiece;

/* Read a BERT vocab.txt (one token a line, the id is the line number, counting from 0).
 * lowercase: the uncased model's normalisation (lower-case and strip accents); false: cased.
 * [UNK], [CLS], [SEP] and [PAD] must be in the vocabulary. */
graft_status wordpiece_load(wordpiece **out, const char *vocab_path, bool lowercase, graft_err *e);
/* The same from a vocab.txt's bytes in memory (copied); name stands for it in messages. */
graft_status wordpiece_load_memory(wordpiece **out, const char *data, size_t size, const char *name,
                                   bool lowercase, graft_err *e);
void wordpiece_free(wordpiece *wp);

int wordpiece_vocab_size(const wordpiece *wp);
/* The id of a token exactly as written in the vocabulary, or -1. */
int64_t wordpiece_token_id(const wordpiece *wp, const char *token, size_t len);
/* The token of an id (NUL-terminated, owned by wp), or NULL when out of range. */
const char *wordpiece_token(const wordpiece *wp, int64_t id);
int64_t wordpiece_pad_id(const wordpiece *wp);
/* A vocabulary or tokenizer file, whole, NUL-terminated (*size without the NUL); errors name the
 * path and what the file is ("vocabulary", "merges.txt", "SentencePiece model"...). */
/* Tokenizer files (vocab.txt, tokenizer.json, merges.txt) larger than this are refused. */
#define TOKENIZER_MAX_FILE_BYTES (1u << 30)
graft_status tokenizer_read_file(const char *path, const char *what, char **out, size_t *size,
                                 graft_err *e);

/* Tokenize text[0..len) without special tokens around it: *ids (malloc'd, grown as needed,
 * capacity *cap) receives *n ids. Invalid UTF-8 is GRAFT_E_INVALID_ARGUMENT naming the byte
 * offset. The caller frees *ids. */
graft_status wordpiece_tokenize(const wordpiece *wp, const char *text, size_t len, int64_t **ids,
                                size_t *n, size_t *cap, graft_err *e);

/* Encode "[CLS] a [SEP]" or, with b non-NULL, "[CLS] a [SEP] b [SEP]" (a, b NUL-terminated).
 * An empty b counts as no pair (as in Hugging Face's tokenizers).
 * max_len > 0: truncate to max_len tokens, specials included ('longest_first' for pairs, as the
 * tokenizers package: both halves cut to max/2 when both are long); max_len must then leave
 * room for the special tokens. max_len == 0: no truncation.
 * pad: fill up to max_len with [PAD] (type 0, mask 0); needs max_len > 0.
 * input_ids, type_ids, mask: caller buffers of `cap` entries each // (cap,); type_ids and mask
 * may be NULL. *out_len receives the length before padding. A result longer than cap is
 * GRAFT_E_INVALID_ARGUMENT. */
graft_status wordpiece_encode(const wordpiece *wp, const char *a, const char *b, int max_len,
                              bool pad, int64_t *input_ids, int64_t *type_ids, int64_t *mask,
                              size_t cap, size_t *out_len, graft_err *e);

/* 'longest_first' truncation of a pair of na and nb tokens to room tokens in all (the tokenizers
 * package's rule); shared with the tokenizer.json pipeline. */
void tokens_truncate_pair(size_t *na, size_t *nb, size_t room);

#endif
