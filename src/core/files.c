/* files.c: opening input files as regular files only (a FIFO, device or folder is refused). */
#include "files.h"

#include <errno.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *not_regular(mode_t m) {
    if (S_ISDIR(m)) return "not a regular file (a folder)";
    if (S_ISFIFO(m)) return "not a regular file (a FIFO; not read)";
    if (S_ISSOCK(m)) return "not a regular file (a socket; not read)";
    if (S_ISCHR(m) || S_ISBLK(m)) return "not a regular file (a device; not read)";
    return "not a regular file";
}

FILE *file_open_regular(const char *path, const char **why) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        *why = strerror(errno);
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        *why = fstat(fd, &sb) != 0 ? strerror(errno) : not_regular(sb.st_mode);
        close(fd);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl != -1) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        *why = strerror(errno);
        close(fd);
    }
    return f;
}

static const char TOO_BIG[] = "larger than the limit";

/* Read what is left of f into a growing buffer of at most max_bytes (+1 for the NUL). */
static char *read_rest(FILE *f, size_t size_hint, size_t max_bytes, size_t *n, const char **why) {
    size_t cap = size_hint + 1 < (1u << 16) ? (1u << 16) : size_hint + 1;
    char *b = malloc(cap + 1);
    *n = 0;
    while (b) {
        *n += fread(b + *n, 1, cap - *n, f);
        if (ferror(f)) return free(b), *why = strerror(errno ? errno : EIO), NULL;
        if (*n > max_bytes) return free(b), *why = TOO_BIG, NULL;
        if (*n < cap) return b;
        char *nb = realloc(b, cap * 2 + 1);
        if (!nb) free(b);
        b = nb, cap *= 2;
    }
    *why = "out of memory";
    return NULL;
}

int file_read_all(const char *path, size_t max_bytes, char **buf, size_t *len, const char **why,
                  int *too_big) {
    *buf = NULL, *len = 0;
    if (too_big) *too_big = 0;
    FILE *f = file_open_regular(path, why);
    if (!f) return -1;
    struct stat sb;
    size_t size = fstat(fileno(f), &sb) == 0 ? (size_t)sb.st_size : 0, n = 0;
    char *b = size > max_bytes ? (*why = TOO_BIG, NULL) : read_rest(f, size, max_bytes, &n, why);
    fclose(f);
    if (!b) {
        if (too_big) *too_big = *why == TOO_BIG;
        return -1;
    }
    b[n] = 0;
    *buf = b, *len = n;
    return 0;
}
