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
bool hf_get_bool(const json_t *o, const char *key, bool dflt);
/* A string member (its length in *len when len is not NULL), or NULL when absent or null. */
const char *hf_get_str(const json_t *o, const char *key, size_t *len);
char *hf_dup(const char *s, size_t n);

/* The "model" object; then added tokens, post-processor, padding and the special roles. */
graft_status hf_load_model(loader *l, const json_t *model);
graft_status hf_load_post(loader *l, const json_t *root);

#endif
