/* fuzz_util.h: helpers the libFuzzer targets share (an input as a temporary file, a quiet ctx). */
#ifndef GRAFT_FUZZ_UTIL_H
#define GRAFT_FUZZ_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graft.h"

/* Write data to a per-process file named with `suffix` (readers that take a path); returns its
 * path (static buffer) or NULL. */
static inline const char *fuzz_temp_file(const uint8_t *data, size_t size, const char *suffix) {
    static char path[256];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/graft-fuzz-%ld%s", dir && *dir ? dir : "/tmp", (long)getpid(),
             suffix);
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    size_t put = size ? fwrite(data, 1, size, f) : 0;
    if (fclose(f) != 0 || put != size) return NULL;
    return path;
}

static void fuzz_quiet_log(graft_log_level level, const char *msg, void *user) {
    (void)user, (void)level, (void)msg;
}

/* A context on the reference kernels that logs nothing. */
static inline graft_ctx *fuzz_ctx(void) {
    graft_ctx_options o = GRAFT_CTX_OPTIONS_INIT;
    o.use_reference_kernels = 1;
    o.log_level = GRAFT_LOG_ERROR;
    o.log_fn = fuzz_quiet_log;
    graft_ctx *ctx = NULL;
    if (graft_ctx_create(&o, &ctx) != GRAFT_OK) return NULL;
    return ctx;
}
#endif
