/* checkpoint.h: what makes a trainer checkpoint checked: checksums (per tensor and over the
 * whole file), the sealed writer, and strict parsers of its metadata fields. */
#ifndef GRAFT_TRAIN_CHECKPOINT_H
#define GRAFT_TRAIN_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "safetensors.h"

/* Metadata keys: "checksum" is the hash (16 hex digits) over every metadata entry but itself,
 * in key order; "checksum.<tensor>" the hash of that tensor's name, dtype, shape and bytes. */
#define CHECKPOINT_SUM_KEY "checksum"
#define CHECKPOINT_SUM_PREFIX "checksum."

/* The hash of one tensor: name, dtype name, shape and data (nbytes). */
uint64_t checkpoint_tensor_sum(const char *name, graft_dtype dtype, int ndim,
                               const int64_t *dims, // (ndim)
                               const void *data, size_t nbytes);

/* safetensors_write with the checksums added to the metadata (which must not hold them). */
graft_status checkpoint_write_sealed(const char *path, const st_tensor_in *tensors, int n_tensors,
                                     const char *const *keys, const char *const *values, int n_meta,
                                     graft_err *e);

/* Check a file's checksums. *sealed is false when it has none (written before checksums;
 * nothing is checked). A mismatch is GRAFT_E_MALFORMED_MODEL "the file is damaged: ..." naming
 * the tensor, or the metadata. */
graft_status checkpoint_verify(const safetensors_file *f, bool *sealed, graft_err *e);

/* Strict metadata fields: present, the whole value parsed, in range; an error names the key,
 * the value and what was expected (`range`, e.g. "the run's 20 epochs"; NULL: no note). */
graft_status checkpoint_get_int(const safetensors_file *f, const char *key, long long lo,
                                long long hi, const char *range, long long *out, graft_err *e);
graft_status checkpoint_get_u64(const safetensors_file *f, const char *key, uint64_t *out,
                                graft_err *e);

/* What a float field may be: finite (the default), also +inf, at least 0, above 0. */
enum { CK_FINITE = 0, CK_POS_INF = 1, CK_NONNEG = 2, CK_POSITIVE = 4 };
graft_status checkpoint_get_float(const safetensors_file *f, const char *key, int rule, double *out,
                                  graft_err *e);

/* The tensor named name: float32 of numel values, every one finite. */
graft_status checkpoint_check_tensor(const safetensors_file *f, const char *name, int64_t numel,
                                     const st_tensor **out, graft_err *e);

#endif
