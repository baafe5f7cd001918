/* safetensors_write.c: atomic writing of .safetensors files (header JSON, padding, fsync, rename).
 */
#include "train/safetensors.h"

#include "core/temp_files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- writer */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) {
    sb_add(b, s, strlen(s));
}

static void sb_json_string(sbuf *b, const char *s) {
    sb_add(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c;
            sb_add(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sb_add(b, esc, 6);
        } else {
            sb_add(b, (const char *)&c, 1);
        }
    }
    sb_add(b, "\"", 1);
}

typedef struct wr_item {
    const st_tensor_in *t;
    size_t elsize, nbytes;
} wr_item;

static int cmp_wr_item(const void *a, const void *b) {
    const wr_item *x = a, *y = b;
    if (x->elsize != y->elsize) return x->elsize > y->elsize ? -1 : 1;
    return strcmp(x->t->name, y->t->name);
}

static int cmp_cstr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool valid_string(const char *s) {
    return s && safetensors_utf8_valid((const unsigned char *)s, strlen(s));
}

/* Checks the inputs and fills items (sorted into file order). */
static graft_status plan_items(wr_item *items, const st_tensor_in *tensors, int n,
                               const char *const *keys, const char *const *values, int n_meta,
                               graft_err *err) {
    for (int i = 0; i < n_meta; i++)
        if (!valid_string(keys[i]) || !valid_string(values[i]))
            return err_set(err, GRAFT_E_INVALID_ARGUMENT,
                           "safetensors_write: metadata entry %d is NULL or not UTF-8", i);
    for (int i = 0; i < n; i++) {
        const st_tensor_in *t = &tensors[i];
        if (!valid_string(t->name) || strcmp(t->name, "__metadata__") == 0)
            return err_set(err, GRAFT_E_INVALID_ARGUMENT,
                           "safetensors_write: tensor %d has no valid name", i);
        if (!safetensors_dtype_name(t->dtype))
            return err_set(err, GRAFT_E_DTYPE,
                           "safetensors_write: tensor '%s' has dtype %s, "
                           "which safetensors cannot store",
                           t->name, graft_dtype_name(t->dtype));
        if (t->ndim < 0 || t->ndim > GRAFT_MAX_DIMS || (t->ndim > 0 && !t->dims))
            return err_set(err, GRAFT_E_SHAPE, "safetensors_write: tensor '%s' has rank %d",
                           t->name, t->ndim);
        size_t es = graft_dtype_size(t->dtype), bytes = es;
        for (int d = 0; d < t->ndim; d++) {
            if (t->dims[d] < 0 || (t->dims[d] > 0 && bytes > SIZE_MAX / 2 / (size_t)t->dims[d]))
                return err_set(err, GRAFT_E_SHAPE,
                               "safetensors_write: tensor '%s' has a "
                               "negative or too large dimension",
                               t->name);
            bytes *= (size_t)t->dims[d];
        }
        if (bytes > 0 && !t->data)
            return err_set(err, GRAFT_E_INVALID_ARGUMENT,
                           "safetensors_write: tensor '%s' has no data", t->name);
        items[i] = (wr_item){t, es, bytes};
    }
    if (n > 1) qsort(items, (size_t)n, sizeof *items, cmp_wr_item);
    const char **names = malloc(sizeof *names * (size_t)(n > 0 ? n : 1));
    if (!names) return err_set(err, GRAFT_E_OUT_OF_MEMORY, "safetensors_write: out of memory");
    for (int i = 0; i < n; i++) names[i] = tensors[i].name;
    if (n > 1) qsort(names, (size_t)n, sizeof *names, cmp_cstr);
    for (int i = 1; i < n; i++) {
        if (strcmp(names[i - 1], names[i]) == 0) {
            err_set(err, GRAFT_E_INVALID_ARGUMENT, "safetensors_write: duplicate tensor name '%s'",
                    names[i]);
            free(names);
            return GRAFT_E_INVALID_ARGUMENT;
        }
    }
    free(names);
    return GRAFT_OK;
}

/* The header JSON, padded with spaces so that 8 + its length is a multiple of 8. */
static graft_status build_header(sbuf *h, const wr_item *items, int n, const char *const *keys,
                                 const char *const *values, int n_meta, graft_err *err) {
    sb_str(h, "{");
    if (n_meta > 0) {
        sb_str(h, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            if (i) sb_str(h, ",");
            sb_json_string(h, keys[i]);
            sb_str(h, ":");
            sb_json_string(h, values[i]);
        }
        sb_str(h, "}");
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const st_tensor_in *t = items[i].t;
        char num[64];
        if (i || n_meta > 0) sb_str(h, ",");
        sb_json_string(h, t->name);
        sb_str(h, ":{\"dtype\":\"");
        sb_str(h, safetensors_dtype_name(t->dtype));
        sb_str(h, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)t->dims[d]);
            sb_str(h, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%zu,%zu]}", off, off + items[i].nbytes);
        sb_str(h, num);
        off += items[i].nbytes;
    }
    sb_str(h, "}");
    while (!h->oom && (8 + h->n) % 8 != 0) sb_str(h, " ");
    if (h->oom) return err_set(err, GRAFT_E_OUT_OF_MEMORY, "safetensors_write: out of memory");
    return GRAFT_OK;
}

/* For tests: GRAFT_TEST_WRITE_PAUSE_MS=N (1..10000) pauses every write for N ms with the header
 * written and flushed, so that a kill lands inside a write (tests/test_cli_kill.sh). */
static void test_pause(FILE *fp) {
    const char *v = getenv("GRAFT_TEST_WRITE_PAUSE_MS");
    long ms = v ? strtol(v, NULL, 10) : 0;
    if (ms <= 0 || ms > 10000) return;
    fflush(fp);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Write everything to fp, flush and fsync it. */
static bool write_all(FILE *fp, const sbuf *h, const wr_item *items, int n) {
    unsigned char len[8];
    uint64_t hn = h->n;
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(hn >> (8 * i));
    if (fwrite(len, 1, 8, fp) != 8 || fwrite(h->p, 1, h->n, fp) != h->n) return false;
    test_pause(fp);
    for (int i = 0; i < n; i++)
        if (items[i].nbytes && fwrite(items[i].t->data, 1, items[i].nbytes, fp) != items[i].nbytes)
            return false;
    return fflush(fp) == 0 && fsync(fileno(fp)) == 0;
}

/* fsync the folder holding path, so that the rename itself is durable (best effort). */
static void sync_parent(const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* Whether name is one of path's temporaries: "<base of path>.tmp." and mkstemp's 6 characters. */
static graft_status write_atomic(const char *path, const sbuf *h, const wr_item *items, int n,
                                 graft_err *err) {
    (void)temp_files_remove_stale(path);
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) return err_set(err, GRAFT_E_OUT_OF_MEMORY, "safetensors_write: out of memory");
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", 12);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        err_set(err, GRAFT_E_IO, "cannot create a temporary file next to %s: %s", path,
                strerror(errno));
        free(tmp);
        return GRAFT_E_IO;
    }
    (void)fchmod(fd, 0644);
    (void)flock(fd, LOCK_EX); /* released when the file is closed, or the process dies */
    FILE *fp = fdopen(fd, "wb");
    bool ok = fp && write_all(fp, h, items, n);
    int saved = errno;
    if (fp) ok = (fflush(fp) == 0) && ok;
    if (ok && rename(tmp, path) != 0) ok = false, saved = errno;
    if (fp)
        ok = (fclose(fp) == 0) && ok;
    else
        close(fd);
    if (!ok) {
        unlink(tmp);
        err_set(err, GRAFT_E_IO, "cannot write %s: %s", path, strerror(saved));
        free(tmp);
        return GRAFT_E_IO;
    }
    free(tmp);
    sync_parent(path);
    return GRAFT_OK;
}

graft_status safetensors_write(const char *path, const st_tensor_in *tensors, int n_tensors,
                               const char *const *meta_keys, const char *const *meta_values,
                               int n_meta, graft_err *err) {
    if (!path || n_tensors < 0 || n_meta < 0 || (n_tensors > 0 && !tensors) ||
        (n_meta > 0 && (!meta_keys || !meta_values)))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "safetensors_write: bad arguments");
    wr_item *items = malloc(sizeof *items * (size_t)(n_tensors > 0 ? n_tensors : 1));
    if (!items) return err_set(err, GRAFT_E_OUT_OF_MEMORY, "safetensors_write: out of memory");
    sbuf h = {0};
    graft_status st = plan_items(items, tensors, n_tensors, meta_keys, meta_values, n_meta, err);
    if (st == GRAFT_OK)
        st = build_header(&h, items, n_tensors, meta_keys, meta_values, n_meta, err);
    if (st == GRAFT_OK) st = write_atomic(path, &h, items, n_tensors, err);
    free(h.p);
    free(items);
    return st;
}
