/* safetensors.c: .safetensors reading: strict hand-written JSON header parser and validation. */
#include "train/safetensors.h"
#include "core/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER (100u * 1024u * 1024u) /* the Python package's limit */
#define ST_BAD GRAFT_E_MALFORMED_MODEL

typedef struct st_meta {
    char *key;
    char *value;
} st_meta;

struct safetensors_file {
    unsigned char *buf; /* the whole file */
    size_t size;
    st_tensor *tensors; /* ascending data offset */
    int n_tensors;
    st_tensor **by_name; /* sorted by name, for lookup */
    st_meta *meta;
    int n_meta;
};

static const struct {
    graft_dtype dtype;
    const char *name;
} dtype_names[] = {
    {GRAFT_DTYPE_BOOL, "BOOL"}, {GRAFT_DTYPE_U8, "U8"},     {GRAFT_DTYPE_I8, "I8"},
    {GRAFT_DTYPE_U16, "U16"},   {GRAFT_DTYPE_I16, "I16"},   {GRAFT_DTYPE_U32, "U32"},
    {GRAFT_DTYPE_I32, "I32"},   {GRAFT_DTYPE_U64, "U64"},   {GRAFT_DTYPE_I64, "I64"},
    {GRAFT_DTYPE_F16, "F16"},   {GRAFT_DTYPE_BF16, "BF16"}, {GRAFT_DTYPE_F32, "F32"},
    {GRAFT_DTYPE_F64, "F64"},
};
#define N_DTYPE_NAMES ((int)(sizeof dtype_names / sizeof dtype_names[0]))

const char *safetensors_dtype_name(graft_dtype dtype) {
    for (int i = 0; i < N_DTYPE_NAMES; i++)
        if (dtype_names[i].dtype == dtype) return dtype_names[i].name;
    return NULL;
}

static graft_dtype dtype_from_name(const char *name) {
    for (int i = 0; i < N_DTYPE_NAMES; i++)
        if (strcmp(dtype_names[i].name, name) == 0) return dtype_names[i].dtype;
    return GRAFT_DTYPE_UNDEFINED;
}

/* Whether s[0..n) is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
bool safetensors_utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        int len;
        unsigned min, cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xE0) == 0xC0)
            len = 2, min = 0x80, cp = c & 0x1F;
        else if ((c & 0xF0) == 0xE0)
            len = 3, min = 0x800, cp = c & 0x0F;
        else if ((c & 0xF8) == 0xF0)
            len = 4, min = 0x10000, cp = c & 0x07;
        else
            return false;
        if (n - i < (size_t)len) return false;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += (size_t)len;
    }
    return true;
}

/* ---------------------------------------------------------------- header parser */

typedef struct jparser {
    const char *s;
    size_t n, pos;
    graft_err *err;
} jparser;

static graft_status jfail(jparser *p, const char *what) {
    if (p->pos >= p->n)
        return err_set(p->err, ST_BAD, "safetensors header: %s at the end of the header", what);
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c >= 0x20 && c < 0x7F)
        return err_set(p->err, ST_BAD, "safetensors header: %s at byte %zu ('%c')", what, p->pos,
                       c);
    return err_set(p->err, ST_BAD, "safetensors header: %s at byte %zu (0x%02x)", what, p->pos, c);
}

static void jws(jparser *p) {
    while (p->pos < p->n && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
                             p->s[p->pos] == '\r'))
        p->pos++;
}

/* Skip whitespace, then consume c or fail. */
static graft_status jexpect(jparser *p, char c) {
    jws(p);
    if (p->pos < p->n && p->s[p->pos] == c) {
        p->pos++;
        return GRAFT_OK;
    }
    char what[32];
    snprintf(what, sizeof what, "expected '%c'", c);
    return jfail(p, what);
}

/* After an element of an object or array: ',' -> *more = true, close -> *more = false. */
static graft_status jnext(jparser *p, char close, bool *more) {
    jws(p);
    if (p->pos < p->n && p->s[p->pos] == ',') {
        p->pos++;
        *more = true;
        return GRAFT_OK;
    }
    if (p->pos < p->n && p->s[p->pos] == close) {
        p->pos++;
        *more = false;
        return GRAFT_OK;
    }
    char what[40];
    snprintf(what, sizeof what, "expected ',' or '%c'", close);
    return jfail(p, what);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool jhex4(jparser *p, unsigned *out) {
    if (p->n - p->pos < 4) return false;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p->s[p->pos + (size_t)i]);
        if (h < 0) return false;
        v = v * 16 + (unsigned)h;
    }
    p->pos += 4;
    *out = v;
    return true;
}

/* The code point of a \u escape (p->pos just after "\u"), pairing surrogates. */
static graft_status junicode(jparser *p, unsigned *cp) {
    unsigned hi, lo;
    if (!jhex4(p, &hi)) return jfail(p, "bad \\u escape");
    if (hi >= 0xDC00 && hi <= 0xDFFF) return jfail(p, "lone low surrogate in \\u escape");
    if (hi >= 0xD800 && hi <= 0xDBFF) {
        if (p->n - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
            return jfail(p, "high surrogate without a low one");
        p->pos += 2;
        if (!jhex4(p, &lo) || lo < 0xDC00 || lo > 0xDFFF) return jfail(p, "bad low surrogate");
        hi = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (hi == 0) return jfail(p, "\\u0000 in a string");
    *cp = hi;
    return GRAFT_OK;
}

static size_t utf8_put(char *o, unsigned cp) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | (cp >> 6)), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A JSON string, decoded into a malloc'd NUL-terminated UTF-8 string. Decoding never grows the
 * text, so the raw length bounds the output. */
static graft_status jstring(jparser *p, char **out) {
    *out = NULL;
    TRY(jexpect(p, '"'));
    size_t start = p->pos, end = start;
    while (end < p->n && p->s[end] != '"') end += (p->s[end] == '\\') ? 2 : 1;
    if (end >= p->n) return jfail(p, "unterminated string");
    char *o = malloc(end - start + 1);
    if (!o) return err_set(p->err, GRAFT_E_OUT_OF_MEMORY, "safetensors header: out of memory");
    size_t k = 0;
    while (p->s[p->pos] != '"') {
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c < 0x20) {
            free(o);
            return jfail(p, "control character in a string");
        }
        if (c != '\\') {
            o[k++] = (char)c;
            p->pos++;
            continue;
        }
        char e = p->s[++p->pos];
        p->pos++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e != 0 && simple) {
            o[k++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
        } else if (e == 'u') {
            unsigned cp = 0;
            graft_status st = junicode(p, &cp);
            if (st != GRAFT_OK) {
                free(o);
                return st;
            }
            k += utf8_put(o + k, cp);
        } else {
            free(o);
            p->pos--;
            return jfail(p, "bad escape in a string");
        }
    }
    p->pos++;
    o[k] = '\0';
    *out = o;
    return GRAFT_OK;
}

/* A non-negative integer no larger than INT64_MAX (no sign, fraction or exponent). */
static graft_status juint(jparser *p, int64_t *out) {
    jws(p);
    size_t start = p->pos;
    uint64_t v = 0;
    while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        unsigned d = (unsigned)(p->s[p->pos] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10) return jfail(p, "integer too large");
        v = v * 10 + d;
        p->pos++;
    }
    if (p->pos == start) return jfail(p, "expected a non-negative integer");
    if (p->pos - start > 1 && p->s[start] == '0') {
        p->pos = start;
        return jfail(p, "integer with a leading zero");
    }
    if (p->pos < p->n && (p->s[p->pos] == '.' || p->s[p->pos] == 'e' || p->s[p->pos] == 'E'))
        return jfail(p, "expected an integer, not a fraction");
    *out = (int64_t)v;
    return GRAFT_OK;
}

/* "[a, b, ...]" of at most max integers. */
static graft_status jint_array(jparser *p, int64_t *vals, int max, int *count, const char *what) {
    *count = 0;
    TRY(jexpect(p, '['));
    jws(p);
    if (p->pos < p->n && p->s[p->pos] == ']') {
        p->pos++;
        return GRAFT_OK;
    }
    for (bool more = true; more;) {
        if (*count == max) {
            char msg[80];
            snprintf(msg, sizeof msg, "%s has more than %d entries", what, max);
            return jfail(p, msg);
        }
        TRY(juint(p, &vals[(*count)++]));
        TRY(jnext(p, ']', &more));
    }
    return GRAFT_OK;
}

/* ---------------------------------------------------------------- header semantics */

typedef struct st_parsed {
    st_tensor *tensors;
    int n, cap;
    int64_t (*offsets)[2]; /* parallel to tensors */
    st_meta *meta;
    int n_meta, cap_meta;
    bool have_meta;
} st_parsed;

/* {"key": "value", ...} */
static graft_status parse_metadata(jparser *p, st_parsed *ps) {
    if (ps->have_meta) return jfail(p, "second __metadata__");
    ps->have_meta = true;
    TRY(jexpect(p, '{'));
    jws(p);
    if (p->pos < p->n && p->s[p->pos] == '}') return p->pos++, GRAFT_OK;
    for (bool more = true; more;) {
        if (ps->n_meta == ps->cap_meta) {
            int cap = ps->cap_meta ? 2 * ps->cap_meta : 8;
            st_meta *m = realloc(ps->meta, sizeof *m * (size_t)cap);
            if (!m) return err_set(p->err, GRAFT_E_OUT_OF_MEMORY, "safetensors: out of memory");
            ps->meta = m, ps->cap_meta = cap;
        }
        st_meta *m = &ps->meta[ps->n_meta];
        m->value = NULL;
        TRY(jstring(p, &m->key));
        ps->n_meta++; /* owned from here on */
        TRY(jexpect(p, ':'));
        jws(p);
        if (p->pos < p->n && p->s[p->pos] != '"')
            return jfail(p, "__metadata__ values must be strings");
        TRY(jstring(p, &m->value));
        TRY(jnext(p, '}', &more));
    }
    return GRAFT_OK;
}

/* {"dtype": "F32", "shape": [..], "data_offsets": [b, e]} for tensor t (name already set). */
static graft_status parse_tensor(jparser *p, st_tensor *t, int64_t off[2]) {
    bool seen[3] = {false, false, false};
    TRY(jexpect(p, '{'));
    for (bool more = true; more;) {
        char *key = NULL;
        TRY(jstring(p, &key));
        int which = !strcmp(key, "dtype")          ? 0
                    : !strcmp(key, "shape")        ? 1
                    : !strcmp(key, "data_offsets") ? 2
                                                   : -1;
        free(key);
        if (which < 0) return jfail(p, "unknown key in a tensor entry");
        if (seen[which]) return jfail(p, "duplicate key in a tensor entry");
        seen[which] = true;
        TRY(jexpect(p, ':'));
        if (which == 0) {
            char *dt = NULL;
            TRY(jstring(p, &dt));
            t->dtype = dtype_from_name(dt);
            if (t->dtype == GRAFT_DTYPE_UNDEFINED) {
                err_set(p->err, ST_BAD, "safetensors: tensor '%s' has unsupported dtype '%.40s'",
                        t->name, dt);
                free(dt);
                return ST_BAD;
            }
            free(dt);
        } else if (which == 1) {
            TRY(jint_array(p, t->dims, GRAFT_MAX_DIMS, &t->ndim, "shape"));
        } else {
            int cnt;
            TRY(jint_array(p, off, 2, &cnt, "data_offsets"));
            if (cnt != 2) return jfail(p, "data_offsets needs 2 entries");
        }
        TRY(jnext(p, '}', &more));
    }
    if (!seen[0] || !seen[1] || !seen[2])
        return err_set(p->err, ST_BAD, "safetensors: tensor '%s' lacks %s", t->name,
                       !seen[0]   ? "dtype"
                       : !seen[1] ? "shape"
                                  : "data_offsets");
    return GRAFT_OK;
}

static graft_status add_tensor(jparser *p, st_parsed *ps, char *name) {
    if (ps->n == ps->cap) {
        int cap = ps->cap ? 2 * ps->cap : 16;
        st_tensor *t = realloc(ps->tensors, sizeof *t * (size_t)cap);
        if (t) ps->tensors = t;
        int64_t(*o)[2] = realloc(ps->offsets, sizeof *o * (size_t)cap);
        if (o) ps->offsets = o;
        if (!t || !o) {
            free(name);
            return err_set(p->err, GRAFT_E_OUT_OF_MEMORY, "safetensors: out of memory");
        }
        ps->cap = cap;
    }
    st_tensor *t = &ps->tensors[ps->n++];
    memset(t, 0, sizeof *t);
    t->name = name;
    return parse_tensor(p, t, ps->offsets[ps->n - 1]);
}

/* The whole header: one object, then only space padding. */
static graft_status parse_header(st_parsed *ps, const char *s, size_t n, graft_err *err) {
    if (!safetensors_utf8_valid((const unsigned char *)s, n))
        return err_set(err, ST_BAD, "safetensors header: not valid UTF-8");
    jparser p = {s, n, 0, err};
    TRY(jexpect(&p, '{'));
    jws(&p);
    if (p.pos < p.n && p.s[p.pos] == '}') {
        p.pos++;
    } else {
        for (bool more = true; more;) {
            char *name = NULL;
            TRY(jstring(&p, &name));
            graft_status st = jexpect(&p, ':');
            if (st == GRAFT_OK && strcmp(name, "__metadata__") == 0) {
                free(name);
                st = parse_metadata(&p, ps);
            } else if (st == GRAFT_OK) {
                st = add_tensor(&p, ps, name);
            } else {
                free(name);
            }
            TRY(st);
            TRY(jnext(&p, '}', &more));
        }
    }
    jws(&p);
    if (p.pos != p.n) return jfail(&p, "trailing bytes after the header object");
    return GRAFT_OK;
}

static int cmp_tensor_ptr_name(const void *a, const void *b) {
    return strcmp((*(st_tensor *const *)a)->name, (*(st_tensor *const *)b)->name);
}
static int cmp_meta_key(const void *a, const void *b) {
    return strcmp(((const st_meta *)a)->key, ((const st_meta *)b)->key);
}

/* Sizes against offsets, offsets against the data buffer; sorts tensors into file order. */
static graft_status check_layout(st_parsed *ps, size_t data_size, graft_err *err) {
    int64_t limit = (int64_t)(data_size < (size_t)INT64_MAX ? data_size : (size_t)INT64_MAX);
    for (int i = 0; i < ps->n; i++) {
        st_tensor *t = &ps->tensors[i];
        int64_t b = ps->offsets[i][0], e = ps->offsets[i][1];
        uint64_t bytes = graft_dtype_size(t->dtype);
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->dims[d] != 0 && (uint64_t)numel > (uint64_t)limit / (uint64_t)t->dims[d])
                return err_set(err, ST_BAD, "safetensors: tensor '%s' is larger than the file",
                               t->name);
            numel *= t->dims[d];
        }
        if (e < b || e > limit)
            return err_set(err, ST_BAD,
                           "safetensors: tensor '%s' has data_offsets [%lld, %lld] outside the "
                           "%zu-byte data buffer",
                           t->name, (long long)b, (long long)e, data_size);
        if ((uint64_t)(e - b) != (uint64_t)numel * bytes)
            return err_set(err, ST_BAD,
                           "safetensors: tensor '%s' has %lld elements of %s (%llu bytes) but "
                           "data_offsets span %lld bytes",
                           t->name, (long long)numel, safetensors_dtype_name(t->dtype),
                           (unsigned long long)((uint64_t)numel * bytes), (long long)(e - b));
        t->numel = numel;
        t->nbytes = (size_t)(e - b);
    }
    /* insertion order -> offset order (a stable sort of (begin, end) keys, tensors alongside) */
    for (int i = 1; i < ps->n; i++) {
        st_tensor t = ps->tensors[i];
        int64_t o0 = ps->offsets[i][0], o1 = ps->offsets[i][1];
        int j = i;
        for (; j > 0 && (ps->offsets[j - 1][0] > o0 ||
                         (ps->offsets[j - 1][0] == o0 && ps->offsets[j - 1][1] > o1));
             j--) {
            ps->tensors[j] = ps->tensors[j - 1];
            ps->offsets[j][0] = ps->offsets[j - 1][0], ps->offsets[j][1] = ps->offsets[j - 1][1];
        }
        ps->tensors[j] = t, ps->offsets[j][0] = o0, ps->offsets[j][1] = o1;
    }
    int64_t expect = 0;
    for (int i = 0; i < ps->n; i++) {
        if (ps->offsets[i][0] != expect)
            return err_set(err, ST_BAD,
                           "safetensors: tensor '%s' starts at byte %lld of the data "
                           "buffer, where the previous tensor ends at %lld (%s)",
                           ps->tensors[i].name, (long long)ps->offsets[i][0], (long long)expect,
                           ps->offsets[i][0] < expect ? "overlap" : "gap");
        expect = ps->offsets[i][1];
    }
    if (expect != limit)
        return err_set(err, ST_BAD,
                       "safetensors: the tensors cover %lld of the %zu bytes of the "
                       "data buffer",
                       (long long)expect, data_size);
    return GRAFT_OK;
}

void safetensors_free(safetensors_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n_tensors; i++) free((char *)f->tensors[i].name);
    for (int i = 0; i < f->n_meta; i++) free(f->meta[i].key), free(f->meta[i].value);
    free(f->tensors);
    free(f->by_name);
    free(f->meta);
    free(f->buf);
    free(f);
}

/* Name index and duplicate checks, once the tensors are in file order. */
static graft_status index_names(safetensors_file *f, graft_err *err) {
    if (f->n_tensors > 0) {
        f->by_name = malloc(sizeof *f->by_name * (size_t)f->n_tensors);
        if (!f->by_name) return err_set(err, GRAFT_E_OUT_OF_MEMORY, "safetensors: out of memory");
    }
    for (int i = 0; i < f->n_tensors; i++) f->by_name[i] = &f->tensors[i];
    if (f->n_tensors > 1)
        qsort(f->by_name, (size_t)f->n_tensors, sizeof *f->by_name, cmp_tensor_ptr_name);
    for (int i = 1; i < f->n_tensors; i++)
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0)
            return err_set(err, ST_BAD, "safetensors: duplicate tensor name '%.200s'",
                           f->by_name[i]->name);
    if (f->n_meta > 1) {
        st_meta *sorted = malloc(sizeof *sorted * (size_t)f->n_meta);
        if (!sorted) return err_set(err, GRAFT_E_OUT_OF_MEMORY, "safetensors: out of memory");
        memcpy(sorted, f->meta, sizeof *sorted * (size_t)f->n_meta);
        qsort(sorted, (size_t)f->n_meta, sizeof *sorted, cmp_meta_key);
        for (int i = 1; i < f->n_meta; i++) {
            if (strcmp(sorted[i - 1].key, sorted[i].key) == 0) {
                err_set(err, ST_BAD, "safetensors: duplicate __metadata__ key '%.200s'",
                        sorted[i].key);
                free(sorted);
                return ST_BAD;
            }
        }
        free(sorted);
    }
    return GRAFT_OK;
}

/* Parse f->buf[0..f->size). */
static graft_status parse_file(safetensors_file *f, graft_err *err) {
    if (f->size < 8)
        return err_set(err, ST_BAD,
                       "safetensors: %zu-byte file is too short for the 8-byte "
                       "header length",
                       f->size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | f->buf[i];
    if (n > f->size - 8)
        return err_set(err, ST_BAD,
                       "safetensors: header length %llu is beyond the end of the "
                       "%zu-byte file (truncated?)",
                       (unsigned long long)n, f->size);
    if (n > ST_MAX_HEADER)
        return err_set(err, ST_BAD, "safetensors: header length %llu exceeds the %u-byte limit",
                       (unsigned long long)n, ST_MAX_HEADER);
    if (n < 2)
        return err_set(err, ST_BAD, "safetensors: header length %llu is too short",
                       (unsigned long long)n);
    st_parsed ps = {0};
    graft_status st = parse_header(&ps, (const char *)f->buf + 8, (size_t)n, err);
    if (st == GRAFT_OK) st = check_layout(&ps, f->size - 8 - (size_t)n, err);
    const unsigned char *data = f->buf + 8 + n;
    for (int i = 0; st == GRAFT_OK && i < ps.n; i++) ps.tensors[i].data = data + ps.offsets[i][0];
    f->tensors = ps.tensors, f->n_tensors = ps.n;
    f->meta = ps.meta, f->n_meta = ps.n_meta;
    free(ps.offsets);
    if (st == GRAFT_OK) st = index_names(f, err);
    return st;
}

static graft_status from_buffer(safetensors_file **out, unsigned char *buf, size_t size,
                                graft_err *err) {
    safetensors_file *f = calloc(1, sizeof *f);
    if (!f) {
        free(buf);
        return err_set(err, GRAFT_E_OUT_OF_MEMORY, "safetensors: out of memory");
    }
    f->buf = buf, f->size = size;
    graft_status st = parse_file(f, err);
    if (st != GRAFT_OK) {
        safetensors_free(f);
        return st;
    }
    *out = f;
    return GRAFT_OK;
}

graft_status safetensors_from_memory(safetensors_file **out, const void *bytes, size_t size,
                                     graft_err *err) {
    *out = NULL;
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) return err_set(err, GRAFT_E_OUT_OF_MEMORY, "safetensors: out of memory");
    if (size) memcpy(buf, bytes, size);
    return from_buffer(out, buf, size, err);
}

graft_status safetensors_open(safetensors_file **out, const char *path, graft_err *err) {
    *out = NULL;
    const char *why = NULL;
    FILE *fp = file_open_regular(path, &why);
    if (!fp) return err_set(err, GRAFT_E_IO, "cannot open %s: %s", path, why);
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(fp);
        return err_set(err, GRAFT_E_IO, "%s is not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) {
        fclose(fp);
        return err_set(err, GRAFT_E_OUT_OF_MEMORY, "out of memory reading %s (%zu bytes)", path,
                       size);
    }
    size_t got = fread(buf, 1, size, fp);
    int rerr = ferror(fp);
    fclose(fp);
    if (got != size || rerr) {
        free(buf);
        return err_set(err, GRAFT_E_IO, "cannot read %s: short read (%zu of %zu bytes)", path, got,
                       size);
    }
    graft_status st = from_buffer(out, buf, size, err);
    if (st != GRAFT_OK) err_prefix(err, "%s: ", path);
    return st;
}

int safetensors_count(const safetensors_file *f) {
    return f ? f->n_tensors : 0;
}

const st_tensor *safetensors_tensor_at(const safetensors_file *f, int i) {
    return (f && i >= 0 && i < f->n_tensors) ? &f->tensors[i] : NULL;
}

const st_tensor *safetensors_find(const safetensors_file *f, const char *name) {
    if (!f || !name) return NULL;
    int lo = 0, hi = f->n_tensors - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(f->by_name[mid]->name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

int safetensors_meta_count(const safetensors_file *f) {
    return f ? f->n_meta : 0;
}

const char *safetensors_meta(const safetensors_file *f, const char *key) {
    for (int i = 0; f && key && i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}

const char *safetensors_meta_at(const safetensors_file *f, int i, const char **value) {
    if (!f || i < 0 || i >= f->n_meta) return NULL;
    if (value) *value = f->meta[i].value;
    return f->meta[i].key;
}
