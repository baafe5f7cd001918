/* test_run_log.c: writes a run log, re-reads its JSON records, TFRecord CRCs, scalar and hparams
 * events and report; the JSON numbers and typed command-line values on their own. */
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

/* Removes the event files of earlier runs from folder; or copies the name of the one there into
 * `found`. Returns how many there were. */
static int event_files(const char *folder, int remove_them, char *found, size_t size) {
    DIR *d = opendir(folder);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20) != 0) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", folder, e->d_name);
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

/* Floats that must read back bit for bit from metrics.jsonl (and fit a float for TensorBoard). */
static const double roundtrip[] = {0.1, 1.0 / 3, 1e-30, 123456789.0, -0.0, 2.5e30, 0.1 + 0.2, 1.0};
#define N_ROUNDTRIP ((int)(sizeof roundtrip / sizeof roundtrip[0]))
#define N_EPOCHS (STEPS / VAL_EVERY)
#define NO_VAL_EPOCH 3  /* an epoch without validation data */
#define NAN_VAL_EPOCH 5 /* one whose validation loss diverged */

typedef struct {
    int scalars, epochs, tb_scalars; /* JSON scalar lines, epoch lines, TensorBoard scalars */
} logged;

static void log_epoch(run_log *log, int s, logged *n) {
    graft_train_report p = {.epoch_end = 1, .epoch = s / VAL_EVERY, .step = s};
    p.loss = train_loss(s), p.accuracy = train_acc(s), p.lr = lr_at(s);
    p.val_loss = train_loss(s) + 0.12, p.val_accuracy = train_acc(s) - 0.04;
    if (p.epoch == NO_VAL_EPOCH) p.val_loss = p.val_accuracy = -1;
    if (p.epoch == NAN_VAL_EPOCH) p.val_loss = NAN;
    run_log_epoch(log, &p);
    n->epochs++;
    n->tb_scalars += 2 + (p.epoch == NO_VAL_EPOCH ? 0 : 2);
}

static void log_config_and_steps(run_log *log, logged *n) {
    run_log_config(log, "model", run_log_text("models/digits_cnn.onnx"));
    run_log_config(log, "optimizer", run_log_text("adamw"));
    run_log_config(log, "lr", run_log_number_or_text("0.001"));
    run_log_config(log, "epochs", run_log_number_or_text("10"));
    run_log_config(log, "augment", run_log_bool(true));
    run_log_config(log, "bad", run_log_float(INFINITY));
    run_log_config(log, "note", run_log_text("<script>alert(\"x\")</script> & 'quoted'\n\ttab"));
    for (int s = 1; s <= STEPS; s++) {
        run_log_scalar(log, "train/loss", s, train_loss(s));
        run_log_scalar(log, "train/lr", s, lr_at(s));
        run_log_scalar(log, "train/grad_norm", s, s == 77 ? NAN : 1.0 / sqrt(s));
        n->scalars += 3;
        if (s % SCALE_EVERY == 0) run_log_scalar(log, "train/loss_scale", s, 65536.0 / (s / 50));
        n->scalars += s % SCALE_EVERY == 0;
        if (s % VAL_EVERY == 0) log_epoch(log, s, n);
    }
    for (int i = 0; i < N_ROUNDTRIP; i++)
        run_log_scalar(log, "test/roundtrip", STEPS, roundtrip[i]);
    n->scalars += N_ROUNDTRIP;
    n->tb_scalars += n->scalars;
}

/* Writes the log. */
static logged write_log(void) {
    logged n = {0};
    char err[512] = "";
    run_log *log = run_log_open(dir, err, sizeof err);
    CHECK("open", log != NULL, "%s", err);
    if (!log) return n;
    log_config_and_steps(log, &n);
    static const char *names[5] = {"zero", "one", "<two>", "three & co", "four"};
    int64_t cm[25];
    for (int i = 0; i < 25; i++) cm[i] = (i % 6 == 0) ? 40 + i : (i * 7) % 5;
    run_log_confusion(log, 5, names, cm);
    run_log_summary(log, "val_accuracy", run_log_float(0.93));
    run_log_summary(log, "best_epoch", run_log_int(9));
    run_log_summary(log, "skipped_files", run_log_int(0));
    run_log_summary(log, "final_loss", run_log_float(NAN));
    run_log_summary(log, "time", run_log_text("12.1 s / 3.4 s"));
    n.tb_scalars += 4; /* the summary's numbers */
    int rc = run_log_close(log, RUN_LOG_COMPLETED, err, sizeof err);
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
    if (strcmp(v->tag, "val/accuracy") == 0) return v->simple_value == (float)(train_acc(s) - 0.04);
    return 1;
}

static const GraftTb__HParamEntry *hparam(const GraftTb__SessionStartInfo *st, const char *key) {
    for (size_t i = 0; i < st->n_hparams; i++)
        if (st->hparams[i]->key && strcmp(st->hparams[i]->key, key) == 0) return st->hparams[i];
    return NULL;
}

/* The session's hparams: each option with its type (a non-finite float as text). */
static int start_matches(const GraftTb__SessionStartInfo *st) {
    const GraftTb__HParamEntry *lr = hparam(st, "lr"), *aug = hparam(st, "augment");
    const GraftTb__HParamEntry *model = hparam(st, "model"), *bad = hparam(st, "bad");
    const GraftTb__HParamEntry *epochs = hparam(st, "epochs");
    return st->n_hparams == 7 && lr && lr->value->has_number_value &&
           lr->value->number_value == 0.001 && epochs && epochs->value->number_value == 10 && aug &&
           aug->value->has_bool_value && aug->value->bool_value && model &&
           model->value->string_value &&
           strcmp(model->value->string_value, "models/digits_cnn.onnx") == 0 && bad &&
           bad->value->string_value && strcmp(bad->value->string_value, "inf") == 0;
}

/* The experiment: 7 options; the summary's 4 numbers and the 2 val/ tags as metrics. */
static int experiment_matches(const GraftTb__Experiment *ex) {
    int found = 0;
    for (size_t i = 0; i < ex->n_metric_infos; i++) {
        const char *tag = ex->metric_infos[i]->name ? ex->metric_infos[i]->name->tag : NULL;
        found += tag && (!strcmp(tag, "summary/val_accuracy") || !strcmp(tag, "val/loss") ||
                         !strcmp(tag, "summary/final_loss"));
    }
    return ex->n_hparam_infos == 7 && ex->n_metric_infos == 6 && found == 3;
}

/* An HParams plugin event: which of the three it is (1 start, 2 experiment, 3 end) when its
 * tag, plugin name and contents agree, else 0. */
static int hparams_event(const GraftTb__Value *v) {
    const GraftTb__PluginData *pd = v->metadata->plugin_data;
    if (!pd || !pd->plugin_name || strcmp(pd->plugin_name, "hparams") || !v->tensor) return 0;
    GraftTb__HParamsPluginData *d =
        graft_tb__hparams_plugin_data__unpack(NULL, pd->content.len, pd->content.data);
    int kind = 0;
    if (d && !strcmp(v->tag, "_hparams_/session_start_info") && d->session_start_info)
        kind = start_matches(d->session_start_info) ? 1 : 0;
    else if (d && !strcmp(v->tag, "_hparams_/experiment") && d->experiment)
        kind = experiment_matches(d->experiment) ? 2 : 0;
    else if (d && !strcmp(v->tag, "_hparams_/session_end_info") && d->session_end_info)
        kind = d->session_end_info->status == GRAFT_TB__SESSION_STATUS__STATUS_SUCCESS ? 3 : 0;
    if (d) graft_tb__hparams_plugin_data__free_unpacked(d, NULL);
    return kind;
}

static void check_events(const logged *n) {
    char path[2048] = "";
    CHECK("one_event_file", event_files(dir, 0, path, sizeof path) == 1, "expected one file");
    size_t size = 0, pos = 0, len;
    unsigned char *b = path[0] ? read_file(path, &size) : NULL;
    CHECK("event_file_read", b != NULL, "cannot read %s", path);
    if (!b) return;
    int records = 0, bad_crc = 0, bad_event = 0, crc_ok, hparams[4] = {0};
    int64_t last_step = 0;
    const unsigned char *data;
    while ((data = next_record(b, size, &pos, &len, &crc_ok))) {
        bad_crc += !crc_ok;
        GraftTb__Event *ev = graft_tb__event__unpack(NULL, len, data);
        if (!ev)
            bad_event++;
        else if (records == 0)
            bad_event += !(ev->file_version && strcmp(ev->file_version, "brain.Event:2") == 0);
        else if (ev->summary && ev->summary->n_value == 1 && ev->summary->value[0]->metadata)
            hparams[hparams_event(ev->summary->value[0])]++;
        else
            bad_event += !event_matches(ev, &last_step);
        if (ev) graft_tb__event__free_unpacked(ev, NULL);
        records++;
    }
    CHECK("event_file_framing", pos == size, "%zu trailing bytes at %zu", size - pos, pos);
    CHECK("event_record_count", records == n->tb_scalars + 4, "%d records for %d scalars", records,
          n->tb_scalars);
    CHECK("event_crcs", bad_crc == 0, "%d records with a bad CRC", bad_crc);
    CHECK("event_contents", bad_event == 0, "%d events decode wrong", bad_event);
    CHECK("event_hparams", hparams[0] == 0 && hparams[1] == 1 && hparams[2] == 1 && hparams[3] == 1,
          "%d wrong, %d start, %d experiment, %d end", hparams[0], hparams[1], hparams[2],
          hparams[3]);
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

/* The first line holding both needles (NULL: none), as a copy the caller frees. */
static char *line_with(const char *text, const char *a, const char *b) {
    for (const char *p = text; p && *p;) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char *line = malloc(n + 1);
        if (!line) return NULL;
        memcpy(line, p, n);
        line[n] = 0;
        if (strstr(line, a) && (!b || strstr(line, b))) return line;
        free(line);
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

static int has_line(const char *text, const char *a, const char *b) {
    char *l = line_with(text, a, b);
    free(l);
    return l != NULL;
}

/* The roundtrip scalars read back bit for bit, each written as a float (a point or exponent). */
static void check_roundtrip(const char *t) {
    int k = 0, exact = 0, floats = 0;
    for (const char *p = strstr(t, "\"tag\": \"test/roundtrip\""); p && k < N_ROUNDTRIP;
         p = strstr(p + 1, "\"tag\": \"test/roundtrip\""), k++) {
        const char *v = strstr(p, "\"value\": ");
        if (!v) break;
        v += 9;
        size_t len = strcspn(v, ",}");
        double x = strtod(v, NULL);
        exact += memcmp(&x, &roundtrip[k], sizeof x) == 0;
        floats += memchr(v, '.', len) || memchr(v, 'e', len);
    }
    CHECK("jsonl_floats_round_trip", k == N_ROUNDTRIP && exact == k, "%d of %d exact", exact, k);
    CHECK("jsonl_floats_look_like_floats", floats == N_ROUNDTRIP, "%d of %d", floats, k);
}

static void check_jsonl(const logged *n) {
    char path[2048];
    size_t size;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *t = (char *)read_file(path, &size);
    CHECK("jsonl_read", t != NULL, "cannot read %s", path);
    if (!t) return;
    static const char config[] = "{\"kind\": \"config\", \"schema\": 1, \"graft_version\": \"";
    CHECK("jsonl_config_first", strncmp(t, config, strlen(config)) == 0, "first line: %.80s", t);
    CHECK("jsonl_config_typed",
          has_line(t, "\"lr\": 0.001, \"epochs\": 10, \"augment\": true, \"bad\": null", NULL) &&
              has_line(t, "\"kind\": \"config\"", "\"nonfinite\": {\"options.bad\": \"inf\"}}"),
          "options not typed");
    CHECK("jsonl_escaped", has_line(t, "\"note\": \"<script>alert(\\\"x\\\")</script>", "\\n\\t"),
          "note not escaped");
    int scalars = count_lines(t, "{\"kind\": \"scalar\", \"tag\": ");
    CHECK("jsonl_scalars", scalars == n->scalars, "%d scalar lines, %d logged", scalars,
          n->scalars);
    int epochs = count_lines(t, "{\"kind\": \"epoch\", \"epoch\": ");
    CHECK("jsonl_epochs", epochs == n->epochs && n->epochs == N_EPOCHS, "%d epoch lines", epochs);
    CHECK("jsonl_confusion",
          count_lines(t, "{\"kind\": \"confusion\", \"classes\": [\"zero\"") == 1,
          "no confusion line");
    const char *last = size > 1 ? t + size - 2 : t;
    while (last > t && last[-1] != '\n') last--;
    static const char summary[] =
        "{\"kind\": \"summary\", \"status\": \"completed\", \"end_time\": ";
    CHECK("jsonl_summary_last", strncmp(last, summary, strlen(summary)) == 0, "last: %.80s", last);
    CHECK("jsonl_summary_typed",
          strstr(last,
                 "\"metrics\": {\"val_accuracy\": 0.93, \"best_epoch\": 9, \"skipped_files\": "
                 "0, \"final_loss\": null, \"time\": \"12.1 s / 3.4 s\"}, \"nonfinite\": "
                 "{\"metrics.final_loss\": \"nan\"}}") != NULL,
          "%.300s", last);
    CHECK("jsonl_nan_is_noted_null",
          has_line(t, "\"tag\": \"train/grad_norm\", \"step\": 77, \"value\": null",
                   "\"nonfinite\": {\"value\": \"nan\"}"),
          "no noted null for NaN");
    CHECK("jsonl_epoch_unmeasured_null",
          has_line(t, "\"epoch\": 3, ", "\"val_loss\": null, \"val_accuracy\": null") &&
              !has_line(t, "\"epoch\": 3, ", "nonfinite"),
          "epoch without validation");
    CHECK("jsonl_epoch_nan_noted",
          has_line(t, "\"epoch\": 5, ", "\"val_loss\": null") &&
              has_line(t, "\"epoch\": 5, ", "\"nonfinite\": {\"val_loss\": \"nan\"}"),
          "epoch with a NaN loss");
    check_roundtrip(t);
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
    CHECK("report_summary_values",
          strstr(t, "<tr><th>val accuracy</th><td>0.93</td></tr>") &&
              strstr(t, "<tr><th>best epoch</th><td>9</td></tr>") &&
              strstr(t, "<tr><th>final loss</th><td>NaN</td></tr>"),
          "summary values");
    CHECK("report_config_values",
          strstr(t, "<tr><th>lr</th><td>0.001</td></tr>") &&
              strstr(t, "<tr><th>augment</th><td>yes</td></tr>") &&
              strstr(t, "<tr><th>bad</th><td>+inf</td></tr>"),
          "config values");
    int rows = 0;
    for (const char *p = strstr(t, "<table class=\"ep\">"); p && (p = strstr(p, "<tr><td>")); p++)
        rows++;
    CHECK("report_epochs", rows == N_EPOCHS, "%d epoch rows", rows);
    CHECK("report_epoch_cells", strstr(t, "<tr><td>3</td><td>60</td>") && strstr(t, "<td>NaN</td>"),
          "epoch cells");
    CHECK("report_no_status_note", !strstr(t, "class=\"status\""), "a completed run noted");
    free(t);
}

/* Unit checks of the JSON numbers and of reading command-line values. */
static void check_values(void) {
    static const double extremes[] = {
        5e-324, 1.7976931348623157e308, -2.2250738585072014e-308, 1e22, 100.0, 0.1 + 0.2,
        -1.5,   4503599627370497.0};
    FILE *f = tmpfile();
    CHECK("tmpfile", f != NULL, "no temporary file");
    if (!f) return;
    int exact = 0;
    for (size_t i = 0; i < sizeof extremes / sizeof *extremes; i++) {
        char buf[64] = "";
        rewind(f);
        rl_json_float(f, extremes[i], NULL, NULL);
        fputc(0, f);
        rewind(f);
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        buf[got] = 0;
        exact += strtod(buf, NULL) == extremes[i] && strpbrk(buf, ".e");
    }
    fclose(f);
    CHECK("json_float_extremes", exact == (int)(sizeof extremes / sizeof *extremes), "%d exact",
          exact);
    struct {
        const char *text;
        run_log_type type;
        double value;
    } cases[] = {
        {"10", RUN_LOG_INT, 10},       {"-3", RUN_LOG_INT, -3},
        {"+7", RUN_LOG_INT, 7},        {"0.001", RUN_LOG_FLOAT, 0.001},
        {"1e-3", RUN_LOG_FLOAT, 1e-3}, {".5", RUN_LOG_FLOAT, 0.5},
        {"5.", RUN_LOG_FLOAT, 5},      {"abc", RUN_LOG_TEXT, 0},
        {"0x10", RUN_LOG_TEXT, 0},     {"inf", RUN_LOG_TEXT, 0},
        {"nan", RUN_LOG_TEXT, 0},      {"1e999", RUN_LOG_TEXT, 0},
        {"1,2", RUN_LOG_TEXT, 0},      {"", RUN_LOG_TEXT, 0},
        {"-", RUN_LOG_TEXT, 0},        {"1e", RUN_LOG_TEXT, 0},
        {"e5", RUN_LOG_TEXT, 0},       {"99999999999999999999", RUN_LOG_TEXT, 0},
        {"mlp:256", RUN_LOG_TEXT, 0},  {"9223372036854775807", RUN_LOG_INT, 9223372036854775807.0}};
    int right = 0, n = (int)(sizeof cases / sizeof *cases);
    for (int i = 0; i < n; i++) {
        run_log_value v = run_log_number_or_text(cases[i].text);
        int ok = v.type == cases[i].type;
        if (ok && v.type == RUN_LOG_INT) ok = (double)v.as.i == cases[i].value;
        if (ok && v.type == RUN_LOG_FLOAT) ok = v.as.f == cases[i].value;
        if (ok && v.type == RUN_LOG_TEXT) ok = strcmp(v.as.text, cases[i].text) == 0;
        if (!ok) printf("  %s: type %d\n", cases[i].text, v.type);
        right += ok;
    }
    CHECK("number_or_text", right == n, "%d of %d read right", right, n);
}

/* A run stopped by Ctrl-C before any scalar: config and summary still written, status noted. */
static void check_interrupted(void) {
    char d[2048], path[2100], err[512] = "";
    snprintf(d, sizeof d, "%s-interrupted", dir);
    event_files(d, 1, NULL, 0);
    run_log *log = run_log_open(d, err, sizeof err);
    CHECK("interrupted_open", log != NULL, "%s", err);
    if (!log) return;
    run_log_config(log, "epochs", run_log_int(3));
    CHECK("interrupted_close", run_log_close(log, RUN_LOG_INTERRUPTED, err, sizeof err) == 0, "%s",
          err);
    snprintf(path, sizeof path, "%s/metrics.jsonl", d);
    size_t size;
    char *t = (char *)read_file(path, &size);
    CHECK("interrupted_jsonl",
          t && count_lines(t, "{\"kind\": ") == 2 && count_lines(t, "{\"kind\": \"config\"") == 1 &&
              has_line(t, "{\"kind\": \"summary\", \"status\": \"interrupted\"", "\"metrics\": {}"),
          "%.200s", t ? t : "(none)");
    free(t);
    snprintf(path, sizeof path, "%s/report.html", d);
    t = (char *)read_file(path, &size);
    CHECK("interrupted_report", t && strstr(t, "class=\"status\">Interrupted"), "no note");
    free(t);
}

static void check_errors(void) {
    char err[512] = "", path[2048];
    snprintf(path, sizeof path, "%s/metrics.jsonl/sub", dir);
    run_log *log = run_log_open(path, err, sizeof err);
    CHECK("open_error", log == NULL && err[0], "opened '%s'", path);
    if (log) run_log_close(log, RUN_LOG_FAILED, NULL, 0);
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
    event_files(dir, 1, NULL, 0);
    logged n = write_log();
    check_events(&n);
    check_jsonl(&n);
    check_report();
    check_values();
    check_interrupted();
    check_errors();
    return test_failures ? 1 : 0;
}
