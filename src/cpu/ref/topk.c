/* topk.c: reference kernel of TopK: each (outer, inner) column sorted by value, ties in index
 * order; NaN counts as larger than every number (first with largest, last without). */
#include <stdlib.h>
#include <string.h>

#include "../../core/scalar.h"
#include "../../ops/reduce.h"
#include "../../ops/shape_plan.h"

typedef struct topk_entry {
    double f;  /* the value, for float dtypes */
    int64_t i; /* the value, for integer dtypes */
    int64_t index;
} topk_entry;

/* qsort's comparators: total orders (the index breaks ties), so the result is deterministic. */
static int by_index(const topk_entry *a, const topk_entry *b) {
    return (a->index > b->index) - (a->index < b->index);
}

static int float_order(double a, double b) {
    bool na = a != a, nb = b != b;
    if (na || nb) return na - nb; /* NaN above everything */
    return (a > b) - (a < b);
}

static int largest_float(const void *pa, const void *pb) {
    const topk_entry *a = pa, *b = pb;
    int o = float_order(b->f, a->f);
    return o ? o : by_index(a, b);
}

static int smallest_float(const void *pa, const void *pb) {
    const topk_entry *a = pa, *b = pb;
    int o = float_order(a->f, b->f);
    return o ? o : by_index(a, b);
}

static int largest_int(const void *pa, const void *pb) {
    const topk_entry *a = pa, *b = pb;
    int o = (b->i > a->i) - (b->i < a->i);
    return o ? o : by_index(a, b);
}

static int smallest_int(const void *pa, const void *pb) {
    const topk_entry *a = pa, *b = pb;
    int o = (a->i > b->i) - (a->i < b->i);
    return o ? o : by_index(a, b);
}

graft_status ref_TopK(const op_call *c) {
    const tensor *x = c->in[0];
    if (!x) return op_missing_input(c, 0);
    if (x->ndim < 1) return op_error(c->node, c->err, GRAFT_E_SHAPE, "X must have rank >= 1");
    int axis;
    int64_t k;
    TRY(topk_params(c->node, x->ndim, c->n_in > 1 ? c->in[1] : NULL, &axis, &k, c->err));
    axis_split s = axis_split_dims(x->ndim, x->dims, axis, true);
    if (k > s.n)
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                        "k is %lld, more than the %lld elements of axis %d", (long long)k,
                        (long long)s.n, axis);
    TRY(op_check_output(c, 0, x->dtype, s.outer * k * s.inner));
    TRY(op_check_output(c, 1, GRAFT_DTYPE_I64, s.outer * k * s.inner));
    if (k == 0 || s.outer * s.inner == 0) return GRAFT_OK;
    bool flt = dtype_is_float(x->dtype), largest = attr_i(c->node, "largest", 1) != 0;
    int (*order)(const void *, const void *) =
        flt ? (largest ? largest_float : smallest_float) : (largest ? largest_int : smallest_int);
    topk_entry *col = malloc(sizeof *col * (size_t)s.n);
    if (!col) return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "no memory for TopK");
    size_t elem = graft_dtype_size(x->dtype);
    int64_t *indices = c->out[1]->data;
    for (int64_t o = 0; o < s.outer; o++)
        for (int64_t i = 0; i < s.inner; i++) {
            int64_t base = o * s.n * s.inner + i;
            for (int64_t j = 0; j < s.n; j++) {
                int64_t at = base + j * s.inner;
                col[j].f = flt ? tensor_get_f64(x, at) : 0.0;
                col[j].i = flt ? 0 : scalar_load_int(x->data, x->dtype, at);
                col[j].index = j;
            }
            qsort(col, (size_t)s.n, sizeof *col, order);
            for (int64_t j = 0; j < k; j++) {
                int64_t dst = o * k * s.inner + j * s.inner + i;
                memcpy((char *)c->out[0]->data + dst * (int64_t)elem,
                       (const char *)x->data + (base + col[j].index * s.inner) * (int64_t)elem,
                       elem);
                indices[dst] = col[j].index;
            }
        }
    free(col);
    return GRAFT_OK;
}
