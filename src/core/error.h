/* error.h: error reports that carry a status and a message naming file, node, op and shapes. */
#ifndef GRAFT_CORE_ERROR_H
#define GRAFT_CORE_ERROR_H

#include "graft.h"

#define GRAFT_ERR_MSG_MAX 1024

/* Where a failing internal function writes what went wrong. Functions take `graft_err *` and
 * return the status they set; a NULL `graft_err *` is allowed and drops the message. */
typedef struct graft_err {
    graft_status status;
    char msg[GRAFT_ERR_MSG_MAX];
} graft_err;

#if defined(__GNUC__)
#define GRAFT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define GRAFT_PRINTF(a, b)
#endif

/* Set the error and return `status`. */
graft_status err_set(graft_err *e, graft_status status, const char *fmt, ...) GRAFT_PRINTF(3, 4);
/* Put context in front of an existing message ("while loading x.onnx: ..."), return its status. */
graft_status err_prefix(graft_err *e, const char *fmt, ...) GRAFT_PRINTF(2, 3);
void err_clear(graft_err *e);

/* Format a shape as "(2, 3, 4)" into buf; returns buf. */
char *shape_str(char *buf, size_t size, int ndim, const int64_t *dims);

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        graft_status try_status_ = (expr);                                                         \
        if (try_status_ != GRAFT_OK) return try_status_;                                           \
    } while (0)

#endif
