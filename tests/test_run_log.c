/* test_run_log.c: writes a run log, re-reads its JSON lines, TFRecord CRCs, events and report. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/run_log_internal.h"
#include "tensorboard.pb-c.h"
#include "test_util.h"

#define STEPS 200
#define VAL_EVERY 20
#define SCALE_EVERY 50

static const char *dir;

/* Bitwise CRC32C, independent of the table-driven one under test. */
static uint32_t crc32c_bitwise(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    }
    return ~c;
}

static uint32_t masked(const unsigned char *p, size_t n) {
    uint32_t c = crc32c_bitwise(p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static uint64_t get_le(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static unsigned char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) b = (free(b), NULL);
    if (b) b[n] = 0;
    fclose(f);
    *size = (size_t)n;
    return b;
}

/* Removes event files of earlier runs; copies the name of the one left into `found`. */
static int event_files(int remove_them, char *found, size_t size) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20) != 0) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (remove_them)
            unlink(path);
        else
            snprintf(found, size, "%s", path);
        n++;
    }
    closedir(d);
    return n;
}

static double train_loss(int s) {
    return 2.2 * exp(-s / 60.0) + 0.15 + 0.04 * sin(s * 0.7);
}
static double train_acc(int s) {
    return 0.97 - 0.8 * exp(-s / 50.0) + 0.01 * cos(s * 0.9);
}
static double lr_at(int s) {
    return 1e-3 * 0.5 * (1 + cos(M_PI * s / STEPS));
}

/* Writes the log: returns the number of scalars logged. */
static int write_log(void) {
    char err[512] = "";
    run_log *log = run_log_open(dir, err, sizeof err);
    CHECK("open", log != NULL, "%s", err);
    if (!log) return 0;
    run_log_config(log, "model", "models/digits_cnn.onnx");
    run_log_config(log, "optimizer", "adamw");
    run_log_config(log, "lr", "0.001");
    run_log_config(log, "epochs", "10");
    run_log_config(log, "note", "<script>alert(\"x\")</script> & 'quoted'\n\ttab");
    int n = 0;
    for (int s = 1; s <= STEPS; s++) {
        run_log_scalar(log, "train/loss", s, train_loss(s));
        run_log_scalar(log, "train/accuracy", s, train_acc(s));
        run_log_scalar(log, "train/lr", s, lr_at(s));
        run_log_scalar(log, "train/grad_norm", s, s == 77 ? NAN : 1.0 / sqrt(s));
        n += 4;
        if (s % SCALE_EVERY == 0)
            run_log_scalar(log, "train/loss_scale", s, 65536.0 / (s / 50)), n++;
        if (s % VAL_EVERY == 0) {
            run_log_scalar(log, "val/loss", s, train_loss(s) + 0.12);
            run_log_scalar(log, "val/accuracy", s, train_acc(s) - 0.04);
            n += 2;
        }
    }
    static const char *names[5] = {"zero", "one", "<two>", "three & co", "four"};
    int64_t cm[25];
    for (int i = 0; i < 25; i++) cm[i] = (i % 6 == 0) ? 40 + i : (i * 7) % 5;
    run_log_confusion(log, 5, names, cm);
    run_log_summary(log, "best epoch", "9");
    run_log_summary(log, "validation accuracy", "93.0%");
    run_log_summary(log, "time (backbone / head)", "12.1 s / 3.4 s");
    int rc = run_log_close(log, err, sizeof err);
    CHECK("close", rc == 0, "%s", err);
    return n;
}

/* One record at *pos: checks both CRCs and returns the data, or NULL. */
static const unsigned char *next_record(const unsigned char *b, size_t size, size_t *pos,
                                        size_t *len, int *crc_ok) {
    if (*pos + 12 > size) return NULL;
    const unsigned char *h = b + *pos;
    uint64_t n = get_le(h, 8);
    if (n > size || *pos + 16 + n > size) return NULL;
    *crc_ok =
        get_le(h + 8, 4) == masked(h, 8) && get_le(h + 12 + n, 4) == masked(h + 12, (size_t)n);
    *pos += 16 + (size_t)n;
    *len = (size_t)n;
    return h + 12;
}

static int event_matches(const GraftTb__Event *ev, int64_t *last_step) {
    if (!ev->summary || ev->summary->n_value != 1 || !ev->has_step || !ev->has_wall_time) return 0;
    const GraftTb__Value *v = ev->summary->value[0];
    if (!v->has_simple_value || ev->step < *last_step) return 0;
    *last_step = ev->step;
    int s = (int)ev->step;
    if (strcmp(v->tag, "train/loss") == 0) return v->simple_value == (float)train_loss(s);
    if (strcmp(v->tag, "train/lr") == 0) return v->simple_value == (float)lr_at(s);
    return 1;
}

static void check_events(int scalars) {
    char path[2048] = "";
    CHECK("one_event_file", event_files(0, path, sizeof path) == 1, "expected one file");
    size_t size = 0, pos = 0, len;
    unsigned char *b = path[0] ? read_file(path, &size) : NULL;
    CHECK("event_file_read", b != NULL, "cannot read %s", path);
    if (!b) return;
    int records = 0, bad_crc = 0, bad_event = 0, crc_ok;
    int64_t last_step = 0;
    const unsigned char *data;
    while ((data = next_record(b, size, &pos, &len, &crc_ok))) {
        bad_crc += !crc_ok;
        GraftTb__Event *ev = graft_tb__event__unpack(NULL, len, data);
        if (!ev)
            bad_event++;
        else if (records == 0)
            bad_event += !(ev->file_version && strcmp(ev->file_version, "brain.Event:2") == 0);
        else
            bad_event += !event_matches(ev, &last_step);
        if (ev) graft_tb__event__free_unpacked(ev, NULL);
        records++;
    }
    CHECK("event_file_framing", pos == size, "%zu trailing bytes at %zu", size - pos, pos);
    CHECK("event_record_count", records == scalars + 1, "%d records for %d scalars", records,
          scalars);
    CHECK("event_crcs", bad_crc == 0, "%d records with a bad CRC", bad_crc);
    CHECK("event_contents", bad_event == 0, "%d events decode wrong", bad_event);
    free(b);
}

static int count_lines(const char *text, const char *prefix) {
    int n = 0;
    for (const char *p = text; p && *p;) {
        if (strncmp(p, prefix, strlen(prefix)) == 0) n++;
        p = strchr(p, '\n');
        if (p) p++;
    }
    return n;
}

static void check_jsonl(int scalars) {
    char path[2048];
    size_t size;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *t = (char *)read_file(path, &size);
    CHECK("jsonl_read", t != NULL, "cannot read %s", path);
    if (!t) return;
    CHECK("jsonl_config_first", strncmp(t, "{\"config\": {", 12) == 0, "first line: %.60s", t);
    CHECK("jsonl_scalars", count_lines(t, "{\"step\": ") == scalars, "%d scalar lines",
          count_lines(t, "{\"step\": "));
    const char *last = size > 1 ? t + size - 2 : t;
    while (last > t && last[-1] != '\n') last--;
    CHECK("jsonl_summary_last", strncmp(last, "{\"summary\": {", 13) == 0, "last: %.60s", last);
    CHECK("jsonl_nan_is_null", strstr(t, "\"value\": null") != NULL, "no null for NaN");
    free(t);
}

static void check_report(void) {
    char path[2048];
    size_t size;
    snprintf(path, sizeof path, "%s/report.html", dir);
    char *t = (char *)read_file(path, &size);
    CHECK("report_read", t != NULL, "cannot read %s", path);
    if (!t) return;
    CHECK("report_svg", strstr(t, "<svg") && strstr(t, "<polyline"), "no SVG charts");
    CHECK("report_escaped",
          !strstr(t, "<script") && strstr(t, "&lt;script&gt;") && strstr(t, "&lt;two&gt;") &&
              strstr(t, "three &amp; co"),
          "escaping");
    CHECK("report_self_contained", !strstr(t, "src=") && !strstr(t, "href="), "external resource");
    free(t);
}

static void check_errors(void) {
    char err[512] = "", path[2048];
    snprintf(path, sizeof path, "%s/metrics.jsonl/sub", dir);
    run_log *log = run_log_open(path, err, sizeof err);
    CHECK("open_error", log == NULL && err[0], "opened '%s'", path);
    if (log) run_log_close(log, NULL, 0);
    err[0] = 0;
    CHECK("open_empty", run_log_open("", err, sizeof err) == NULL && err[0], "no error");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        printf("FAIL usage: test_run_log DIR\n");
        return 1;
    }
    dir = argv[1];
    static const char vec[] = "123456789";
    CHECK("crc32c_vector", tb_crc32c(vec, 9) == 0xE3069283u, "got %08x", tb_crc32c(vec, 9));
    CHECK("crc32c_bitwise_vector", crc32c_bitwise((const unsigned char *)vec, 9) == 0xE3069283u,
          "got %08x", crc32c_bitwise((const unsigned char *)vec, 9));
    unsigned char blob[1000];
    for (int i = 0; i < 1000; i++) blob[i] = (unsigned char)(i * 31 + 7);
    CHECK("crc32c_table_vs_bitwise", tb_crc32c(blob, 1000) == crc32c_bitwise(blob, 1000), "differ");
    event_files(1, NULL, 0);
    int scalars = write_log();
    check_events(scalars);
    check_jsonl(scalars);
    check_report();
    check_errors();
    return test_failures ? 1 : 0;
}
