/* files.c: opening input files as regular files only (a FIFO, device or folder is refused). */
#include "files.h"

#include <errno.h>
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
