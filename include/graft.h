/* graft.h: the public C API of libgraft, an embeddable engine for transfer learning on ONNX models.
 */
#ifndef GRAFT_H
#define GRAFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(GRAFT_BUILDING_LIBRARY) && defined(__GNUC__)
#define GRAFT_API __attribute__((visibility("default")))
#else
#define GRAFT_API
#endif

#define GRAFT_VERSION_MAJOR 0
#define GRAFT_VERSION_MINOR 1
#define GRAFT_VERSION_PATCH 0

/* The most dimensions a tensor may have. */
#define GRAFT_MAX_DIMS 8

/* Every fallible call returns a status: 0 is success, negatives are errors. */
typedef enum graft_status {
    GRAFT_OK = 0,
    GRAFT_E_INVALID_ARGUMENT = -1, /* a caller passed something that makes no sense */
    GRAFT_E_IO = -2,               /* a file could not be opened, read or written */
    GRAFT_E_MALFORMED_MODEL = -3,  /* the model file breaks the ONNX format */
    GRAFT_E_UNSUPPORTED = -4,      /* a valid model uses something graft does not implement */
    GRAFT_E_SHAPE = -5,            /* shapes disagree, or a shape is impossible */
    GRAFT_E_DTYPE = -6,            /* an element type is wrong for where it is used */
    GRAFT_E_OUT_OF_MEMORY = -7,    /* an allocation failed or a size overflowed */
    GRAFT_E_NOT_FOUND = -8,        /* a named input, output or tensor does not exist */
    GRAFT_E_BACKEND = -9,          /* a compute library (oneDNN, CUDA) reported a failure */
    GRAFT_E_INTERNAL = -10,        /* a bug in graft: please report it */
    GRAFT_STATUS_COUNT = 11
} graft_status;

/* Element types. The numbers are ONNX's TensorProto.DataType values. */
typedef enum graft_dtype {
    GRAFT_DTYPE_UNDEFINED = 0,
    GRAFT_DTYPE_F32 = 1,
    GRAFT_DTYPE_U8 = 2,
    GRAFT_DTYPE_I8 = 3,
    GRAFT_DTYPE_U16 = 4,
    GRAFT_DTYPE_I16 = 5,
    GRAFT_DTYPE_I32 = 6,
    GRAFT_DTYPE_I64 = 7,
    GRAFT_DTYPE_BOOL = 9,
    GRAFT_DTYPE_F16 = 10,
    GRAFT_DTYPE_F64 = 11,
    GRAFT_DTYPE_U32 = 12,
    GRAFT_DTYPE_U64 = 13,
    GRAFT_DTYPE_BF16 = 16,
    GRAFT_DTYPE_COUNT = 17
} graft_dtype;

typedef enum graft_log_level {
    GRAFT_LOG_DEBUG = 0,
    GRAFT_LOG_INFO = 1,
    GRAFT_LOG_WARN = 2,
    GRAFT_LOG_ERROR = 3,
    GRAFT_LOG_COUNT = 4
} graft_log_level;

/* A dense, row-major tensor. The caller owns `data` of tensors it passes in; tensors the library
 * hands out are owned by the handle that returned them, as each function says. */
typedef struct graft_tensor {
    graft_dtype dtype;
    int32_t ndim;
    int64_t dims[GRAFT_MAX_DIMS];
    void *data;
} graft_tensor;

/* A tensor bound to a model input or output by name. */
typedef struct graft_named_tensor {
    const char *name;
    graft_tensor tensor;
} graft_named_tensor;

/* What a model declares about one of its inputs or outputs. A dimension of -1 is symbolic (its
 * name, where the model gives one, is in dim_names) and is resolved at run time. */
typedef struct graft_value_info {
    const char *name;
    graft_dtype dtype;
    int32_t ndim; /* -1 when the model leaves the rank unknown */
    int64_t dims[GRAFT_MAX_DIMS];
    const char *dim_names[GRAFT_MAX_DIMS]; /* NULL where a dimension has no symbolic name */
} graft_value_info;

typedef void (*graft_log_fn)(graft_log_level level, const char *message, void *user);

/* Context options; initialise with GRAFT_CTX_OPTIONS_INIT so that later fields get defaults. */
typedef struct graft_ctx_options {
    int num_threads;           /* 0: as many as OpenMP offers */
    graft_log_level log_level; /* messages below it are dropped */
    graft_log_fn log_fn;       /* NULL: write to stderr */
    void *log_user;
    int use_reference_kernels; /* 1: plain reference kernels only (tests, debugging) */
    /* Where models loaded with this context run: NULL or "cpu"; "auto" (the first usable GPU,
     * else the CPU with one warning); "cuda" or "cuda:N" (that GPU, else an error). */
    const char *device;
    int allow_tf32; /* 1: fp32 matrix products and convolutions on the GPU may use TF32 */
    /* 1: BatchNormalization stays a node at load (not folded into Conv), so fine-tuned blocks
     * train conv weights and BN scale/bias separately as PyTorch does. */
    int keep_batchnorm;
} graft_ctx_options;
#define GRAFT_CTX_OPTIONS_INIT                                                                     \
    { 0, GRAFT_LOG_WARN, NULL, NULL, 0, NULL, 0, 0 }

/* GPUs graft can use (0 in a build without CUDA, or without a driver or device; then `why`
 * says which). */
GRAFT_API int graft_gpu_count(char *why, size_t why_size);
typedef struct graft_gpu_info {
    int index;
    char name[256];
    int cc_major, cc_minor; /* compute capability */
    int multiprocessors;
    size_t total_bytes, free_bytes;
    int driver_version, runtime_version; /* 13000 is CUDA 13.0 */
    size_t cudnn_version, cublaslt_version;
} graft_gpu_info;
GRAFT_API graft_status graft_gpu_info_get(int index, graft_gpu_info *out);
/* 1 when this build has the CUDA backend. */
GRAFT_API int graft_cuda_built(void);

/* Opaque handles. A graft_ctx holds error state and settings; use one per thread. A graft_model
 * belongs to the context it was loaded with; one run at a time per model. */
typedef struct graft_ctx graft_ctx;
typedef struct graft_model graft_model;

GRAFT_API const char *graft_version(void);
GRAFT_API const char *graft_status_str(graft_status status);
GRAFT_API const char *graft_dtype_name(graft_dtype dtype);
GRAFT_API size_t graft_dtype_size(graft_dtype dtype);

GRAFT_API graft_status graft_ctx_create(const graft_ctx_options *options, graft_ctx **out);
GRAFT_API void graft_ctx_free(graft_ctx *ctx);
/* Data-parallel runs (docs/distributed.md): join the process group the launcher set up (mpirun's
 * OMPI_COMM_WORLD_* variables; alone, nothing happens). Every trainer of this context then runs
 * its share: each rank extracts the features of its share of the samples and gathers all of
 * them, computes its slice of every global batch, and the gradients are summed across ranks
 * before each optimizer step, so every rank holds the same weights as a one-process run would.
 * Call once per process, before creating trainers; graft_ctx_free leaves the group (MPI_Finalize).
 * A launch this build cannot serve (MPI not built in; torchrun's variables) is an error. */
GRAFT_API graft_status graft_ctx_distribute(graft_ctx *ctx);
/* This process's rank and the number of ranks (0 and 1 when not distributed). */
GRAFT_API int graft_ctx_rank(const graft_ctx *ctx);
GRAFT_API int graft_ctx_world_size(const graft_ctx *ctx);
/* Leave the process group now. failed == 0: together with the other ranks (MPI_Finalize, which
 * waits for them all). failed != 0: at once, without waiting, so a rank that failed alone does
 * not hang; the application should then exit non-zero, and mpirun ends the other ranks. A
 * collective that failed or timed out already leaves this way. Not distributed: nothing. */
GRAFT_API void graft_ctx_leave(graft_ctx *ctx, int failed);
/* The message of the last failure on this context ("" when none). Valid until the next call. */
GRAFT_API const char *graft_last_error(const graft_ctx *ctx);
/* Record an error on ctx (what graft_last_error then says) and return status: for code graft
 * calls back, a batch source's read above all, to say why it failed. message NULL: "". */
GRAFT_API graft_status graft_set_error(graft_ctx *ctx, graft_status status, const char *message);

/* Load an ONNX model. External-data files are looked up next to `path`, or in `base_dir` for a
 * model in memory (NULL: external data is then an error). */
GRAFT_API graft_status graft_model_load(graft_ctx *ctx, const char *path, graft_model **out);
GRAFT_API graft_status graft_model_load_memory(graft_ctx *ctx, const void *data, size_t size,
                                               const char *base_dir, graft_model **out);
GRAFT_API void graft_model_free(graft_model *model);

GRAFT_API int graft_model_input_count(const graft_model *model);
GRAFT_API int graft_model_output_count(const graft_model *model);
/* Strings in `info` live as long as the model. */
GRAFT_API graft_status graft_model_input_info(const graft_model *model, int index,
                                              graft_value_info *info);
GRAFT_API graft_status graft_model_output_info(const graft_model *model, int index,
                                               graft_value_info *info);
/* The only batch the model's graph runs: 0 when it takes any. A graph can fix it by its inputs'
 * declared leading dim (the dynamo exporter writes the traced one) or pin it in a node (a
 * Reshape whose constant target holds the traced batch, as TorchScript exports of ShuffleNet
 * and Swin have); graft_model_run then takes any batch anyway, running it in chunks of this
 * batch (the last one padded by repeating its last row) and concatenating the outputs, which
 * must all lead with the batch. *why (may be NULL) gets a sentence for tools ("fixed at 1 (the
 * graph pins it in node '/Reshape' (Reshape))", or why a declared batch was let go), "" when
 * there is nothing to say; it lives as long as the model. */
GRAFT_API int64_t graft_model_fixed_batch(const graft_model *model, const char **why);

/* Facts about a loaded model, for tools such as `graft info`. */
typedef struct graft_model_summary {
    int64_t ir_version;
    const char *producer_name;
    const char *producer_version;
    int64_t default_opset; /* the opset of the ai.onnx domain */
    int64_t node_count;    /* after load-time passes */
    int64_t parameter_count;
    int64_t parameter_bytes;
    double flops_per_sample; /* multiply-adds count two; symbolic dims taken as 1 (batch) or
                                `assumed_seq_len` (others); -1 when shapes are unknown */
    int64_t assumed_seq_len;
} graft_model_summary;
GRAFT_API graft_status graft_model_summarize(const graft_model *model, graft_model_summary *out);
/* The op histogram: count of distinct op types, and each type's name and node count. */
GRAFT_API int graft_model_op_type_count(const graft_model *model);
GRAFT_API graft_status graft_model_op_type(const graft_model *model, int index, const char **op,
                                           int64_t *count);
GRAFT_API int graft_model_opset_count(const graft_model *model);
GRAFT_API graft_status graft_model_opset(const graft_model *model, int index, const char **domain,
                                         int64_t *version);
GRAFT_API int graft_model_metadata_count(const graft_model *model);
GRAFT_API graft_status graft_model_metadata(const graft_model *model, int index, const char **key,
                                            const char **value);
/* Set (or replace) a metadata_props entry; exports carry it. */
GRAFT_API graft_status graft_model_set_metadata(graft_model *model, const char *key,
                                                const char *value);
/* The token-embedding table that the integer input `input` (e.g. "input_ids") indexes: the
 * constant (rows, width) data of the Gather that reads it (directly or through Cast, Reshape,
 * Unsqueeze, Squeeze or Flatten). *rows gets its row count (ids must be below it) and
 * *table_name (may be NULL) its name; GRAFT_E_NOT_FOUND when no such Gather exists. */
GRAFT_API graft_status graft_model_embedding_rows(const graft_model *model, const char *input,
                                                  int64_t *rows, const char **table_name);

/* The inputs a text model (BERT family) takes, in the order of graft's text data sets. */
typedef enum graft_text_input {
    GRAFT_TEXT_INPUT_IDS = 0,      /* token ids */
    GRAFT_TEXT_INPUT_MASK = 1,     /* attention mask (1: a token, 0: padding) */
    GRAFT_TEXT_INPUT_TYPE_IDS = 2, /* token type (segment) ids */
    GRAFT_TEXT_INPUT_COUNT
} graft_text_input;
/* Which of the model's inputs takes each of them, told from the graph whatever the names: the
 * input that indexes the largest embedding table (a Gather of a constant 2-D table, through
 * Cast/Reshape/Unsqueeze/...) takes the ids, one indexing a smaller table the type ids, one that
 * only feeds arithmetic (the mask's Cast/Sub/Mul into the attention scores) the mask; the names
 * (`*mask*`, `*type*`/`*segment*`, `*ids*`/`*input*`) decide only where the graph does not.
 * names[GRAFT_TEXT_INPUT_*] get the input's name (living as long as the model) or NULL where
 * the model has no such input. GRAFT_E_INVALID_ARGUMENT, naming the inputs, when a role cannot
 * be decided (an input that could take none or two, no ids input, more than 3 inputs). */
GRAFT_API graft_status graft_model_text_inputs(const graft_model *model,
                                               const char *names[GRAFT_TEXT_INPUT_COUNT]);

/* How the cut tensor becomes one vector per sample (an encoder's tokens, a CNN's map). */
typedef enum graft_pooling {
    GRAFT_POOLING_AUTO = 0,    /* the auto cut: its rule's pooling; a named cut: CLS for a
                                  (batch, sequence, hidden) tensor of a model with a mask, else
                                  none */
    GRAFT_POOLING_NONE = 1,    /* the cut tensor as it is */
    GRAFT_POOLING_CLS = 2,     /* the first ([CLS]) token */
    GRAFT_POOLING_POOLER = 3,  /* the model's pooler output (tanh of a dense layer over [CLS]) */
    GRAFT_POOLING_MEAN = 4,    /* mean over the tokens the attention mask marks */
    GRAFT_POOLING_SPATIAL = 5, /* a (N, C, H, W) map averaged over H and W, then (N, C) */
    GRAFT_POOLING_COUNT = 6
} graft_pooling;

/* The cut `auto` takes (docs/training.md, "The auto cut", states the rules): walked back from
 * each output through the classifier's tail (bias Add, Flatten, Reshape, Squeeze, Identity,
 * Dropout, Cast, Softmax, LogSoftmax, Sigmoid; global average pooling and activations after a
 * 1x1 Conv classifier), the input of the final classifier: a Gemm/MatMul with a constant weight
 * over (N, F), or a 1x1 Conv with a constant weight (then pooled over H and W by the cut).
 * Else the input of a Gemm/MatMul fed by global pooling; else an encoder's (batch, sequence,
 * hidden) output, pooled to its [CLS] token. The strings live until the next call on the model. */
typedef struct graft_auto_cut_info {
    const char *tensor;    /* the tensor cut at */
    const char *why;       /* which rule chose it, and the pooling the cut adds */
    graft_pooling pooling; /* what GRAFT_POOLING_AUTO does there: NONE, CLS or SPATIAL */
    int64_t features;      /* features per sample after that pooling; -1 when not known */
} graft_auto_cut_info;
/* GRAFT_E_NOT_FOUND (graft_last_error says why) when no rule fits. */
GRAFT_API graft_status graft_model_auto_cut_info(const graft_model *model,
                                                 graft_auto_cut_info *out);
/* The same: the tensor's name and the why text only. */
GRAFT_API graft_status graft_model_auto_cut(const graft_model *model, const char **tensor_name,
                                            const char **why);

/* Candidate freeze points (docs/training.md, "Freeze points"): the tensors before the auto cut
 * that every path from the data inputs (not an attention mask) to the cut passes through, one per
 * run of view ops, grouped into the stages of a CNN (runs of residual or dense blocks of one
 * size) or the layers of an encoder (each starting where attention does). The trainable part
 * from such a tensor needs only it and side inputs that do not depend on the data. */
typedef struct graft_freeze_point_info {
    const char *tensor;           /* the freeze point (what `--train-from` takes) */
    const char *kind;             /* static: "stage" or "layer" (what --unfreeze counts), "block"
                                     (a block's input, or the last block's output) or "tensor" */
    int unit;                     /* N when `--unfreeze N` picks this point, else 0 */
    const char *first_node;       /* the first node of the trainable part after it */
    int64_t trainable_parameters; /* parameter elements from it to the cut */
} graft_freeze_point_info;
/* How many candidates there are before the auto cut (nearest the cut first), or a negative
 * status (graft_last_error says why: no auto cut, or a cut not computed from the inputs). */
GRAFT_API int graft_model_freeze_point_count(const graft_model *model);
/* Candidate `index` (0: nearest the cut); strings live as long as the model's graph (until a
 * cut or the model is freed). */
GRAFT_API graft_status graft_model_freeze_point(const graft_model *model, int index,
                                                graft_freeze_point_info *out);
/* What `--unfreeze n` means: the input of the last n stages or layers. *units (may be NULL)
 * gets how many there are (0 when no grouping is recognised) and *unit_kind (may be NULL)
 * "stage", "layer" or NULL. GRAFT_E_INVALID_ARGUMENT naming how many exist when n is out of
 * range, GRAFT_E_NOT_FOUND when the model has no stages or layers. */
GRAFT_API graft_status graft_model_unfreeze_point(const graft_model *model, int n,
                                                  const char **tensor_name, int *units,
                                                  const char **unit_kind);

/* Freeze the model at a cut point: `cut` is "auto" (graft_model_auto_cut's choice) or a tensor
 * name. Only the subgraph computing the cut tensor is kept (the rest, e.g. the old classifier, is
 * dropped), pooled as asked, and it becomes the model's single output, named "features". The
 * backbone is frozen: its weights are constants, BatchNormalization uses running statistics and
 * dropout is off. Inputs the kept subgraph does not read are dropped too. */
GRAFT_API graft_status graft_model_cut(graft_model *model, const char *cut, graft_pooling pooling);

/* Run the model. Every model input must be given (by name), with its dtype and a shape that fits
 * the declared one. Outputs stay valid until the next run or until the model is freed. */
GRAFT_API graft_status graft_model_run(graft_model *model, const graft_named_tensor *inputs,
                                       int n_inputs);
GRAFT_API graft_status graft_model_output(const graft_model *model, int index,
                                          const graft_tensor **out);

/* Memory statistics of the last run: bytes of intermediate tensors at the peak, and the sum of
 * all intermediate tensors' sizes (what a planner that never reuses memory would need). */
typedef struct graft_run_stats {
    int64_t peak_activation_bytes;
    int64_t total_activation_bytes;
    int64_t nodes_run;
    int planned; /* 1 when the run used a cached static memory plan */
} graft_run_stats;
GRAFT_API graft_status graft_model_run_stats(const graft_model *model, graft_run_stats *out);
/* Profiling: with it on, each run times every node and sums the time per op type; turning it on
 * clears the sums. A node on the GPU is timed by events queued before and after it (the GPU's
 * own time, plus any wait for the node's launches; runs go node by node, no CUDA graph is
 * replayed), a node on the CPU by the wall clock. A fused group's time is counted on its last
 * node's op. */
typedef struct graft_op_time {
    const char *op; /* static */
    int64_t count;  /* nodes run, over all runs since profiling was turned on */
    double seconds;
    /* floating-point operations of those nodes (a multiply-add counts 2), estimated from their
     * shapes (a fused group's members count under the group): flops / seconds is the rate the
     * kernels reached */
    double flops;
} graft_op_time;
GRAFT_API graft_status graft_model_set_profiling(graft_model *model, int on);
/* The op types seen, most time first: fills out[0..max) and returns how many there are. A fused
 * group's time is listed under the group's name (lower case, e.g. "conv_add_relu"); the op
 * types of its members then count only their bookkeeping. */
GRAFT_API int graft_model_profile(const graft_model *model, graft_op_time *out, int max);
/* Run the model's float tensors in GRAFT_DTYPE_F16 or GRAFT_DTYPE_BF16 on a GPU: weights are
 * converted once (finite values saturate), inputs and outputs stay fp32, kernels accumulate
 * in fp32 and softmax/normalisation statistics are computed in fp32. Call once, after loading
 * (and cutting); GRAFT_DTYPE_F32 keeps the model as it is. On the CPU, GRAFT_DTYPE_BF16 where it
 * has AVX512_BF16 or AMX keeps the graph fp32 and runs the convolutions' and linear layers'
 * products in bf16 (an error naming what the CPU lacks elsewhere; the model stays fp32); fp16 on
 * the CPU only with use_reference_kernels (slowly, for tests). */
GRAFT_API graft_status graft_model_set_precision(graft_model *model, graft_dtype precision);
/* Feed an image input as uint8 pixels instead of normalised floats (4x less to copy to a GPU):
 * the float32 input `input` (NULL: the model's only rank-4 input) of (N, C, H, W), C = channels
 * (3 or 1), becomes a uint8 input of the same name shaped (N, H, W, C) with nhwc = 1 or
 * (N, C, H, W) with nhwc = 0, followed by Cast to float, Transpose (0, 3, 1, 2) when nhwc, then
 * x * 1 / (255 std[c]) + -mean[c] / std[c] (constants (1, C, 1, 1)) feeding every former reader.
 * Pixels are what graft_image_load gives with dtype GRAFT_DTYPE_U8. Call after loading (and
 * cutting, which keeps the prologue); before or after graft_model_set_precision (after it the
 * prologue computes in fp32, then the existing Cast to half). Once per input: a uint8 input is
 * an error, as are a non-float or non-rank-4 input, a channel count that differs and a std of 0
 * or a non-finite normalisation. graft_model_export writes the prologue: the exported model
 * takes uint8. */
GRAFT_API graft_status graft_model_set_uint8_input(graft_model *model, const char *input, int nhwc,
                                                   const float mean[3], const float std[3],
                                                   int channels);
/* Where the model runs: "cpu", or "cuda:N (GPU name)". */
GRAFT_API const char *graft_model_device(const graft_model *model);

/* Inputs and outputs in GPU memory, for pipelines that keep data on the device (a model on a
 * GPU only; GRAFT_E_UNSUPPORTED on the CPU). With inputs_on_device, the data of every input
 * given to graft_model_run is device memory on the model's GPU (from graft_model_device_alloc,
 * or the application's own CUDA allocations), written completely before the call (graft's work
 * does not wait on other CUDA streams: synchronise them first). With outputs_on_device,
 * graft_model_output's tensors point at device memory, complete when graft_model_run returns and
 * valid until the next run. A model with a fixed batch then takes exactly that batch. CUDA graphs
 * still replay: device inputs are copied on the device into the buffers the recording reads. */
GRAFT_API graft_status graft_model_set_device_io(graft_model *model, int inputs_on_device,
                                                 int outputs_on_device);
/* Device memory on the model's GPU (free with graft_model_device_free; ready for use on any
 * stream when the call returns), and copies between it and the host; every copy is complete when
 * the call returns. */
GRAFT_API graft_status graft_model_device_alloc(graft_model *model, size_t bytes, void **out);
GRAFT_API void graft_model_device_free(graft_model *model, void *ptr);
typedef enum graft_copy_kind {
    GRAFT_COPY_HOST_TO_DEVICE = 0,
    GRAFT_COPY_DEVICE_TO_HOST = 1,
    GRAFT_COPY_DEVICE_TO_DEVICE = 2
} graft_copy_kind;
GRAFT_API graft_status graft_model_copy(graft_model *model, void *dst, const void *src,
                                        size_t bytes, graft_copy_kind kind);
/* Feeding a GPU from the host while it works: page-locked host memory (free with
 * graft_model_host_free), from which graft_model_copy_async starts a copy to device memory on a
 * copy stream of its own and returns at once. The copy starts once the model's work queued
 * before it is done, and runs beside the work after it; a graft_model_run whose device input
 * (graft_model_set_device_io) overlaps dst waits for it on the GPU, not on the host. So a loop
 * that starts the copy of batch i + 1 into one device buffer, then runs batch i from the other,
 * hides the copy behind the run. src must not change until the copy is done: once a run that
 * reads dst has returned, or after graft_model_copy_wait (which waits for every such copy).
 * A source that is not page-locked is an error (GRAFT_E_INVALID_ARGUMENT); so is a model on
 * the CPU (GRAFT_E_UNSUPPORTED). graft_model_copy and graft_model_device_free wait for the
 * copies under way first. */
GRAFT_API graft_status graft_model_host_alloc(graft_model *model, size_t bytes, void **out);
GRAFT_API void graft_model_host_free(graft_model *model, void *ptr);
GRAFT_API graft_status graft_model_copy_async(graft_model *model, void *dst, const void *src,
                                              size_t bytes);
GRAFT_API graft_status graft_model_copy_wait(graft_model *model);

/* ---- Training a head on a cut model -------------------------------------------------------- */

typedef enum graft_activation {
    GRAFT_ACTIVATION_RELU = 0,
    GRAFT_ACTIVATION_GELU = 1,
    GRAFT_ACTIVATION_TANH = 2,
    GRAFT_ACTIVATION_COUNT = 3
} graft_activation;

typedef enum graft_init {
    GRAFT_INIT_KAIMING = 0, /* uniform, PyTorch's nn.Linear default (a = sqrt(5)) */
    GRAFT_INIT_XAVIER = 1,  /* Glorot uniform, biases zero */
    GRAFT_INIT_COUNT = 2
} graft_init;

#define GRAFT_MAX_HIDDEN 8

/* A head: linear (n_hidden = 0) or an MLP of Linear -> activation -> dropout blocks. */
typedef struct graft_head_options {
    int n_outputs;
    int n_hidden;
    int hidden[GRAFT_MAX_HIDDEN];
    graft_activation activation;
    float dropout; /* after each hidden activation, training only */
    graft_init init;
    uint64_t seed;
} graft_head_options;
#define GRAFT_HEAD_OPTIONS_INIT                                                                    \
    { 0, 0, {0}, GRAFT_ACTIVATION_RELU, 0.0f, GRAFT_INIT_KAIMING, 0 }

typedef enum graft_loss {
    GRAFT_LOSS_CROSS_ENTROPY = 0, /* labels: int64 class indices (N) */
    GRAFT_LOSS_BCE_LOGITS = 1,    /* labels: float32 (N, outputs) in [0, 1] */
    GRAFT_LOSS_MSE = 2,           /* labels: float32 (N, outputs) */
    GRAFT_LOSS_COUNT = 3
} graft_loss;

typedef enum graft_optimizer {
    GRAFT_OPTIMIZER_SGD = 0,
    GRAFT_OPTIMIZER_ADAM = 1,
    GRAFT_OPTIMIZER_ADAMW = 2,
    GRAFT_OPTIMIZER_LAMB = 3,
    GRAFT_OPTIMIZER_COUNT = 4
} graft_optimizer;

typedef enum graft_scheduler {
    GRAFT_SCHEDULER_CONSTANT = 0,
    GRAFT_SCHEDULER_STEP = 1,     /* lr * gamma^(step / step_size) */
    GRAFT_SCHEDULER_COSINE = 2,   /* linear warm-up, then cosine to min_lr */
    GRAFT_SCHEDULER_ONECYCLE = 3, /* PyTorch's OneCycleLR defaults */
    GRAFT_SCHEDULER_PLATEAU = 4,  /* ReduceLROnPlateau on the validation loss, per epoch */
    GRAFT_SCHEDULER_COUNT = 5
} graft_scheduler;

typedef enum graft_precision {
    GRAFT_PRECISION_FP32 = 0,
    GRAFT_PRECISION_BF16 = 1, /* head computes in bf16, fp32 master weights */
    GRAFT_PRECISION_FP16 = 2, /* head computes in fp16, fp32 master weights, dynamic loss scale */
    GRAFT_PRECISION_COUNT = 3
} graft_precision;

/* What the trainer reports after every step (epoch_end = 0) and every epoch (epoch_end = 1). */
typedef struct graft_train_report {
    int epoch_end;
    int64_t epoch, step;
    double loss, accuracy;         /* running over the epoch (accuracy: classification only) */
    double val_loss, val_accuracy; /* at epoch ends with validation data, else -1 */
    double lr, loss_scale;
    double backbone_seconds, head_seconds;
    int64_t backbone_samples; /* samples the backbone ran for so far (cache misses) */
    int64_t epoch_samples;    /* samples of the current epoch trained so far (step reports) */
    /* The backbone phase's time in the sources' reads (decoding, or waiting for it) and in the
     * feature cache (opening, lookups, writes, closing). */
    double read_seconds, cache_seconds;
} graft_train_report;
/* Return non-zero to stop training: at the next optimizer step's end (with accumulate > 1, once
 * the accumulated micro-batches are applied) or at this epoch's end. */
typedef int (*graft_train_callback)(const graft_train_report *report, void *user);

/* The backbone phase (features for every sample, from the frozen backbone or the feature
 * cache), reported before the first batch of each data source and after every batch. */
typedef struct graft_extract_report {
    int validation;           /* 0: the training data, 1: the validation data */
    int64_t done, total;      /* samples of this source read so far (skipped ones too), of total */
    int64_t backbone_samples; /* of those, run through the backbone (the rest: the cache) */
    double seconds;           /* since this source's first batch */
    /* Why this source's cache file was replaced by an empty one ("rebuilt: corrupt or incomplete
     * (...): PATH", key or shape changed); NULL when it was reused, new, or there is none. */
    const char *cache_note;
    /* Of `seconds`: in the backbone (its runs, the features copied out), in the source's read
     * (decoding, or waiting for its threads) and in the feature cache (lookups, writes). */
    double backbone_seconds, read_seconds, cache_seconds;
} graft_extract_report;
/* Return non-zero to stop the backbone phase after this batch: graft_trainer_fit_source then
 * returns GRAFT_OK without training (features already computed stay in the cache file). */
typedef int (*graft_extract_callback)(const graft_extract_report *report, void *user);

typedef struct graft_train_options {
    graft_loss loss;
    float label_smoothing;
    const float *class_weights; /* (outputs) or NULL; copied */
    graft_optimizer optimizer;
    double lr, momentum, weight_decay, beta1, beta2, eps;
    int nesterov;
    graft_scheduler scheduler;
    int64_t warmup_steps, step_size;
    double gamma, min_lr;
    int epochs, batch_size, accumulate; /* accumulate: gradient accumulation over k batches */
    double clip_norm;                   /* 0: no clipping */
    graft_precision precision;
    int early_stop;       /* epochs without validation improvement before stopping; 0: off */
    uint64_t seed;        /* data order, dropout and head initialisation */
    int ridge_warm_start; /* linear heads: start from the ridge solution on the features */
    double ridge_lambda;
    const char *cache_path;  /* feature cache file (validation: cache_path + ".val"); NULL: keep
                                features in memory only. Keyed by the cut model's content and the
                                input data: a change to either rebuilds it; so does damage */
    graft_dtype cache_dtype; /* GRAFT_DTYPE_F32, F16 or BF16 (half the size) */
    graft_train_callback callback;
    void *callback_user;                     /* passed to both callbacks */
    graft_extract_callback extract_callback; /* NULL: no reports from the backbone phase */
    /* A folder of feature caches, used when cache_path is NULL: each source's features (training
     * and validation) in their own file, DIR/features-<16 hex digits>.cache, named from the
     * cache key (cut model, cut, data and preprocessing) and cache_dtype, so runs with other
     * settings keep their sets and a rerun with the same settings reuses its own. The folder
     * must exist. NULL: none. */
    const char *cache_dir;
    /* Fine-tune the blocks after this tensor with the head (docs/training.md "Fine-tuning
     * blocks"): a tensor of the cut model upstream of the features (graft_model_freeze_point
     * lists candidates; graft_model_unfreeze_point gives the one for the last N stages or
     * layers). The part before it runs once per sample (its output is what the feature cache
     * holds), the weights after it train with the head's optimizer, and graft_trainer_attach
     * writes them into the model. Runs on the CPU (fp32). NULL: the head alone. Copied. */
    const char *train_from;
    /* With train_from: the blocks' learning rate (scheduled as lr is: the same factor each
     * step), as a parameter group of its own; 0: lr. Pretrained blocks usually want a smaller
     * rate than a new head. */
    double blocks_lr;
} graft_train_options;
#define GRAFT_TRAIN_OPTIONS_INIT                                                                   \
    {                                                                                              \
        GRAFT_LOSS_CROSS_ENTROPY, 0.0f, NULL, GRAFT_OPTIMIZER_ADAMW, 1e-3, 0.9, 0.01, 0.9, 0.999,  \
            1e-8, 0, GRAFT_SCHEDULER_CONSTANT, 0, 10, 0.1, 0.0, 5, 32, 1, 0.0,                     \
            GRAFT_PRECISION_FP32, 0, 0, 0, 1e-3, NULL, GRAFT_DTYPE_F32, NULL, NULL, NULL, NULL,    \
            NULL, 0.0                                                                              \
    }

typedef struct graft_trainer graft_trainer;

/* A trainer for a head on `model`, which must have been cut (graft_model_cut) so that its one
 * output is the feature tensor (batch, features). The model must outlive the trainer. */
GRAFT_API graft_status graft_trainer_create(graft_model *model, const graft_head_options *head,
                                            const graft_train_options *options,
                                            graft_trainer **out);
GRAFT_API void graft_trainer_free(graft_trainer *trainer);

/* Train on N samples given as whole tensors: every model input with N along dim 0, and labels
 * as the loss says. Validation data is optional (NULL, 0, NULL). */
GRAFT_API graft_status graft_trainer_fit(graft_trainer *trainer, const graft_named_tensor *inputs,
                                         int n_inputs, const graft_tensor *labels,
                                         const graft_named_tensor *val_inputs, int n_val_inputs,
                                         const graft_tensor *val_labels);
/* A source of labelled samples, read in order in batches (the data module's folders are one;
 * any application can supply its own). `read` fills `inputs` (every model input) and `labels`
 * (as the loss says) with the samples of [start, start + count) it can deliver, in order, along
 * dim 0, and sets kept[i] to 1 for each delivered sample start + i and 0 for one it skipped (an
 * unreadable file: the source reports it); the tensors' data stay owned by the source and valid
 * until the next read. `identity` names the data and its preprocessing for the feature cache key
 * (NULL: the source cannot be cached). `read_labels` (optional, NULL: none) gives the labels of
 * [start, start + count) alone, every one of them, without reading the inputs: the trainer calls
 * it for a batch whose features are all in the feature cache, so a warm rerun decodes no image;
 * its tensor stays valid until the next call of either function. */
typedef struct graft_batch_source {
    int64_t n_samples;
    int n_inputs;
    graft_status (*read)(void *user, int64_t start, int64_t count, graft_named_tensor *inputs,
                         graft_tensor *labels, unsigned char *kept);
    void *user;
    const char *identity;
    graft_status (*read_labels)(void *user, int64_t start, int64_t count, graft_tensor *labels);
    /* Optional (NULL: none): called once per backbone phase that will read inputs (some features
     * are not in the cache), before the trainer prepares the backbone, with the first read to
     * come, so the source can start its threads and decoders meanwhile. */
    graft_status (*begin)(void *user, int64_t start, int64_t count);
} graft_batch_source;

/* Train on a source; validation source optional (NULL). The backbone reads every sample once. */
GRAFT_API graft_status graft_trainer_fit_source(graft_trainer *trainer,
                                                const graft_batch_source *train,
                                                const graft_batch_source *val);

/* Loss and accuracy (classification) of the current head on labelled samples. */
/* The confusion matrix (counts: n_classes x n_classes, rows true, columns predicted) of the head
 * as it is now on the last fit's validation features (kept by the trainer: no input is read or
 * run through the backbone again). A head of another size, a loss other than cross-entropy or
 * a fit without validation data is GRAFT_E_INVALID_ARGUMENT. */
GRAFT_API graft_status graft_trainer_validation_confusion(graft_trainer *trainer, int n_classes,
                                                          int64_t *counts);
/* After a fit stopped for a NaN or infinite training loss: the samples of that batch (their
 * indices in the training source, first 8 at most) into out[0..max); returns how many there are
 * (0 when the last fit did not stop that way). */
GRAFT_API int graft_trainer_failed_samples(const graft_trainer *trainer, int64_t *out, int max);
GRAFT_API graft_status graft_trainer_evaluate(graft_trainer *trainer,
                                              const graft_named_tensor *inputs, int n_inputs,
                                              const graft_tensor *labels, double *loss,
                                              double *accuracy);
/* Checkpoints: head weights, optimizer, scheduler, loss-scaler and early-stopping state, RNG
 * states, the epoch and the position within it, in a safetensors file written atomically. Load
 * into a trainer created with the same head and options; the next graft_trainer_fit on the same
 * data continues where the saved one stopped (mid-epoch too, when the callback stopped it there),
 * bit for bit as if never interrupted. */
GRAFT_API graft_status graft_trainer_save(const graft_trainer *trainer, const char *path);
GRAFT_API graft_status graft_trainer_load(graft_trainer *trainer, const char *path);
/* graft_trainer_save with the application's own string metadata (keys[i] -> values[i], UTF-8),
 * e.g. how to rebuild the model; a key the trainer itself uses, or a repeated key, is
 * GRAFT_E_INVALID_ARGUMENT. */
GRAFT_API graft_status graft_trainer_save_meta(const graft_trainer *trainer, const char *path,
                                               const char *const *keys, const char *const *values,
                                               int n);
/* Every metadata entry of a checkpoint file (the trainer's and the application's), without a
 * trainer: each(key, value, user) per entry, in file order; a non-zero return stops there.
 * Its checksums are checked (a damaged file is an error); temporaries a killed writer of path
 * left behind are removed, as graft_trainer_load does. */
GRAFT_API graft_status graft_checkpoint_metadata(graft_ctx *ctx, const char *path,
                                                 int (*each)(const char *key, const char *value,
                                                             void *user),
                                                 void *user);

/* Append the trained head to the model: its output becomes the head's logits (named "logits"),
 * or probabilities when softmax is set ("probabilities"). The trainer stays valid. */
GRAFT_API graft_status graft_trainer_attach(graft_trainer *trainer, int softmax);

/* ---- Data: images, GPU JPEG decoding, text, datasets (graft_data.h) ------------------------ */

#include "graft_data.h"

/* ---- Pruning ------------------------------------------------------------------------------- */

typedef enum graft_prune_method {
    GRAFT_PRUNE_MAGNITUDE = 0, /* zero the smallest weights (unstructured) */
    GRAFT_PRUNE_CHANNELS = 1,  /* remove whole convolution output channels (structured) */
    GRAFT_PRUNE_HEADS = 2,     /* remove whole attention heads and feed-forward neurons (BERT) */
    GRAFT_PRUNE_2_4 = 3,       /* two of every four consecutive input weights zero */
    GRAFT_PRUNE_METHOD_COUNT = 4
} graft_prune_method;

typedef enum graft_importance {
    GRAFT_IMPORTANCE_L1 = 0, /* a unit's importance: the L1 norm of its weights */
    GRAFT_IMPORTANCE_L2 = 1,
    GRAFT_IMPORTANCE_BN = 2, /* channels only: |gamma| of the BatchNormalization folded into each
                                Conv at load (network slimming); a Conv without one is an error */
    GRAFT_IMPORTANCE_COUNT = 3
} graft_importance;

/* Which channel groups channel pruning may shrink. */
typedef enum graft_prune_scope {
    GRAFT_PRUNE_SCOPE_ALL = 0,   /* every prunable group */
    GRAFT_PRUNE_SCOPE_INNER = 1, /* only groups no residual Add joins to another (in ResNet: the
                                    outputs of a bottleneck's first two convolutions) */
    GRAFT_PRUNE_SCOPE_COUNT = 2
} graft_prune_scope;

typedef struct graft_prune_options {
    graft_prune_method method;
    double sparsity; /* fraction to remove: of weights (magnitude; zeros already there
                        count), of each group's channels as the model was loaded (channels;
                        channels an earlier call removed count), of heads and of feed-forward
                        neurons (heads) */
    int global;      /* magnitude: one threshold over all layers instead of per layer */
    graft_importance importance;
    const char *const *exclude; /* node names (or op types) left dense */
    int n_exclude;
    int keep_ends; /* 1: the first convolution and the final classifier stay dense (default) */
    graft_prune_scope scope; /* channels: which groups (default all) */
} graft_prune_options;
#define GRAFT_PRUNE_OPTIONS_INIT                                                                   \
    { GRAFT_PRUNE_MAGNITUDE, 0.5, 0, GRAFT_IMPORTANCE_L1, NULL, 0, 1, GRAFT_PRUNE_SCOPE_ALL }

/* What pruning did. */
typedef struct graft_prune_report {
    int64_t params_before, params_after;   /* weights in Conv/Gemm/MatMul constants */
    int64_t nonzero_before, nonzero_after; /* of those, the non-zero ones */
    double flops_before, flops_after;      /* per sample, as graft_model_summarize counts */
    int64_t units_removed;                 /* channels, heads or neurons (structured methods) */
    double sparsity; /* reached, over what the options let the method prune: zeros among the
                        pruned layers' weights (magnitude, 2:4), channels removed since the
                        model was loaded among the prunable groups' (channels), heads and
                        neurons removed by this call among those matched (heads) */
} graft_prune_report;

/* Prune the model in place. Structured methods rewrite the graph into a smaller dense model
 * (every tensor that reads a removed unit shrinks with it; channels joined by a residual Add or
 * a Concat are pruned together or not at all). Works on an uncut or a cut model; prune before
 * training a head, so the head is fitted to the pruned features. report may be NULL. */
GRAFT_API graft_status graft_model_prune(graft_model *model, const graft_prune_options *options,
                                         graft_prune_report *report);
/* The sparsity to prune to in round `round` (1..rounds) of a gradual schedule ending at
 * final_sparsity: Zhu and Gupta's cubic final * (1 - (1 - round / rounds)^3), exactly final at
 * round == rounds. Magnitude and channel pruning count what earlier rounds removed, so calling
 * graft_model_prune with these sparsities in turn only ever removes more (refit between rounds).
 * Out-of-range arguments give -1. */
GRAFT_API double graft_prune_schedule(double final_sparsity, int round, int rounds);

/* ---- Export -------------------------------------------------------------------------------- */

typedef struct graft_export_options {
    int fp16_weights; /* store float weights as float16 (Cast back to float32 in the graph) */
    const char *const *class_names; /* n_class_names names, stored in metadata "graft.classes" */
    int n_class_names;
    const char *preprocessing; /* free text (JSON), stored in metadata "graft.preprocessing" */
} graft_export_options;
#define GRAFT_EXPORT_OPTIONS_INIT                                                                  \
    { 0, NULL, 0, NULL }

/* Write the model as it stands (load-time passes applied: BatchNorm folded; cut and head
 * attached if they were) as one ONNX file, written atomically. ONNX Runtime and graft load it;
 * the model's metadata_props are kept and the options' entries added. */
GRAFT_API graft_status graft_model_export(const graft_model *model, const char *path,
                                          const graft_export_options *options);

/* Element count of a tensor, or -1 when a dimension is negative or the product overflows. */
GRAFT_API int64_t graft_tensor_numel(const graft_tensor *t);

#ifdef __cplusplus
}
#endif
#endif /* GRAFT_H */
