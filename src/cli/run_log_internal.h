/* run_log_internal.h: the run log's state, shared by run_log.c, tb_events.c and report_html.c. */
#ifndef GRAFT_CLI_RUN_LOG_INTERNAL_H
#define GRAFT_CLI_RUN_LOG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "run_log.h"

typedef struct {
    char *key, *value;
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

typedef struct tb_writer tb_writer;

struct run_log {
    char *dir;
    FILE *jsonl;
    tb_writer *tb;
    int config_written;
    rl_pairs config, summary;
    rl_series *series;
    size_t n_series, cap_series;
    int n_classes;
    char **class_names;
    int64_t *confusion;
    double start_time;
    char err[512]; /* the first error; reported by run_log_close */
};

/* TensorBoard event file writer (tb_events.c). */
tb_writer *tb_open(const char *dir, double wall_time, char *err, size_t err_size);
int tb_scalar(tb_writer *w, const char *tag, int64_t step, double wall_time, float value, char *err,
              size_t err_size);
int tb_close(tb_writer *w, char *err, size_t err_size);
/* CRC32C (Castagnoli) and TFRecord's masked form. */
uint32_t tb_crc32c(const void *data, size_t n);
uint32_t tb_masked_crc32c(const void *data, size_t n);

/* Writes DIR/report.html (report_html.c). */
int report_html_write(const run_log *log, char *err, size_t err_size);

/* Looks up a series by tag; NULL when none was logged. */
const rl_series *run_log_find_series(const run_log *log, const char *tag);

#endif
