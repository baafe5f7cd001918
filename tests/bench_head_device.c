/* bench_head_device.c: a head's whole training (trainer_run: its step graph and the optimizer's)
 * over cached features on a device, timed per epoch; tools/bench_head_gpu.py runs it beside
 * PyTorch doing the same. No assertion: read the table.
 *   bench_head_device MODEL DEVICE [ROWS [WIDTH [BATCH [EPOCHS [HIDDEN [PRECISION]]]]]]
 * MODEL only gives the trainer its device (any model loads); PRECISION fp32, bf16 or fp16. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/core/rng.h"
#include "../src/train/trainer.h"

enum { CLASSES = 10 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct times {
    double last, epochs[64];
    int n;
} times;

static int on_report(const graft_train_report *r, void *user) {
    times *tm = user;
    if (r->epoch_end && tm->n < 64) {
        double t = now();
        tm->epochs[tm->n++] = t - tm->last;
        tm->last = t;
    }
    return 0;
}

static graft_trainer *make(graft_model *m, int64_t width, int64_t batch, int epochs, int hidden,
                           graft_precision prec, times *tm, graft_err *e) {
    graft_trainer *t = calloc(1, sizeof *t);
    t->model = m;
    t->head_options = (graft_head_options)GRAFT_HEAD_OPTIONS_INIT;
    t->head_options.n_outputs = CLASSES;
    t->head_options.n_hidden = hidden > 0;
    t->head_options.hidden[0] = hidden;
    t->options = (graft_train_options)GRAFT_TRAIN_OPTIONS_INIT;
    t->options.optimizer = GRAFT_OPTIMIZER_ADAMW, t->options.lr = 1e-3;
    t->options.batch_size = batch, t->options.epochs = epochs, t->options.precision = prec;
    t->options.callback = on_report, t->options.callback_user = tm;
    t->scaler = loss_scaler_default();
    t->best_metric = 1e300;
    t->rng = 7;
    t->loss.kind = LOSS_SOFTMAX_CE;
    if (trainer_setup(t, width, e) != GRAFT_OK) return t;
    return t;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_head_device MODEL DEVICE [ROWS [WIDTH [BATCH [EPOCHS "
                        "[HIDDEN [PRECISION]]]]]]\n");
        return 2;
    }
    int64_t rows = argc > 3 ? atoll(argv[3]) : 20000, width = argc > 4 ? atoll(argv[4]) : 2048;
    int64_t batch = argc > 5 ? atoll(argv[5]) : 256;
    int epochs = argc > 6 ? atoi(argv[6]) : 10, hidden = argc > 7 ? atoi(argv[7]) : 0;
    const char *ps = argc > 8 ? argv[8] : "fp32";
    graft_precision prec = !strcmp(ps, "bf16")   ? GRAFT_PRECISION_BF16
                           : !strcmp(ps, "fp16") ? GRAFT_PRECISION_FP16
                                                 : GRAFT_PRECISION_FP32;
    graft_ctx_options o = GRAFT_CTX_OPTIONS_INIT;
    o.device = argv[2];
    const char *log = getenv("GRAFT_LOG"); /* debug: where the head's steps went */
    if (log && !strcmp(log, "debug")) o.log_level = GRAFT_LOG_DEBUG;
    graft_ctx *ctx = NULL;
    graft_model *m = NULL;
    if (graft_ctx_create(&o, &ctx) != GRAFT_OK || graft_model_load(ctx, argv[1], &m) != GRAFT_OK) {
        fprintf(stderr, "bench_head_device: %s\n", ctx ? graft_last_error(ctx) : "no context");
        return 1;
    }
    float *x = malloc(sizeof(float) * (size_t)(rows * width));
    int64_t *y = malloc(sizeof(int64_t) * (size_t)rows);
    uint64_t s = 1;
    for (int64_t i = 0; i < rows * width; i++) x[i] = (float)(rng_uniform(&s) - 0.5);
    for (int64_t i = 0; i < rows; i++) y[i] = (int64_t)rng_below(&s, CLASSES);
    graft_err e = {0};
    times tm = {0};
    graft_trainer *t = make(m, width, batch, epochs, hidden, prec, &tm, &e);
    double t0 = now();
    tm.last = t0;
    graft_status st =
        t->head_ready ? trainer_run(t, x, y, rows, NULL, NULL, 0, &e) : GRAFT_E_INTERNAL;
    double total = now() - t0;
    if (st != GRAFT_OK) {
        fprintf(stderr, "bench_head_device: %s\n", e.msg);
        return 1;
    }
    double rest = 0;
    for (int i = 1; i < tm.n; i++) rest += tm.epochs[i];
    printf("graft %s %s rows %lld width %lld batch %lld hidden %d: %d epochs %.3f s (first %.3f s, "
           "later %.4f s each), on device %d\n",
           argv[2], ps, (long long)rows, (long long)width, (long long)batch, hidden, tm.n, total,
           tm.n ? tm.epochs[0] : 0.0, tm.n > 1 ? rest / (tm.n - 1) : 0.0, (int)t->gpu.used);
    graft_trainer_free(t);
    graft_model_free(m);
    graft_ctx_free(ctx);
    free(x), free(y);
    return 0;
}
