/* run_log_internal.h: the run log's state, shared by run_log.c, run_log_json.c, tb_events.c and
 * report_html.c. */
#ifndef GRAFT_CLI_RUN_LOG_INTERNAL_H
#define GRAFT_CLI_RUN_LOG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "run_log.h"

/* The schema version written in the config record (docs/metrics.md). */
#define RUN_LOG_SCHEMA 1

typedef struct {
    char *key;
    run_log_value value; /* a text value is owned */
} rl_pair;

typedef struct {
    rl_pair *items;
    size_t n, cap;
} rl_pairs;

/* All values of one tag, in the order they were logged. */
typedef struct {
    char *tag;
    int64_t *steps;
    double *values;
    size_t n, cap;
} rl_series;

/* One epoch record; the has_ flags are false for what was not measured (no validation data, a
 * task without accuracy). */
typedef struct {
    int64_t epoch, step;
    double train_loss, train_accuracy, val_loss, val_accuracy, lr, wall_time;
    bool has_train_accuracy, has_val_loss, has_val_accuracy;
} rl_epoch;

typedef struct tb_writer tb_writer;

struct run_log {
    char *dir;
    FILE *jsonl;
    tb_writer *tb;
    int config_written;
    rl_pairs config, summary;
    rl_series *series;
    size_t n_series, cap_series;
    rl_epoch *epochs;
    size_t n_epochs, cap_epochs;
    int64_t last_step;
    int n_classes;
    char **class_names;
    int64_t *confusion;
    double start_time, end_time;
    run_log_status status;
    char err[512]; /* the first error; reported by run_log_close */
};

/* JSON values (run_log_json.c). A float that is NaN or infinite is written as null and noted as
 * "name": "nan" | "inf" | "-inf" in `notes` (the record's "nonfinite" object), when given. */
typedef struct {
    char text[4096];
    size_t len;
    int n;
} rl_notes;
void rl_json_string(FILE *f, const char *s);
void rl_json_float(FILE *f, double v, rl_notes *notes, const char *name);
void rl_json_value(FILE *f, const run_log_value *v, rl_notes *notes, const char *name);
/* `"key": value, ...` of the pairs, inside braces; non-finite floats noted as PREFIX.KEY. */
void rl_json_pairs(FILE *f, const rl_pairs *p, rl_notes *notes, const char *prefix);
/* Ends a record: `, "nonfinite": {...}` when anything was noted, then "}\n". */
void rl_json_end(FILE *f, const rl_notes *notes);

/* TensorBoard event file writer (tb_events.c). */
tb_writer *tb_open(const char *dir, double wall_time, char *err, size_t err_size);
int tb_scalar(tb_writer *w, const char *tag, int64_t step, double wall_time, float value, char *err,
              size_t err_size);
/* The HParams plugin's session_start_info: the options as hparams. */
int tb_hparams_start(tb_writer *w, const rl_pairs *config, double start_time, char *err,
                     size_t err_size);
/* The HParams plugin's experiment (the options' names and types, these metric tags) and
 * session_end_info (the status). */
int tb_hparams_end(tb_writer *w, const rl_pairs *config, const char *const *metric_tags,
                   size_t n_metrics, run_log_status status, double end_time, char *err,
                   size_t err_size);
int tb_close(tb_writer *w, char *err, size_t err_size);
/* CRC32C (Castagnoli) and TFRecord's masked form. */
uint32_t tb_crc32c(const void *data, size_t n);
uint32_t tb_masked_crc32c(const void *data, size_t n);

/* Writes DIR/report.html (report_html.c). */
int report_html_write(const run_log *log, char *err, size_t err_size);
/* A value as the report shows it (floats to 6 digits, flags yes/no). */
void rl_format_value(const run_log_value *v, char *buf, size_t size);

/* Looks up a series by tag; NULL when none was logged. */
const rl_series *run_log_find_series(const run_log *log, const char *tag);

#endif
