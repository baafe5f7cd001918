/* bench_head.c: one epoch of head training over cached features, head.c's reference forward and
 * backward next to the head's training graph (head_graph.c, the loss in the pause) and the whole
 * trainer step as trainer_run takes it (the step graph gathering its rows, the loss, the
 * optimizer), for fp32/bf16/fp16 linear and MLP-with-dropout heads, in one run; prints
 * seconds per epoch and the reference's time over the graph's. No assertion: read the table.
 *   bench_head [ROWS [WIDTH [BATCH]]]   (default 100000 2048 256) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/train/trainer.h"

enum { CLASSES = 10 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct bench_case {
    const char *name;
    graft_precision precision;
    int hidden;
    float dropout;
} bench_case;

static graft_status fixed_grad(void *user, const float *logits, int64_t n, float *dlogits,
                               graft_err *e) {
    (void)logits, (void)e;
    memcpy(dlogits, user, sizeof(float) * (size_t)(n * CLASSES));
    return GRAFT_OK;
}

static graft_trainer *make_trainer(const bench_case *c, int64_t width, int64_t batch,
                                   graft_err *e) {
    graft_trainer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->head_options = (graft_head_options)GRAFT_HEAD_OPTIONS_INIT;
    t->head_options.n_outputs = CLASSES;
    t->head_options.n_hidden = c->hidden > 0;
    t->head_options.hidden[0] = c->hidden;
    t->head_options.dropout = c->dropout;
    t->options = (graft_train_options)GRAFT_TRAIN_OPTIONS_INIT;
    t->options.precision = c->precision;
    t->options.batch_size = batch;
    t->scaler = loss_scaler_default();
    t->loss.kind = LOSS_SOFTMAX_CE;
    if (trainer_setup(t, width, e) != GRAFT_OK) {
        free(t);
        return NULL;
    }
    return t;
}

static void free_trainer(graft_trainer *t) {
    head_free(&t->h);
    head_step_free(&t->hs);
    head_graph_free(&t->hg);
    optim_graph_free(&t->og);
    optim_free(t->opt);
    free(t->params);
    free(t);
}

/* What trainer_run does per micro-batch of a head alone: the step graph on rows idx of the
 * training set (its Gather picks them), then the optimizer's step. */
static graft_status run_step(graft_trainer *t, const int64_t *idx, const int64_t *y, int64_t m,
                             graft_err *e) {
    float scale = t->options.precision == GRAFT_PRECISION_FP16 ? t->scaler.scale : 1.0f;
    TRY(head_step_run(&t->hs, idx, y, m, &t->loss, scale, e));
    return ++t->micro % t->options.accumulate == 0 ? trainer_apply_step(t, 1e-3, e) : GRAFT_OK;
}

/* Seconds for an epoch: 0 head.c's forward + backward, 1 the graph's step, 2 the trainer's step
 * as trainer_run takes it (the step graph gathering its rows, and the optimizer). */
static double epoch(graft_trainer *t, int how, const float *x, const int64_t *y, int64_t rows,
                    int64_t width, int64_t batch, const float *dl, graft_err *e) {
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)rows);
    if (!idx || head_step_set_data(&t->hs, x, rows, false, e) != GRAFT_OK) {
        free(idx);
        return -1.0;
    }
    for (int64_t i = 0; i < rows; i++) idx[i] = i;
    double t0 = now();
    for (int64_t at = 0; at < rows; at += batch) {
        int64_t m = rows - at < batch ? rows - at : batch;
        const float *xb = x + at * width, *lg;
        graft_status st = how == 0 ? head_forward(&t->h, xb, m, true, &lg, e)
                          : how == 1
                              ? head_graph_step(&t->hg, xb, m, fixed_grad, (void *)dl, NULL, e)
                              : run_step(t, idx + at, y + at, m, e);
        if (st == GRAFT_OK && how == 0) st = head_backward(&t->h, dl, m, e);
        if (st != GRAFT_OK) {
            free(idx);
            return -1.0;
        }
    }
    free(idx);
    return now() - t0;
}

int main(int argc, char **argv) {
    int64_t rows = argc > 1 ? atoll(argv[1]) : 100000, width = argc > 2 ? atoll(argv[2]) : 2048;
    int64_t batch = argc > 3 ? atoll(argv[3]) : 256;
    if (rows < 1 || width < 1 || batch < 1) {
        fprintf(stderr, "usage: bench_head [ROWS [WIDTH [BATCH]]]\n");
        return 2;
    }
    float *x = malloc(sizeof(float) * (size_t)(rows * width)),
          *dl = malloc(sizeof(float) * (size_t)(batch * CLASSES));
    int64_t *y = malloc(sizeof(int64_t) * (size_t)rows);
    if (!x || !y || !dl) return 1;
    uint64_t s = 42;
    for (int64_t i = 0; i < rows * width; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0) - 0.5f;
    }
    for (int64_t i = 0; i < rows; i++) y[i] = i % CLASSES;
    for (int64_t i = 0; i < batch * CLASSES; i++) dl[i] = (float)(i % 7) / 700.0f - 0.004f;
    static const bench_case cases[] = {
        {"fp32 linear", GRAFT_PRECISION_FP32, 0, 0.0f},
        {"fp32 mlp:512 dropout 0.2", GRAFT_PRECISION_FP32, 512, 0.2f},
        {"bf16 linear", GRAFT_PRECISION_BF16, 0, 0.0f},
        {"bf16 mlp:512 dropout 0.2", GRAFT_PRECISION_BF16, 512, 0.2f},
        {"fp16 linear", GRAFT_PRECISION_FP16, 0, 0.0f},
    };
    printf("%lld rows x %lld, batch %lld: seconds per epoch\n", (long long)rows, (long long)width,
           (long long)batch);
    printf("%-26s %12s %12s %14s %8s\n", "head", "head.c fwd+bwd", "graph step", "trainer step",
           "ref/graph");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        graft_err e = {0};
        graft_trainer *t = make_trainer(&cases[i], width, batch, &e);
        double sec[3] = {-1, -1, -1};
        for (int how = 0; t && how < 3; how++)
            sec[how] = epoch(t, how, x, y, rows, width, batch, dl, &e);
        if (!t || sec[0] < 0 || sec[1] < 0 || sec[2] < 0)
            fprintf(stderr, "%s: %s\n", cases[i].name, e.msg);
        printf("%-26s %12.3f %12.3f %14.3f %8.2f\n", cases[i].name, sec[0], sec[1], sec[2],
               sec[1] > 0 ? sec[0] / sec[1] : 0.0);
        if (t) free_trainer(t);
    }
    free(x), free(y), free(dl);
    return 0;
}
