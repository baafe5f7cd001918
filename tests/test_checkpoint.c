/* test_checkpoint.c: checked checkpoints: a damaged byte in a tensor or in the metadata, NaN or
 * Inf weights and optimizer state, out-of-range or unparsable fields and wrong shapes are each
 * refused with an error naming the file, the tensor or field and its value (and leave the trainer
 * as it was); an older checkpoint without checksums loads with a warning. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"
#include "train/checkpoint.h"

enum { N = 24 };

static char warned[1024];

static int each_entry(const char *key, const char *value, void *user) {
    (void)key, (void)value, (void)user;
    return 0;
}

static void on_log(graft_log_level level, const char *message, void *user) {
    (void)user;
    if (level == GRAFT_LOG_WARN) snprintf(warned, sizeof warned, "%s", message);
}

/* A trainer on the digits CNN's features: an MLP head, AdamW with a plateau schedule, 3 epochs. */
static graft_trainer *make_trainer(graft_model *m) {
    graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
    ho.n_outputs = 3, ho.n_hidden = 1, ho.hidden[0] = 8, ho.seed = 3;
    graft_train_options to = GRAFT_TRAIN_OPTIONS_INIT;
    to.epochs = 3, to.batch_size = 5, to.lr = 1e-2, to.seed = 4;
    to.scheduler = GRAFT_SCHEDULER_PLATEAU;
    graft_trainer *t = NULL;
    return graft_trainer_create(m, &ho, &to, &t) == GRAFT_OK ? t : NULL;
}

/* One change to a checkpoint: a metadata value (key -> value; value NULL drops the key), an
 * element of a tensor (set to x), or a tensor one element shorter. */
typedef struct edit {
    const char *key, *value;
    const char *tensor;
    int64_t at;
    float x;
    int shorten;
} edit;

/* Copy src to dst with the edit applied; resealed (new checksums, as a tool rewriting the file
 * would) or with every checksum dropped (an older graft's file). */
static int rewrite(const char *src, const char *dst, const edit *ed, int reseal) {
    safetensors_file *f;
    if (safetensors_open(&f, src, NULL) != GRAFT_OK) return -1;
    int nt = safetensors_count(f), nm = safetensors_meta_count(f), n = 0;
    st_tensor_in ts[64];
    int64_t dims[64];
    void *bufs[64] = {0};
    const char *keys[96], *values[96];
    for (int i = 0; i < nt && i < 64; i++) {
        const st_tensor *t = safetensors_tensor_at(f, i);
        bufs[i] = malloc(t->nbytes + 4);
        memcpy(bufs[i], t->data, t->nbytes);
        dims[i] = t->dims[0];
        if (ed->tensor && !strcmp(ed->tensor, t->name)) {
            if (ed->shorten)
                dims[i]--;
            else
                ((float *)bufs[i])[ed->at] = ed->x;
        }
        ts[i] = (st_tensor_in){t->name, t->dtype, 1, &dims[i], bufs[i]};
    }
    for (int i = 0; i < nm && n < 96; i++) {
        const char *v, *k = safetensors_meta_at(f, i, &v);
        if (!strncmp(k, CHECKPOINT_SUM_KEY, strlen(CHECKPOINT_SUM_KEY))) continue;
        if (ed->key && !strcmp(k, ed->key)) v = ed->value;
        if (v) keys[n] = k, values[n++] = v;
    }
    graft_status st = reseal ? checkpoint_write_sealed(dst, ts, nt, keys, values, n, NULL)
                             : safetensors_write(dst, ts, nt, keys, values, n, NULL);
    for (int i = 0; i < nt; i++) free(bufs[i]);
    safetensors_free(f);
    return st == GRAFT_OK ? 0 : -1;
}

/* Flip one bit of the file at offset (from the end when negative). */
static int flip(const char *src, const char *dst, long offset, int bit) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    if (!in || !out) return (in ? fclose(in) : 0), (out ? fclose(out) : 0), -1;
    fseek(in, 0, SEEK_END);
    long size = ftell(in), at = offset < 0 ? size + offset : offset;
    rewind(in);
    for (long i = 0; i < size; i++) {
        int c = fgetc(in);
        fputc(i == at ? c ^ (1 << bit) : c, out);
    }
    fclose(in);
    return fclose(out);
}

/* The files and the trainer that loads them (fresh: every load here fails but the last). */
typedef struct paths {
    graft_ctx *ctx;
    graft_trainer *u;
    char ck[512], bad[512], before[512], after[512];
} paths;

/* Whether loading path fails with every needle in the error, the trainer's state unchanged. */
static void expect_refused(const paths *p, const char *name, const char *path, const char *n1,
                           const char *n2) {
    graft_ctx *ctx = p->ctx;
    graft_trainer *t = p->u;
    const char *before = p->before, *after = p->after;
    graft_status st = graft_trainer_load(t, path);
    char err[1200];
    snprintf(err, sizeof err, "%s", graft_last_error(ctx));
    graft_trainer_save(t, after);
    FILE *a = fopen(before, "rb"), *b = fopen(after, "rb");
    int same = a && b;
    while (same) {
        int x = fgetc(a), y = fgetc(b);
        same = x == y;
        if (x == EOF) break;
    }
    if (a) fclose(a);
    if (b) fclose(b);
    CHECK(name,
          st != GRAFT_OK && strstr(err, path) && strstr(err, n1) && (!n2 || strstr(err, n2)) &&
              same,
          "status %d, trainer %s: %s", st, same ? "unchanged" : "changed", err);
}

/* The saved file has every checksum and loads without a warning. */
static void sealed(const paths *p, graft_trainer *t) {
    graft_status st;
    safetensors_file *f;
    int sums = 0;
    if (safetensors_open(&f, p->ck, NULL) == GRAFT_OK) {
        for (int i = 0; i < safetensors_count(f); i++) {
            char key[256];
            snprintf(key, sizeof key, CHECKPOINT_SUM_PREFIX "%s",
                     safetensors_tensor_at(f, i)->name);
            sums += safetensors_meta(f, key) != NULL;
        }
        sums = sums == safetensors_count(f) && safetensors_meta(f, CHECKPOINT_SUM_KEY) ? sums : -1;
        safetensors_free(f);
    }
    CHECK("checkpoint_has_checksums", sums > 0, "%d tensor checksums", sums);
    warned[0] = '\0';
    st = graft_trainer_load(t, p->ck);
    CHECK("checkpoint_sealed_loads_quietly", st == GRAFT_OK && !warned[0], "status %d: %s %s", st,
          graft_last_error(p->ctx), warned);
}

/* Damage: the last byte of the data (a tensor), a byte of the header's metadata. */
static void damaged(const paths *p) {
    graft_status st;
    flip(p->ck, p->bad, -1, 3);
    expect_refused(p, "checkpoint_damaged_tensor_byte", p->bad, "the file is damaged: tensor '",
                   "does not match its checksum");
    FILE *fp = fopen(p->ck, "rb");
    char head[4096] = {0};
    size_t got = fp ? fread(head, 1, sizeof head - 1, fp) : 0;
    if (fp) fclose(fp);
    const char *at = got > 8 ? strstr(head + 8, "\"plateau_bad_epochs\":\"") : NULL;
    flip(p->ck, p->bad, at ? (long)(at - head) + 22 : 0, 0);
    expect_refused(p, "checkpoint_damaged_metadata_byte", p->bad,
                   "the file is damaged: its metadata does not match its checksum", NULL);
    st = graft_checkpoint_metadata(p->ctx, p->bad, each_entry, NULL);
    CHECK("checkpoint_metadata_damaged",
          st != GRAFT_OK && strstr(graft_last_error(p->ctx), "damaged"), "status %d: %s", st,
          graft_last_error(p->ctx));
    at = got > 8 ? strstr(head + 8, "\"checksum\":\"") : NULL;
    flip(p->ck, p->bad, at ? (long)(at - head) + 8 : 0, 5); /* "checksuM": the tensors' sums stay */
    expect_refused(p, "checkpoint_checksum_key_damaged", p->bad,
                   "the file is damaged: its metadata does not match its checksum", NULL);
}

/* Resealed files whose content is wrong. */
static void wrong_content(const paths *p) {
    struct {
        const char *name, *n1, *n2;
        edit ed;
    } cases[] = {
        {"checkpoint_nan_weight",
         "the tensor 'head.0.weight' holds NaN at element 5",
         NULL,
         {.tensor = "head.0.weight", .at = 5, .x = NAN}},
        {"checkpoint_inf_optimizer_state",
         "the tensor 'head.1.bias.exp_avg_sq' holds Inf",
         NULL,
         {.tensor = "head.1.bias.exp_avg_sq", .at = 0, .x = INFINITY}},
        {"checkpoint_wrong_shape",
         "the tensor 'head.1.weight' is F32 of shape (23)",
         "expected F32 of shape (24)",
         {.tensor = "head.1.weight", .shorten = 1}},
        {"checkpoint_epoch_negative",
         "the field 'epoch' is -5: expected an integer from 0 to 3",
         NULL,
         {.key = "epoch", .value = "-5"}},
        {"checkpoint_epoch_beyond_run",
         "the field 'epoch' is 99",
         "the epochs of this run: 3",
         {.key = "epoch", .value = "99"}},
        {"checkpoint_step_not_integer",
         "the field 'step' is 'x': not an integer",
         NULL,
         {.key = "step", .value = "x"}},
        {"checkpoint_step_beyond_micro",
         "the field 'step' is 1000",
         "at most 'micro'",
         {.key = "step", .value = "1000"}},
        {"checkpoint_plateau_lr_nan",
         "the field 'plateau_lr' is 'nan'",
         "finite",
         {.key = "plateau_lr", .value = "nan"}},
        {"checkpoint_loss_scale_zero",
         "the field 'loss_scale' is '0x0p+0'",
         "positive",
         {.key = "loss_scale", .value = "0x0p+0"}},
        {"checkpoint_rng_not_integer",
         "the field 'rng_data_order' is '-1'",
         NULL,
         {.key = "rng_data_order", .value = "-1"}},
        {"checkpoint_epoch_missing", "lacks the field 'epoch'", NULL, {.key = "epoch"}},
        {"checkpoint_samples_after_last_epoch",
         "the field 'epoch_samples' is 7",
         "0 when no epoch is under way",
         {.key = "epoch_samples", .value = "7"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (rewrite(p->ck, p->bad, &cases[i].ed, 1)) {
            CHECK(cases[i].name, 0, "could not rewrite %s", p->ck);
            continue;
        }
        expect_refused(p, cases[i].name, p->bad, cases[i].n1, cases[i].n2);
    }
}

/* An older checkpoint (no checksums) loads, with a warning naming it. */
static void unsealed(const paths *p) {
    edit none = {0};
    warned[0] = '\0';
    graft_status st =
        rewrite(p->ck, p->bad, &none, 0) ? GRAFT_E_INTERNAL : graft_trainer_load(p->u, p->bad);
    CHECK("checkpoint_without_checksum_warns",
          st == GRAFT_OK && strstr(warned, p->bad) && strstr(warned, "has no checksum"),
          "status %d: %s / warning '%s'", st, graft_last_error(p->ctx), warned);
}

static void run(graft_ctx *ctx, graft_model *m, const char *dir) {
    graft_trainer *t = make_trainer(m);
    paths p = {ctx, make_trainer(m), "", "", "", ""};
    float x[N * 64];
    int64_t y[N];
    for (int i = 0; i < N * 64; i++) x[i] = (float)((i * 37 % 101) / 101.0);
    for (int i = 0; i < N; i++) y[i] = i % 3;
    graft_named_tensor in = {"input", {GRAFT_DTYPE_F32, 4, {N, 1, 8, 8}, x}};
    graft_tensor labels = {GRAFT_DTYPE_I64, 1, {N}, y};
    snprintf(p.ck, sizeof p.ck, "%s/ck.safetensors", dir);
    snprintf(p.bad, sizeof p.bad, "%s/bad.safetensors", dir);
    snprintf(p.before, sizeof p.before, "%s/before.safetensors", dir);
    snprintf(p.after, sizeof p.after, "%s/after.safetensors", dir);
    graft_status st =
        t && p.u ? graft_trainer_fit(t, &in, 1, &labels, NULL, 0, NULL) : GRAFT_E_INTERNAL;
    if (st == GRAFT_OK) st = graft_trainer_save(t, p.ck);
    if (st == GRAFT_OK) st = graft_trainer_save(p.u, p.before);
    CHECK("checkpoint_saved", st == GRAFT_OK, "status %d: %s", st, graft_last_error(ctx));
    if (st == GRAFT_OK) {
        sealed(&p, t);
        damaged(&p);
        wrong_content(&p);
        unsealed(&p);
    }
    graft_trainer_free(t);
    graft_trainer_free(p.u);
    const char *files[] = {p.ck, p.bad, p.before, p.after};
    for (int i = 0; i < 4; i++) remove(files[i]);
}

int main(int argc, char **argv) {
    const char *model = argc > 1 ? argv[1] : "models/digits_cnn.onnx";
    graft_ctx_options co = GRAFT_CTX_OPTIONS_INIT;
    co.log_fn = on_log;
    graft_ctx *ctx;
    graft_model *m = NULL;
    graft_ctx_create(&co, &ctx);
    char dir[] = "/tmp/graft_ckcheckXXXXXX";
    if (graft_model_load(ctx, model, &m) != GRAFT_OK ||
        graft_model_cut(m, "auto", GRAFT_POOLING_AUTO) != GRAFT_OK || !mkdtemp(dir)) {
        MISSING("checkpoint", model);
    } else {
        run(ctx, m, dir);
        rmdir(dir);
    }
    graft_model_free(m);
    graft_ctx_free(ctx);
    return test_failures ? 1 : 0;
}
