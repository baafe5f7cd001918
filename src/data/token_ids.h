/* token_ids.h: the growing array of token ids that every tokenizer model appends to. */
#ifndef GRAFT_DATA_TOKEN_IDS_H
#define GRAFT_DATA_TOKEN_IDS_H

#include <stddef.h>
#include <stdint.h>

/* Append id to the growing array *ids (*n used of *cap); -1 when out of memory. */
int token_ids_push(int64_t **ids, size_t *n, size_t *cap, int64_t id);

#endif
