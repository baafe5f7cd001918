/* test_train_loss.c: the TrainLoss op (src/ops/train_loss.h) run through graph/exec against the
 * trainer's own computation of a step's loss (loss_compute, the gradient scaled for accumulation
 * and fp16's loss scale, the right answers): bit for bit on the CPU, for every loss and option,
 * with the state's sums over two steps; a bad class index named. With --device cuda:0 (the GPU
 * checks): the op's CUDA kernel, its state resident on the device, within 1e-6. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "graph/build.h"
#include "test_util.h"
#include "train/loss.h"
#include "train/train_exec.h"
#include "train/train_state.h"

#define N 37
#define C 7

static const char *device;

typedef struct lcase {
    const char *name;
    int kind; /* loss_kind */
    float smoothing, grad_scale;
    int accumulate;
    bool fp16, weights;
    bool scale_input; /* grad_scale as input 4 (the attribute says 0.9, which it overrides) */
} lcase;

static graft_status add_input(ir_graph *g, const char *name, graft_dtype dt, int nd, int64_t d0,
                              int64_t d1, int *out, graft_err *e) {
    int64_t dims[2] = {d0, d1};
    return graph_add_input(g, name, dt, nd, dims, out, e);
}

static graft_status set_attrs(ir_node *n, const lcase *k, graft_err *e) {
    static const char *const names[] = {"kind", "label_smoothing", "grad_scale", "accumulate",
                                        "fp16"};
    ir_attr *a = calloc(5, sizeof *a);
    if (!a) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < n->n_attrs; i++) ir_attr_free(&n->attrs[i]);
    free(n->attrs);
    n->attrs = a, n->n_attrs = 5;
    for (int i = 0; i < 5; i++) a[i].name = ir_strdup(names[i]);
    a[0].type = a[3].type = a[4].type = IR_ATTR_INT;
    a[1].type = a[2].type = IR_ATTR_FLOAT;
    a[0].i = k->kind, a[1].f = k->smoothing, a[2].f = k->scale_input ? 0.9f : k->grad_scale;
    a[3].i = k->accumulate, a[4].i = k->fp16;
    return GRAFT_OK;
}

/* logits, targets, weights (or omitted), state[, grad_scale] -> dlogits. */
static graft_status build(ir_graph *g, const lcase *k, graft_err *e) {
    ir_graph_init(g);
    g->opsets = calloc(1, sizeof *g->opsets);
    if (!g->opsets || !(g->opsets[0].domain = ir_strdup("")))
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    g->opsets[0].version = 17, g->n_opsets = 1, g->ir_version = 8;
    int in[5], out;
    TRY(add_input(g, "logits", GRAFT_DTYPE_F32, 2, N, C, &in[0], e));
    if (k->kind == LOSS_SOFTMAX_CE)
        TRY(add_input(g, "targets", GRAFT_DTYPE_I64, 1, N, 0, &in[1], e));
    else
        TRY(add_input(g, "targets", GRAFT_DTYPE_F32, 2, N, C, &in[1], e));
    in[2] = -1;
    if (k->weights) TRY(add_input(g, "weights", GRAFT_DTYPE_F32, 1, C, 0, &in[2], e));
    TRY(add_input(g, "state", GRAFT_DTYPE_U8, 1, (int64_t)sizeof(train_state), 0, &in[3], e));
    if (k->scale_input) TRY(add_input(g, "grad_scale", GRAFT_DTYPE_F32, 1, 1, 0, &in[4], e));
    TRY(graph_add_node(g, "TrainLoss", 1, in, k->scale_input ? 5 : 4, "dlogits", NULL, 0, &out, e));
    TRY(set_attrs(&g->nodes[g->n_nodes - 1], k, e));
    g->outputs = malloc(sizeof(int));
    if (!g->outputs) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    g->outputs[g->n_outputs++] = out;
    g->values[out].is_graph_output = true;
    ir_link_producers(g);
    return graph_infer_shapes(g, e);
}

typedef struct data {
    float x[N * C], yf[N * C], w[C], dl[N * C];
    int64_t yi[N];
    train_state st;
} data;

static void fill(data *d, const lcase *k, int step) {
    uint64_t r = 11 + (uint64_t)step;
    for (int i = 0; i < N * C; i++) d->x[i] = (float)(4.0 * (rng_uniform(&r) - 0.5));
    for (int i = 0; i < N * C; i++)
        d->yf[i] = k->kind == LOSS_BCE_LOGITS ? (float)(rng_uniform(&r) > 0.6)
                                              : (float)(rng_uniform(&r) - 0.5);
    for (int i = 0; i < N; i++) d->yi[i] = (int64_t)rng_below(&r, C);
    for (int j = 0; j < C; j++) d->w[j] = (float)(0.5 + rng_uniform(&r));
}

/* The trainer's computation (trainer.c's loss_and_grad and count_correct) into want. */
static graft_status expected(const data *d, const lcase *k, train_state *st, float *dl,
                             graft_err *e) {
    loss_spec spec = {.kind = (loss_kind)k->kind,
                      .label_smoothing = k->smoothing,
                      .class_weight = k->kind == LOSS_SOFTMAX_CE && k->weights ? d->w : NULL,
                      .pos_weight = k->kind == LOSS_BCE_LOGITS && k->weights ? d->w : NULL,
                      .grad_scale = k->grad_scale};
    double loss;
    const void *y = k->kind == LOSS_SOFTMAX_CE ? (const void *)d->yi : (const void *)d->yf;
    TRY(loss_compute(&loss, dl, &spec, d->x, y, N, C, e));
    double scale = 1.0 / (double)k->accumulate;
    if (k->fp16) scale *= st->scale;
    for (int i = 0; i < N * C; i++) dl[i] = (float)(dl[i] * scale);
    int64_t right = 0;
    for (int i = 0; k->kind == LOSS_SOFTMAX_CE && i < N; i++) {
        int best = 0;
        for (int j = 1; j < C; j++)
            if (d->x[i * C + j] > d->x[i * C + best]) best = j;
        right += best == d->yi[i];
    }
    st->step_loss = loss, st->epoch_loss += loss * N;
    st->step_correct = right, st->epoch_correct += right;
    return GRAFT_OK;
}

static double rel(double a, double b) {
    return fabs(a - b) / fmax(fabs(b), 1e-30);
}

/* One step through the executor; the state in and out of st. */
static graft_status run_op(train_exec *x, const lcase *k, data *d, void *dev_state, graft_err *e) {
    tensor in[5];
    int n = 0;
    float gs = k->grad_scale;
    in[n++] = (tensor){GRAFT_DTYPE_F32, 2, {N, C}, d->x};
    in[n++] = k->kind == LOSS_SOFTMAX_CE ? (tensor){GRAFT_DTYPE_I64, 1, {N}, d->yi}
                                         : (tensor){GRAFT_DTYPE_F32, 2, {N, C}, d->yf};
    if (k->weights) in[n++] = (tensor){GRAFT_DTYPE_F32, 1, {C}, d->w};
    in[n++] = (tensor){GRAFT_DTYPE_U8, 1, {(int64_t)sizeof d->st}, dev_state ? dev_state : &d->st};
    if (k->scale_input) in[n++] = (tensor){GRAFT_DTYPE_F32, 1, {1}, &gs};
    if (dev_state) TRY(train_exec_upload(x, dev_state, &d->st, sizeof d->st, e));
    TRY(train_exec_run(x, in, e));
    memcpy(d->dl, train_exec_output(x, 0)->data, sizeof d->dl);
    if (dev_state) TRY(train_exec_download(x, &d->st, dev_state, sizeof d->st, e));
    return GRAFT_OK;
}

static void run_case(const lcase *k) {
    ir_graph g;
    train_exec x = {0};
    graft_err e = {0};
    void *dev_state = NULL;
    static data d;
    train_state want = {0};
    float want_dl[N * C];
    memset(&d, 0, sizeof d);
    d.st.scale = want.scale = 1024.0f;
    graft_status st = build(&g, k, &e);
    if (st == GRAFT_OK) st = train_exec_init_named(&x, &g, device, 0, &e);
    if (st == GRAFT_OK && device) st = train_exec_device_alloc(&x, sizeof d.st, &dev_state, &e);
    int state_at = g.n_inputs - (k->scale_input ? 2 : 1);
    if (st == GRAFT_OK && device) st = train_exec_input_on_device(&x, state_at, true, &e);
    double worst = 0.0;
    bool exact = true;
    for (int step = 0; st == GRAFT_OK && step < 2; step++) {
        fill(&d, k, step);
        st = expected(&d, k, &want, want_dl, &e);
        if (st == GRAFT_OK) st = run_op(&x, k, &d, dev_state, &e);
        for (int i = 0; st == GRAFT_OK && i < N * C; i++) {
            exact = exact && d.dl[i] == want_dl[i];
            worst = fmax(worst, rel(d.dl[i], want_dl[i]) * (fabs(want_dl[i]) > 1e-12));
        }
        exact = exact && d.st.step_loss == want.step_loss && d.st.epoch_loss == want.epoch_loss;
        worst = fmax(worst, fmax(rel(d.st.step_loss, want.step_loss),
                                 rel(d.st.epoch_loss, want.epoch_loss)));
        if (d.st.epoch_correct != want.epoch_correct) worst = INFINITY;
    }
    bool ok = st == GRAFT_OK && (device ? worst <= 1e-6 : exact);
    CHECK(k->name, ok, "%s worst relative %.3g, exact %d, correct %lld/%lld", e.msg, worst, exact,
          (long long)d.st.epoch_correct, (long long)want.epoch_correct);
    if (device && st == GRAFT_OK) printf("  %s: worst relative %.3g\n", k->name, worst);
    train_exec_device_free(&x, dev_state);
    train_exec_free(&x);
    ir_graph_free(&g);
}

/* A class index out of range fails, naming the op and the sample (the CPU kernel). */
static void test_bad_label(void) {
    lcase k = {"train_loss_bad_label", LOSS_SOFTMAX_CE, 0, 0, 1, false, false, false};
    ir_graph g;
    train_exec x = {0};
    graft_err e = {0};
    static data d;
    memset(&d, 0, sizeof d);
    fill(&d, &k, 0);
    d.yi[5] = C;
    graft_status st = build(&g, &k, &e);
    if (st == GRAFT_OK) st = train_exec_init_named(&x, &g, NULL, 0, &e);
    if (st == GRAFT_OK) st = run_op(&x, &k, &d, NULL, &e);
    CHECK(k.name, st != GRAFT_OK && strstr(e.msg, "TrainLoss") && strstr(e.msg, "5"), "%d: %s", st,
          e.msg);
    train_exec_free(&x);
    ir_graph_free(&g);
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "--device")) device = argv[2];
    const lcase cases[] = {
        {"train_loss_ce", LOSS_SOFTMAX_CE, 0, 0, 1, false, false, false},
        {"train_loss_ce_smoothing_weights_acc2", LOSS_SOFTMAX_CE, 0.1f, 0, 2, false, true, false},
        {"train_loss_ce_fp16", LOSS_SOFTMAX_CE, 0, 0, 1, true, false, false},
        {"train_loss_ce_grad_scale", LOSS_SOFTMAX_CE, 0, 0.25f, 1, false, true, false},
        {"train_loss_bce_pos_weight", LOSS_BCE_LOGITS, 0, 0, 1, false, true, false},
        {"train_loss_bce_fp16_acc4", LOSS_BCE_LOGITS, 0, 0, 4, true, false, false},
        {"train_loss_mse_acc3_grad_scale", LOSS_MSE, 0, 0.5f, 3, false, false, false},
        /* a data-parallel rank's share per run: input 4 over the attribute */
        {"train_loss_ce_grad_scale_input", LOSS_SOFTMAX_CE, 0.1f, 0.3f, 2, false, true, true},
        {"train_loss_bce_grad_scale_input_fp16", LOSS_BCE_LOGITS, 0, 0.6f, 1, true, true, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);
    if (!device) test_bad_label();
    return test_failures ? 1 : 0;
}
