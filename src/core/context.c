/* context.c: creating contexts, recording the last error and logging through the callback. */
#include "context.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dist/dist.h"
#include "graft_config.h"

const char *graft_version(void) {
    return GRAFT_VERSION;
}

graft_status graft_ctx_create(const graft_ctx_options *options, graft_ctx **out) {
    if (!out) return GRAFT_E_INVALID_ARGUMENT;
    *out = NULL;
    graft_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return GRAFT_E_OUT_OF_MEMORY;
    graft_ctx_options defaults = GRAFT_CTX_OPTIONS_INIT;
    ctx->options = options ? *options : defaults;
    if (ctx->options.num_threads < 0 || ctx->options.log_level < GRAFT_LOG_DEBUG ||
        ctx->options.log_level >= GRAFT_LOG_COUNT) {
        free(ctx);
        return GRAFT_E_INVALID_ARGUMENT;
    }
    const char *d = ctx->options.device ? ctx->options.device : "cpu";
    if (strlen(d) >= sizeof ctx->device) {
        free(ctx);
        return GRAFT_E_INVALID_ARGUMENT;
    }
    snprintf(ctx->device, sizeof ctx->device, "%s", d);
    ctx->options.device = ctx->device;
    *out = ctx;
    return GRAFT_OK;
}

void graft_ctx_free(graft_ctx *ctx) {
    if (ctx) dist_free(ctx->dist);
    free(ctx);
}

const char *graft_last_error(const graft_ctx *ctx) {
    return ctx ? ctx->err.msg : "";
}

graft_status graft_set_error(graft_ctx *ctx, graft_status status, const char *message) {
    if (ctx) err_set(&ctx->err, status, "%s", message ? message : "");
    return status;
}

graft_status ctx_fail(graft_ctx *ctx, const graft_err *e) {
    if (ctx && e && &ctx->err != e) ctx->err = *e;
    return e ? e->status : GRAFT_E_INTERNAL;
}

void ctx_log(const graft_ctx *ctx, graft_log_level level, const char *fmt, ...) {
    if (!ctx || level < ctx->options.log_level) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ctx->options.log_fn) {
        ctx->options.log_fn(level, msg, ctx->options.log_user);
        return;
    }
    static const char *const names[] = {"debug", "info", "warning", "error"};
    fprintf(stderr, "graft: %s: %s\n", names[level], msg);
}
