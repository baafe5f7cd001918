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

int file_read_all(const char *path, size_t max_bytes, char **buf, size_t *len, const char **why,
                  int *too_big) {
    *buf = NULL, *len = 0;
    if (too_big) *too_big = 0;
    FILE *f = file_open_regular(path, why);
    if (!f) return -1;
    struct stat sb;
    size_t want = fstat(fileno(f), &sb) == 0 ? (size_t)sb.st_size : 0, n = 0;
    char *b = NULL;
    int rc = 0;
    if (want > max_bytes) rc = -1, *why = "larger than the limit";
    size_t cap = want + 1 < (1u << 16) ? (1u << 16) : want + 1;
    if (!rc && !(b = malloc(cap + 1))) rc = -1, *why = "out of memory";
    while (!rc) {
        n += fread(b + n, 1, cap - n, f);
        if (ferror(f)) rc = -1, *why = strerror(errno ? errno : EIO);
        if (rc || n < cap) break;
        char *nb = cap <= max_bytes ? realloc(b, cap * 2 + 1) : NULL;
        if (!nb)
            rc = -1, *why = cap > max_bytes ? "larger than the limit" : "out of memory";
        else
            b = nb, cap *= 2;
    }
    fclose(f);
    if (!rc && n > max_bytes) rc = -1, *why = "larger than the limit";
    if (rc) {
        if (too_big) *too_big = strcmp(*why, "larger than the limit") == 0;
        free(b);
        return -1;
    }
    b[n] = 0;
    *buf = b, *len = n;
    return 0;
}
