/* session.c: the model, data and head training shared by `graft finetune`, `graft export` and
 * `graft prune --refit`. */
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void session_make_dirs(const char *path, bool whole) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    if (!whole) {
        char *slash = strrchr(buf, '/');
        if (!slash) return;
        *slash = 0;
    }
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(buf, 0777);
            *p = '/';
        }
    mkdir(buf, 0777);
}

#include "gpu_source.h"
#include "text_model.h"

void session_free(session *s) {
    graft_trainer_free(s->trainer);
    graft_dataset_free(s->val);
    graft_dataset_free(s->train);
    graft_dataset_free(s->all);
    graft_model_free(s->model);
    graft_ctx_free(s->ctx);
}

int session_fail(session *s, const char *what) {
    fprintf(stderr, "graft %s: %s: %s\n", s->cmd, what, graft_last_error(s->ctx));
    return 1;
}

/* The fixed length of the token-id input's rows, 0 when it takes any; *name gets the input. */
static long fixed_text_len(const graft_model *m, const char **name) {
    const char *roles[GRAFT_TEXT_INPUT_COUNT] = {0};
    if (graft_model_text_inputs(m, roles) != GRAFT_OK || !roles[GRAFT_TEXT_INPUT_IDS]) return 0;
    for (int i = 0; i < graft_model_input_count(m); i++) {
        graft_value_info v;
        if (graft_model_input_info(m, i, &v) == GRAFT_OK &&
            !strcmp(v.name, roles[GRAFT_TEXT_INPUT_IDS]) && v.ndim == 2 && v.dims[1] > 0) {
            *name = v.name;
            return (long)v.dims[1];
        }
    }
    return 0;
}

/* Whether texts may be padded per batch to the longest: every integer input takes any length (a
 * fixed (batch, N) input needs every text padded to N) and the model has an attention mask
 * (without one it attends to the padding, so the padding would change the results). */
static bool pads_per_batch(const graft_model *m) {
    for (int i = 0; i < graft_model_input_count(m); i++) {
        graft_value_info v;
        if (graft_model_input_info(m, i, &v) == GRAFT_OK && v.ndim == 2 && v.dims[1] > 0)
            return false;
    }
    const char *roles[GRAFT_TEXT_INPUT_COUNT] = {0};
    return graft_model_text_inputs(m, roles) == GRAFT_OK && roles[GRAFT_TEXT_INPUT_MASK];
}

/* --input-uint8: on, or auto with the model on a GPU, for a float32 image input. */
static bool wants_uint8(const session *s, const finetune_opts *o) {
    if (!s->allow_uint8 || o->input_uint8 == 0) return false;
    if (o->input_uint8 < 0 && strncmp(graft_model_device(s->model), "cuda", 4) != 0) return false;
    return s->prep.o.dtype == GRAFT_DTYPE_F32 || o->input_uint8 > 0;
}

int session_apply_uint8(session *s) {
    if (!s->uint8_input) return 0;
    const graft_image_options *p = &s->prep.o;
    if (graft_model_set_uint8_input(s->model, s->prep.input_name, 1, p->mean, p->std,
                                    p->grayscale ? 1 : 3) != GRAFT_OK)
        return session_fail(s, "--input-uint8");
    return 0;
}

/* Texts padded per batch run in order of length (src/data/dataset_order.c): batches of like
 * lengths pad little, and few lengths occur. */
static int sort_texts(session *s, const finetune_opts *o) {
    graft_dataset *views[2] = {s->train, s->val};
    for (int k = 0; k < 2; k++)
        if (views[k] && graft_dataset_sort_by_length(views[k], o->threads) != GRAFT_OK)
            return session_fail(s, "ordering the texts by length");
    return 0;
}

int session_open_data(session *s, finetune_opts *o) {
    graft_status st;
    bool by_length = false;
    if (o->vocab) {
        graft_text_options t = GRAFT_TEXT_OPTIONS_INIT;
        const char *ids = NULL;
        long len = o->max_len, fixed = fixed_text_len(s->model, &ids);
        text_fit_fixed_len(s->cmd, ids, fixed, &len, &t.pad_len);
        o->max_len = (int)len; /* what the export records */
        t.vocab_path = o->vocab, t.cased = o->cased, t.max_len = o->max_len;
        if (o->text_column) t.text_column = o->text_column;
        if (o->label_column) t.label_column = o->label_column;
        t.pad_to_longest = !o->pad_max && pads_per_batch(s->model);
        by_length = t.pad_to_longest;
        st = graft_dataset_open_text(s->ctx, o->data, &t, &s->all);
    } else {
        /* The options given, else the model's metadata, else its input shape, else ImageNet's;
         * o->image.input_name then points into s->prep. */
        if (image_prep_resolve(&s->prep, s->ctx, s->model, &o->image, o->image_set) != 0) {
            fprintf(stderr, "graft %s: %s: %s\n", s->cmd, o->model, s->prep.error);
            return 1;
        }
        if (wants_uint8(s, o)) {
            s->uint8_input = true;
            s->prep.o.dtype = GRAFT_DTYPE_U8, s->prep.o.nhwc = 1;
        }
        o->image = s->prep.o;
        image_prep_print(stdout, &s->prep);
        st = graft_dataset_open_images(s->ctx, o->data, &o->image, &s->all);
    }
    if (st != GRAFT_OK) return session_fail(s, o->data);
    if (o->val) {
        if (graft_dataset_open_like(s->all, o->val, &s->val) != GRAFT_OK)
            return session_fail(s, o->val);
        s->train = s->all, s->all = NULL;
    } else if (o->val_split > 0) {
        if (graft_dataset_split(s->all, o->val_split, o->train.seed, &s->train, &s->val) !=
            GRAFT_OK)
            return session_fail(s, "splitting the data");
        s->val_shares_train = true;
    } else {
        s->train = s->all, s->all = NULL;
    }
    return by_length ? sort_texts(s, o) : 0;
}

int session_check_vocab(session *s, const finetune_opts *o) {
    int64_t rows = 0;
    const char *table = NULL;
    const char *names[GRAFT_TEXT_INPUT_COUNT];
    if (!o->vocab) return 0;
    if (graft_model_text_inputs(s->model, names) != GRAFT_OK)
        return session_fail(s, "the model's inputs"); /* before any work: no role for one */
    if (graft_model_embedding_rows(s->model, names[GRAFT_TEXT_INPUT_IDS], &rows, &table) !=
        GRAFT_OK)
        return 0; /* no embedding table to check against */
    graft_tokenizer *tok;
    if (graft_tokenizer_load(s->ctx, o->vocab, o->cased, &tok) != GRAFT_OK)
        return session_fail(s, o->vocab);
    int64_t size = graft_tokenizer_vocab_size(tok);
    graft_tokenizer_free(tok);
    if (size <= rows) return 0;
    fprintf(stderr,
            "graft %s: --vocab %s has %lld tokens, but the model %s has %lld token embeddings "
            "('%s'): ids from %lld up would not fit; use the model's own vocabulary\n",
            s->cmd, o->vocab, (long long)size, o->model, (long long)rows, table, (long long)rows);
    return 2;
}

int session_class_count(const session *s) {
    return s->train ? graft_dataset_class_count(s->train) : s->n_classes;
}

const char *session_class_name(const session *s, int index) {
    return s->train ? graft_dataset_class_name(s->train, index) : s->class_names[index];
}

/* The pruning options of round k (1..rounds) of the schedule. */
static graft_prune_options round_options(const finetune_opts *o, int k) {
    graft_prune_options po = GRAFT_PRUNE_OPTIONS_INIT;
    po.method = (graft_prune_method)o->prune_method;
    po.importance = (graft_importance)o->prune_importance;
    po.scope = (graft_prune_scope)o->prune_scope;
    po.sparsity = graft_prune_schedule(o->prune_sparsity, k, o->prune_rounds);
    return po;
}

/* Each round prunes to its sparsity, counting what the rounds before removed, so it only
 * removes more. The head never changes the frozen backbone, so replaying the rounds on a fresh
 * load gives the backbone the previous round left. */
int session_prune_through(session *s, const finetune_opts *o, int k, graft_prune_report *report) {
    for (int j = 1; j <= k; j++) {
        graft_prune_options po = round_options(o, j);
        graft_prune_report pr;
        if (graft_model_prune(s->model, &po, &pr) != GRAFT_OK) return session_fail(s, "pruning");
        if (j > 1) {
            pr.params_before = report->params_before, pr.flops_before = report->flops_before;
            pr.nonzero_before = report->nonzero_before;
        }
        *report = pr;
    }
    return 0;
}

int session_unfreeze(session *s, finetune_opts *o, bool say) {
    const char *tensor = NULL, *kind = NULL;
    int units = 0;
    if (graft_model_unfreeze_point(s->model, o->unfreeze, &tensor, &units, &kind) != GRAFT_OK)
        return session_fail(s, "--unfreeze");
    snprintf(o->unfreeze_tensor, sizeof o->unfreeze_tensor, "%s", tensor);
    o->train.train_from = o->unfreeze_tensor;
    if (say)
        printf("fine-tuning the last %d %s%s of %d with the head (from '%s')\n", o->unfreeze,
               kind ? kind : "block", o->unfreeze == 1 ? "" : "s", units, tensor);
    return 0;
}

int session_make_trainer(session *s, finetune_opts *o) {
    o->head.n_outputs = session_class_count(s);
    if (o->head.n_outputs < 2) {
        fprintf(stderr, "graft %s: %s: need at least 2 classes\n", s->cmd,
                s->train ? o->data : "the checkpoint");
        return 1;
    }
    if (graft_trainer_create(s->model, &o->head, &o->train, &s->trainer) != GRAFT_OK)
        return session_fail(s, "setting up training");
    return 0;
}

/* Text: feed the ids, mask and type ids to the inputs that take them, whatever their names, and
 * leave out what the model does not take. */
static graft_status bind_text_inputs(session *s) {
    const char *names[GRAFT_TEXT_INPUT_COUNT];
    graft_status st = graft_model_text_inputs(s->model, names);
    if (st == GRAFT_OK) st = graft_dataset_set_input_names(s->train, names, GRAFT_TEXT_INPUT_COUNT);
    if (st == GRAFT_OK && s->val)
        st = graft_dataset_set_input_names(s->val, names, GRAFT_TEXT_INPUT_COUNT);
    return st;
}

/* --decode gpu: one decoding worker for both sources (read one after the other). */
typedef struct gpu_run {
    gpu_decode *worker;
    gpu_source *g[2];
} gpu_run;

static void gpu_run_free(gpu_run *r) {
    gpu_source_free(r->g[0]), gpu_source_free(r->g[1]);
    gpu_decode_free(r->worker);
    memset(r, 0, sizeof *r);
}

/* --decode gpu+cpu: CPU threads decoding a share of each batch beside nvJPEG: --threads N in
 * all with nvJPEG's thread, or every core but the decoder's, the file reader's and the
 * trainer's. */
static int beside_threads(int threads) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int n = threads > 0 ? threads - 1 : (int)(cores > 3 ? cores - 3 : 0);
    return n < 0 ? 0 : n;
}

/* nvJPEG decoding threads (--decode gpu; gpu+cpu keeps one, its CPU threads beside it):
 * GRAFT_NVJPEG_DECODERS (1..4), else two. On an H100 a second decoder
 * took the decoding of 1.06 million JPEGs from ~12,500 to ~16,800 images/s beside the backbone
 * (a third added nothing); opening after the first, it costs 20,000 JPEGs nothing (4.2 s cold
 * against 4.4 s with one on an H200; docs/benchmarks.md, stop 36). */
static int nvjpeg_decoders(void) {
    const char *v = getenv("GRAFT_NVJPEG_DECODERS");
    long n = v && *v ? strtol(v, NULL, 10) : 0;
    return n >= 1 && n <= 4 ? (int)n : 2;
}

/* --decode gpu: the sources decode on the GPU (gpu_source.c) and the model takes device inputs
 * for the backbone phase; 0, or 1 after an error (none left to undo). */
static int gpu_sources(session *s, const finetune_opts *o, graft_batch_source *train,
                       graft_batch_source *val, gpu_run *r) {
    if (o->vocab) {
        fprintf(stderr, "graft %s: --decode gpu is for images, not text\n", s->cmd);
        return 1;
    }
    const char *why = strncmp(graft_model_device(s->model), "cuda", 4)
                          ? "the model runs on the CPU (give --device cuda)"
                      : s->prep.o.augment   ? "--augment is done on the CPU"
                      : s->prep.o.grayscale ? "--grayscale is done on the CPU"
                                            : NULL;
    if (why) {
        fprintf(stderr, "graft %s: --decode gpu: %s\n", s->cmd, why);
        return 1;
    }
    int b = o->train.batch_size, cpu = o->decode_gpu == 2 ? beside_threads(o->threads) : 0;
    graft_status st = gpu_decode_create(s->ctx, s->model, &s->prep.o, b, cpu,
                                        cpu > 0 ? 1 : nvjpeg_decoders(), &r->worker);
    if (st == GRAFT_OK)
        st = gpu_source_create(s->train, train, r->worker, s->model, &s->prep.o, b, cpu > 0,
                               &r->g[0], train);
    if (st == GRAFT_OK && s->val)
        st = gpu_source_create(s->val, val, r->worker, s->model, &s->prep.o, b, cpu > 0, &r->g[1],
                               val);
    if (st == GRAFT_OK) st = graft_model_set_device_io(s->model, 1, 0);
    if (st == GRAFT_OK) {
        printf("backbone: JPEGs decoded on the GPU (nvJPEG) where the cache lacks them\n");
        return 0;
    }
    gpu_run_free(r);
    return session_fail(s, "--decode gpu");
}

/* Where the GPU decoding's time went (the terminal and --report's summary). */
static void gpu_run_report(session *s, gpu_run *r) {
    int64_t on_gpu = 0, beside = 0, on_cpu = 0, a, b, c;
    for (int k = 0; k < 2; k++)
        gpu_source_counts(r->g[k], &a, &b, &c), on_gpu += a, beside += b, on_cpu += c;
    if (on_gpu + beside + on_cpu == 0) return;
    gpu_decode_stats st;
    gpu_decode_get_stats(r->worker, &st);
    printf("backbone: %lld images decoded on the GPU (nvJPEG, %s), %lld by CPU threads beside "
           "it, %lld on the CPU path; decoder start %.2fs, file reads %.2fs and decoding %.2fs "
           "on %d thread%s (%.0f images/s), the backbone waited %.2fs for images\n",
           (long long)on_gpu, gpu_decode_backend(r->worker), (long long)beside, (long long)on_cpu,
           st.start_s, st.read_s, st.decode_s, st.decoders, st.decoders == 1 ? "" : "s",
           st.decode_s > 0 ? (double)st.images * st.decoders / st.decode_s : 0.0, st.wait_s);
    if (!s->log) return;
    run_log_summary(s->log, "gpu_decode_images", run_log_float((double)on_gpu));
    run_log_summary(s->log, "gpu_decode_cpu_beside", run_log_float((double)beside));
    run_log_summary(s->log, "gpu_decode_cpu_fallbacks", run_log_float((double)on_cpu));
    run_log_summary(s->log, "gpu_decode_seconds_start", run_log_float(st.start_s));
    run_log_summary(s->log, "gpu_decode_seconds_read", run_log_float(st.read_s));
    run_log_summary(s->log, "gpu_decode_seconds_decode", run_log_float(st.decode_s));
    run_log_summary(s->log, "gpu_decode_seconds_waited", run_log_float(st.wait_s));
}

int session_fit(session *s, const finetune_opts *o) {
    graft_batch_source train, val;
    gpu_run gr = {0};
    if (o->vocab && bind_text_inputs(s) != GRAFT_OK) return session_fail(s, "the model's inputs");
    graft_status st = graft_dataset_source(s->train, o->threads, 2, o->train.seed, &train);
    if (st == GRAFT_OK && s->val) st = graft_dataset_source(s->val, o->threads, 2, 0, &val);
    if (st == GRAFT_OK && o->decode_gpu && gpu_sources(s, o, &train, &val, &gr)) return 1;
    if (st == GRAFT_OK) st = graft_trainer_fit_source(s->trainer, &train, s->val ? &val : NULL);
    if (o->decode_gpu && gr.worker) {
        gpu_run_report(s, &gr);
        graft_model_set_device_io(s->model, 0, 0);
        gpu_run_free(&gr);
    }
    if (st == GRAFT_OK) return 0;
    int rc = session_fail(s, "training");
    int64_t bad[8];
    int n = graft_trainer_failed_samples(s->trainer, bad, 8);
    for (int i = 0; i < n && i < 8; i++) { /* a NaN/Inf loss: the batch's files, to look at */
        const char *path = graft_dataset_sample_path(s->train, bad[i]);
        if (path) fprintf(stderr, "graft %s: in that batch: %s\n", s->cmd, path);
    }
    return rc;
}

int session_export(session *s, const finetune_opts *o) {
    int n = session_class_count(s), rc = 0;
    const char **names = calloc((size_t)n, sizeof *names);
    if (!names) return 1;
    for (int c = 0; c < n; c++) names[c] = session_class_name(s, c);
    graft_export_options ex = GRAFT_EXPORT_OPTIONS_INIT;
    ex.class_names = names, ex.n_class_names = n, ex.fp16_weights = o->fp16_weights;
    if (!o->vocab && graft_image_options_to_model(s->model, &o->image) != GRAFT_OK)
        rc = session_fail(s, "recording the preprocessing");
    if (!rc && o->vocab) rc = text_model_record(s->cmd, s->ctx, s->model, o);
    if (!rc && graft_model_export(s->model, o->out, &ex) != GRAFT_OK)
        rc = session_fail(s, "exporting");
    free(names);
    return rc;
}
