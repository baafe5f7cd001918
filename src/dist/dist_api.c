/* dist_api.c: the public calls that put a context into the launch's process group. */
#include "../core/context.h"
#include "dist.h"

graft_status graft_ctx_distribute(graft_ctx *ctx) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    err_clear(&ctx->err);
    if (ctx->dist) return GRAFT_OK;
    return dist_create(&ctx->dist, &ctx->err);
}

void graft_ctx_leave(graft_ctx *ctx, int failed) {
    if (!ctx || !ctx->dist) return;
    dist_leave(ctx->dist, failed != 0);
}

int graft_ctx_rank(const graft_ctx *ctx) {
    return ctx ? dist_rank(ctx->dist) : 0;
}

int graft_ctx_world_size(const graft_ctx *ctx) {
    return ctx ? dist_world_size(ctx->dist) : 1;
}
