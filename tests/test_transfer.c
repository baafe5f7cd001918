/* test_transfer.c: transfer learning works on real data: the small CNN of models/digits_cnn.onnx
 * (pretrained by tools/make_digits_transfer.py on scikit-learn's digits 0-4) is cut, a new head
 * is trained for digits 5-9 with PyTorch's recipe (AdamW lr 1e-2, wd 1e-4 on weights, batch 32,
 * 100 epochs), and the validation accuracy must reach PyTorch's within 1 point. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/npy.h"
#include "graft.h"
#include "test_util.h"

static int load(const char *dir, const char *name, graft_tensor *t) {
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (npy_read(path, t, err, sizeof err) == 0) return 0;
    printf("  %s\n", err);
    return -1;
}

static int first_epoch(const graft_train_report *r, void *user) {
    if (r->epoch_end && *(double *)user < 0) *(double *)user = r->loss;
    return 0;
}

/* The ridge warm start is a better start: the first epoch's loss is lower than from the random
 * initialisation, and its validation accuracy after that one epoch is already high. */
static void ridge_start(graft_model *m, graft_named_tensor *train, const graft_tensor *ty,
                        graft_named_tensor *val, const graft_tensor *vy) {
    double loss[2] = {-1, -1}, acc[2] = {-1, -1}, vloss;
    for (int ridge = 0; ridge < 2; ridge++) {
        graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
        ho.n_outputs = 5;
        graft_train_options to = GRAFT_TRAIN_OPTIONS_INIT;
        to.optimizer = GRAFT_OPTIMIZER_ADAMW, to.lr = 1e-2, to.weight_decay = 1e-4;
        to.batch_size = 32, to.epochs = 1, to.seed = 0;
        to.ridge_warm_start = ridge, to.ridge_lambda = 1.0;
        to.callback = first_epoch, to.callback_user = &loss[ridge];
        graft_trainer *t = NULL;
        if (graft_trainer_create(m, &ho, &to, &t) == GRAFT_OK &&
            graft_trainer_fit(t, train, 1, ty, NULL, 0, NULL) == GRAFT_OK)
            graft_trainer_evaluate(t, val, 1, vy, &vloss, &acc[ridge]);
        graft_trainer_free(t);
    }
    CHECK("ridge_warm_start_better_start", loss[1] >= 0 && loss[1] < loss[0] && acc[1] > acc[0],
          "first-epoch loss %.4f (random) vs %.4f (ridge); accuracy %.4f vs %.4f", loss[0], loss[1],
          acc[0], acc[1]);
    printf("  after one epoch: random start loss %.4f acc %.4f, ridge start loss %.4f acc %.4f\n",
           loss[0], acc[0], loss[1], acc[1]);
}

/* Attach the head (with softmax), export the grafted model with class names, reload it: the
 * reloaded model gives the same probabilities. Leaves the file, its inputs and graft's outputs
 * in out_dir for tools/check_export.py to run through ONNX Runtime. */
static void export_grafted(graft_ctx *ctx, graft_model *m, graft_trainer *t, graft_tensor *vx,
                           const char *out_dir) {
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/digits_grafted.onnx", out_dir);
    graft_tensor some = *vx;
    some.dims[0] = 32;
    graft_named_tensor in = {"input", some};
    const char *classes[5] = {"five", "six", "seven", "eight", "nine"};
    graft_export_options eo = GRAFT_EXPORT_OPTIONS_INIT;
    eo.class_names = classes, eo.n_class_names = 5;
    eo.preprocessing = "{\"scale\": 0.0625, \"mean\": 0.3053, \"std\": 0.376}";
    graft_status st = graft_trainer_attach(t, 1);
    if (st == GRAFT_OK) st = graft_model_run(m, &in, 1);
    const graft_tensor *p = NULL;
    if (st == GRAFT_OK) st = graft_model_output(m, 0, &p);
    if (st == GRAFT_OK) st = graft_model_export(m, path, &eo);
    graft_model *back = NULL;
    if (st == GRAFT_OK) st = graft_model_load(ctx, path, &back);
    const graft_tensor *q = NULL;
    if (st == GRAFT_OK) st = graft_model_run(back, &in, 1);
    if (st == GRAFT_OK) st = graft_model_output(back, 0, &q);
    double worst = st == GRAFT_OK ? 0 : 1;
    for (int64_t i = 0; q && i < graft_tensor_numel(p); i++) {
        double d = fabs(((const float *)p->data)[i] - ((const float *)q->data)[i]);
        worst = d > worst ? d : worst;
    }
    const char *key = NULL, *value = "";
    for (int i = 0; back && i < graft_model_metadata_count(back); i++) {
        graft_model_metadata(back, i, &key, &value);
        if (!strcmp(key, "graft.classes")) break;
        value = "";
    }
    CHECK("transfer_export_round_trip", st == GRAFT_OK && worst <= 1e-5 && strstr(value, "seven"),
          "status %d: %s; max difference %.3g; classes '%s'", st, graft_last_error(ctx), worst,
          value);
    graft_value_info ii = {0}, oi = {0};
    if (back) graft_model_input_info(back, 0, &ii), graft_model_output_info(back, 0, &oi);
    CHECK("transfer_export_batch_dim_named",
          ii.dim_names[0] && oi.dim_names[0] && !strcmp(ii.dim_names[0], oi.dim_names[0]) &&
              oi.dims[0] < 0,
          "input's leading dim '%s', output's '%s' (%lld)",
          ii.dim_names[0] ? ii.dim_names[0] : "(none)",
          oi.dim_names[0] ? oi.dim_names[0] : "(none)", (long long)oi.dims[0]);
    snprintf(path, sizeof path, "%s/digits_grafted.in.input.npy", out_dir);
    if (p && npy_write(path, &some, err, sizeof err) == 0) {
        snprintf(path, sizeof path, "%s/digits_grafted.graft.probabilities.npy", out_dir);
        npy_write(path, p, err, sizeof err);
    }
    graft_model_free(back);
}

int main(int argc, char **argv) {
    const char *model = argc > 1 ? argv[1] : "models/digits_cnn.onnx";
    const char *dir = argc > 2 ? argv[2] : "build/test-logs/digits";
    const char *out_dir = argc > 3 ? argv[3] : dir;
    graft_tensor tx, ty, vx, vy;
    double ref_mean = 0, ref_min = 0, ref_max = 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/transfer_reference.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f ||
        fscanf(f, "val_accuracy_mean %lf val_accuracy_min %lf val_accuracy_max %lf", &ref_mean,
               &ref_min, &ref_max) != 3 ||
        load(dir, "transfer_train_x.npy", &tx) || load(dir, "transfer_train_y.npy", &ty) ||
        load(dir, "transfer_val_x.npy", &vx) || load(dir, "transfer_val_y.npy", &vy)) {
        CHECK("transfer_digits", 0, "run tools/export_digits.py %s first", dir);
        return 1;
    }
    fclose(f);
    graft_ctx *ctx;
    graft_model *m;
    graft_trainer *t = NULL;
    graft_ctx_create(NULL, &ctx);
    graft_status st = graft_model_load(ctx, model, &m);
    if (st == GRAFT_OK) st = graft_model_cut(m, "auto", GRAFT_POOLING_AUTO);
    graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
    ho.n_outputs = 5;
    graft_train_options to = GRAFT_TRAIN_OPTIONS_INIT;
    to.optimizer = GRAFT_OPTIMIZER_ADAMW, to.lr = 1e-2, to.weight_decay = 1e-4;
    to.batch_size = 32, to.epochs = 100, to.seed = 0;
    if (st == GRAFT_OK) st = graft_trainer_create(m, &ho, &to, &t);
    graft_named_tensor train_in = {"input", tx}, val_in = {"input", vx};
    if (st == GRAFT_OK) st = graft_trainer_fit(t, &train_in, 1, &ty, NULL, 0, NULL);
    double loss = -1, acc = -1;
    if (st == GRAFT_OK) st = graft_trainer_evaluate(t, &val_in, 1, &vy, &loss, &acc);
    CHECK("transfer_digits_within_1_point_of_pytorch", st == GRAFT_OK && acc >= ref_mean - 0.01,
          "status %d: %s; graft %.4f vs PyTorch %.4f (seeds %.4f..%.4f)", st, graft_last_error(ctx),
          acc, ref_mean, ref_min, ref_max);
    printf("  digits 5-9 on a backbone pretrained on 0-4: graft %.4f, PyTorch %.4f (10 seeds "
           "%.4f..%.4f), val loss %.4f\n",
           acc, ref_mean, ref_min, ref_max, loss);
    if (st == GRAFT_OK) ridge_start(m, &train_in, &ty, &val_in, &vy);
    if (st == GRAFT_OK) export_grafted(ctx, m, t, &vx, out_dir);
    graft_trainer_free(t);
    graft_model_free(m);
    graft_ctx_free(ctx);
    free(tx.data), free(ty.data), free(vx.data), free(vy.data);
    return test_failures ? 1 : 0;
}
