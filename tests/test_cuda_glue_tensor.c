/* test_cuda_glue_tensor.c: the host side of the CUDA data-movement kernels (src/cuda/
 * cuda_tensor*.c) without a GPU: host stand-ins for tensor.cu's launchers do what
 * tensor_launch.h documents (and check its preconditions: unit sizes, alignment, tile axes), and
 * every op's output is compared byte for byte with graft's CPU reference over random shapes,
 * dtypes, misaligned buffers and the layouts BERT and CNN exports use, which must take the wide
 * (16-byte) or tiled paths. The GPU tests check the kernels themselves. */
#include "../src/cuda/cuda_tensor.c"
#include "../src/cuda/cuda_tensor_generate.c"

#include <stdio.h>
#include <stdlib.h>

#include "test_node.h"
#include "test_util.h"

/* ---- host stand-ins for the launchers ------------------------------------------------------ */

static int contract_errors;
static long calls_view, calls_tiled, last_unit;

static bool bad_unit(int unit, const void *a, const void *b) {
    bool ok = (unit == 1 || unit == 2 || unit == 4 || unit == 8 || unit == 16) &&
              (uintptr_t)a % (uintptr_t)unit == 0 && (uintptr_t)b % (uintptr_t)unit == 0;
    if (!ok) contract_errors++;
    return !ok;
}

/* dst dense = the view of src, unit by unit, walking the coordinates as an odometer. */
static void host_view(char *dst, const char *src, int unit, int ndim, const int64_t *dims,
                      const int64_t *strides) {
    int64_t idx[CUDA_TENSOR_VIEW_DIMS] = {0}, total = 1, off = 0;
    for (int k = 0; k < ndim; k++) total *= dims[k];
    for (int64_t i = 0; i < total; i++) {
        memcpy(dst + i * unit, src + off * unit, (size_t)unit);
        for (int k = ndim - 1; k >= 0; k--) {
            off += strides[k];
            if (++idx[k] < dims[k]) break;
            off -= strides[k] * dims[k];
            idx[k] = 0;
        }
    }
}

cudaError_t cuda_tensor_copy_view(void *dst, const void *src, int unit, int ndim,
                                  const int64_t *dims, const int64_t *strides, cudaStream_t s) {
    (void)s;
    if (bad_unit(unit, dst, src)) return cudaErrorInvalidValue;
    if (ndim < 1 || ndim > CUDA_TENSOR_VIEW_DIMS) {
        contract_errors++;
        return cudaErrorInvalidValue;
    }
    calls_view++;
    last_unit = unit;
    host_view(dst, src, unit, ndim, dims, strides);
    return cudaSuccess;
}

cudaError_t cuda_tensor_copy_tiled(void *dst, const void *src, int unit, int ndim,
                                   const int64_t *dims, const int64_t *strides, int tile_axis,
                                   cudaStream_t s) {
    (void)s;
    if (bad_unit(unit, dst, src)) return cudaErrorInvalidValue;
    if (unit > 8 || ndim < 2 || ndim > CUDA_TENSOR_VIEW_DIMS || tile_axis < 0 ||
        tile_axis >= ndim - 1 || strides[tile_axis] != 1 || strides[ndim - 1] == 1) {
        contract_errors++;
        return cudaErrorInvalidValue;
    }
    calls_tiled++;
    last_unit = unit;
    host_view(dst, src, unit, ndim, dims, strides);
    return cudaSuccess;
}

cudaError_t cuda_tensor_copy_pieces(void *whole, void *const *pieces, const int64_t *widths,
                                    const int64_t *offsets, int n, int64_t rows, int64_t row_width,
                                    int unit, bool join, cudaStream_t s) {
    (void)s;
    if (n < 0 || n > CUDA_TENSOR_PIECES || bad_unit(unit, whole, whole))
        return cudaErrorInvalidValue;
    last_unit = unit;
    for (int i = 0; i < n; i++) {
        if (widths[i] == 0) continue;
        if (bad_unit(unit, pieces[i], pieces[i]) || offsets[i] + widths[i] > row_width)
            return cudaErrorInvalidValue;
        for (int64_t r = 0; r < rows; r++) {
            char *w = (char *)whole + (r * row_width + offsets[i]) * unit;
            char *p = (char *)pieces[i] + r * widths[i] * unit;
            memcpy(join ? w : p, join ? p : w, (size_t)(widths[i] * unit));
        }
    }
    return cudaSuccess;
}

cudaError_t cuda_tensor_gather(void *dst, const void *src, const void *indices, bool indices_i64,
                               int64_t outer, int64_t axis_dim, int64_t n_indices, int64_t inner,
                               int unit, cuda_gather_fault *bad_index, cudaStream_t s) {
    (void)s;
    if (bad_unit(unit, dst, src)) return cudaErrorInvalidValue;
    last_unit = unit;
    int64_t row = inner * unit;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n_indices; j++) {
            int64_t k = indices_i64 ? ((const int64_t *)indices)[j] : ((const int32_t *)indices)[j];
            int64_t given = k;
            if (k < 0) k += axis_dim;
            char *d = (char *)dst + (o * n_indices + j) * row;
            if (k < 0 || k >= axis_dim) {
                memset(d, 0, (size_t)row);
                if (bad_index && !bad_index->raised)
                    *bad_index = (cuda_gather_fault){1, given, axis_dim};
            } else {
                memcpy(d, (const char *)src + (o * axis_dim + k) * row, (size_t)row);
            }
        }
    return cudaSuccess;
}

cudaError_t cuda_tensor_fill(void *dst, int64_t n, int unit, const void *pattern, cudaStream_t s) {
    (void)s;
    if (bad_unit(unit, dst, dst)) return cudaErrorInvalidValue;
    for (int64_t i = 0; i < n; i++) memcpy((char *)dst + i * unit, pattern, (size_t)unit);
    return cudaSuccess;
}

cudaError_t cuda_tensor_range(void *dst, graft_dtype dtype, int64_t n, const void *start,
                              const void *delta, cudaStream_t s) {
    (void)s;
    tensor st = {dtype, 0, {0}, (void *)start}, dt = {dtype, 0, {0}, (void *)delta};
    for (int64_t i = 0; i < n; i++) {
        tensor o = {dtype, 0, {0}, (char *)dst + i * (int64_t)graft_dtype_size(dtype)};
        if (dtype == GRAFT_DTYPE_F32) {
            volatile float p = (float)i * *(const float *)delta; /* two roundings, no FMA */
            *(float *)o.data = *(const float *)start + p;
        } else if (dtype == GRAFT_DTYPE_F64) {
            volatile double p = (double)i * *(const double *)delta;
            *(double *)o.data = *(const double *)start + p;
        } else {
            uint64_t v =
                (uint64_t)tensor_get_i64(&st, 0) + (uint64_t)i * (uint64_t)tensor_get_i64(&dt, 0);
            if (dtype == GRAFT_DTYPE_I64) *(int64_t *)o.data = (int64_t)v;
            if (dtype == GRAFT_DTYPE_I32) *(int32_t *)o.data = (int32_t)v;
            if (dtype == GRAFT_DTYPE_I16) *(int16_t *)o.data = (int16_t)v;
        }
    }
    return cudaSuccess;
}

/* The input index output index o of an axis reads (-1: the constant), as ONNX defines the modes. */
static int64_t host_pad_source(int mode, int64_t o, int64_t begin, int64_t dim) {
    int64_t i = o - begin;
    if (i >= 0 && i < dim) return i;
    if (dim == 0 || mode == CUDA_PAD_CONSTANT) return -1;
    if (mode == CUDA_PAD_EDGE) return i < 0 ? 0 : dim - 1;
    if (mode == CUDA_PAD_WRAP) return ((i % dim) + dim) % dim;
    if (dim == 1) return 0;
    while (i < 0 || i >= dim) i = i < 0 ? -i : 2 * (dim - 1) - i; /* reflect off either edge */
    return i;
}

cudaError_t cuda_tensor_pad(void *dst, const void *src, int elem, int ndim, const int64_t *out_dims,
                            const int64_t *in_dims, const int64_t *begin, int mode,
                            const void *constant, cudaStream_t s) {
    (void)s;
    if (bad_unit(elem, dst, src) || elem > 8 || ndim < 1 || ndim > GRAFT_MAX_DIMS)
        return cudaErrorInvalidValue;
    int64_t total = dims_numel(ndim, out_dims), in_strides[GRAFT_MAX_DIMS];
    dims_strides(ndim, in_dims, in_strides);
    for (int64_t i = 0; i < total; i++) {
        int64_t rem = i, off = 0;
        bool constant_here = false;
        for (int k = ndim - 1; k >= 0; k--) {
            int64_t src_k = host_pad_source(mode, rem % out_dims[k], begin[k], in_dims[k]);
            rem /= out_dims[k];
            if (src_k < 0) constant_here = true;
            off += src_k * in_strides[k];
        }
        memcpy((char *)dst + i * elem, constant_here ? constant : (const char *)src + off * elem,
               (size_t)elem);
    }
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t st) {
    (void)k, (void)st;
    memmove(d, s, n);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    (void)s;
    memset(p, v, n);
    return cudaSuccess;
}

/* ---- running one op both ways -------------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int64_t rnd_in(int64_t lo, int64_t hi) {
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static const graft_dtype dtypes[] = {GRAFT_DTYPE_U8,  GRAFT_DTYPE_F16,  GRAFT_DTYPE_F32,
                                     GRAFT_DTYPE_I64, GRAFT_DTYPE_BF16, GRAFT_DTYPE_I32,
                                     GRAFT_DTYPE_F64, GRAFT_DTYPE_BOOL};

static graft_dtype rnd_dtype(void) {
    return dtypes[rnd() % 8];
}

/* A tensor of random bytes (bool: 0 or 1). */
static tensor make(graft_dtype dt, int nd, const int64_t *dims) {
    tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.ndim = nd;
    for (int i = 0; i < nd; i++) t.dims[i] = dims[i];
    int64_t nb = tensor_nbytes(&t);
    t.data = malloc((size_t)nb + 1);
    for (int64_t i = 0; i < nb; i++)
        ((unsigned char *)t.data)[i] = (unsigned char)(dt == GRAFT_DTYPE_BOOL ? rnd() & 1 : rnd());
    return t;
}

static tensor make_i64(int n, const int64_t *v) {
    int64_t d[1] = {n};
    tensor t = make(GRAFT_DTYPE_I64, 1, d);
    memcpy(t.data, v, sizeof(int64_t) * (size_t)n);
    return t;
}

static void rnd_dims(int nd, int64_t *d, int maxd) {
    for (int i = 0; i < nd; i++) d[i] = rnd() % 23 == 0 ? 0 : rnd_in(1, maxd);
}

/* Where the "device" copies sit: 0 aligned, 1 shifted by an element, 2 by odd bytes (the
 * kernels must narrow their units or decline), 3 by 16 bytes in, 8 bytes out. */
static int shift_in(int mode, size_t elem) {
    return mode == 0 ? 0 : mode == 1 ? (int)elem : mode == 2 ? 1 : 16;
}

static int shift_out(int mode) {
    return mode == 3 ? 8 : mode == 2 ? 3 : 0;
}

typedef struct tally {
    int cases, mismatches, declined;
    char first[256];
} tally;

static void note(tally *t, const char *label, const char *what) {
    if (t->mismatches++ == 0) snprintf(t->first, sizeof t->first, "%s: %.200s", label, what);
}

static const cuda_kernel *kernel_for(const char *op) {
    for (const cuda_kernel *k = cuda_tensor_kernels; k->op; k++)
        if (strcmp(k->op, op) == 0) return k;
    return NULL;
}

/* Outputs of the reference (ro) and of the CUDA glue (co, prefilled with 0xCD to catch unwritten
 * bytes and overruns); inputs to the glue copied to shifted buffers. */
typedef struct both_outputs {
    tensor ro[64], co[64], ci[32];
    const tensor *cip[32];
    tensor *rop[64], *cop[64];
    char *bufs[100];
    int nbufs;
} both_outputs;

static char *shifted_copy(both_outputs *b, const void *src, int64_t bytes, int shift, int fill) {
    char *p = malloc((size_t)bytes + 64);
    memset(p, fill, (size_t)bytes + 64);
    if (src) memcpy(p + 16 + shift, src, (size_t)bytes);
    b->bufs[b->nbufs++] = p;
    return p + 16 + shift; /* malloc gives 16-byte alignment */
}

static bool setup(both_outputs *b, const ir_node *node, tensor **in, int n_in, int n_out,
                  int mode) {
    value_info vi[32], vo[64];
    for (int i = 0; i < n_in; i++) tensor_value_info(&vi[i], in[i]);
    graft_err e = {0};
    if (op_find(node->op_type)->infer(node, vi, n_in, vo, n_out, &e) != GRAFT_OK) return false;
    b->nbufs = 0;
    for (int i = 0; i < n_in; i++) {
        b->cip[i] = NULL;
        if (!in[i]) continue;
        b->ci[i] = *in[i];
        b->ci[i].data = shifted_copy(b, in[i]->data, tensor_nbytes(in[i]),
                                     shift_in(mode, graft_dtype_size(in[i]->dtype)), 0);
        b->cip[i] = &b->ci[i];
    }
    for (int o = 0; o < n_out; o++) {
        tensor *r = &b->ro[o];
        memset(r, 0, sizeof *r);
        r->dtype = vo[o].dtype;
        r->ndim = vo[o].ndim;
        memcpy(r->dims, vo[o].dims, sizeof r->dims);
        r->data = calloc(1, (size_t)tensor_nbytes(r) + 1);
        b->co[o] = *r;
        b->co[o].data = shifted_copy(b, NULL, tensor_nbytes(r), shift_out(mode), 0xCD);
        b->rop[o] = r;
        b->cop[o] = &b->co[o];
    }
    return true;
}

static void compare(tally *t, const char *label, both_outputs *b, int n_out) {
    for (int o = 0; o < n_out; o++) {
        int64_t bytes = tensor_nbytes(&b->ro[o]);
        const unsigned char *after = (const unsigned char *)b->co[o].data + bytes;
        if (memcmp(b->ro[o].data, b->co[o].data, (size_t)bytes) != 0) {
            note(t, label, "output differs from the reference");
            return;
        }
        for (int j = 0; j < 8; j++)
            if (after[j] != 0xCD) {
                note(t, label, "wrote past the output");
                return;
            }
    }
}

/* Run node on the reference and the glue; both must succeed and agree, or both refuse. */
static void run(tally *t, const char *label, const ir_node *node, tensor **in, int n_in, int n_out,
                int mode) {
    both_outputs b;
    if (!setup(&b, node, in, n_in, n_out, mode)) return;
    t->cases++;
    graft_err e = {0}, e2 = {0};
    op_call rc = {node, (const tensor *const *)in, n_in, b.rop, n_out, &e};
    op_call cc = {node, b.cip, n_in, b.cop, n_out, &e2};
    graft_status rs = op_find(node->op_type)->reference(&rc);
    cuda_backend be;
    memset(&be, 0, sizeof be);
    void *state = NULL;
    bool handled = false;
    graft_status cs = kernel_for(node->op_type)->run(&be, &cc, &state, &handled);
    if (cs == GRAFT_OK && !handled)
        t->declined++;
    else if ((rs != GRAFT_OK) != (cs != GRAFT_OK))
        note(t, label, rs != GRAFT_OK ? "the reference refused, the glue did not" : e2.msg);
    else if (rs == GRAFT_OK)
        compare(t, label, &b, n_out);
    for (int i = 0; i < b.nbufs; i++) free(b.bufs[i]);
    for (int o = 0; o < n_out; o++) free(b.ro[o].data);
}

static void report(const char *name, const tally *t) {
    CHECK(name, t->mismatches == 0 && t->cases > 0, "%d of %d cases wrong, first %s", t->mismatches,
          t->cases, t->first);
}

/* ---- the ops -------------------------------------------------------------------------------- */

static void shuffle(int64_t *v, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint64_t)(i + 1));
        int64_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

static void test_transpose(int iters) {
    tally t = {0};
    for (int it = 0; it < iters; it++) {
        int nd = (int)rnd_in(1, 6);
        int64_t d[GRAFT_MAX_DIMS], perm[GRAFT_MAX_DIMS];
        rnd_dims(nd, d, it % 3 == 0 && nd <= 3 ? 40 : 6); /* large enough to tile */
        tensor x = make(rnd_dtype(), nd, d);
        test_node tn;
        node_init(&tn, "Transpose", 13);
        if (rnd() % 5) { /* else the default: reversed axes */
            for (int i = 0; i < nd; i++) perm[i] = i;
            shuffle(perm, nd);
            set_ints(&tn, "perm", nd, perm);
        }
        tensor *in[1] = {&x};
        run(&t, "random", &tn.node, in, 1, 1, (int)(rnd() % 4));
        free(x.data);
    }
    report("Transpose: random ranks, perms, dtypes and alignments match the reference", &t);
}

static void test_slice(int iters) {
    tally t = {0};
    for (int it = 0; it < iters; it++) {
        int nd = (int)rnd_in(1, 5), na = (int)rnd_in(1, nd);
        int64_t d[GRAFT_MAX_DIMS], st[8], en[8], ax[8], sp[8], axes[8];
        rnd_dims(nd, d, 9);
        for (int i = 0; i < nd; i++) axes[i] = i;
        shuffle(axes, nd);
        for (int i = 0; i < na; i++) {
            ax[i] = rnd() % 2 ? axes[i] : axes[i] - nd;
            st[i] = rnd_in(-12, 12);
            en[i] = rnd() % 7 == 0 ? (rnd() % 2 ? INT64_MAX : INT64_MIN) : rnd_in(-12, 12);
            sp[i] = rnd() % 3 ? rnd_in(1, 3) : -rnd_in(1, 3);
        }
        tensor x = make(rnd_dtype(), nd, d), ts = make_i64(na, st), te = make_i64(na, en);
        tensor ta = make_i64(na, ax), tp = make_i64(na, sp);
        test_node tn;
        node_init(&tn, "Slice", 13);
        tensor *in[5] = {&x, &ts, &te, rnd() % 4 ? &ta : NULL, rnd() % 3 ? &tp : NULL};
        run(&t, "random", &tn.node, in, 5, 1, (int)(rnd() % 4));
        free(x.data), free(ts.data), free(te.data), free(ta.data), free(tp.data);
    }
    report("Slice: random starts, ends, axes and negative steps match the reference", &t);
}

static void test_expand(int iters) {
    tally t = {0};
    for (int it = 0; it < iters; it++) {
        int nd = (int)rnd_in(0, 4), lead = (int)rnd_in(0, 2);
        int64_t d[GRAFT_MAX_DIMS], od[GRAFT_MAX_DIMS];
        for (int i = 0; i < lead; i++) od[i] = rnd_in(1, 4);
        for (int i = 0; i < nd; i++) {
            d[i] = rnd() % 2 ? 1 : rnd_in(1, 6);
            od[lead + i] = d[i] == 1 && rnd() % 2 ? rnd_in(1, 6) : d[i];
        }
        tensor x = make(rnd_dtype(), nd, d), sh = make_i64(nd + lead, od);
        test_node tn;
        node_init(&tn, "Expand", 13);
        tensor *in[2] = {&x, &sh};
        run(&t, "random", &tn.node, in, 2, 1, (int)(rnd() % 4));
        free(x.data), free(sh.data);
    }
    report("Expand: random broadcasts match the reference", &t);
}

/* Concat pieces along an axis, then Split the same sizes back out of a whole. */
static void concat_split_case(tally *tc, tally *ts, int n, int mode) {
    int nd = (int)rnd_in(1, 4), axis;
    int64_t d[GRAFT_MAX_DIMS], sizes[20];
    rnd_dims(nd, d, 6);
    axis = (int)rnd_in(0, nd - 1);
    graft_dtype dt = rnd_dtype();
    tensor pieces[20], *in[20];
    d[axis] = 0;
    for (int i = 0; i < n; i++) {
        int64_t pd[GRAFT_MAX_DIMS];
        memcpy(pd, d, sizeof pd);
        pd[axis] = sizes[i] = rnd() % 6 == 0 ? 0 : rnd_in(1, 5);
        pieces[i] = make(dt, nd, pd);
        in[i] = &pieces[i];
        d[axis] += sizes[i];
    }
    test_node tn;
    node_init(&tn, "Concat", 13);
    set_int(&tn, "axis", rnd() % 2 ? axis : axis - nd);
    run(tc, "random", &tn.node, in, n, 1, mode);
    tensor whole = make(dt, nd, d), sp = make_i64(n, sizes);
    node_init(&tn, "Split", 13);
    set_int(&tn, "axis", axis);
    tensor *sin[2] = {&whole, &sp};
    run(ts, "random", &tn.node, sin, 2, n, mode);
    for (int i = 0; i < n; i++) free(pieces[i].data);
    free(whole.data), free(sp.data);
}

static void test_concat_split(int iters) {
    tally tc = {0}, ts = {0};
    for (int it = 0; it < iters; it++)
        concat_split_case(&tc, &ts, (int)rnd_in(1, it % 4 == 0 ? 20 : 4), (int)(rnd() % 4));
    report("Concat: 1 to 20 pieces (several launches), empty pieces, any axis", &tc);
    report("Split: sizes from the input, empty pieces, any axis", &ts);
}

static void test_gather(int iters) {
    tally t = {0};
    for (int it = 0; it < iters; it++) {
        int nd = (int)rnd_in(1, 4), ni = (int)rnd_in(0, 2), axis = (int)rnd_in(0, nd - 1);
        int64_t d[GRAFT_MAX_DIMS], id[2];
        rnd_dims(nd, d, 6);
        for (int i = 0; i < ni; i++) id[i] = rnd_in(0, 4);
        bool i64 = rnd() % 2;
        tensor x = make(rnd_dtype(), nd, d);
        tensor idx = make(i64 ? GRAFT_DTYPE_I64 : GRAFT_DTYPE_I32, ni, id);
        for (int64_t j = 0, dim = d[axis]; j < tensor_numel(&idx); j++) {
            int64_t v = dim > 0 ? rnd_in(-dim, dim - 1) : 0; /* negative ones count from the end */
            if (i64)
                ((int64_t *)idx.data)[j] = v;
            else
                ((int32_t *)idx.data)[j] = (int32_t)v;
        }
        test_node tn;
        node_init(&tn, "Gather", 13);
        set_int(&tn, "axis", rnd() % 2 ? axis : axis - nd);
        tensor *in[2] = {&x, &idx};
        run(&t, "random", &tn.node, in, 2, 1, (int)(rnd() % 4));
        free(x.data), free(idx.data);
    }
    report("Gather: any axis, int32/int64 and negative indices, scalar indices", &t);
}

static void test_pad(int iters) {
    static const char *modes[] = {"constant", "reflect", "edge", "wrap"};
    tally t = {0};
    for (int it = 0; it < iters; it++) {
        int nd = (int)rnd_in(1, 4), m = (int)(rnd() % 4);
        int64_t d[GRAFT_MAX_DIMS], pads[2 * GRAFT_MAX_DIMS], one[1] = {1};
        rnd_dims(nd, d, 6);
        for (int i = 0; i < nd; i++) {
            pads[i] = rnd_in(-2, 4);
            pads[i + nd] = rnd_in(-2, 4);
            while (d[i] + pads[i] + pads[i + nd] < 0) pads[i]++;
        }
        graft_dtype dt = rnd_dtype();
        tensor x = make(dt, nd, d), tp = make_i64(2 * nd, pads), cv = make(dt, 0, one);
        test_node tn;
        node_init(&tn, "Pad", m == 3 ? 19 : 13);
        set_str(&tn, "mode", modes[m]);
        tensor *in[3] = {&x, &tp, rnd() % 2 ? &cv : NULL};
        run(&t, modes[m], &tn.node, in, 3, 1, (int)(rnd() % 4));
        free(x.data), free(tp.data), free(cv.data);
    }
    int64_t d[4] = {1, 3, 5, 5}, pads[8] = {0, 0, 1, 2, 0, 0, 2, 1};
    tensor x = make(GRAFT_DTYPE_F32, 4, d);
    test_node tn;
    node_init(&tn, "Pad", 2);
    set_ints(&tn, "pads", 8, pads);
    set_float(&tn, "value", 1.5f);
    tensor *in[1] = {&x};
    run(&t, "opset 2", &tn.node, in, 1, 1, 0);
    free(x.data);
    report("Pad: constant, reflect, edge, wrap, cropping, constant_value, opset 2 attributes", &t);
}

static void test_constant_of_shape(void) {
    tally t = {0};
    for (int k = -1; k < 8; k++)
        for (int zero = 0; zero < 2; zero++)
            for (int mode = 0; mode < 4; mode++) {
                int64_t s[3] = {3, rnd_in(0, 7), rnd_in(1, 9)}, one[1] = {1};
                tensor shape = make_i64(3, s), v = make(dtypes[k < 0 ? 0 : k], 1, one);
                test_node tn;
                node_init(&tn, "ConstantOfShape", 13);
                if (k >= 0) { /* else the default float zero */
                    if (zero) memset(v.data, 0, graft_dtype_size(v.dtype));
                    node_attr(&tn, "value", IR_ATTR_TENSOR)->t = v;
                }
                tensor *in[1] = {&shape};
                run(&t, graft_dtype_name(v.dtype), &tn.node, in, 1, 1, mode);
                free(v.data), free(shape.data);
            }
    report("ConstantOfShape: every dtype, zero and non-zero values, the default", &t);
}

static void test_range_and_reshapes(void) {
    struct {
        graft_dtype dt;
        double s, l, d;
    } r[] = {
        {GRAFT_DTYPE_F32, 0.1, 7.3, 0.37}, {GRAFT_DTYPE_F32, 5, -3, -0.3},
        {GRAFT_DTYPE_F64, 0.1, 1000, 0.7}, {GRAFT_DTYPE_I64, -5, 1000, 3},
        {GRAFT_DTYPE_I32, 10, -7, -2},     {GRAFT_DTYPE_I16, 0, 300, 7},
        {GRAFT_DTYPE_F32, 0, 100000, 0.1},
    };
    tally t = {0};
    int64_t one[1] = {1};
    for (size_t i = 0; i < sizeof r / sizeof *r; i++) {
        tensor a = make(r[i].dt, 0, one), b = make(r[i].dt, 0, one), c = make(r[i].dt, 0, one);
        tensor_set_f64(&a, 0, r[i].s);
        tensor_set_f64(&b, 0, r[i].l);
        tensor_set_f64(&c, 0, r[i].d);
        test_node tn;
        node_init(&tn, "Range", 13);
        tensor *in[3] = {&a, &b, &c};
        run(&t, graft_dtype_name(r[i].dt), &tn.node, in, 3, 1, 0);
        free(a.data), free(b.data), free(c.data);
    }
    int64_t d[3] = {2, 3, 4}, ns[2] = {6, -1}, ax[1] = {1};
    tensor x = make(GRAFT_DTYPE_F16, 3, d), s = make_i64(2, ns), a = make_i64(1, ax);
    test_node tn;
    node_init(&tn, "Reshape", 13);
    tensor *in[2] = {&x, &s}, *in2[2] = {&x, &a};
    run(&t, "Reshape", &tn.node, in, 2, 1, 1);
    node_init(&tn, "Flatten", 13);
    set_int(&tn, "axis", 2);
    run(&t, "Flatten", &tn.node, in, 1, 1, 0);
    node_init(&tn, "Unsqueeze", 13);
    run(&t, "Unsqueeze", &tn.node, in2, 2, 1, 0);
    free(x.data), free(s.data), free(a.data);
    report("Range (f32, f64, i16, i32, i64) and the reshape-like copies", &t);
}

/* ---- the layouts that must take the fast paths ---------------------------------------------- */

/* Run an aligned case; report whether it matched and which launcher (tiled or not) and unit it
 * used last. */
static bool path_case(const char *name, test_node *tn, tensor **in, int n_in, bool want_tiled,
                      int want_unit) {
    tally t = {0};
    long tiled0 = calls_tiled, view0 = calls_view;
    last_unit = 0;
    run(&t, name, &tn->node, in, n_in, 1, 0);
    bool tiled = calls_tiled > tiled0, view = calls_view > view0;
    bool ok = t.mismatches == 0 && t.cases == 1 && t.declined == 0 && last_unit == want_unit;
    if (want_tiled) ok = ok && tiled;
    if (!want_tiled && (tiled || view)) ok = ok && view && !tiled;
    CHECK(name, ok, "matched %d, tiled %d, unit %ld (want %s, unit %d)", t.mismatches == 0, tiled,
          last_unit, want_tiled ? "tiled" : "untiled", want_unit);
    return ok;
}

static void transpose_path(const char *name, graft_dtype dt, const int64_t *d, const int64_t *p,
                           bool want_tiled, int want_unit) {
    tensor x = make(dt, 4, d);
    test_node tn;
    node_init(&tn, "Transpose", 13);
    set_ints(&tn, "perm", 4, p);
    tensor *in[1] = {&x};
    path_case(name, &tn, in, 1, want_tiled, want_unit);
    free(x.data);
}

static void test_fast_paths(void) {
    int64_t bshd[4] = {2, 128, 12, 64}, nchw[4] = {2, 64, 14, 14};
    int64_t p0213[4] = {0, 2, 1, 3}, p0231[4] = {0, 2, 3, 1};
    transpose_path("BERT (B,S,H,D)->(B,H,S,D) f16 moves 16-byte words", GRAFT_DTYPE_F16, bshd,
                   p0213, false, 16);
    transpose_path("BERT (B,S,H,D)->(B,H,D,S) f32 is tiled", GRAFT_DTYPE_F32, bshd, p0231, true, 4);
    transpose_path("NCHW->NHWC f16 is tiled", GRAFT_DTYPE_F16, nchw, p0231, true, 2);

    int64_t hd[3] = {4, 128, 768}, s0[1] = {0}, e1[1] = {1}, a1[1] = {1};
    tensor h = make(GRAFT_DTYPE_F16, 3, hd), ts = make_i64(1, s0), te = make_i64(1, e1);
    tensor ta = make_i64(1, a1);
    test_node tn;
    node_init(&tn, "Slice", 13);
    tensor *sl[4] = {&h, &ts, &te, &ta};
    path_case("Slice of the [CLS] row moves 16-byte words", &tn, sl, 4, false, 16);

    int64_t md[4] = {2, 1, 1, 128}, od[4] = {2, 12, 128, 128};
    tensor mask = make(GRAFT_DTYPE_F32, 4, md), shape = make_i64(4, od);
    node_init(&tn, "Expand", 13);
    tensor *ex[2] = {&mask, &shape};
    path_case("Expand of the attention mask moves 16-byte words", &tn, ex, 2, false, 16);

    int64_t ed[2] = {1000, 768}, id[2] = {4, 128};
    tensor emb = make(GRAFT_DTYPE_F16, 2, ed), ids = make(GRAFT_DTYPE_I64, 2, id);
    for (int j = 0; j < 512; j++) ((int64_t *)ids.data)[j] = rnd_in(-1000, 999);
    node_init(&tn, "Gather", 13);
    tensor *ga[2] = {&emb, &ids};
    path_case("Gather of embedding rows moves 16-byte words", &tn, ga, 2, false, 16);

    node_init(&tn, "Concat", 13);
    set_int(&tn, "axis", -1);
    tensor *ca[3] = {&h, &h, &h};
    path_case("Concat on the last axis moves 16-byte words", &tn, ca, 3, false, 16);

    /* An index past the end (in the device copy only: inference would refuse a known one):
     * zero rows, no read outside the table, no host-side error. */
    node_init(&tn, "Gather", 13);
    both_outputs b;
    setup(&b, &tn.node, ga, 2, 1, 0);
    ((int64_t *)b.ci[1].data)[7] = 1000;
    graft_err e = {0};
    op_call cc = {&tn.node, b.cip, 2, b.cop, 1, &e};
    cuda_backend be;
    memset(&be, 0, sizeof be);
    void *state = NULL;
    bool handled = false;
    graft_status st = kernel_for("Gather")->run(&be, &cc, &state, &handled);
    const uint16_t *row7 = (const uint16_t *)b.co[0].data + 7 * 768;
    bool zeros = true;
    for (int j = 0; j < 768; j++) zeros = zeros && row7[j] == 0;
    CHECK("Gather writes zeros for an out-of-range device index",
          st == GRAFT_OK && handled && zeros, "status %d handled %d zeros %d", st, handled, zeros);
    for (int i = 0; i < b.nbufs; i++) free(b.bufs[i]);
    free(b.ro[0].data);
    free(h.data), free(ts.data), free(te.data), free(ta.data), free(mask.data), free(shape.data);
    free(emb.data), free(ids.data);
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 300;
    test_transpose(iters);
    test_slice(iters);
    test_expand(iters);
    test_concat_split(iters);
    test_gather(iters);
    test_pad(iters);
    test_constant_of_shape();
    test_range_and_reshapes();
    test_fast_paths();
    CHECK("launchers were called within their documented contract", contract_errors == 0,
          "%d calls broke it", contract_errors);
    return test_failures != 0;
}
