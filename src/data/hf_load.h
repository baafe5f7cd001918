/* hf_load.h: what the two halves of the tokenizer.json reader (hf_load.c, hf_load_model.c) share.
 */
#ifndef GRAFT_DATA_HF_LOAD_H
#define GRAFT_DATA_HF_LOAD_H

#include <jansson.h>

#include "data/hf_tokenizer.h"

typedef struct loader {
    hf_tokenizer *t;
    graft_err *e;
} loader;

/* GRAFT_E_INVALID_ARGUMENT with "FILE: message". */
graft_status hf_bad(loader *l, const char *fmt, ...) GRAFT_PRINTF(2, 3);
graft_status hf_oom(loader *l);
/* A new, empty tokenizer named name (special ids -1); out-of-memory is an error naming it. */
graft_status hf_tokenizer_new(hf_tokenizer **out, const char *name, graft_err *e);
bool hf_get_bool(const json_t *o, const char *key, bool dflt);
/* A string member (its length in *len when len is not NULL), or NULL when absent or null. */
const char *hf_get_str(const json_t *o, const char *key, size_t *len);
char *hf_dup(const char *s, size_t n);

/* A SentencePiece precompiled charsmap's bytes (trie size, darts units, replacement strings)
 * into z, which becomes a Precompiled normalizer. */
graft_status hf_precompiled_set(loader *l, hf_normalizer *z, const unsigned char *raw, size_t n);
/* One BPE merge a + b of rank r (the model's vocab and prefix set); what starts the messages. */
graft_status hf_add_merge(loader *l, const char *what, const char *a, size_t na, const char *b,
                          size_t nb, size_t r);
/* The text of every id (t->id_tokens) from the model's vocab. */
graft_status hf_index_ids(loader *l);
/* Append a template piece: seq 0 ($A), 1 ($B), or -1 with the special token's ids. */
graft_status hf_add_piece(loader *l, hf_template *tp, int seq, int type_id, const int64_t *ids,
                          size_t n);

/* The "model" object; then added tokens, post-processor, padding and the special roles. */
graft_status hf_load_model(loader *l, const json_t *model);
graft_status hf_load_post(loader *l, const json_t *root);

/* Builders for the files that are not a tokenizer.json (hf_files.c, hf_spm.c): name is the file
 * for messages. vocab.json + merges.txt (GPT-2 / RoBERTa byte-level BPE), with *bundle (when not
 * NULL; malloc'd text) the two as the JSON object {"vocab.json": {...}, "merges.txt": "..."} that
 * hf_from_bpe_bundle reads back; a SentencePiece .model (Unigram or BPE). */
graft_status hf_from_bpe_files(hf_tokenizer **out, const char *vocab_json, size_t vocab_size,
                               const char *merges, size_t merges_size, const char *name,
                               char **bundle, graft_err *e);
graft_status hf_from_bpe_bundle(hf_tokenizer **out, const char *data, size_t size, const char *name,
                                graft_err *e);
graft_status hf_from_spm(hf_tokenizer **out, const unsigned char *data, size_t size,
                         const char *name, graft_err *e);

#endif
