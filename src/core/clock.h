/* clock.h: seconds on the monotonic clock, for the timings graft reports and the timeouts. */
#ifndef GRAFT_CORE_CLOCK_H
#define GRAFT_CORE_CLOCK_H

#include <time.h>

static inline double clock_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
