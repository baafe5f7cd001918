/* npy.h: reading and writing NumPy .npy files (format versions 1 to 3, little-endian). */
#ifndef GRAFT_CLI_NPY_H
#define GRAFT_CLI_NPY_H

#include <stddef.h>

#include "graft.h"

/* Read path into t (t->data malloc'ed). On failure returns non-zero and writes a message. */
int npy_read(const char *path, graft_tensor *t, char *err, size_t err_size);
int npy_write(const char *path, const graft_tensor *t, char *err, size_t err_size);

#endif
