/* run_log.c: a run's report folder: writes metrics.jsonl's records, hands scalars, hparams and
 * the rest to TensorBoard and report.html. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "graft_config.h"
#include "run_log_internal.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Keeps the first error only; later ones are usually its consequences. */
static void set_error(run_log *log, const char *msg) {
    if (!log->err[0]) snprintf(log->err, sizeof log->err, "%s", msg);
}

static char *dup_str(const char *s) {
    if (!s) s = "";
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static int grow(void **items, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap * 2 : 16;
    while (c < need) c *= 2;
    void *p = realloc(*items, c * elem);
    if (!p) return -1;
    *items = p;
    *cap = c;
    return 0;
}

/* Sets key to value (a copy), replacing an earlier value for the same key. */
static void pairs_set(run_log *log, rl_pairs *p, const char *key, run_log_value value) {
    if (value.type == RUN_LOG_TEXT && !(value.as.text = dup_str(value.as.text))) {
        set_error(log, "out of memory");
        return;
    }
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->items[i].key, key ? key : "") == 0) {
            if (p->items[i].value.type == RUN_LOG_TEXT) free((char *)p->items[i].value.as.text);
            p->items[i].value = value;
            return;
        }
    }
    rl_pair *it = NULL;
    if (grow((void **)&p->items, &p->cap, p->n + 1, sizeof *p->items) == 0) {
        it = &p->items[p->n];
        it->key = dup_str(key);
    }
    if (!it || !it->key) {
        if (value.type == RUN_LOG_TEXT) free((char *)value.as.text);
        set_error(log, "out of memory");
        return;
    }
    it->value = value;
    p->n++;
}

static void pairs_free(rl_pairs *p) {
    for (size_t i = 0; i < p->n; i++) {
        free(p->items[i].key);
        if (p->items[i].value.type == RUN_LOG_TEXT) free((char *)p->items[i].value.as.text);
    }
    free(p->items);
}

/* The config record (first line) and TensorBoard's session_start_info, once. */
static void write_config_record(run_log *log) {
    if (log->config_written) return;
    log->config_written = 1;
    FILE *f = log->jsonl;
    rl_notes notes = {0};
    fprintf(f, "{\"kind\": \"config\", \"schema\": %d, \"graft_version\": ", RUN_LOG_SCHEMA);
    rl_json_string(f, GRAFT_VERSION);
    fputs(", \"start_time\": ", f);
    rl_json_float(f, log->start_time, NULL, NULL);
    fputs(", \"options\": ", f);
    rl_json_pairs(f, &log->config, &notes, "options");
    rl_json_end(f, &notes);
    char msg[sizeof log->err];
    if (tb_hparams_start(log->tb, &log->config, log->start_time, msg, sizeof msg) != 0)
        set_error(log, msg);
}

run_log *run_log_open(const char *dir, char *err, size_t err_size) {
    if (!dir || !dir[0]) {
        snprintf(err, err_size, "run log: no folder given");
        return NULL;
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, err_size, "cannot create '%s': %s", dir, strerror(errno));
        return NULL;
    }
    run_log *log = calloc(1, sizeof *log);
    size_t len = strlen(dir) + 32;
    char *path = malloc(len);
    if (!log || !path || !(log->dir = dup_str(dir))) {
        if (log) free(log->dir);
        free(log);
        free(path);
        snprintf(err, err_size, "out of memory opening the run log");
        return NULL;
    }
    snprintf(path, len, "%s/metrics.jsonl", dir);
    log->jsonl = fopen(path, "w");
    if (!log->jsonl) snprintf(err, err_size, "cannot create '%s': %s", path, strerror(errno));
    free(path);
    log->start_time = now_seconds();
    if (log->jsonl) log->tb = tb_open(dir, log->start_time, err, err_size);
    if (!log->jsonl || !log->tb) {
        if (log->jsonl) fclose(log->jsonl);
        free(log->dir);
        free(log);
        return NULL;
    }
    return log;
}

void run_log_config(run_log *log, const char *key, run_log_value value) {
    if (log) pairs_set(log, &log->config, key, value);
}

void run_log_summary(run_log *log, const char *key, run_log_value value) {
    if (log) pairs_set(log, &log->summary, key, value);
}

static rl_series *series_for(run_log *log, const char *tag) {
    for (size_t i = 0; i < log->n_series; i++)
        if (strcmp(log->series[i].tag, tag) == 0) return &log->series[i];
    if (grow((void **)&log->series, &log->cap_series, log->n_series + 1, sizeof *log->series))
        return NULL;
    rl_series *s = &log->series[log->n_series];
    memset(s, 0, sizeof *s);
    if (!(s->tag = dup_str(tag))) return NULL;
    log->n_series++;
    return s;
}

const rl_series *run_log_find_series(const run_log *log, const char *tag) {
    for (size_t i = 0; i < log->n_series; i++)
        if (strcmp(log->series[i].tag, tag) == 0) return &log->series[i];
    return NULL;
}

static void remember(run_log *log, const char *tag, int64_t step, double value) {
    rl_series *s = series_for(log, tag);
    if (s && s->n == s->cap) {
        size_t c = s->cap ? s->cap * 2 : 64;
        int64_t *st = realloc(s->steps, c * sizeof *st);
        if (st) s->steps = st;
        double *v = st ? realloc(s->values, c * sizeof *v) : NULL;
        if (v) {
            s->values = v;
            s->cap = c;
        }
    }
    if (!s || s->n == s->cap) {
        set_error(log, "out of memory");
        return;
    }
    s->steps[s->n] = step;
    s->values[s->n] = value;
    s->n++;
    if (step > log->last_step) log->last_step = step;
}

static void tb_only_scalar(run_log *log, const char *tag, int64_t step, double t, double value) {
    char msg[sizeof log->err];
    if (!log->err[0] && tb_scalar(log->tb, tag, step, t, (float)value, msg, sizeof msg) != 0)
        set_error(log, msg);
}

/* A scalar for TensorBoard and the report's charts (not a JSON line). */
static void chart_scalar(run_log *log, const char *tag, int64_t step, double t, double value) {
    tb_only_scalar(log, tag, step, t, value);
    remember(log, tag, step, value);
}

static void flush_jsonl(run_log *log) {
    if (ferror(log->jsonl) || fflush(log->jsonl) != 0) set_error(log, "cannot write metrics.jsonl");
}

void run_log_scalar(run_log *log, const char *tag, int64_t step, double value) {
    if (!log || !tag) return;
    double t = now_seconds();
    FILE *f = log->jsonl;
    rl_notes notes = {0};
    write_config_record(log);
    fputs("{\"kind\": \"scalar\", \"tag\": ", f);
    rl_json_string(f, tag);
    fprintf(f, ", \"step\": %" PRId64 ", \"value\": ", step);
    rl_json_float(f, value, &notes, "value");
    fputs(", \"wall_time\": ", f);
    rl_json_float(f, t, NULL, NULL);
    rl_json_end(f, &notes);
    flush_jsonl(log);
    chart_scalar(log, tag, step, t, value);
}

/* -1 means "not measured" in a train report; NaN is a measurement (a diverged loss). */
static bool measured(double v) {
    return !(v < 0);
}

static void write_epoch_record(run_log *log, const rl_epoch *e) {
    FILE *f = log->jsonl;
    rl_notes notes = {0};
    const char *names[] = {"train_loss", "train_accuracy", "val_loss", "val_accuracy", "lr"};
    double values[] = {e->train_loss, e->train_accuracy, e->val_loss, e->val_accuracy, e->lr};
    bool has[] = {true, e->has_train_accuracy, e->has_val_loss, e->has_val_accuracy, true};
    fprintf(f, "{\"kind\": \"epoch\", \"epoch\": %" PRId64 ", \"step\": %" PRId64, e->epoch,
            e->step);
    for (int i = 0; i < 5; i++) {
        fprintf(f, ", \"%s\": ", names[i]);
        if (has[i])
            rl_json_float(f, values[i], &notes, names[i]);
        else
            fputs("null", f);
    }
    fputs(", \"wall_time\": ", f);
    rl_json_float(f, e->wall_time, NULL, NULL);
    rl_json_end(f, &notes);
    flush_jsonl(log);
}

void run_log_epoch(run_log *log, const graft_train_report *p) {
    if (!log || !p) return;
    rl_epoch e = {.epoch = p->epoch,
                  .step = p->step,
                  .train_loss = p->loss,
                  .train_accuracy = p->accuracy,
                  .val_loss = p->val_loss,
                  .val_accuracy = p->val_accuracy,
                  .lr = p->lr,
                  .wall_time = now_seconds(),
                  .has_train_accuracy = measured(p->accuracy),
                  .has_val_loss = measured(p->val_loss),
                  .has_val_accuracy = measured(p->val_accuracy)};
    write_config_record(log);
    write_epoch_record(log, &e);
    if (grow((void **)&log->epochs, &log->cap_epochs, log->n_epochs + 1, sizeof e) == 0)
        log->epochs[log->n_epochs++] = e;
    else
        set_error(log, "out of memory");
    chart_scalar(log, "epoch/train_loss", e.step, e.wall_time, e.train_loss);
    if (e.has_train_accuracy)
        chart_scalar(log, "train/accuracy", e.step, e.wall_time, e.train_accuracy);
    if (e.has_val_loss) chart_scalar(log, "val/loss", e.step, e.wall_time, e.val_loss);
    if (e.has_val_accuracy) chart_scalar(log, "val/accuracy", e.step, e.wall_time, e.val_accuracy);
}

void run_log_confusion(run_log *log, int n_classes, const char *const *names,
                       const int64_t *counts) {
    if (!log || n_classes <= 0 || !counts) return;
    size_t n = (size_t)n_classes;
    char **nm = calloc(n, sizeof *nm);
    int64_t *c = malloc(n * n * sizeof *c);
    int ok = nm && c;
    for (size_t i = 0; ok && i < n; i++) {
        char fallback[32];
        snprintf(fallback, sizeof fallback, "class %zu", i);
        ok = (nm[i] = dup_str(names && names[i] ? names[i] : fallback)) != NULL;
    }
    if (!ok) {
        for (size_t i = 0; nm && i < n; i++) free(nm[i]);
        free(nm);
        free(c);
        set_error(log, "out of memory");
        return;
    }
    memcpy(c, counts, n * n * sizeof *c);
    for (int i = 0; i < log->n_classes; i++) free(log->class_names[i]);
    free(log->class_names);
    free(log->confusion);
    log->n_classes = n_classes;
    log->class_names = nm;
    log->confusion = c;
}

static void write_confusion_record(run_log *log) {
    FILE *f = log->jsonl;
    int n = log->n_classes;
    if (n <= 0) return;
    fputs("{\"kind\": \"confusion\", \"classes\": [", f);
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", f);
        rl_json_string(f, log->class_names[i]);
    }
    fputs("], \"counts\": [", f);
    for (int i = 0; i < n; i++) {
        fputs(i ? ", [" : "[", f);
        for (int j = 0; j < n; j++)
            fprintf(f, "%s%" PRId64, j ? ", " : "", log->confusion[(size_t)i * n + j]);
        fputc(']', f);
    }
    fputs("]}\n", f);
}

static const char *status_name(run_log_status s) {
    return s == RUN_LOG_COMPLETED     ? "completed"
           : s == RUN_LOG_INTERRUPTED ? "interrupted"
                                      : "failed";
}

static void write_summary_record(run_log *log) {
    FILE *f = log->jsonl;
    rl_notes notes = {0};
    fputs("{\"kind\": \"summary\", \"status\": ", f);
    rl_json_string(f, status_name(log->status));
    fputs(", \"end_time\": ", f);
    rl_json_float(f, log->end_time, NULL, NULL);
    fputs(", \"seconds\": ", f);
    rl_json_float(f, log->end_time - log->start_time, NULL, NULL);
    fputs(", \"metrics\": ", f);
    rl_json_pairs(f, &log->summary, &notes, "metrics");
    rl_json_end(f, &notes);
}

/* The summary's numbers as scalars summary/KEY at the last step, and the HParams experiment
 * whose metrics are those and the val/ tags, with the session's end. */
static void write_tb_end(run_log *log) {
    size_t cap = log->summary.n + log->n_series, n = 0;
    char **tags = calloc(cap ? cap : 1, sizeof *tags);
    if (!tags) {
        set_error(log, "out of memory");
        return;
    }
    for (size_t i = 0; i < log->summary.n && !log->err[0]; i++) {
        const rl_pair *p = &log->summary.items[i];
        if (p->value.type != RUN_LOG_INT && p->value.type != RUN_LOG_FLOAT) continue;
        size_t len = strlen(p->key) + 9;
        if (!(tags[n] = malloc(len))) {
            set_error(log, "out of memory");
            break;
        }
        snprintf(tags[n], len, "summary/%s", p->key);
        double v = p->value.type == RUN_LOG_INT ? (double)p->value.as.i : p->value.as.f;
        tb_only_scalar(log, tags[n++], log->last_step, log->end_time, v);
    }
    for (size_t i = 0; i < log->n_series && !log->err[0]; i++)
        if (strncmp(log->series[i].tag, "val/", 4) == 0 && (tags[n] = dup_str(log->series[i].tag)))
            n++;
    char msg[sizeof log->err];
    if (!log->err[0] && tb_hparams_end(log->tb, &log->config, (const char *const *)tags, n,
                                       log->status, log->end_time, msg, sizeof msg) != 0)
        set_error(log, msg);
    for (size_t i = 0; i < n; i++) free(tags[i]);
    free(tags);
}

static void free_log(run_log *log) {
    pairs_free(&log->config);
    pairs_free(&log->summary);
    for (size_t i = 0; i < log->n_series; i++) {
        free(log->series[i].tag);
        free(log->series[i].steps);
        free(log->series[i].values);
    }
    free(log->series);
    free(log->epochs);
    for (int i = 0; i < log->n_classes; i++) free(log->class_names[i]);
    free(log->class_names);
    free(log->confusion);
    free(log->dir);
    free(log);
}

int run_log_close(run_log *log, run_log_status status, char *err, size_t err_size) {
    if (!log) return 0;
    char msg[sizeof log->err];
    log->status = status;
    log->end_time = now_seconds();
    write_config_record(log);
    write_confusion_record(log);
    write_summary_record(log);
    if (fclose(log->jsonl) != 0) set_error(log, "cannot write metrics.jsonl");
    write_tb_end(log);
    if (tb_close(log->tb, msg, sizeof msg) != 0) set_error(log, msg);
    if (report_html_write(log, msg, sizeof msg) != 0) set_error(log, msg);
    int rc = log->err[0] ? -1 : 0;
    if (rc && err) snprintf(err, err_size, "%s", log->err);
    free_log(log);
    return rc;
}
