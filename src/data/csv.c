/* csv.c: the CSV/TSV record reader (Python csv module semantics) and a strict UTF-8 check. */
#include "csv.h"

#include <stdlib.h>
#include <string.h>

enum csv_state { START_FIELD, IN_FIELD, IN_QUOTED, QUOTE_IN_QUOTED };

void csv_reader_init(csv_reader *r, const char *buf, size_t len, char delim, char quote) {
    memset(r, 0, sizeof *r);
    r->buf = buf;
    r->len = len;
    r->delim = delim;
    r->quote = quote;
    r->line = 1;
    if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) r->pos = 3;
}

void csv_reader_free(csv_reader *r) {
    free(r->scratch);
    free(r->field_off);
    free(r->field_len);
    memset(r, 0, sizeof *r);
}

static int scratch_push(csv_reader *r, char c) {
    if (r->scratch_len == r->scratch_cap) {
        size_t cap = r->scratch_cap ? r->scratch_cap * 2 : 256;
        char *p = realloc(r->scratch, cap);
        if (!p) return 0;
        r->scratch = p;
        r->scratch_cap = cap;
    }
    r->scratch[r->scratch_len++] = c;
    return 1;
}

/* Close the field that began at scratch offset `start`. */
static int field_end(csv_reader *r, size_t start) {
    if (r->nfields == r->fields_cap) {
        int cap = r->fields_cap ? r->fields_cap * 2 : 16;
        size_t *o = realloc(r->field_off, (size_t)cap * sizeof *o);
        if (!o) return 0;
        r->field_off = o;
        size_t *l = realloc(r->field_len, (size_t)cap * sizeof *l);
        if (!l) return 0;
        r->field_len = l;
        r->fields_cap = cap;
    }
    r->field_off[r->nfields] = start;
    r->field_len[r->nfields] = r->scratch_len - start;
    r->nfields++;
    return scratch_push(r, '\0');
}

/* Step over one line end ("\r\n", "\r" or "\n") at pos. */
static void eat_line_end(csv_reader *r) {
    if (r->buf[r->pos] == '\r' && r->pos + 1 < r->len && r->buf[r->pos + 1] == '\n') r->pos++;
    r->pos++;
    r->line++;
}

/* A line end inside a quoted field: count it once ("\r\n" counts at its "\n"). */
static void count_quoted_line_end(csv_reader *r, char c) {
    if (c == '\n' || (c == '\r' && !(r->pos + 1 < r->len && r->buf[r->pos + 1] == '\n'))) r->line++;
}

/* The buffer ended inside a record that started at field state `st`. */
static csv_result finish_at_end(csv_reader *r, enum csv_state st, size_t start) {
    r->raw_end = r->len;
    if (st == START_FIELD) start = r->scratch_len; /* "a," ends with an empty field */
    if (!field_end(r, start)) return CSV_NO_MEMORY;
    return st == IN_QUOTED ? CSV_UNTERMINATED : CSV_RECORD;
}

csv_result csv_reader_next(csv_reader *r) {
    r->nfields = 0;
    r->scratch_len = 0;
    if (r->pos >= r->len) return CSV_END;
    r->record_line = r->line;
    r->raw_begin = r->pos;
    if (r->buf[r->pos] == '\n' || r->buf[r->pos] == '\r') { /* an empty line: no fields */
        r->raw_end = r->pos;
        eat_line_end(r);
        return CSV_RECORD;
    }
    enum csv_state st = START_FIELD;
    size_t start = 0; /* scratch offset of the current field */
    int ok = 1, done = 0;
    for (; ok && !done && r->pos < r->len; r->pos++) {
        char c = r->buf[r->pos];
        int eol = c == '\n' || c == '\r';
        int is_quote = r->quote != 0 && c == r->quote;
        switch (st) {
        case START_FIELD:
            start = r->scratch_len;
            if (is_quote) {
                st = IN_QUOTED;
                break;
            }
            st = IN_FIELD;
            /* fall through */
        case IN_FIELD:
        case QUOTE_IN_QUOTED:
            if (is_quote && st == QUOTE_IN_QUOTED) { /* a doubled quote */
                ok = scratch_push(r, c);
                st = IN_QUOTED;
            } else if (c == r->delim) {
                ok = field_end(r, start);
                st = START_FIELD;
            } else if (eol) {
                ok = field_end(r, start);
                done = 1;
            } else {
                ok = scratch_push(r, c); /* after a closing quote too (non-strict) */
                st = IN_FIELD;
            }
            break;
        case IN_QUOTED:
            if (is_quote) {
                st = QUOTE_IN_QUOTED;
            } else {
                count_quoted_line_end(r, c);
                ok = scratch_push(r, c);
            }
            break;
        default:
            break;
        }
    }
    if (!ok) return CSV_NO_MEMORY;
    if (!done) return finish_at_end(r, st, start);
    r->pos--; /* back on the line end */
    r->raw_end = r->pos;
    eat_line_end(r);
    return CSV_RECORD;
}

const char *csv_field(const csv_reader *r, int i, size_t *len) {
    if (i < 0 || i >= r->nfields) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = r->field_len[i];
    return r->scratch + r->field_off[i];
}

int utf8_valid(const char *s, size_t n, size_t *bad_offset) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t need;
        unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0; /* no overlong forms */
            if (c == 0xED) hi = 0x9F; /* no surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F; /* nothing above U+10FFFF */
        } else {
            goto bad;
        }
        if (i + need >= n) goto bad; /* truncated sequence */
        if (p[i + 1] < lo || p[i + 1] > hi) goto bad;
        for (size_t k = 2; k <= need; k++)
            if ((p[i + k] & 0xC0) != 0x80) goto bad;
        i += need + 1;
    }
    return 1;
bad:
    if (bad_offset) *bad_offset = i;
    return 0;
}
