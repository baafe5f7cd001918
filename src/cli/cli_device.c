/* cli_device.c: --device auto for the tool: the CPU without a word when there is no GPU to miss,
 * and the "no usable GPU" note once per machine state rather than on every run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"

/* $XDG_CACHE_HOME/graft/gpu-state (or ~/.cache/...): the last "no usable GPU" reason told. */
static int state_path(char *path, size_t size, int make_dirs) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[3072];
    if (xdg && *xdg)
        snprintf(dir, sizeof dir, "%s", xdg);
    else if (home && *home)
        snprintf(dir, sizeof dir, "%s/.cache", home);
    else
        return -1;
    if (make_dirs) mkdir(dir, 0700);
    size_t n = strlen(dir);
    snprintf(dir + n, sizeof dir - n, "/graft");
    if (make_dirs) mkdir(dir, 0700);
    return snprintf(path, size, "%s/gpu-state", dir) < (int)size ? 0 : -1;
}

/* Whether `why` was told last time (so this machine's state has not changed since). */
static int told_before(const char *why) {
    char path[4096], last[512] = "";
    if (state_path(path, sizeof path, 0) != 0) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(last, 1, sizeof last - 1, f);
    fclose(f);
    last[n] = 0;
    last[strcspn(last, "\n")] = 0;
    return strcmp(last, why) == 0;
}

static void remember(const char *why) {
    char path[4096], tmp[4200];
    if (state_path(path, sizeof path, 1) != 0) return;
    snprintf(tmp, sizeof tmp, "%s.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    int ok = fprintf(f, "%s\n", why) > 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) remove(tmp);
}

const char *cli_resolve_device(const char *cmd, const char *device) {
    if (!device || strcmp(device, "auto") != 0) return device;
    if (!graft_cuda_built()) return "cpu"; /* a CPU build: the CPU is what was asked for */
    char why[256] = "";
    if (graft_gpu_count(why, sizeof why) > 0) return device;
    if (!told_before(why)) {
        fprintf(stderr,
                "graft %s: note: no usable GPU (%s); running on the CPU (said once until this "
                "changes; `graft devices` has details)\n",
                cmd, why);
        remember(why);
    }
    return "cpu";
}
