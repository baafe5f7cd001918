/* text_table.c: building the labelled text table from a CSV/TSV file or a DIR/<class>/ folder. */
#include "text_table.h"

#include <ctype.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "csv.h"
#include "text_folder.h"
#include "../core/files.h"

struct text_table {
    text_table_options opt; /* its strings point into opt_text */
    char *opt_text[3];
    char *pool; /* every text, pair and raw label, NUL-terminated */
    size_t pool_len, pool_cap;
    int64_t n, cap;
    int64_t *text_off, *pair_off, *label_off; /* (cap) offsets into pool; pair_off -1: none */
    int64_t *line;                            /* (cap) where each row's record starts */
    double *target;                           /* (cap) REGRESSION targets */
    int64_t *lab_start;                       /* (n + 1) CSR rows into lab_idx */
    int32_t *lab_idx;                         /* (lab_start[n]) class indices */
    char **classes;                           /* (nclasses) sorted */
    int nclasses;
    int classes_fixed; /* 1: classes were given (folder names or load_like), not collected */
    text_skip *skips;
    int64_t nskips, skips_cap;
};

static graft_status no_memory(graft_err *e, const char *path) {
    return err_set(e, GRAFT_E_OUT_OF_MEMORY, "%s: out of memory while loading text data", path);
}

static char *dup_str(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static int grow(void **p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return 1;
    int64_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return 0;
    *p = q;
    *cap = c;
    return 1;
}

/* ---- table building ------------------------------------------------------------------------ */

static text_table *table_new(const text_table_options *o) {
    text_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    text_table_options def = TEXT_TABLE_OPTIONS_INIT;
    t->opt = o ? *o : def;
    const char *names[3] = {t->opt.text_column, t->opt.text_pair_column, t->opt.label_column};
    for (int k = 0; k < 3; k++) {
        t->opt_text[k] = dup_str(names[k]);
        if (names[k] && !t->opt_text[k]) {
            text_table_free(t);
            return NULL;
        }
    }
    t->opt.text_column = t->opt_text[0];
    t->opt.text_pair_column = t->opt_text[1];
    t->opt.label_column = t->opt_text[2];
    return t;
}

static int64_t pool_add(text_table *t, const char *s, size_t n) {
    if (t->pool_len + n + 1 > t->pool_cap) {
        size_t cap = t->pool_cap ? t->pool_cap : 4096;
        while (cap < t->pool_len + n + 1) cap *= 2;
        char *p = realloc(t->pool, cap);
        if (!p) return -1;
        t->pool = p;
        t->pool_cap = cap;
    }
    int64_t off = (int64_t)t->pool_len;
    memcpy(t->pool + off, s, n);
    t->pool[off + (int64_t)n] = '\0';
    t->pool_len += n + 1;
    return off;
}

/* Append a row; label is the raw label text (NULL in REGRESSION mode, where target counts). */
static int add_row(text_table *t, int64_t line, const char *text, size_t text_len, const char *pair,
                   size_t pair_len, const char *label, size_t label_len, double target) {
    int64_t c = t->cap;
    if (t->n == t->cap) {
        if (!grow((void **)&t->text_off, &c, t->n + 1, sizeof(int64_t))) return 0;
        c = t->cap;
        if (!grow((void **)&t->pair_off, &c, t->n + 1, sizeof(int64_t))) return 0;
        c = t->cap;
        if (!grow((void **)&t->label_off, &c, t->n + 1, sizeof(int64_t))) return 0;
        c = t->cap;
        if (!grow((void **)&t->target, &c, t->n + 1, sizeof(double))) return 0;
        c = t->cap;
        if (!grow((void **)&t->line, &c, t->n + 1, sizeof(int64_t))) return 0;
        t->cap = c;
    }
    int64_t to = pool_add(t, text, text_len);
    int64_t po = pair ? pool_add(t, pair, pair_len) : -1;
    int64_t lo = label ? pool_add(t, label, label_len) : -1;
    if (to < 0 || (pair && po < 0) || (label && lo < 0)) return 0;
    t->text_off[t->n] = to;
    t->pair_off[t->n] = po;
    t->label_off[t->n] = lo;
    t->target[t->n] = target;
    t->line[t->n] = line;
    t->n++;
    return 1;
}

/* Record a skipped sample. Returns 0 when out of memory. */
static int add_skip(text_table *t, const char *path, int64_t line, const char *fmt, ...)
    GRAFT_PRINTF(4, 5);
static int add_skip(text_table *t, const char *path, int64_t line, const char *fmt, ...) {
    if (!grow((void **)&t->skips, &t->skips_cap, t->nskips + 1, sizeof(text_skip))) return 0;
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    text_skip *s = &t->skips[t->nskips];
    s->path = dup_str(path);
    s->reason = dup_str(reason);
    s->line = line;
    if (!s->path || !s->reason) {
        free(s->path);
        free(s->reason);
        return 0;
    }
    t->nskips++;
    return 1;
}

/* ---- labels ---------------------------------------------------------------------------------- */

/* The next piece of a multi-label field from *s, trimmed of spaces and tabs; 0 at the end. */
static int next_piece(const char **s, char sep, const char **piece, size_t *len) {
    while (**s) {
        const char *b = *s, *end = strchr(b, sep);
        if (!end) end = b + strlen(b);
        *s = *end ? end + 1 : end;
        while (b < end && (*b == ' ' || *b == '\t')) b++;
        while (end > b && (end[-1] == ' ' || end[-1] == '\t')) end--;
        if (end > b) {
            *piece = b;
            *len = (size_t)(end - b);
            return 1;
        }
    }
    return 0;
}

/* Index of the class named by the len bytes at name, or -1. */
static int find_class(char *const *classes, int n, const char *name, size_t len) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strncmp(classes[mid], name, len);
        if (c == 0 && classes[mid][len] != '\0') c = 1;
        if (c == 0) return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Take the classes from a sorted list (copies). */
static int set_classes(text_table *t, char *const *names, int n) {
    t->classes = calloc((size_t)(n ? n : 1), sizeof(char *));
    if (!t->classes) return 0;
    t->nclasses = n;
    for (int c = 0; c < n; c++)
        if (!(t->classes[c] = dup_str(names[c]))) return 0;
    t->classes_fixed = 1;
    return 1;
}

/* Collect the distinct label names of all rows, sorted, as the classes. */
static int collect_classes(text_table *t) {
    int64_t cap = 0, n = 0;
    char **names = NULL;
    for (int64_t i = 0; i < t->n; i++) {
        const char *s = t->pool + t->label_off[i], *p = s;
        size_t len = strlen(s);
        int multi = t->opt.label_mode == TEXT_LABEL_MULTI;
        while (multi ? next_piece(&s, t->opt.label_separator, &p, &len) : (s != NULL)) {
            if (!grow((void **)&names, &cap, n + 1, sizeof(char *))) goto fail;
            if (!(names[n] = malloc(len + 1))) goto fail;
            memcpy(names[n], p, len);
            names[n++][len] = '\0';
            if (!multi) s = NULL;
        }
    }
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    int64_t u = 0;
    for (int64_t i = 0; i < n; i++) {
        if (u > 0 && strcmp(names[u - 1], names[i]) == 0)
            free(names[i]);
        else
            names[u++] = names[i];
    }
    if (u > INT32_MAX) goto fail;
    t->classes = names ? names : calloc(1, sizeof(char *));
    t->nclasses = (int)u;
    return t->classes != NULL;
fail:
    for (int64_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return 0;
}

/* Does every class name of the raw label exist? (*bad gets the first unknown piece.) */
static int labels_known(const text_table *t, const char *label, const char **bad, size_t *bad_len) {
    const char *s = label, *p = label;
    size_t len = strlen(label);
    if (t->opt.label_mode != TEXT_LABEL_MULTI) {
        *bad = label;
        *bad_len = len;
        return find_class(t->classes, t->nclasses, label, len) >= 0;
    }
    while (next_piece(&s, t->opt.label_separator, &p, &len)) {
        if (find_class(t->classes, t->nclasses, p, len) < 0) {
            *bad = p;
            *bad_len = len;
            return 0;
        }
    }
    return 1;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Turn each row's raw label into class indices (CSR), every name being a known class. */
static int resolve_labels(text_table *t) {
    if (t->opt.label_mode == TEXT_LABEL_REGRESSION || t->opt.label_mode == TEXT_LABEL_NONE)
        return 1;
    if (!t->classes_fixed && !collect_classes(t)) return 0;
    t->lab_start = calloc((size_t)t->n + 1, sizeof(int64_t));
    if (!t->lab_start) return 0;
    int64_t cap = 0, used = 0;
    for (int64_t i = 0; i < t->n; i++) {
        const char *s = t->pool + t->label_off[i], *p = s;
        size_t len = strlen(s);
        int64_t first = used;
        int multi = t->opt.label_mode == TEXT_LABEL_MULTI;
        while (multi ? next_piece(&s, t->opt.label_separator, &p, &len) : (s != NULL)) {
            if (!grow((void **)&t->lab_idx, &cap, used + 1, sizeof(int32_t))) return 0;
            t->lab_idx[used++] = find_class(t->classes, t->nclasses, p, len);
            if (!multi) s = NULL;
        }
        if (used > first) /* lab_idx is NULL while no row has had a label */
            qsort(t->lab_idx + first, (size_t)(used - first), sizeof(int32_t), cmp_i32);
        int64_t u = first;
        for (int64_t k = first; k < used; k++)
            if (u == first || t->lab_idx[u - 1] != t->lab_idx[k]) t->lab_idx[u++] = t->lab_idx[k];
        used = u;
        t->lab_start[i + 1] = used;
    }
    return 1;
}

/* A finite decimal number, optionally surrounded by white space, as Python's float() reads it
 * (without its underscores, "inf" and "nan"), independent of the C locale. */
static int parse_number(const char *s, double *out) {
    while (isspace((unsigned char)*s)) s++;
    const char *p = s;
    if (*p == '+' || *p == '-') p++;
    int digits = 0;
    while (isdigit((unsigned char)*p)) p++, digits++;
    const char *dot = NULL;
    if (*p == '.') {
        dot = p++;
        while (isdigit((unsigned char)*p)) p++, digits++;
    }
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!isdigit((unsigned char)*p)) return 0;
        while (isdigit((unsigned char)*p)) p++;
    }
    const char *end = p;
    while (isspace((unsigned char)*p)) p++;
    if (*p) return 0;
    char buf[512];
    size_t n = (size_t)(end - s);
    if (n >= sizeof buf) return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    const char *point = localeconv()->decimal_point;
    if (dot && point && point[0] && point[0] != '.' && !point[1]) buf[dot - s] = point[0];
    double v = strtod(buf, NULL);
    if (!isfinite(v)) return 0;
    *out = v;
    return 1;
}

/* ---- CSV / TSV ------------------------------------------------------------------------------- */

/* A CSV/TSV table or one text file as a sample, at most `max` bytes. */
static graft_status read_whole_file(const char *path, size_t max, char **buf, size_t *len,
                                    graft_err *e) {
    const char *why = NULL;
    int too_big = 0;
    if (file_read_all(path, max, buf, len, &why, &too_big) == 0) return GRAFT_OK;
    if (too_big)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "%s: over graft's limit of %zu MiB", path,
                       max >> 20);
    if (!strcmp(why, "out of memory")) return no_memory(e, path);
    return err_set(e, GRAFT_E_IO, "%s: cannot open: %s", path, why);
}

/* Where the header names a column; -1 for name NULL. */
static graft_status find_column(const csv_reader *r, const char *path, const char *what,
                                const char *name, int *col, graft_err *e) {
    *col = -1;
    if (!name) return GRAFT_OK;
    for (int i = 0; i < r->nfields; i++) {
        if (strcmp(csv_field(r, i, NULL), name) != 0) continue;
        if (*col >= 0)
            return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                           "%s: the header names the %s column '%s' twice", path, what, name);
        *col = i;
    }
    if (*col < 0)
        return err_set(e, GRAFT_E_NOT_FOUND, "%s: the header (line %lld) has no %s column '%s'",
                       path, (long long)r->record_line, what, name);
    return GRAFT_OK;
}

/* Read the header record (empty lines before it are passed over) and find the columns. */
static graft_status read_header(csv_reader *r, const text_table *t, const char *path, int col[3],
                                graft_err *e) {
    csv_result res;
    while ((res = csv_reader_next(r)) == CSV_RECORD && r->nfields == 0) {
    }
    if (res == CSV_NO_MEMORY) return no_memory(e, path);
    if (res == CSV_END)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "%s: empty file (no header)", path);
    if (res == CSV_UNTERMINATED)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "%s: the header (line %lld) has an unterminated quote", path,
                       (long long)r->record_line);
    size_t bad;
    if (!utf8_valid(r->buf + r->raw_begin, r->raw_end - r->raw_begin, &bad) ||
        memchr(r->buf + r->raw_begin, 0, r->raw_end - r->raw_begin))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "%s: the header (line %lld) is not valid UTF-8 text", path,
                       (long long)r->record_line);
    TRY(find_column(r, path, "text", t->opt.text_column, &col[0], e));
    TRY(find_column(r, path, "text pair", t->opt.text_pair_column, &col[1], e));
    return find_column(r, path, "label", t->opt.label_column, &col[2], e);
}

/* Why a parsed record cannot be a row, written into why; 0 when it can. */
static int record_problem(const text_table *t, const csv_reader *r, csv_result res, int nheader,
                          const int col[3], double *target, char *why, size_t why_size) {
    size_t bad, n = r->raw_end - r->raw_begin;
    const char *raw = r->buf + r->raw_begin;
    if (res == CSV_UNTERMINATED)
        return snprintf(why, why_size, "unterminated quoted field (runs to the end of the file)");
    if (!utf8_valid(raw, n, &bad))
        return snprintf(why, why_size, "invalid UTF-8 (byte 0x%02x at offset %zu of the record)",
                        (unsigned char)raw[bad], bad);
    if (memchr(raw, 0, n)) return snprintf(why, why_size, "NUL byte in the record");
    if (r->nfields != nheader)
        return snprintf(why, why_size, "%d fields where the header has %d", r->nfields, nheader);
    size_t len;
    csv_field(r, col[0], &len);
    if (len == 0) return snprintf(why, why_size, "empty text");
    if (t->opt.label_mode == TEXT_LABEL_NONE) return 0;
    const char *label = csv_field(r, col[2], &len);
    const char *unknown;
    switch (t->opt.label_mode) {
    case TEXT_LABEL_REGRESSION:
        if (!parse_number(label, target))
            return snprintf(why, why_size, "label '%.80s' is not a finite number", label);
        break;
    case TEXT_LABEL_CLASS:
        if (len == 0) return snprintf(why, why_size, "empty label");
        /* fall through */
    default:
        if (t->classes_fixed && !labels_known(t, label, &unknown, &len))
            return snprintf(why, why_size, "label '%.*s' is not one of the %d known classes",
                            (int)(len > 80 ? 80 : len), unknown, t->nclasses);
    }
    return 0;
}

static graft_status load_records(text_table *t, csv_reader *r, const char *path, graft_err *e) {
    int col[3];
    TRY(read_header(r, t, path, col, e));
    int nheader = r->nfields;
    for (;;) {
        csv_result res = csv_reader_next(r);
        if (res == CSV_END) break;
        if (res == CSV_NO_MEMORY) return no_memory(e, path);
        if (res == CSV_RECORD && r->nfields == 0) continue; /* an empty line */
        char why[256];
        double target = 0;
        if (record_problem(t, r, res, nheader, col, &target, why, sizeof why)) {
            if (!add_skip(t, path, r->record_line, "%s", why)) return no_memory(e, path);
            continue;
        }
        size_t tl, pl = 0, ll = 0;
        const char *text = csv_field(r, col[0], &tl);
        const char *pair = col[1] >= 0 ? csv_field(r, col[1], &pl) : NULL;
        const char *label = col[2] >= 0 ? csv_field(r, col[2], &ll) : NULL;
        if (t->opt.label_mode == TEXT_LABEL_REGRESSION) label = NULL;
        if (!add_row(t, r->record_line, text, tl, pair, pl, label, ll, target))
            return no_memory(e, path);
    }
    return resolve_labels(t) ? GRAFT_OK : no_memory(e, path);
}

static int has_ext(const char *path, const char *ext) {
    size_t n = strlen(path), k = strlen(ext);
    return n > k && strcasecmp(path + n - k, ext) == 0;
}

/* Fill t (options and, for load_like, classes already set) from a .csv/.tsv file. */
static graft_status fill_from_csv(text_table *t, const char *path, graft_err *e) {
    char delim;
    if (has_ext(path, ".csv"))
        delim = ',';
    else if (has_ext(path, ".tsv"))
        delim = '\t';
    else
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "%s: text data must be a folder, a .csv or a .tsv file", path);
    if (!t->opt.text_column || (!t->opt.label_column && t->opt.label_mode != TEXT_LABEL_NONE))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "%s: the text and label column names are needed", path);
    if (t->opt.label_mode == TEXT_LABEL_MULTI &&
        (t->opt.label_separator == 0 || t->opt.label_separator == '\n'))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "%s: multi-label needs a label separator",
                       path);
    if ((unsigned)t->opt.label_mode >= TEXT_LABEL_MODE_COUNT)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "%s: unknown label mode %d", path,
                       (int)t->opt.label_mode);
    char *buf;
    size_t len;
    TRY(read_whole_file(path, TEXT_TABLE_MAX_BYTES, &buf, &len, e));
    csv_reader r;
    csv_reader_init(&r, buf, len, delim, t->opt.literal_quotes ? 0 : '"');
    graft_status st = load_records(t, &r, path, e);
    csv_reader_free(&r);
    free(buf);
    return st;
}

graft_status text_table_load_csv(text_table **out, const char *path, const text_table_options *o,
                                 graft_err *e) {
    *out = NULL;
    text_table *t = table_new(o);
    if (!t) return no_memory(e, path);
    graft_status st = fill_from_csv(t, path, e);
    if (st != GRAFT_OK) {
        text_table_free(t);
        return st;
    }
    *out = t;
    return GRAFT_OK;
}

/* ---- folders --------------------------------------------------------------------------------- */

static int is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* Read one sample file into a row of class `name`, or record why not. */
static graft_status add_file_sample(text_table *t, const char *path, const char *name,
                                    graft_err *e) {
    char *buf;
    size_t len;
    graft_err fe;
    err_clear(&fe);
    graft_status st = read_whole_file(path, TEXT_SAMPLE_MAX_BYTES, &buf, &len, &fe);
    if (st == GRAFT_E_OUT_OF_MEMORY) return err_set(e, st, "%s", fe.msg);
    if (st != GRAFT_OK)
        return add_skip(t, path, 0, "unreadable: %s", fe.msg) ? GRAFT_OK : no_memory(e, path);
    const char *text = buf;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) text += 3, len -= 3;
    size_t bad, k = 0;
    while (k < len && isspace((unsigned char)text[k])) k++;
    int ok = 1;
    if (!utf8_valid(text, len, &bad))
        ok = add_skip(t, path, 0, "invalid UTF-8 (byte 0x%02x at offset %zu)",
                      (unsigned char)text[bad], bad + (size_t)(text - buf));
    else if (memchr(text, 0, len))
        ok = add_skip(t, path, 0, "NUL byte in the file");
    else if (k == len)
        ok = add_skip(t, path, 0, len ? "empty (only white space)" : "empty file");
    else
        ok = add_row(t, 0, text, len, NULL, 0, name, strlen(name), 0);
    free(buf);
    return ok ? GRAFT_OK : no_memory(e, path);
}

/* Record what the listing left out (every note, link loops and files reached twice among them:
 * nothing is left out silently). */
static graft_status add_notes(text_table *t, const file_walk *w, int64_t from, int64_t to,
                              graft_err *e) {
    for (int64_t i = from; i < to; i++)
        if (!add_skip(t, w->notes[i].path, 0, "%s", w->notes[i].reason))
            return no_memory(e, w->notes[i].path);
    return GRAFT_OK;
}

/* Class c's files read and its notes recorded, in name order (both lists are sorted). */
static graft_status load_class(text_table *t, const text_folder *f, int64_t c, graft_err *e) {
    const file_walk *w = &f->w;
    int64_t note = f->note_start[c], end = f->note_start[c + 1];
    graft_status st = GRAFT_OK;
    for (int64_t k = f->file_start[c]; st == GRAFT_OK && k < f->file_start[c + 1]; k++) {
        int64_t first = note;
        while (note < end && strcmp(w->notes[note].path, w->paths[k]) < 0) note++;
        st = add_notes(t, w, first, note, e);
        if (st == GRAFT_OK) st = add_file_sample(t, w->paths[k], f->classes[c], e);
    }
    return st == GRAFT_OK ? add_notes(t, w, note, end, e) : st;
}

static graft_status fill_from_folder(text_table *t, const char *dir, const text_table *like,
                                     graft_err *e) {
    text_folder f;
    TRY(text_folder_list(&f, dir, like ? like->classes : NULL, like ? like->nclasses : 0, e));
    graft_status st = GRAFT_OK;
    if (!(like ? set_classes(t, like->classes, like->nclasses)
               : set_classes(t, f.classes, (int)f.n_classes)))
        st = no_memory(e, dir);
    if (st == GRAFT_OK) st = add_notes(t, &f.w, 0, f.note_start[0], e);
    for (int64_t c = 0; st == GRAFT_OK && c < f.n_classes; c++) st = load_class(t, &f, c, e);
    text_folder_free(&f);
    if (st == GRAFT_OK && !resolve_labels(t)) st = no_memory(e, dir);
    return st;
}

graft_status text_table_load_folder(text_table **out, const char *dir, const text_table_options *o,
                                    graft_err *e) {
    *out = NULL;
    text_table *t = table_new(o);
    if (!t) return no_memory(e, dir);
    t->opt.label_mode = TEXT_LABEL_CLASS;
    t->opt.text_pair_column = NULL;
    graft_status st = fill_from_folder(t, dir, NULL, e);
    if (st != GRAFT_OK) {
        text_table_free(t);
        return st;
    }
    *out = t;
    return GRAFT_OK;
}

graft_status text_table_load(text_table **out, const char *path, const text_table_options *o,
                             graft_err *e) {
    if (is_dir(path)) return text_table_load_folder(out, path, o, e);
    return text_table_load_csv(out, path, o, e);
}

graft_status text_table_load_like(text_table **out, const text_table *like, const char *path,
                                  const text_table_options *o, graft_err *e) {
    *out = NULL;
    text_table *t = table_new(o ? o : &like->opt);
    if (!t) return no_memory(e, path);
    t->opt.label_mode = like->opt.label_mode;
    t->opt.label_separator = like->opt.label_separator;
    graft_status st;
    if (is_dir(path)) {
        if (like->opt.label_mode != TEXT_LABEL_CLASS)
            st = err_set(e, GRAFT_E_INVALID_ARGUMENT,
                         "%s: a folder gives one class per sample; the data it must match is %s",
                         path,
                         like->opt.label_mode == TEXT_LABEL_MULTI ? "multi-label" : "regression");
        else
            st = fill_from_folder(t, path, like, e);
    } else {
        st = GRAFT_OK;
        if (like->opt.label_mode != TEXT_LABEL_REGRESSION &&
            !set_classes(t, like->classes, like->nclasses))
            st = no_memory(e, path);
        if (st == GRAFT_OK) st = fill_from_csv(t, path, e);
    }
    if (st != GRAFT_OK) {
        text_table_free(t);
        return st;
    }
    *out = t;
    return GRAFT_OK;
}

void text_table_free(text_table *t) {
    if (!t) return;
    for (int k = 0; k < 3; k++) free(t->opt_text[k]);
    free(t->pool);
    free(t->text_off);
    free(t->pair_off);
    free(t->label_off);
    free(t->target);
    free(t->line);
    free(t->lab_start);
    free(t->lab_idx);
    if (t->classes)
        for (int c = 0; c < t->nclasses; c++) free(t->classes[c]);
    free(t->classes);
    for (int64_t i = 0; i < t->nskips; i++) {
        free(t->skips[i].path);
        free(t->skips[i].reason);
    }
    free(t->skips);
    free(t);
}

/* ---- accessors ------------------------------------------------------------------------------- */

int64_t text_table_count(const text_table *t) {
    return t ? t->n : 0;
}

const char *text_table_text(const text_table *t, int64_t i) {
    return t && i >= 0 && i < t->n ? t->pool + t->text_off[i] : NULL;
}

const char *text_table_text_pair(const text_table *t, int64_t i) {
    if (!t || i < 0 || i >= t->n || t->pair_off[i] < 0) return NULL;
    return t->pool + t->pair_off[i];
}

int64_t text_table_line(const text_table *t, int64_t i) {
    return t && i >= 0 && i < t->n ? t->line[i] : 0;
}

text_label_mode text_table_label_mode(const text_table *t) {
    return t->opt.label_mode;
}

int text_table_class_count(const text_table *t) {
    return t ? t->nclasses : 0;
}

const char *text_table_class_name(const text_table *t, int c) {
    return t && c >= 0 && c < t->nclasses ? t->classes[c] : NULL;
}

int text_table_label(const text_table *t, int64_t i) {
    if (!t || i < 0 || i >= t->n || t->opt.label_mode != TEXT_LABEL_CLASS) return -1;
    return t->lab_idx[t->lab_start[i]];
}

double text_table_target(const text_table *t, int64_t i) {
    if (!t || i < 0 || i >= t->n || t->opt.label_mode != TEXT_LABEL_REGRESSION) return 0;
    return t->target[i];
}

const int32_t *text_table_label_indices(const text_table *t, int64_t i, int *n) {
    *n = 0;
    if (!t || i < 0 || i >= t->n || !t->lab_start) return NULL;
    *n = (int)(t->lab_start[i + 1] - t->lab_start[i]);
    return *n ? t->lab_idx + t->lab_start[i] : NULL;
}

void text_table_label_vector(const text_table *t, int64_t i, float *out) {
    for (int c = 0; c < text_table_class_count(t); c++) out[c] = 0.0f;
    int n;
    const int32_t *idx = text_table_label_indices(t, i, &n);
    for (int k = 0; k < n; k++) out[idx[k]] = 1.0f;
}

int64_t text_table_skipped_count(const text_table *t) {
    return t ? t->nskips : 0;
}

const text_skip *text_table_skipped(const text_table *t, int64_t i) {
    return t && i >= 0 && i < t->nskips ? &t->skips[i] : NULL;
}
