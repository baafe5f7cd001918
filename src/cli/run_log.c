/* run_log.c: a run's report folder: writes metrics.jsonl, hands scalars to TensorBoard and HTML. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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

/* Sets key to value, replacing an earlier value for the same key. */
static void pairs_set(run_log *log, rl_pairs *p, const char *key, const char *value) {
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->items[i].key, key ? key : "") == 0) {
            char *v = dup_str(value);
            if (!v) {
                set_error(log, "out of memory");
                return;
            }
            free(p->items[i].value);
            p->items[i].value = v;
            return;
        }
    }
    if (grow((void **)&p->items, &p->cap, p->n + 1, sizeof *p->items) != 0) {
        set_error(log, "out of memory");
        return;
    }
    rl_pair *it = &p->items[p->n];
    it->key = dup_str(key);
    it->value = dup_str(value);
    if (!it->key || !it->value) {
        free(it->key);
        free(it->value);
        {
            set_error(log, "out of memory");
            return;
        }
    }
    p->n++;
}

static void pairs_free(rl_pairs *p) {
    for (size_t i = 0; i < p->n; i++) {
        free(p->items[i].key);
        free(p->items[i].value);
    }
    free(p->items);
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* Shortest of %.15g / %.17g that reads back exactly; null for NaN and infinities. */
static void json_number(FILE *f, double v) {
    char buf[40];
    if (!isfinite(v)) {
        fputs("null", f);
        return;
    }
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
    fputs(buf, f);
}

static void json_object(FILE *f, const char *name, const rl_pairs *p) {
    fprintf(f, "{\"%s\": {", name);
    for (size_t i = 0; i < p->n; i++) {
        if (i) fputs(", ", f);
        json_string(f, p->items[i].key);
        fputs(": ", f);
        json_string(f, p->items[i].value);
    }
    fputs("}}\n", f);
}

static void write_config_line(run_log *log) {
    if (log->config_written || !log->jsonl) return;
    json_object(log->jsonl, "config", &log->config);
    log->config_written = 1;
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

void run_log_config(run_log *log, const char *key, const char *value) {
    if (!log) return;
    /* After the first scalar the JSON config line is written; later keys reach the report only. */
    pairs_set(log, &log->config, key, value);
}

void run_log_summary(run_log *log, const char *key, const char *value) {
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
}

void run_log_scalar(run_log *log, const char *tag, int64_t step, double value) {
    if (!log || !tag) return;
    double t = now_seconds();
    write_config_line(log);
    fprintf(log->jsonl, "{\"step\": %lld, \"tag\": ", (long long)step);
    json_string(log->jsonl, tag);
    fputs(", \"value\": ", log->jsonl);
    json_number(log->jsonl, value);
    fprintf(log->jsonl, ", \"wall_time\": %.6f}\n", t);
    if (fflush(log->jsonl) != 0) set_error(log, "cannot write metrics.jsonl");
    if (log->tb && !log->err[0]) {
        char msg[sizeof log->err];
        if (tb_scalar(log->tb, tag, step, t, (float)value, msg, sizeof msg) != 0)
            set_error(log, msg);
    }
    remember(log, tag, step, value);
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
        {
            set_error(log, "out of memory");
            return;
        }
    }
    memcpy(c, counts, n * n * sizeof *c);
    for (int i = 0; i < log->n_classes; i++) free(log->class_names[i]);
    free(log->class_names);
    free(log->confusion);
    log->n_classes = n_classes;
    log->class_names = nm;
    log->confusion = c;
}

static void write_confusion_line(run_log *log) {
    FILE *f = log->jsonl;
    int n = log->n_classes;
    if (n <= 0) return;
    fputs("{\"confusion\": {\"classes\": [", f);
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", f);
        json_string(f, log->class_names[i]);
    }
    fputs("], \"counts\": [", f);
    for (int i = 0; i < n; i++) {
        fputs(i ? ", [" : "[", f);
        for (int j = 0; j < n; j++)
            fprintf(f, "%s%lld", j ? ", " : "", (long long)log->confusion[(size_t)i * n + j]);
        fputc(']', f);
    }
    fputs("]}}\n", f);
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
    for (int i = 0; i < log->n_classes; i++) free(log->class_names[i]);
    free(log->class_names);
    free(log->confusion);
    free(log->dir);
    free(log);
}

int run_log_close(run_log *log, char *err, size_t err_size) {
    if (!log) return 0;
    char msg[sizeof log->err];
    write_config_line(log);
    write_confusion_line(log);
    json_object(log->jsonl, "summary", &log->summary);
    if (fclose(log->jsonl) != 0) set_error(log, "cannot write metrics.jsonl");
    if (tb_close(log->tb, msg, sizeof msg) != 0) set_error(log, msg);
    if (report_html_write(log, msg, sizeof msg) != 0) set_error(log, msg);
    int rc = log->err[0] ? -1 : 0;
    if (rc && err) snprintf(err, err_size, "%s", log->err);
    free_log(log);
    return rc;
}
