/* run_log.h: what a training run leaves behind in its report folder: metrics as JSON lines
 * (metrics.jsonl), TensorBoard event files (events.out.tfevents.*), and a self-contained HTML
 * report (report.html) with SVG plots of loss, accuracy and learning rate, the confusion matrix
 * and the run's configuration. */
#ifndef GRAFT_CLI_RUN_LOG_H
#define GRAFT_CLI_RUN_LOG_H

#include <stdint.h>

typedef struct run_log run_log;

/* Open (create) the folder; NULL and a message in err on failure. */
run_log *run_log_open(const char *dir, char *err, size_t err_size);
/* The run's configuration, shown in the report (and the first JSON line). */
void run_log_config(run_log *log, const char *key, const char *value);
/* One scalar at a global step: tags "train/loss", "train/accuracy", "train/lr",
 * "train/loss_scale", "val/loss", "val/accuracy"; written to metrics.jsonl and TensorBoard. */
void run_log_scalar(run_log *log, const char *tag, int64_t step, double value);
/* The final confusion matrix (rows: true class, columns: predicted), class names. */
void run_log_confusion(run_log *log, int n_classes, const char *const *names,
                       const int64_t *counts);
/* Summary lines for the report ("best epoch", "validation accuracy", ...). */
void run_log_summary(run_log *log, const char *key, const char *value);
/* Write report.html, flush and close everything. Returns 0 on success. */
int run_log_close(run_log *log, char *err, size_t err_size);

#endif
