/* test_util.h: tiny test harness: PASS/FAIL/SKIP lines that tools/test.sh counts. */
#ifndef GRAFT_TEST_UTIL_H
#define GRAFT_TEST_UTIL_H

#include <stdio.h>

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

#define SKIP(name, why)                                                                            \
    do {                                                                                           \
        printf("SKIP %s: %s\n", name, why);                                                        \
        fflush(stdout);                                                                            \
    } while (0)

#endif
