/* report_html.c: report.html, self-contained (inline CSS, SVG charts, epochs, confusion matrix,
 * summary and config). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graft_config.h"
#include "run_log_internal.h"

#define CHART_W 600
#define CHART_H 300
#define PAD_L 78
#define PAD_R 18
#define PAD_T 14
#define PAD_B 46
#define MAX_POINTS 1500
#define PAD_YL 16
#define MAX_SERIES 4

typedef struct {
    const rl_series *s;
    const char *color;
} plot_series;

typedef struct {
    double lo, hi, step;
} axis;

static const char *const other_colors[] = {"#0891b2", "#db2777", "#65a30d", "#9333ea", "#ca8a04"};

static void html(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

/* 1, 2 or 5 times a power of ten, near span / target. */
static double nice_step(double span, int target) {
    double raw = span / target;
    double mag = pow(10.0, floor(log10(raw)));
    double f = raw / mag;
    double nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
    return nf * mag;
}

static axis make_axis(double lo, double hi, int target, int integer) {
    axis a;
    if (!(hi > lo)) {
        double d = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1.0;
        lo -= d;
        hi += d;
    }
    a.step = nice_step(hi - lo, target);
    if (integer && a.step < 1) a.step = 1;
    a.lo = floor(lo / a.step + 1e-9) * a.step;
    a.hi = ceil(hi / a.step - 1e-9) * a.step;
    if (a.hi <= a.lo) a.hi = a.lo + a.step;
    return a;
}

static void format_tick(char *buf, size_t n, double v, double step, int percent) {
    if (fabs(v) < step * 1e-6) v = 0;
    if (percent)
        snprintf(buf, n, "%.4g%%", v * 100);
    else
        snprintf(buf, n, fabs(v) >= 1e4 && fabs(v) < 1e7 ? "%.0f" : "%.4g", v);
}

static double px(const axis *x, double v) {
    return PAD_L + (v - x->lo) / (x->hi - x->lo) * (CHART_W - PAD_L - PAD_R);
}

static double py(const axis *y, double v) {
    return CHART_H - PAD_B - (v - y->lo) / (y->hi - y->lo) * (CHART_H - PAD_T - PAD_B);
}

/* Grid lines, ticks and tick labels for both axes, and the axis titles. */
static void draw_axes(FILE *f, const axis *x, const axis *y, int percent, const char *ylabel) {
    char buf[64];
    int x0 = PAD_L, x1 = CHART_W - PAD_R, y0 = CHART_H - PAD_B, y1 = PAD_T;
    fputs("<g class=\"grid\">", f);
    for (double v = y->lo; v <= y->hi + y->step * 1e-6; v += y->step) {
        double yy = py(y, v);
        format_tick(buf, sizeof buf, v, y->step, percent);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>", x0, yy, x1, yy);
        fprintf(f, "<text class=\"yt\" x=\"%d\" y=\"%.1f\">%s</text>", x0 - 8, yy + 4, buf);
    }
    for (double v = x->lo; v <= x->hi + x->step * 1e-6; v += x->step) {
        double xx = px(x, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>", xx, y1, xx, y0);
        fprintf(f, "<line class=\"tick\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>", xx, y0, xx,
                y0 + 5);
        fprintf(f, "<text class=\"xt\" x=\"%.1f\" y=\"%d\">%.0f</text>", xx, y0 + 19, v);
    }
    fputs("</g>", f);
    fprintf(f, "<path class=\"axis\" d=\"M%d %dV%dH%d\"/>", x0, y1, y0, x1);
    fprintf(f, "<text class=\"xl\" x=\"%d\" y=\"%d\">step</text>", (x0 + x1) / 2, CHART_H - 6);
    fprintf(f, "<text class=\"xl\" transform=\"translate(%d %d) rotate(-90)\">", PAD_YL,
            (y0 + y1) / 2);
    html(f, ylabel);
    fputs("</text>", f);
}

static void draw_series(FILE *f, const axis *x, const axis *y, const plot_series *p) {
    const rl_series *s = p->s;
    size_t stride = s->n > MAX_POINTS ? (s->n + MAX_POINTS - 1) / MAX_POINTS : 1;
    fprintf(f,
            "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
            "stroke-linejoin=\"round\" points=\"",
            p->color);
    for (size_t i = 0; i < s->n; i += stride) {
        size_t k = (i + stride >= s->n) ? s->n - 1 : i;
        if (isfinite(s->values[k]))
            fprintf(f, "%.1f,%.1f ", px(x, (double)s->steps[k]), py(y, s->values[k]));
        if (k == s->n - 1) break;
    }
    fputs("\"/>", f);
    if (s->n > 60) return;
    for (size_t i = 0; i < s->n; i++)
        if (isfinite(s->values[i]))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>",
                    px(x, (double)s->steps[i]), py(y, s->values[i]), p->color);
}

/* The data range of the series: steps into xr, finite values into yr. */
static int data_range(const plot_series *ps, int n, double xr[2], double yr[2]) {
    int any = 0;
    xr[0] = yr[0] = INFINITY;
    xr[1] = yr[1] = -INFINITY;
    for (int i = 0; i < n; i++) {
        for (size_t k = 0; k < ps[i].s->n; k++) {
            double v = ps[i].s->values[k], st = (double)ps[i].s->steps[k];
            if (!isfinite(v)) continue;
            any = 1;
            xr[0] = fmin(xr[0], st);
            xr[1] = fmax(xr[1], st);
            yr[0] = fmin(yr[0], v);
            yr[1] = fmax(yr[1], v);
        }
    }
    return any;
}

static void write_last_values(FILE *f, const plot_series *ps, int n, int percent) {
    fputs("<div class=\"last\">", f);
    for (int i = 0; i < n; i++) {
        const rl_series *s = ps[i].s;
        double v = s->values[s->n - 1];
        fprintf(f, "<span><i style=\"background:%s\"></i>", ps[i].color);
        html(f, s->tag);
        if (!isfinite(v))
            fprintf(f, " <b>%s</b>", isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf");
        else if (percent)
            fprintf(f, " <b>%.2f%%</b>", v * 100);
        else
            fprintf(f, fabs(v) >= 1e4 && fabs(v) < 1e7 ? " <b>%.0f</b>" : " <b>%.4g</b>", v);
        fprintf(f, " at step %lld</span>", (long long)s->steps[s->n - 1]);
    }
    fputs("</div>", f);
}

static void write_chart(FILE *f, const char *title, const plot_series *ps, int n, int percent,
                        const double *steps) {
    double xr[2], yr[2];
    fputs("<figure class=\"chart\"><figcaption>", f);
    html(f, title);
    fputs("</figcaption>", f);
    write_last_values(f, ps, n, percent);
    if (!data_range(ps, n, xr, yr)) {
        fputs("<p class=\"empty\">No finite values were logged.</p></figure>\n", f);
        return;
    }
    axis x = make_axis(steps[0], steps[1], 8, 1), y = make_axis(yr[0], yr[1], 5, 0);
    fprintf(f, "<svg viewBox=\"0 0 %d %d\" role=\"img\" xmlns=\"http://www.w3.org/2000/svg\">",
            CHART_W, CHART_H);
    draw_axes(f, &x, &y, percent, title);
    for (int i = 0; i < n; i++) draw_series(f, &x, &y, &ps[i]);
    fputs("</svg></figure>\n", f);
}

/* One chart of the tags found among `tags` (NULL-terminated); nothing when none were logged. */
static void chart_of(FILE *f, const run_log *log, const char *title, const char *const *tags,
                     const char *const *colors, int percent, const double *steps) {
    plot_series ps[MAX_SERIES];
    int n = 0;
    for (int i = 0; tags[i] && n < MAX_SERIES; i++) {
        const rl_series *s = run_log_find_series(log, tags[i]);
        if (s && s->n) ps[n++] = (plot_series){s, colors[i]};
    }
    if (n) write_chart(f, title, ps, n, percent, steps);
}

static const char *const known_tags[] = {
    "train/loss",   "epoch/train_loss", "val/loss",         "train/accuracy",
    "val/accuracy", "train/lr",         "train/loss_scale", NULL};

static int is_known(const char *tag) {
    for (int i = 0; known_tags[i]; i++)
        if (strcmp(tag, known_tags[i]) == 0) return 1;
    return 0;
}

static void write_charts(FILE *f, const run_log *log) {
    static const char *const loss[] = {"train/loss", "epoch/train_loss", "val/loss", NULL};
    static const char *const acc[] = {"train/accuracy", "val/accuracy", NULL};
    static const char *const lr[] = {"train/lr", NULL};
    static const char *const scale[] = {"train/loss_scale", NULL};
    static const char *const tv[] = {"#2563eb", "#f97316"};
    static const char *const ltv[] = {"#93c5fd", "#2563eb", "#f97316"};
    static const char *const green[] = {"#059669"}, *const purple[] = {"#7c3aed"};
    double steps[2] = {INFINITY, -INFINITY};
    for (size_t i = 0; i < log->n_series; i++) {
        for (size_t k = 0; k < log->series[i].n; k++) {
            steps[0] = fmin(steps[0], (double)log->series[i].steps[k]);
            steps[1] = fmax(steps[1], (double)log->series[i].steps[k]);
        }
    }
    if (steps[0] > 0 && steps[0] <= steps[1] * 0.25) steps[0] = 0;
    fputs("<section><h2>Training curves</h2>", f);
    if (!log->n_series) fputs("<p class=\"empty\">No scalars were logged.</p>", f);
    fputs("<div class=\"charts\">\n", f);
    chart_of(f, log, "Loss", loss, ltv, 0, steps);
    chart_of(f, log, "Accuracy", acc, tv, 1, steps);
    chart_of(f, log, "Learning rate", lr, green, 0, steps);
    chart_of(f, log, "Loss scale", scale, purple, 0, steps);
    int k = 0;
    for (size_t i = 0; i < log->n_series; i++) {
        const rl_series *s = &log->series[i];
        if (is_known(s->tag) || !s->n) continue;
        plot_series p = {s, other_colors[k++ % 5]};
        write_chart(f, s->tag, &p, 1, 0, steps);
    }
    fputs("</div></section>\n", f);
}

/* A summary key as a label: "val_accuracy" reads "val accuracy". */
static void html_label(FILE *f, const char *key) {
    for (; *key; key++) {
        if (*key == '_')
            fputc(' ', f);
        else {
            char one[2] = {*key, 0};
            html(f, one);
        }
    }
}

static void write_pairs(FILE *f, const char *title, const rl_pairs *p, const char *cls,
                        int labels) {
    fprintf(f, "<section class=\"%s\"><h2>", cls);
    html(f, title);
    fputs("</h2>", f);
    if (!p->n) {
        fputs("<p class=\"empty\">Nothing recorded.</p></section>\n", f);
        return;
    }
    fputs("<table class=\"kv\"><tbody>", f);
    for (size_t i = 0; i < p->n; i++) {
        const run_log_value *v = &p->items[i].value;
        char buf[64];
        fputs("<tr><th>", f);
        if (labels)
            html_label(f, p->items[i].key);
        else
            html(f, p->items[i].key);
        fputs("</th><td>", f);
        if (v->type == RUN_LOG_TEXT) {
            html(f, v->as.text);
        } else {
            rl_format_value(v, buf, sizeof buf);
            html(f, buf);
        }
        fputs("</td></tr>", f);
    }
    fputs("</tbody></table></section>\n", f);
}

static void epoch_cell(FILE *f, bool has, double v, const char *format) {
    if (!has)
        fputs("<td>&#8211;</td>", f);
    else if (!isfinite(v))
        fprintf(f, "<td>%s</td>", isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf");
    else {
        fputs("<td>", f);
        fprintf(f, format, v);
        fputs("</td>", f);
    }
}

/* The epoch records as a table (scrolling when long). */
static void write_epochs(FILE *f, const run_log *log) {
    if (!log->n_epochs) return;
    fputs("<section><h2>Epochs</h2><div class=\"epwrap\"><table class=\"ep\"><thead><tr>"
          "<th>epoch</th><th>step</th><th>train loss</th><th>train accuracy</th><th>val loss</th>"
          "<th>val accuracy</th><th>lr</th></tr></thead><tbody>",
          f);
    for (size_t i = 0; i < log->n_epochs; i++) {
        const rl_epoch *e = &log->epochs[i];
        fprintf(f, "<tr><td>%lld</td><td>%lld</td>", (long long)e->epoch, (long long)e->step);
        epoch_cell(f, true, e->train_loss, "%.4f");
        epoch_cell(f, e->has_train_accuracy, e->train_accuracy * 100, "%.2f%%");
        epoch_cell(f, e->has_val_loss, e->val_loss, "%.4f");
        epoch_cell(f, e->has_val_accuracy, e->val_accuracy * 100, "%.2f%%");
        epoch_cell(f, true, e->lr, "%.4g");
        fputs("</tr>", f);
    }
    fputs("</tbody></table></div></section>\n", f);
}

/* Background of a cell: blue on the diagonal, red off it, darker for a larger share of the row. */
static void cell_style(FILE *f, double t, int diagonal) {
    static const int light[3] = {248, 250, 252};
    static const int blue[3] = {29, 78, 216}, red[3] = {220, 38, 38};
    const int *dark = diagonal ? blue : red;
    int c[3];
    if (!diagonal) t = t > 0 ? 0.12 + 0.88 * t : 0;
    for (int i = 0; i < 3; i++) c[i] = (int)lround(light[i] + (dark[i] - light[i]) * t);
    fprintf(f, " style=\"background:rgb(%d,%d,%d);color:%s\"", c[0], c[1], c[2],
            t > 0.5 ? "#fff" : "#0f172a");
}

static void confusion_header(FILE *f, const run_log *log) {
    int n = log->n_classes;
    fprintf(f,
            "<thead><tr><th class=\"corner\" rowspan=\"2\">true &#8595; / predicted "
            "&#8594;</th><th class=\"axis\" colspan=\"%d\">predicted</th>"
            "<th rowspan=\"2\" class=\"rc\">recall</th></tr><tr>",
            n);
    for (int j = 0; j < n; j++) {
        fputs("<th class=\"cn\">", f);
        html(f, log->class_names[j]);
        fputs("</th>", f);
    }
    fputs("</tr></thead>", f);
}

static void write_confusion(FILE *f, const run_log *log) {
    int n = log->n_classes;
    const int64_t *c = log->confusion;
    if (n <= 0) return;
    fputs("<section><h2>Confusion matrix</h2><p class=\"note\">Rows: true class; columns: "
          "predicted class. Shading is the share of the row.</p><div class=\"cmwrap\">"
          "<table class=\"cm\">",
          f);
    confusion_header(f, log);
    fputs("<tbody>", f);
    for (int i = 0; i < n; i++) {
        int64_t row = 0;
        for (int j = 0; j < n; j++) row += c[(size_t)i * n + j];
        fputs("<tr><th class=\"rn\">", f);
        html(f, log->class_names[i]);
        fputs("</th>", f);
        for (int j = 0; j < n; j++) {
            int64_t v = c[(size_t)i * n + j];
            fputs("<td", f);
            cell_style(f, row > 0 ? (double)v / (double)row : 0, i == j);
            fprintf(f, ">%lld</td>", (long long)v);
        }
        if (row > 0)
            fprintf(f, "<td class=\"rc\">%.1f%%</td></tr>",
                    100.0 * (double)c[(size_t)i * n + i] / (double)row);
        else
            fputs("<td class=\"rc\">&#8211;</td></tr>", f);
    }
    fputs("<tr class=\"prec\"><th class=\"rn\">precision</th>", f);
    for (int j = 0; j < n; j++) {
        int64_t col = 0;
        for (int i = 0; i < n; i++) col += c[(size_t)i * n + j];
        if (col > 0)
            fprintf(f, "<td>%.1f%%</td>", 100.0 * (double)c[(size_t)j * n + j] / (double)col);
        else
            fputs("<td>&#8211;</td>", f);
    }
    fputs("<td></td></tr></tbody></table></div></section>\n", f);
}

static const char *const css =
    "*{box-sizing:border-box}"
    "body{margin:0;background:#f1f5f9;color:#0f172a;font:14px/1.5 system-ui,-apple-system,"
    "'Segoe UI',Roboto,'DejaVu Sans',sans-serif}"
    "main{max-width:1240px;margin:0 auto;padding:24px 20px 40px}"
    "header{background:#0f172a;color:#f8fafc;padding:22px "
    "28px;border-radius:10px;margin-bottom:18px}"
    "header h1{margin:0;font-size:22px;font-weight:650}"
    "header p{margin:4px 0 0;color:#cbd5e1;font-size:13px}"
    "section{background:#fff;border:1px solid #e2e8f0;border-radius:10px;padding:16px 20px;"
    "margin-bottom:18px}"
    "h2{font-size:16px;margin:0 0 10px;color:#1e293b}"
    ".top{display:grid;grid-template-columns:1fr 1fr;gap:18px}.top section{margin:0}"
    ".top{margin-bottom:18px}"
    "table.kv{border-collapse:collapse;width:100%}"
    ".kv th,.kv td{text-align:left;padding:5px 8px;border-bottom:1px solid #f1f5f9;"
    "vertical-align:top}"
    ".kv th{color:#475569;font-weight:500;width:42%}"
    ".kv td{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:13px;"
    "word-break:break-all}"
    ".summary .kv td{font-family:inherit;font-size:14px;font-weight:600}"
    ".charts{display:grid;grid-template-columns:1fr 1fr;gap:16px}"
    "figure.chart{margin:0;border:1px solid #e2e8f0;border-radius:8px;padding:10px 12px}"
    "figcaption{font-weight:600;color:#1e293b}"
    ".last{font-size:12px;color:#64748b;margin:2px 0 4px}"
    ".last span{margin-right:14px;white-space:nowrap}"
    ".last i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px}"
    "svg{width:100%;height:auto;display:block}"
    ".grid line{stroke:#e2e8f0;stroke-width:1}.grid line.tick{stroke:#94a3b8}"
    ".axis{stroke:#64748b;fill:none;stroke-width:1.2}"
    "svg text{font-size:12px;fill:#475569}.yt{text-anchor:end}.xt{text-anchor:middle}"
    ".xl{text-anchor:middle;font-size:12px;fill:#334155}"
    ".empty,.note{color:#64748b;margin:4px 0 10px}"
    ".cmwrap{overflow-x:auto}"
    "table.cm{border-collapse:separate;border-spacing:3px;font-variant-numeric:tabular-nums}"
    ".cm td{min-width:56px;height:40px;text-align:center;border-radius:4px;font-weight:600}"
    ".cm th{font-weight:600;color:#334155;padding:4px 8px}"
    ".cm th.rn{text-align:right}.cm th.corner{font-weight:400;color:#64748b;font-size:12px}"
    ".cm th.axis{color:#64748b;font-weight:400;font-size:12px}"
    ".cm td.rc,.cm .prec td{background:#f8fafc;color:#475569;font-weight:500;font-size:12px}"
    ".cm th.rc{color:#64748b;font-weight:400;font-size:12px}"
    ".epwrap{max-height:420px;overflow-y:auto}"
    "table.ep{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}"
    ".ep th,.ep td{text-align:right;padding:4px 10px;border-bottom:1px solid #f1f5f9}"
    ".ep th{position:sticky;top:0;background:#fff;color:#475569;font-weight:500}"
    "header p.status{color:#fca5a5;font-weight:600}"
    "footer{color:#94a3b8;font-size:12px;text-align:center}";

static void write_header(FILE *f, const run_log *log) {
    char when[64] = "";
    time_t t = (time_t)log->start_time;
    struct tm tm;
    if (localtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    double dur = log->end_time - log->start_time;
    fprintf(f,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            "<title>graft run report</title><style>%s</style></head><body><main>\n"
            "<header><h1>graft training report</h1><p>",
            css);
    html(f, log->dir);
    long secs = dur > 0 ? (long)dur : 0;
    fprintf(f, " &#183; started %s &#183; ran %ldh %02ldm %02lds</p>", when, secs / 3600,
            secs / 60 % 60, secs % 60);
    if (log->status == RUN_LOG_INTERRUPTED)
        fputs("<p class=\"status\">Interrupted (Ctrl-C) before the end of training.</p>", f);
    else if (log->status == RUN_LOG_FAILED)
        fputs("<p class=\"status\">The run failed before it finished.</p>", f);
    fputs("</header>\n", f);
}

int report_html_write(const run_log *log, char *err, size_t err_size) {
    size_t len = strlen(log->dir) + 32;
    char *tmp = malloc(len), *path = malloc(len);
    if (!tmp || !path) {
        free(tmp);
        free(path);
        snprintf(err, err_size, "out of memory writing report.html");
        return -1;
    }
    snprintf(tmp, len, "%s/report.html.tmp", log->dir);
    snprintf(path, len, "%s/report.html", log->dir);
    FILE *f = fopen(tmp, "w");
    int rc = 0;
    if (!f) {
        snprintf(err, err_size, "cannot create '%s': %s", tmp, strerror(errno));
        rc = -1;
    } else {
        write_header(f, log);
        fputs("<div class=\"top\">", f);
        write_pairs(f, "Summary", &log->summary, "summary", 1);
        write_pairs(f, "Configuration", &log->config, "config", 0);
        fputs("</div>\n", f);
        write_charts(f, log);
        write_epochs(f, log);
        write_confusion(f, log);
        fputs("<footer>Written by graft " GRAFT_VERSION "</footer></main></body></html>\n", f);
        int bad = ferror(f);
        if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
            snprintf(err, err_size, "cannot write '%s': %s", path, strerror(errno));
            remove(tmp);
            rc = -1;
        }
    }
    free(tmp);
    free(path);
    return rc;
}
