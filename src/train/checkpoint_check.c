/* checkpoint_check.c: checksums of trainer checkpoints (written with every file, verified on
 * load) and strict parsing of their metadata fields and tensors. */
#include "checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

#define SUM_SEED 0x67726166742e636bull /* "graft.ck" */
#define PREFIX_LEN (sizeof CHECKPOINT_SUM_PREFIX - 1)

uint64_t checkpoint_tensor_sum(const char *name, graft_dtype dtype, int ndim, const int64_t *dims,
                               const void *data, size_t nbytes) {
    hash64_state s;
    hash64_init(&s, SUM_SEED);
    hash64_update_str(&s, name);
    const char *dt = safetensors_dtype_name(dtype);
    hash64_update_str(&s, dt ? dt : "?");
    hash64_update_u64(&s, (uint64_t)ndim);
    for (int i = 0; i < ndim; i++) hash64_update_u64(&s, (uint64_t)dims[i]);
    hash64_update_u64(&s, (uint64_t)nbytes);
    if (nbytes) hash64_update(&s, data, nbytes);
    return hash64_final(&s);
}

typedef struct kv {
    const char *k, *v;
} kv;

static int cmp_kv(const void *a, const void *b) {
    return strcmp(((const kv *)a)->k, ((const kv *)b)->k);
}

/* The hash over entries (sorted by key in place), "checksum" itself left out. */
static uint64_t meta_sum(kv *entries, int n) {
    qsort(entries, (size_t)n, sizeof *entries, cmp_kv);
    hash64_state s;
    hash64_init(&s, SUM_SEED);
    for (int i = 0; i < n; i++) {
        if (!strcmp(entries[i].k, CHECKPOINT_SUM_KEY)) continue;
        hash64_update_str(&s, entries[i].k);
        hash64_update_str(&s, entries[i].v);
    }
    return hash64_final(&s);
}

graft_status checkpoint_write_sealed(const char *path, const st_tensor_in *ts, int n_tensors,
                                     const char *const *keys, const char *const *values, int n_meta,
                                     graft_err *e) {
    int n = n_meta + n_tensors + 1;
    size_t names = 0;
    for (int i = 0; i < n_tensors; i++) names += PREFIX_LEN + strlen(ts[i].name) + 1;
    const char **k = malloc(sizeof(char *) * (size_t)n), **v = malloc(sizeof(char *) * (size_t)n);
    char *key_buf = malloc(names + 1), *sum_buf = malloc(17 * (size_t)(n_tensors + 1));
    kv *entries = malloc(sizeof(kv) * (size_t)n);
    graft_status st = GRAFT_OK;
    if (!k || !v || !key_buf || !sum_buf || !entries)
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory sealing the checkpoint");
    for (int i = 0; st == GRAFT_OK && i < n_meta; i++) {
        if (!strcmp(keys[i], CHECKPOINT_SUM_KEY) ||
            !strncmp(keys[i], CHECKPOINT_SUM_PREFIX, PREFIX_LEN))
            st = err_set(e, GRAFT_E_INVALID_ARGUMENT, "checkpoint metadata key '%s' is reserved",
                         keys[i]);
        k[i] = keys[i], v[i] = values[i];
    }
    char *kp = key_buf;
    for (int i = 0; st == GRAFT_OK && i < n_tensors; i++) {
        size_t bytes = graft_dtype_size(ts[i].dtype);
        for (int d = 0; d < ts[i].ndim; d++) bytes *= (size_t)ts[i].dims[d];
        uint64_t h = checkpoint_tensor_sum(ts[i].name, ts[i].dtype, ts[i].ndim, ts[i].dims,
                                           ts[i].data, bytes);
        k[n_meta + i] = kp;
        kp += sprintf(kp, CHECKPOINT_SUM_PREFIX "%s", ts[i].name) + 1;
        v[n_meta + i] = sum_buf + 17 * i;
        snprintf(sum_buf + 17 * i, 17, "%016" PRIx64, h);
    }
    if (st == GRAFT_OK) {
        for (int i = 0; i < n - 1; i++) entries[i] = (kv){k[i], v[i]};
        k[n - 1] = CHECKPOINT_SUM_KEY, v[n - 1] = sum_buf + 17 * n_tensors;
        snprintf(sum_buf + 17 * n_tensors, 17, "%016" PRIx64, meta_sum(entries, n - 1));
        st = safetensors_write(path, ts, n_tensors, k, v, n, e);
    }
    free(k), free(v), free(key_buf), free(sum_buf), free(entries);
    return st;
}

/* 16 hex digits, exactly. */
static bool parse_sum(const char *s, uint64_t *out) {
    if (!s || strlen(s) != 16 || strspn(s, "0123456789abcdef") != 16) return false;
    *out = strtoull(s, NULL, 16);
    return true;
}

static graft_status damaged(graft_err *e, const char *what) {
    return err_set(e, GRAFT_E_MALFORMED_MODEL,
                   "the file is damaged: %s does not match its checksum (a changed or corrupt "
                   "byte; use another checkpoint or start the run again)",
                   what);
}

static graft_status verify_meta(const safetensors_file *f, const char *sum, graft_err *e) {
    int n = safetensors_meta_count(f);
    kv *entries = malloc(sizeof(kv) * (size_t)(n > 0 ? n : 1));
    if (!entries) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory checking a checkpoint");
    for (int i = 0; i < n; i++) entries[i].k = safetensors_meta_at(f, i, &entries[i].v);
    uint64_t want = 0, got = meta_sum(entries, n);
    free(entries);
    return parse_sum(sum, &want) && want == got ? GRAFT_OK : damaged(e, "its metadata");
}

graft_status checkpoint_verify(const safetensors_file *f, bool *sealed, graft_err *e) {
    const char *sum = safetensors_meta(f, CHECKPOINT_SUM_KEY);
    int n_sums = 0;
    for (int i = 0; i < safetensors_meta_count(f); i++) {
        const char *v, *k = safetensors_meta_at(f, i, &v);
        if (!strncmp(k, CHECKPOINT_SUM_PREFIX, PREFIX_LEN)) {
            n_sums++;
            if (!safetensors_find(f, k + PREFIX_LEN))
                return err_set(e, GRAFT_E_MALFORMED_MODEL,
                               "the file is damaged: its tensor '%s' is missing", k + PREFIX_LEN);
        }
    }
    *sealed = sum || n_sums > 0;
    if (!*sealed) return GRAFT_OK;
    TRY(verify_meta(f, sum, e));
    for (int i = 0; i < safetensors_count(f); i++) {
        const st_tensor *t = safetensors_tensor_at(f, i);
        char key[256], what[300];
        snprintf(key, sizeof key, CHECKPOINT_SUM_PREFIX "%s", t->name);
        snprintf(what, sizeof what, "tensor '%s'", t->name);
        uint64_t want = 0;
        if (!parse_sum(safetensors_meta(f, key), &want))
            return err_set(e, GRAFT_E_MALFORMED_MODEL,
                           "the file is damaged: tensor '%s' is not in its checksums", t->name);
        if (checkpoint_tensor_sum(t->name, t->dtype, t->ndim, t->dims, t->data, t->nbytes) != want)
            return damaged(e, what);
    }
    return GRAFT_OK;
}

static const char *get(const safetensors_file *f, const char *key, graft_err *e) {
    const char *v = safetensors_meta(f, key);
    if (!v) err_set(e, GRAFT_E_MALFORMED_MODEL, "the checkpoint lacks the field '%s'", key);
    return v;
}

graft_status checkpoint_get_int(const safetensors_file *f, const char *key, long long lo,
                                long long hi, const char *range, long long *out, graft_err *e) {
    const char *v = get(f, key, e), *end = NULL;
    if (!v) return GRAFT_E_MALFORMED_MODEL;
    errno = 0;
    long long i = strtoll(v, (char **)&end, 10);
    if (!*v || *end || errno || (*v != '-' && (*v < '0' || *v > '9')))
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "the field '%s' is '%.40s': not an integer", key,
                       v);
    if (i < lo || i > hi)
        return err_set(e, GRAFT_E_MALFORMED_MODEL,
                       "the field '%s' is %lld: expected an integer from %lld to %lld%s%s%s", key,
                       i, lo, hi, range ? " (" : "", range ? range : "", range ? ")" : "");
    *out = i;
    return GRAFT_OK;
}

graft_status checkpoint_get_u64(const safetensors_file *f, const char *key, uint64_t *out,
                                graft_err *e) {
    const char *v = get(f, key, e), *end = NULL;
    if (!v) return GRAFT_E_MALFORMED_MODEL;
    errno = 0;
    unsigned long long u = strtoull(v, (char **)&end, 10);
    if (*v < '0' || *v > '9' || *end || errno)
        return err_set(e, GRAFT_E_MALFORMED_MODEL,
                       "the field '%s' is '%.40s': not an unsigned 64-bit integer", key, v);
    *out = u;
    return GRAFT_OK;
}

graft_status checkpoint_get_float(const safetensors_file *f, const char *key, int rule, double *out,
                                  graft_err *e) {
    const char *v = get(f, key, e), *end = NULL;
    if (!v) return GRAFT_E_MALFORMED_MODEL;
    errno = 0;
    double d = strtod(v, (char **)&end);
    if (!*v || *end)
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "the field '%s' is '%.40s': not a number", key,
                       v);
    bool ok = (isfinite(d) || ((rule & CK_POS_INF) && d > 0)) && !((rule & CK_NONNEG) && d < 0) &&
              !((rule & CK_POSITIVE) && !(d > 0));
    if (!ok)
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "the field '%s' is '%.40s': expected a %s%s",
                       key, v,
                       rule & CK_POSITIVE ? "positive "
                       : rule & CK_NONNEG ? "non-negative "
                                          : "",
                       rule & CK_POS_INF ? "number or inf" : "finite number");
    *out = d;
    return GRAFT_OK;
}

graft_status checkpoint_check_tensor(const safetensors_file *f, const char *name, int64_t numel,
                                     const st_tensor **out, graft_err *e) {
    const st_tensor *t = safetensors_find(f, name);
    if (!t)
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "the checkpoint lacks the tensor '%s'", name);
    if (t->dtype != GRAFT_DTYPE_F32 || t->ndim != 1 || t->numel != numel) {
        char shape[96];
        const char *dt = safetensors_dtype_name(t->dtype);
        return err_set(e, GRAFT_E_MALFORMED_MODEL,
                       "the tensor '%s' is %s of shape %s: expected F32 of shape (%lld) for this "
                       "trainer's head",
                       name, dt ? dt : "?", shape_str(shape, sizeof shape, t->ndim, t->dims),
                       (long long)numel);
    }
    for (int64_t i = 0; i < numel; i++) {
        float x;
        memcpy(&x, (const char *)t->data + 4 * i, 4);
        if (!isfinite(x))
            return err_set(e, GRAFT_E_MALFORMED_MODEL,
                           "the tensor '%s' holds %s at element %lld: refusing weights or "
                           "optimizer state that are not finite",
                           name, isnan(x) ? "NaN" : "Inf", (long long)i);
    }
    *out = t;
    return GRAFT_OK;
}
