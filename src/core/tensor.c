/* tensor.c: dtype sizes, overflow-checked shape arithmetic, tensor allocation and element access.
 */
#include "tensor.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "scalar.h"

#define NUMEL_LIMIT ((int64_t)1 << 62)

size_t graft_dtype_size(graft_dtype dt) {
    switch (dt) {
    case GRAFT_DTYPE_F32:
    case GRAFT_DTYPE_I32:
    case GRAFT_DTYPE_U32:
        return 4;
    case GRAFT_DTYPE_U8:
    case GRAFT_DTYPE_I8:
    case GRAFT_DTYPE_BOOL:
        return 1;
    case GRAFT_DTYPE_U16:
    case GRAFT_DTYPE_I16:
    case GRAFT_DTYPE_F16:
    case GRAFT_DTYPE_BF16:
        return 2;
    case GRAFT_DTYPE_I64:
    case GRAFT_DTYPE_F64:
    case GRAFT_DTYPE_U64:
        return 8;
    default:
        return 0;
    }
}

const char *graft_dtype_name(graft_dtype dt) {
    switch (dt) {
    case GRAFT_DTYPE_F32:
        return "float32";
    case GRAFT_DTYPE_U8:
        return "uint8";
    case GRAFT_DTYPE_I8:
        return "int8";
    case GRAFT_DTYPE_U16:
        return "uint16";
    case GRAFT_DTYPE_I16:
        return "int16";
    case GRAFT_DTYPE_I32:
        return "int32";
    case GRAFT_DTYPE_I64:
        return "int64";
    case GRAFT_DTYPE_BOOL:
        return "bool";
    case GRAFT_DTYPE_F16:
        return "float16";
    case GRAFT_DTYPE_F64:
        return "float64";
    case GRAFT_DTYPE_U32:
        return "uint32";
    case GRAFT_DTYPE_U64:
        return "uint64";
    case GRAFT_DTYPE_BF16:
        return "bfloat16";
    default:
        return "unsupported-dtype";
    }
}

bool dtype_is_valid(graft_dtype dt) {
    return graft_dtype_size(dt) != 0;
}

bool dtype_is_float(graft_dtype dt) {
    return dt == GRAFT_DTYPE_F32 || dt == GRAFT_DTYPE_F64 || dt == GRAFT_DTYPE_F16 ||
           dt == GRAFT_DTYPE_BF16;
}

bool dtype_is_int(graft_dtype dt) {
    return dt == GRAFT_DTYPE_U8 || dt == GRAFT_DTYPE_I8 || dt == GRAFT_DTYPE_U16 ||
           dt == GRAFT_DTYPE_I16 || dt == GRAFT_DTYPE_I32 || dt == GRAFT_DTYPE_I64 ||
           dt == GRAFT_DTYPE_U32 || dt == GRAFT_DTYPE_U64;
}

int64_t dims_numel(int ndim, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0) return -1;
        if (dims[i] != 0 && n > NUMEL_LIMIT / dims[i]) return -1;
        n *= dims[i];
    }
    return n;
}

int64_t dtype_bytes(graft_dtype dt, int64_t numel) {
    int64_t sz = (int64_t)graft_dtype_size(dt);
    if (numel < 0 || sz == 0 || numel > NUMEL_LIMIT / sz) return -1;
    return numel * sz;
}

int64_t tensor_numel(const tensor *t) {
    return dims_numel(t->ndim, t->dims);
}
int64_t graft_tensor_numel(const graft_tensor *t) {
    return t ? tensor_numel(t) : -1;
}
int64_t tensor_nbytes(const tensor *t) {
    return dtype_bytes(t->dtype, tensor_numel(t));
}

bool shapes_equal(int ndim_a, const int64_t *a, int ndim_b, const int64_t *b) {
    if (ndim_a != ndim_b) return false;
    for (int i = 0; i < ndim_a; i++)
        if (a[i] != b[i]) return false;
    return true;
}

void *host_alloc_aligned(size_t bytes) {
    void *p = NULL;
    return posix_memalign(&p, 64, bytes ? bytes : 1) == 0 ? p : NULL;
}

void *host_alloc_large(size_t bytes) {
    if (bytes < HOST_LARGE_BYTES) return host_alloc_aligned(bytes);
    const size_t page = (size_t)2 << 20;
    char *p = NULL;
    if (posix_memalign((void **)&p, page, bytes) != 0) return NULL;
    (void)madvise(p, bytes, MADV_HUGEPAGE); /* a hint: without it, 4 KiB pages */
    int64_t chunks = (int64_t)((bytes + page - 1) / page);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; c++) {
        size_t at = (size_t)c * page;
        memset(p + at, 0, bytes - at < page ? bytes - at : page);
    }
    return p;
}

graft_status tensor_alloc(tensor *t, graft_err *e) {
    int64_t nbytes = tensor_nbytes(t);
    if (nbytes < 0) {
        char s[256];
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "tensor of shape %s and dtype %s is too large",
                       shape_str(s, sizeof s, t->ndim, t->dims), graft_dtype_name(t->dtype));
    }
    t->data = calloc(1, nbytes ? (size_t)nbytes : 1);
    if (!t->data)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "could not allocate %lld bytes",
                       (long long)nbytes);
    return GRAFT_OK;
}

graft_status tensor_make(tensor *t, graft_dtype dt, int ndim, const int64_t *dims, graft_err *e) {
    if (ndim < 0 || ndim > GRAFT_MAX_DIMS)
        return err_set(e, GRAFT_E_UNSUPPORTED, "rank %d is outside 0..%d", ndim, GRAFT_MAX_DIMS);
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->dims[i] = dims[i];
    return tensor_alloc(t, e);
}

graft_status tensor_clone(tensor *dst, const tensor *src, graft_err *e) {
    TRY(tensor_make(dst, src->dtype, src->ndim, src->dims, e));
    int64_t nbytes = tensor_nbytes(src);
    if (nbytes > 0) memcpy(dst->data, src->data, (size_t)nbytes);
    return GRAFT_OK;
}

void tensor_release(tensor *t) {
    if (!t) return;
    free(t->data);
    t->data = NULL;
}

double tensor_get_f64(const tensor *t, int64_t i) {
    return scalar_load_f64(t->data, t->dtype, i);
}

int64_t tensor_get_i64(const tensor *t, int64_t i) {
    if (dtype_is_float(t->dtype))
        return scalar_f64_to_int(scalar_load_f64(t->data, t->dtype, i), t->dtype);
    return scalar_load_int(t->data, t->dtype, i);
}

void tensor_set_f64(tensor *t, int64_t i, double v) {
    if (dtype_is_float(t->dtype))
        scalar_store_float(t->data, t->dtype, i, v);
    else if (t->dtype == GRAFT_DTYPE_BOOL)
        ((uint8_t *)t->data)[i] = v != 0.0;
    else
        scalar_store_int(t->data, t->dtype, i, scalar_f64_to_int(v, t->dtype));
}

void dims_strides(int ndim, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}
