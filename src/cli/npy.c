/* npy.c: NumPy .npy files: parse the header dictionary (descr, fortran_order, shape), read and
 * write C-ordered little-endian arrays. */
#include "npy.h"
#include "../core/files.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *descr;
    graft_dtype dtype;
} npy_types[] = {
    {"<f4", GRAFT_DTYPE_F32}, {"<f8", GRAFT_DTYPE_F64}, {"<f2", GRAFT_DTYPE_F16},
    {"<i8", GRAFT_DTYPE_I64}, {"<i4", GRAFT_DTYPE_I32}, {"<i2", GRAFT_DTYPE_I16},
    {"|i1", GRAFT_DTYPE_I8},  {"|u1", GRAFT_DTYPE_U8},  {"<u2", GRAFT_DTYPE_U16},
    {"<u4", GRAFT_DTYPE_U32}, {"<u8", GRAFT_DTYPE_U64}, {"|b1", GRAFT_DTYPE_BOOL},
};

static int fail(char *err, size_t n, const char *path, const char *what) {
    snprintf(err, n, "%s: %s", path, what);
    return -1;
}

static int parse_shape(const char *p, graft_tensor *t) {
    p = strchr(p, '(');
    if (!p) return -1;
    p++;
    t->ndim = 0;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') return 0;
        char *end;
        errno = 0;
        long long d = strtoll(p, &end, 10);
        /* a dim over 2^40 (the most elements graft's values have) is refused, zero dims or not */
        if (end == p || d < 0 || errno == ERANGE || d > (1ll << 40) || t->ndim >= GRAFT_MAX_DIMS)
            return -1;
        t->dims[t->ndim++] = d;
        p = end;
    }
}

static int parse_header(const char *h, graft_tensor *t, const char *path, char *err, size_t n) {
    const char *d = strstr(h, "'descr'");
    const char *f = strstr(h, "'fortran_order'");
    const char *s = strstr(h, "'shape'");
    if (!d || !f || !s) return fail(err, n, path, "malformed .npy header");
    const char *q = strchr(d + 7, '\'');
    if (!q) return fail(err, n, path, "malformed .npy descr");
    t->dtype = GRAFT_DTYPE_UNDEFINED;
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (strncmp(q + 1, npy_types[i].descr, 3) == 0 && q[4] == '\'')
            t->dtype = npy_types[i].dtype;
    if (t->dtype == GRAFT_DTYPE_UNDEFINED) {
        char what[96];
        snprintf(what, sizeof what, "unsupported .npy dtype '%.8s'", q + 1);
        return fail(err, n, path, what);
    }
    const char *colon = strchr(f + 15, ':');
    if (!colon || colon - (f + 15) != (ptrdiff_t)strspn(f + 15, " "))
        return fail(err, n, path, "malformed .npy header: no ':' after 'fortran_order'");
    if (strncmp(colon + 1 + strspn(colon + 1, " "), "False", 5) != 0)
        return fail(err, n, path, "Fortran-ordered arrays are not supported");
    if (parse_shape(s, t) != 0) return fail(err, n, path, "malformed .npy shape");
    return 0;
}

int npy_read(const char *path, graft_tensor *t, char *err, size_t n) {
    memset(t, 0, sizeof *t);
    const char *why = NULL;
    FILE *fp = file_open_regular(path, &why);
    if (!fp) {
        snprintf(err, n, "%s: cannot open: %s", path, why);
        return -1;
    }
    unsigned char magic[10];
    int rc = -1;
    char *header = NULL;
    if (fread(magic, 1, 8, fp) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0) {
        fail(err, n, path, "not a .npy file");
        goto out;
    }
    size_t hlen;
    if (magic[6] == 1) {
        if (fread(magic, 1, 2, fp) != 2) goto short_read;
        hlen = (size_t)magic[0] | (size_t)magic[1] << 8;
    } else if (magic[6] == 2 || magic[6] == 3) {
        if (fread(magic, 1, 4, fp) != 4) goto short_read;
        hlen = (size_t)magic[0] | (size_t)magic[1] << 8 | (size_t)magic[2] << 16 |
               (size_t)magic[3] << 24;
        if (hlen > (1u << 20)) {
            fail(err, n, path, "implausible .npy header length");
            goto out;
        }
    } else {
        fail(err, n, path, "unsupported .npy format version");
        goto out;
    }
    header = malloc(hlen + 1);
    if (!header || fread(header, 1, hlen, fp) != hlen) goto short_read;
    header[hlen] = '\0';
    if (parse_header(header, t, path, err, n) != 0) goto out;
    /* The shape's size, by graft's own rule for a tensor's element count (its limit applies to
     * the dims before a zero too, so a zero does not hide an overflowing product), must match
     * what the file holds before allocating. */
    int64_t numel = graft_tensor_numel(t);
    if (numel < 0) {
        fail(err, n, path,
             "the .npy shape's size overflows graft's limit for a tensor (2^62 elements)");
        goto out;
    }
    size_t bytes = (size_t)numel * graft_dtype_size(t->dtype);
    struct stat sb;
    long here = ftell(fp);
    long long avail = -1;
    if (fstat(fileno(fp), &sb) == 0 && S_ISREG(sb.st_mode) && here >= 0 && sb.st_size >= here)
        avail = (long long)(sb.st_size - here);
    if (avail < 0 || (uint64_t)avail < bytes) {
        char what[160];
        snprintf(what, sizeof what,
                 "file is truncated: its shape needs %zu bytes of data, the file holds %lld", bytes,
                 avail < 0 ? 0 : avail);
        fail(err, n, path, what);
        goto out;
    }
    t->data = malloc(bytes ? bytes : 1);
    if (!t->data) {
        fail(err, n, path, "out of memory");
        goto out;
    }
    if (fread(t->data, 1, bytes, fp) != bytes) goto short_read;
    rc = 0;
    goto out;
short_read:
    fail(err, n, path, "file is truncated");
out:
    if (rc != 0) {
        free(t->data);
        t->data = NULL;
    }
    free(header);
    fclose(fp);
    return rc;
}

int npy_write(const char *path, const graft_tensor *t, char *err, size_t n) {
    const char *descr = NULL;
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (npy_types[i].dtype == t->dtype) descr = npy_types[i].descr;
    if (!descr) {
        snprintf(err, n, "%s: dtype %s cannot be written as .npy", path,
                 graft_dtype_name(t->dtype));
        return -1;
    }
    char dict[512];
    int len =
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < t->ndim; i++)
        len += snprintf(dict + len, sizeof dict - (size_t)len, "%lld%s", (long long)t->dims[i],
                        t->ndim == 1 ? "," : (i + 1 < t->ndim ? ", " : ""));
    len += snprintf(dict + len, sizeof dict - (size_t)len, "), }");
    size_t total = 10 + (size_t)len + 1;
    size_t pad = (64 - total % 64) % 64;
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        snprintf(err, n, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    size_t hlen = (size_t)len + pad + 1;
    unsigned char pre[10] = {0x93,
                             'N',
                             'U',
                             'M',
                             'P',
                             'Y',
                             1,
                             0,
                             (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    fwrite(pre, 1, 10, fp);
    fwrite(dict, 1, (size_t)len, fp);
    for (size_t i = 0; i < pad; i++) fputc(' ', fp);
    fputc('\n', fp);
    int64_t numel = graft_tensor_numel(t);
    size_t bytes = (size_t)(numel > 0 ? numel : 0) * graft_dtype_size(t->dtype);
    size_t wrote = bytes ? fwrite(t->data, 1, bytes, fp) : 0;
    if (fclose(fp) != 0 || wrote != bytes) {
        snprintf(err, n, "%s: write failed", path);
        return -1;
    }
    return 0;
}
