/* error.c: building and prefixing error messages, and the static status texts. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

graft_status err_set(graft_err *e, graft_status status, const char *fmt, ...) {
    if (!e) return status;
    e->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return status;
}

graft_status err_prefix(graft_err *e, const char *fmt, ...) {
    if (!e) return GRAFT_E_INTERNAL;
    char head[GRAFT_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    char old[GRAFT_ERR_MSG_MAX];
    memcpy(old, e->msg, sizeof old);
    /* Keep the start of the context and as much of the old message as fits. */
    size_t n = strlen(head);
    if (n > sizeof e->msg / 2) n = sizeof e->msg / 2;
    memcpy(e->msg, head, n);
    e->msg[n] = '\0';
    strncat(e->msg, ": ", sizeof e->msg - strlen(e->msg) - 1);
    strncat(e->msg, old, sizeof e->msg - strlen(e->msg) - 1);
    return e->status;
}

void err_clear(graft_err *e) {
    if (!e) return;
    e->status = GRAFT_OK;
    e->msg[0] = '\0';
}

char *shape_str(char *buf, size_t size, int ndim, const int64_t *dims) {
    size_t used = 0;
    if (size == 0) return buf;
    buf[0] = '\0';
    if (ndim < 0) {
        snprintf(buf, size, "(unknown rank)");
        return buf;
    }
    used += (size_t)snprintf(buf + used, size - used, "(");
    for (int i = 0; i < ndim && used < size; i++) {
        if (dims[i] < 0)
            used += (size_t)snprintf(buf + used, size - used, "%s?", i ? ", " : "");
        else
            used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "",
                                     (long long)dims[i]);
    }
    if (used < size) snprintf(buf + used, size - used, ")");
    return buf;
}

const char *graft_status_str(graft_status status) {
    switch (status) {
    case GRAFT_OK:
        return "ok";
    case GRAFT_E_INVALID_ARGUMENT:
        return "invalid argument";
    case GRAFT_E_IO:
        return "input/output error";
    case GRAFT_E_MALFORMED_MODEL:
        return "malformed model";
    case GRAFT_E_UNSUPPORTED:
        return "unsupported";
    case GRAFT_E_SHAPE:
        return "shape error";
    case GRAFT_E_DTYPE:
        return "dtype error";
    case GRAFT_E_OUT_OF_MEMORY:
        return "out of memory";
    case GRAFT_E_NOT_FOUND:
        return "not found";
    case GRAFT_E_BACKEND:
        return "backend failure";
    case GRAFT_E_INTERNAL:
        return "internal error";
    default:
        return "unknown status";
    }
}
