/* dist_api.c: the public calls that put a context into the launch's process group. */
#include <stdio.h>
#include <string.h>

#include "../core/context.h"
#include "../core/device_kind.h"
#include "dist.h"

/* A device kind's name alone ("cuda", or "auto" with a GPU) names the rank's own device in a group:
 * the one its collectives (NCCL) run on, else its local rank's among the host's (ranks share
 * devices when there are more ranks than devices). "cuda:N" stays as the caller said. */
static void rank_device(graft_ctx *ctx) {
    if (!ctx->dist) return;
    const device_kind *k = device_kind_of(ctx->device);
    if (!strcmp(ctx->device, "auto")) { /* auto takes the first kind's device 0 alone */
        int n = 0;
        const device_kind *const *kinds = device_kinds(&n);
        char why[256];
        k = n > 0 && kinds[0]->count(why, sizeof why) > 0 ? kinds[0] : NULL;
    } else if (k && strcmp(ctx->device, k->name)) {
        return;
    }
    if (!k) return;
    int index = dist_device_index(ctx->dist);
    if (index < 0) {
        char why[256];
        int n = k->count(why, sizeof why);
        if (n <= 0) return;
        index = dist_local_rank(ctx->dist) % n;
    }
    snprintf(ctx->device, sizeof ctx->device, "%s:%d", k->name, index);
}

graft_status graft_ctx_distribute(graft_ctx *ctx) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    err_clear(&ctx->err);
    if (ctx->dist) return GRAFT_OK;
    graft_status st = dist_create(&ctx->dist, &ctx->err);
    if (st != GRAFT_OK || !ctx->dist) return st;
    rank_device(ctx);
    ctx_log(ctx, GRAFT_LOG_INFO, "rank %d of %d (local rank %d) over %s, on %s",
            dist_rank(ctx->dist), dist_world_size(ctx->dist), dist_local_rank(ctx->dist),
            dist_backend_name(ctx->dist), ctx->device);
    return GRAFT_OK;
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
