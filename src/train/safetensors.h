/* safetensors.h: hand-written reader and atomic writer of .safetensors files (tensors + metadata).
 */
#ifndef GRAFT_TRAIN_SAFETENSORS_H
#define GRAFT_TRAIN_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/*
 * File layout (https://github.com/huggingface/safetensors, "Format"):
 *   8 bytes   N, little-endian u64: the header length
 *   N bytes   JSON object: {"__metadata__": {"k": "v", ...},
 *                           "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, ...}
 *             padded with spaces so that 8 + N is a multiple of 8
 *   rest      the data buffer; offsets are relative to its start, the tensors tile it exactly.
 * Dtype names: BOOL U8 I8 U16 I16 U32 I32 U64 I64 F16 BF16 F32 F64 (the graft dtypes; others,
 * such as F8_E4M3, are rejected as unsupported). Data is little-endian, row-major.
 */

/* A tensor to write. */
typedef struct st_tensor_in {
    const char *name; /* unique, not "__metadata__", UTF-8 */
    graft_dtype dtype;
    int ndim;            /* 0..GRAFT_MAX_DIMS; 0 is a scalar */
    const int64_t *dims; // (ndim)
    const void *data;    // (prod(dims)) elements of dtype, little-endian
} st_tensor_in;

/* Write tensors[0..n_tensors) and metadata (keys[i] -> values[i], i < n_meta) to path,
 * atomically: a temporary file in the same folder is written, flushed, fsync'ed and renamed over
 * path; on any failure the temporary file is removed and path is left as it was. Tensors are laid
 * out by element size (largest first), then by name, so every tensor is aligned to its element
 * size within the file. */
graft_status safetensors_write(const char *path, const st_tensor_in *tensors, int n_tensors,
                               const char *const *meta_keys, const char *const *meta_values,
                               int n_meta, graft_err *err);

/* Stale temporaries of path ("<path>.tmp.XXXXXX") are removed on every write and when a
 * checkpoint is loaded: temp_files_remove_stale (src/core/temp_files.h). */

/* A tensor of a file that was read. `data` points into the file's buffer (valid until
 * safetensors_free); it is aligned to the element size when the file's offsets are (graft's and
 * the Python package's writers ensure that), otherwise copy it out with memcpy. */
typedef struct st_tensor {
    const char *name;
    graft_dtype dtype;
    int ndim;
    int64_t dims[GRAFT_MAX_DIMS];
    int64_t numel;
    const void *data;
    size_t nbytes;
} st_tensor;

typedef struct safetensors_file safetensors_file;

/* Read and validate a whole file. A file that cannot be read is GRAFT_E_IO; any malformation
 * (short file, header length beyond the file, bad JSON, unknown dtype, shape/offset mismatch,
 * overlapping or uncovering offsets, duplicate names) is GRAFT_E_MALFORMED_MODEL ("the file
 * breaks its format") with a message naming the problem. Never trusts the file. */
graft_status safetensors_open(safetensors_file **out, const char *path, graft_err *err);
/* The same from bytes in memory (copied). */
graft_status safetensors_from_memory(safetensors_file **out, const void *bytes, size_t size,
                                     graft_err *err);
void safetensors_free(safetensors_file *f);

int safetensors_count(const safetensors_file *f);
/* Tensors in file order (ascending data offset); NULL when i is out of range. */
const st_tensor *safetensors_tensor_at(const safetensors_file *f, int i);
/* The tensor named name, or NULL. */
const st_tensor *safetensors_find(const safetensors_file *f, const char *name);

int safetensors_meta_count(const safetensors_file *f);
/* The metadata value for key, or NULL. */
const char *safetensors_meta(const safetensors_file *f, const char *key);
/* Metadata entry i (in header order); returns the key and sets *value; NULL if out of range. */
const char *safetensors_meta_at(const safetensors_file *f, int i, const char **value);

/* Whether s[0..n) is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF). */
bool safetensors_utf8_valid(const unsigned char *s, size_t n);

/* The safetensors name of a dtype ("F32"), or NULL when the format has none. */
const char *safetensors_dtype_name(graft_dtype dtype);

#endif
