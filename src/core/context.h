/* context.h: the library context (settings, last error, logging) shared by every handle. */
#ifndef GRAFT_CORE_CONTEXT_H
#define GRAFT_CORE_CONTEXT_H

#include <stdbool.h>

#include "error.h"

struct graft_ctx {
    graft_ctx_options options;
    graft_err err;
    char device[32];   /* options.device, copied */
    bool device_noted; /* the CPU fallback of "auto" was reported */
    struct dist *dist; /* graft_ctx_distribute's process group; NULL alone (src/dist/) */
};

/* Record e as the context's last error and return its status. */
graft_status ctx_fail(graft_ctx *ctx, const graft_err *e);
void ctx_log(const graft_ctx *ctx, graft_log_level level, const char *fmt, ...) GRAFT_PRINTF(3, 4);

#endif
