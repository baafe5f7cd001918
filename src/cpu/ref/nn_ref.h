/* nn_ref.h: helpers the nn reference kernels share: the f32 matrix product and f32 staging of
 * 16-bit float tensors. */
#ifndef GRAFT_CPU_REF_NN_REF_H
#define GRAFT_CPU_REF_NN_REF_H

#include <stdbool.h>
#include <stdint.h>

#include "../../ops/nn.h"

/* c (m, n) = [c +] a (m, k) * b, row-major with leading dimensions; b is (k, n), or (n, k) when
 * b_transposed. Threads over blocks of c when the product is large. */
void nn_sgemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
              int64_t ldb, bool b_transposed, float *c, int64_t ldc, bool accumulate);

/* A newly allocated f32 copy of a float tensor's elements (NULL when out of memory). */
float *nn_f32_copy(const tensor *t);
/* Write f32 values into a float tensor of any float dtype, rounding as the dtype needs. */
void nn_f32_store(tensor *t, const float *values);

/* Run a 16-bit float call (inputs 0..2, output 0) through `f32_kernel` on f32 copies of its
 * tensors, rounding the result back once at the end. */
graft_status nn_run_via_f32(const op_call *c, graft_status (*f32_kernel)(const op_call *));

/* True when the caller may open an OpenMP parallel region that will actually run in parallel. */
bool nn_may_parallelize(void);

/* The same window seen as 3-D: missing leading spatial axes become size 1 with a 1-tap kernel,
 * so that one loop nest serves 1-D, 2-D and 3-D. */
static inline nn_window nn_window_as_3d(const nn_window *w) {
    nn_window w3 = {0};
    int lead = NN_MAX_SPATIAL - w->nsp;
    w3.nsp = NN_MAX_SPATIAL;
    w3.ceil_mode = w->ceil_mode;
    for (int i = 0; i < NN_MAX_SPATIAL; i++) {
        int s = i - lead;
        w3.in[i] = s >= 0 ? w->in[s] : 1;
        w3.kernel[i] = s >= 0 ? w->kernel[s] : 1;
        w3.stride[i] = s >= 0 ? w->stride[s] : 1;
        w3.dilation[i] = s >= 0 ? w->dilation[s] : 1;
        w3.pad_begin[i] = s >= 0 ? w->pad_begin[s] : 0;
        w3.pad_end[i] = s >= 0 ? w->pad_end[s] : 0;
        w3.out[i] = s >= 0 ? w->out[s] : 1;
    }
    return w3;
}

#endif
