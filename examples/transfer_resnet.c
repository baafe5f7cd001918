/* transfer_resnet.c: the whole transfer-learning path through the C API: load a ResNet, cut it
 * at its pooled features, train a new head on tensors, attach it, export the grafted model,
 * reload the export and predict with it.
 *
 *   transfer_resnet RESNET.onnx OUT.onnx
 *
 * The data is made up so the example runs anywhere: two classes of noise images, one brighter
 * than the other; a real program would fill the same tensors from its own images. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <graft.h>

enum { N = 24, C = 3, H = 224, W = 224, CLASSES = 2 };

static int fail(graft_ctx *ctx, const char *what) {
    fprintf(stderr, "transfer_resnet: %s: %s\n", what, graft_last_error(ctx));
    return 1;
}

/* Sample i: uniform noise, plus 0.5 everywhere when its label is 1. */
static void make_data(float *images, int64_t *labels) {
    uint64_t s = 42;
    for (int i = 0; i < N; i++) {
        labels[i] = i % CLASSES;
        for (int k = 0; k < C * H * W; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            float noise = (float)((s >> 40) & 0xffff) / 65536.0f - 0.5f;
            images[(size_t)i * C * H * W + k] = noise + (labels[i] ? 0.5f : 0.0f);
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: transfer_resnet RESNET.onnx OUT.onnx\n");
        return 2;
    }
    float *images = malloc(sizeof(float) * N * C * H * W);
    int64_t labels[N];
    if (!images) return 1;
    make_data(images, labels);

    graft_ctx *ctx;
    graft_model *model, *exported;
    graft_trainer *trainer;
    if (graft_ctx_create(NULL, &ctx) != GRAFT_OK) return 1;
    /* 1. Load, and freeze the backbone at its pooled features (the classifier is dropped). */
    if (graft_model_load(ctx, argv[1], &model) != GRAFT_OK) return fail(ctx, "load");
    if (graft_model_cut(model, "auto", GRAFT_POOLING_AUTO) != GRAFT_OK) return fail(ctx, "cut");
    /* 2. A linear head for our classes, trained with AdamW; the backbone runs once per image. */
    graft_head_options head = GRAFT_HEAD_OPTIONS_INIT;
    head.n_outputs = CLASSES;
    graft_train_options train = GRAFT_TRAIN_OPTIONS_INIT;
    train.epochs = 20, train.batch_size = 8, train.lr = 1e-2;
    if (graft_trainer_create(model, &head, &train, &trainer) != GRAFT_OK)
        return fail(ctx, "trainer");
    graft_named_tensor inputs = {"input", {GRAFT_DTYPE_F32, 4, {N, C, H, W}, images}};
    graft_tensor targets = {GRAFT_DTYPE_I64, 1, {N}, labels};
    if (graft_trainer_fit(trainer, &inputs, 1, &targets, NULL, 0, NULL) != GRAFT_OK)
        return fail(ctx, "fit");
    double loss, accuracy;
    graft_trainer_evaluate(trainer, &inputs, 1, &targets, &loss, &accuracy);
    printf("trained: loss %.4f, accuracy %.3f\n", loss, accuracy);
    /* 3. Attach the head (with a softmax) and export one ONNX file with the class names. */
    if (graft_trainer_attach(trainer, 1) != GRAFT_OK) return fail(ctx, "attach");
    const char *names[CLASSES] = {"dark", "bright"};
    graft_export_options ex = GRAFT_EXPORT_OPTIONS_INIT;
    ex.class_names = names, ex.n_class_names = CLASSES;
    if (graft_model_export(model, argv[2], &ex) != GRAFT_OK) return fail(ctx, "export");
    printf("exported %s\n", argv[2]);
    /* 4. Reload the export, as an application would, and predict two images. */
    if (graft_model_load(ctx, argv[2], &exported) != GRAFT_OK) return fail(ctx, "reload");
    graft_named_tensor two = {"input", {GRAFT_DTYPE_F32, 4, {2, C, H, W}, images}};
    const graft_tensor *probs;
    if (graft_model_run(exported, &two, 1) != GRAFT_OK) return fail(ctx, "predict");
    graft_model_output(exported, 0, &probs);
    int right = 0;
    for (int i = 0; i < 2; i++) {
        const float *p = (const float *)probs->data + i * CLASSES;
        int best = p[1] > p[0];
        right += best == labels[i];
        printf("image %d: %s (p = %.3f), true %s\n", i, names[best], p[best], names[labels[i]]);
    }
    graft_model_free(exported);
    graft_trainer_free(trainer);
    graft_model_free(model);
    graft_ctx_free(ctx);
    free(images);
    return accuracy >= 0.9 && right == 2 ? 0 : 1;
}
