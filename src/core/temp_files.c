/* temp_files.c: removing the temporaries that killed atomic writers left next to their files. */
#include "temp_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static bool is_temp_of(const char *name, const char *base) {
    size_t bl = strlen(base);
    return strncmp(name, base, bl) == 0 && strncmp(name + bl, ".tmp.", 5) == 0 &&
           strlen(name + bl + 5) == 6;
}

int temp_files_remove_stale(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    const char *base = slash ? slash + 1 : path;
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!is_temp_of(de->d_name, base)) continue;
        char full[8192];
        snprintf(full, sizeof full, "%s/%s", dir, de->d_name);
        int fd = open(full, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat sb;
        /* a writer holds its temporary locked until it is renamed: an unlocked one is stale */
        if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            unlink(full) == 0)
            removed++;
        close(fd);
    }
    closedir(d);
    return removed;
}
