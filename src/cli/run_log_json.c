/* run_log_json.c: metrics.jsonl's values: typed config and summary values, JSON strings, floats
 * that read back exactly, and the "nonfinite" note of a record whose floats were NaN or inf. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_log_internal.h"

run_log_value run_log_text(const char *text) {
    run_log_value v = {.type = RUN_LOG_TEXT};
    v.as.text = text ? text : "";
    return v;
}

run_log_value run_log_int(int64_t value) {
    run_log_value v = {.type = RUN_LOG_INT};
    v.as.i = value;
    return v;
}

run_log_value run_log_float(double value) {
    run_log_value v = {.type = RUN_LOG_FLOAT};
    v.as.f = value;
    return v;
}

run_log_value run_log_bool(bool value) {
    run_log_value v = {.type = RUN_LOG_BOOL};
    v.as.b = value;
    return v;
}

/* Whether s is [+-]digits[.digits][e[+-]digits] (digits on at least one side of the point);
 * *integer: no point and no exponent. Hex, inf and nan are not numbers here. */
static int decimal_syntax(const char *s, int *integer) {
    const char *p = s + (*s == '+' || *s == '-');
    size_t whole = strspn(p, "0123456789"), frac = 0;
    p += whole;
    *integer = 1;
    if (*p == '.') {
        *integer = 0;
        frac = strspn(++p, "0123456789");
        p += frac;
    }
    if (!whole && !frac) return 0;
    if (*p == 'e' || *p == 'E') {
        *integer = 0;
        p++;
        p += *p == '+' || *p == '-';
        size_t exp = strspn(p, "0123456789");
        if (!exp) return 0;
        p += exp;
    }
    return *p == 0;
}

run_log_value run_log_number_or_text(const char *text) {
    int integer;
    if (!text || !decimal_syntax(text, &integer)) return run_log_text(text);
    char *end;
    errno = 0;
    if (integer) {
        long long i = strtoll(text, &end, 10);
        return errno ? run_log_text(text) : run_log_int((int64_t)i);
    }
    double f = strtod(text, &end);
    return isfinite(f) ? run_log_float(f) : run_log_text(text);
}

void rl_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\r')
            fputs("\\r", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* Appends `"name": "what"` to the notes (names are escaped as JSON strings). */
static void note(rl_notes *notes, const char *name, const char *what) {
    char buf[600];
    size_t n = 0;
    buf[n++] = '"';
    for (const unsigned char *p = (const unsigned char *)name; *p && n < 500; p++) {
        if (*p == '"' || *p == '\\') buf[n++] = '\\';
        if (*p < 0x20) {
            n += (size_t)snprintf(buf + n, sizeof buf - n, "\\u%04x", *p);
            continue;
        }
        buf[n++] = (char)*p;
    }
    n += (size_t)snprintf(buf + n, sizeof buf - n, "\": \"%s\"", what);
    /* A record with more non-finite floats than the notes hold keeps its nulls; notes are a
     * few fields long in practice (see docs/metrics.md). */
    if (notes->len + n + 3 > sizeof notes->text) return;
    if (notes->n++) notes->text[notes->len++] = ',', notes->text[notes->len++] = ' ';
    memcpy(notes->text + notes->len, buf, n);
    notes->len += n;
    notes->text[notes->len] = 0;
}

/* The shortest of %.15g, %.16g, %.17g that reads back exactly, always with a point or an
 * exponent (so that JSON readers see a float: 1.0, not 1). */
void rl_json_float(FILE *f, double v, rl_notes *notes, const char *name) {
    if (!isfinite(v)) {
        fputs("null", f);
        if (notes && name) note(notes, name, isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return;
    }
    char buf[48];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".eE")) strcat(buf, ".0");
    fputs(buf, f);
}

void rl_json_value(FILE *f, const run_log_value *v, rl_notes *notes, const char *name) {
    switch (v->type) {
    case RUN_LOG_INT:
        fprintf(f, "%" PRId64, v->as.i);
        break;
    case RUN_LOG_FLOAT:
        rl_json_float(f, v->as.f, notes, name);
        break;
    case RUN_LOG_BOOL:
        fputs(v->as.b ? "true" : "false", f);
        break;
    default:
        rl_json_string(f, v->as.text);
    }
}

void rl_json_pairs(FILE *f, const rl_pairs *p, rl_notes *notes, const char *prefix) {
    fputc('{', f);
    for (size_t i = 0; i < p->n; i++) {
        char name[512];
        snprintf(name, sizeof name, "%s.%s", prefix, p->items[i].key);
        if (i) fputs(", ", f);
        rl_json_string(f, p->items[i].key);
        fputs(": ", f);
        rl_json_value(f, &p->items[i].value, notes, name);
    }
    fputc('}', f);
}

void rl_json_end(FILE *f, const rl_notes *notes) {
    if (notes && notes->n) fprintf(f, ", \"nonfinite\": {%s}", notes->text);
    fputs("}\n", f);
}

void rl_format_value(const run_log_value *v, char *buf, size_t size) {
    switch (v->type) {
    case RUN_LOG_INT:
        snprintf(buf, size, "%" PRId64, v->as.i);
        break;
    case RUN_LOG_FLOAT:
        if (isfinite(v->as.f))
            snprintf(buf, size, "%.6g", v->as.f);
        else
            snprintf(buf, size, "%s", isnan(v->as.f) ? "NaN" : v->as.f > 0 ? "+inf" : "-inf");
        break;
    case RUN_LOG_BOOL:
        snprintf(buf, size, "%s", v->as.b ? "yes" : "no");
        break;
    default:
        snprintf(buf, size, "%s", v->as.text);
    }
}
