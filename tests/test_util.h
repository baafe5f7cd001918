/* test_util.h: tiny test harness: PASS/FAIL/SKIP lines that tools/test.sh counts. */
#ifndef GRAFT_TEST_UTIL_H
#define GRAFT_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "graft.h"

static int test_failures;

#define CHECK(name, cond, ...)                                                                     \
    do {                                                                                           \
        if (cond)                                                                                  \
            printf("PASS %s\n", name);                                                             \
        else {                                                                                     \
            printf("FAIL %s: ", name);                                                             \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            test_failures++;                                                                       \
        }                                                                                          \
        fflush(stdout);                                                                            \
    } while (0)

/* A fixture the test command generates is missing: a failure (the generator failed), not a skip. */
#define MISSING(name, what)                                                                        \
    do {                                                                                           \
        printf("FAIL %s: fixture missing: %s (tools/test.sh makes it; see its make_* logs)\n",     \
               name, what);                                                                        \
        test_failures++;                                                                           \
        fflush(stdout);                                                                            \
    } while (0)

#define SKIP(name, why)                                                                            \
    do {                                                                                           \
        printf("SKIP %s: %s\n", name, why);                                                        \
        fflush(stdout);                                                                            \
    } while (0)

/* max |a-b| / max(max|b|, tiny) over two f32 tensors of b's size: robust for outputs with
 * values near zero; NaN propagates. */
static inline double test_rel_error(const graft_tensor *a, const graft_tensor *b) {
    int64_t n = graft_tensor_numel(b);
    double maxdiff = 0, maxref = 1e-12;
    const float *x = a->data, *y = b->data;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (!(d <= maxdiff)) maxdiff = d;
        if (fabs(y[i]) > maxref) maxref = fabs(y[i]);
    }
    return maxdiff / maxref;
}

#endif
