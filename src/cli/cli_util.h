/* cli_util.h: helpers shared by the eval, predict, devices and bench subcommands. */
#ifndef GRAFT_CLI_UTIL_H
#define GRAFT_CLI_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "graft.h"

/* Print "graft CMD: MESSAGE" and a newline to stderr; returns 2 (usage errors). */
int cli_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Parse an integer option value in [min, max]; on failure print a one-line error, return -1. */
int cli_int(const char *cmd, const char *opt, const char *text, long min, long max, long *out);

/* A comma-separated list of integers in [min, max] (at most cap of them); returns the count, or
 * -1 after printing an error. */
int cli_int_list(const char *cmd, const char *opt, const char *text, long min, long max, long *out,
                 int cap);

/* The model's metadata value for key, or NULL. */
const char *cli_metadata(const graft_model *m, const char *key);

/* The model's class names from metadata "graft.classes" (a JSON list of strings): *names gets a
 * malloc'ed array of malloc'ed strings, *n its length (0 and NULL when the model has none).
 * Returns 0, or -1 after printing an error naming the malformed entry. */
int cli_model_classes(const char *cmd, const graft_model *m, char ***names, int *n);
void cli_free_classes(char **names, int n);

/* Scores of output row r as probabilities: copied when the output already holds probabilities
 * (its name is "probabilities", or every row is non-negative and sums to 1), else softmax. */
int cli_output_is_probabilities(const char *name, const float *scores, int64_t rows, int64_t cols);
void cli_row_probabilities(const float *row, int64_t cols, int is_probs, float *out);

/* Indices of the k largest of v[0..n), best first (ties: lower index first). */
void cli_top_k(const float *v, int64_t n, int k, int *out);

/* s as a JSON string literal (quotes included). */
void cli_json_string(FILE *f, const char *s);

/* A context honouring --threads (0: all cores); prints an error and returns NULL on failure. */
/* Validate a --device value (cpu, auto, cuda, cuda:N; cuda only in a CUDA build) into out;
 * 0, or 2 after printing the error. */
int cli_device(const char *cmd, const char *value, char *out, size_t out_size);
/* Parse a --precision value (fp32, fp16, bf16); 0, or 2 after printing the error. */
int cli_precision(const char *cmd, const char *value, graft_dtype *out);
/* --uint8: the model's only image input becomes uint8 NHWC (graft_model_set_uint8_input) with
 * the normalisation of its metadata (graft.image.mean/std), else ImageNet's; channels from the
 * input. 0, or 1 after printing the error. */
int cli_uint8_input(const char *cmd, graft_ctx *ctx, graft_model *m);
/* A context with `threads` compute threads on `device` (NULL: the CPU); NULL after an error. */
graft_ctx *cli_ctx(const char *cmd, int threads, const char *device);
/* Models ctx loads from now on keep BatchNormalization as nodes (graft_ctx_options.
 * keep_batchnorm): fine-tuned blocks train conv weights and BN scale/bias as PyTorch does. */
void cli_ctx_keep_batchnorm(graft_ctx *ctx, int on);
/* The device to create a context with: "auto" becomes "cpu" when there is no usable GPU (in a
 * CUDA build with a note on stderr, once per machine state: the reason is remembered in
 * $XDG_CACHE_HOME/graft/gpu-state); anything else unchanged. */
const char *cli_resolve_device(const char *cmd, const char *device);

#endif
