/* files.h: opening input files as regular files only (a FIFO, device or folder is refused). */
#ifndef GRAFT_CORE_FILES_H
#define GRAFT_CORE_FILES_H

#include <stdio.h>

/* fopen(path, "rb") for a regular file: opened with O_NONBLOCK (so a FIFO cannot block the open),
 * then checked with fstat on the open file (what is checked is what is read). On failure NULL,
 * and *why (static or strerror's text) says why: the open's error, or "not a regular file (a
 * FIFO)" and the like. */
FILE *file_open_regular(const char *path, const char **why);

/* The whole of a regular file (file_open_regular) into *buf (malloc'd, NUL-terminated beyond
 * *len), refused with a reason before allocating when it holds more than max_bytes (and while
 * reading, should it grow). 0 on success; else -1 and *why: the open's reason, "out of memory",
 * a read error, or "larger than ..." (*too_big set, when not NULL). */
int file_read_all(const char *path, size_t max_bytes, char **buf, size_t *len, const char **why,
                  int *too_big);

#endif
