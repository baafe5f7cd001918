/* run_log.h: what a training run leaves behind in its report folder: metrics as JSON lines
 * (metrics.jsonl, one schema per record kind: docs/metrics.md), TensorBoard event files
 * (events.out.tfevents.*: scalars and the HParams plugin's data), and a self-contained HTML
 * report (report.html) with SVG plots of loss, accuracy and learning rate, the epochs, the
 * confusion matrix and the run's configuration. */
#ifndef GRAFT_CLI_RUN_LOG_H
#define GRAFT_CLI_RUN_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graft.h"

typedef struct run_log run_log;

/* A typed value of the configuration or the summary: text, a whole number, a float, a flag. */
typedef enum { RUN_LOG_TEXT, RUN_LOG_INT, RUN_LOG_FLOAT, RUN_LOG_BOOL } run_log_type;
typedef struct {
    run_log_type type;
    union {
        const char *text;
        int64_t i;
        double f;
        bool b;
    } as;
} run_log_value;

run_log_value run_log_text(const char *text);
run_log_value run_log_int(int64_t value);
run_log_value run_log_float(double value);
run_log_value run_log_bool(bool value);
/* A command-line value: a whole number when the text is one (and fits 64 bits), a float when it
 * is a finite decimal number (1.5, -2e-3, .5), else the text itself. */
run_log_value run_log_number_or_text(const char *text);

/* How the run ended, for the summary record and TensorBoard's session status. */
typedef enum { RUN_LOG_COMPLETED, RUN_LOG_INTERRUPTED, RUN_LOG_FAILED } run_log_status;

/* Open (create) the folder; NULL and a message in err on failure. */
run_log *run_log_open(const char *dir, char *err, size_t err_size);
/* One option of the run's configuration: the config record (written with the first scalar or
 * epoch), TensorBoard's hparams and the report. A later key reaches the report only. */
void run_log_config(run_log *log, const char *key, run_log_value value);
/* One scalar at a global step: tags "train/loss", "train/lr", "train/loss_scale", ...; written
 * to metrics.jsonl (a scalar record) and TensorBoard. */
void run_log_scalar(run_log *log, const char *tag, int64_t step, double value);
/* The end of an epoch: an epoch record, and the TensorBoard scalars epoch/train_loss,
 * train/accuracy, val/loss, val/accuracy (those measured: accuracy and validation are -1 when
 * not). */
void run_log_epoch(run_log *log, const graft_train_report *report);
/* The final confusion matrix (rows: true class, columns: predicted), class names. */
void run_log_confusion(run_log *log, int n_classes, const char *const *names,
                       const int64_t *counts);
/* One final metric ("val_accuracy", "best_epoch", ...): the summary record, the report, and
 * (numbers) TensorBoard's hparams metrics as scalars summary/KEY. */
void run_log_summary(run_log *log, const char *key, run_log_value value);
/* Write the summary record and report.html, flush and close everything. 0 on success. */
int run_log_close(run_log *log, run_log_status status, char *err, size_t err_size);

#endif
