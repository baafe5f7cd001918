/* tensor_proto.c: TensorProto to tensor: raw, typed and external data, with size checks. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx.pb-c.h"
#include "onnx_io.h"

/* Open `path` for reading as a regular file: O_NONBLOCK so that a FIFO cannot block the open,
 * fstat after the open so that what is checked is what is read. *len receives its size. */
static graft_status open_regular(const char *path, int flags, const char *what, int *fd_out,
                                 int64_t *len, graft_err *e) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | flags);
    if (fd < 0)
        return err_set(e, GRAFT_E_IO, "cannot open %s'%s': %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return err_set(e, GRAFT_E_IO, "%s'%s' is not a regular file", what, path);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl != -1) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = fd;
    *len = (int64_t)sb.st_size;
    return GRAFT_OK;
}

/* Read n bytes at offset of fd into dst; false on a short read. */
static bool read_at(int fd, void *dst, size_t n, int64_t offset) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)dst + got, n - got, (off_t)offset + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        got += (size_t)r;
    }
    return true;
}

graft_status read_file(const char *path, void **data, size_t *size, graft_err *e) {
    int fd;
    int64_t len;
    TRY(open_regular(path, 0, "", &fd, &len, e));
    if (len > ONNX_MAX_FILE_BYTES) {
        close(fd);
        return err_set(e, GRAFT_E_IO,
                       "'%s' is %lld bytes, over graft's limit of %lld bytes for one protobuf "
                       "file (put large weights in external data)",
                       path, (long long)len, (long long)ONNX_MAX_FILE_BYTES);
    }
    void *buf = malloc(len ? (size_t)len : 1);
    if (!buf) {
        close(fd);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "cannot allocate %lld bytes to read '%s'",
                       (long long)len, path);
    }
    bool ok = read_at(fd, buf, (size_t)len, 0);
    close(fd);
    if (!ok) {
        free(buf);
        return err_set(e, GRAFT_E_IO, "short read of '%s' (%lld bytes expected)", path,
                       (long long)len);
    }
    *data = buf;
    *size = (size_t)len;
    return GRAFT_OK;
}

static const char *tname(const Onnx__TensorProto *tp) {
    return tp->name && tp->name[0] ? tp->name : "<unnamed>";
}

/* Open the external-data file of tp, checked before anything is allocated: its location stays
 * inside base_dir once links are resolved (realpath of both), it is a regular file (a FIFO or
 * device is refused, never waited on) and it holds nbytes at the offset given. */
static graft_status open_external(const Onnx__TensorProto *tp, const char *base_dir, int64_t nbytes,
                                  int *fd, int64_t *offset_out, graft_err *e) {
    const char *location = NULL;
    int64_t offset = 0, length = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *kv = tp->external_data[i];
        if (!kv->key || !kv->value) continue;
        if (strcmp(kv->key, "location") == 0)
            location = kv->value;
        else if (strcmp(kv->key, "offset") == 0)
            offset = strtoll(kv->value, NULL, 10);
        else if (strcmp(kv->key, "length") == 0)
            length = strtoll(kv->value, NULL, 10);
    }
    if (!location)
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "tensor '%s' is external but names no location",
                       tname(tp));
    if (!base_dir)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "tensor '%s' has external data '%s' but the model was loaded from memory "
                       "without a base directory",
                       tname(tp), location);
    if (location[0] == '/' || strstr(location, ".."))
        return err_set(e, GRAFT_E_MALFORMED_MODEL,
                       "tensor '%s': external data location '%s' must be a relative path inside "
                       "the model's folder",
                       tname(tp), location);
    if (offset < 0 || (length >= 0 && length != nbytes))
        return err_set(e, GRAFT_E_MALFORMED_MODEL,
                       "tensor '%s': external data length %lld does not match the %lld bytes its "
                       "shape needs",
                       tname(tp), (long long)length, (long long)nbytes);
    char path[4096], dir_real[PATH_MAX], file_real[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", base_dir, location);
    if (!realpath(base_dir, dir_real) || !realpath(path, file_real))
        return err_set(e, GRAFT_E_IO, "tensor '%s': cannot open external data file '%s': %s",
                       tname(tp), path, strerror(errno));
    size_t dl = strlen(dir_real);
    if (strncmp(file_real, dir_real, dl) != 0 || (file_real[dl] != '/' && dl > 1))
        return err_set(e, GRAFT_E_MALFORMED_MODEL,
                       "tensor '%s': external data '%s' resolves to '%s', outside the model's "
                       "folder '%s' (a symbolic link out of the folder is not followed: copy the "
                       "files into one folder, e.g. `huggingface-cli download --local-dir DIR` "
                       "instead of the hub cache's links)",
                       tname(tp), location, file_real, dir_real);
    int64_t len;
    graft_status st = open_regular(file_real, O_NOFOLLOW, "external data file ", fd, &len, e);
    if (st != GRAFT_OK) return err_prefix(e, "tensor '%s'", tname(tp));
    if (offset > len || nbytes > len - offset) {
        close(*fd);
        return err_set(e, GRAFT_E_IO,
                       "tensor '%s': external data file '%s' is too short for %lld bytes at offset "
                       "%lld (it holds %lld)",
                       tname(tp), path, (long long)nbytes, (long long)offset, (long long)len);
    }
    *offset_out = offset;
    return GRAFT_OK;
}

static graft_status count_mismatch(const Onnx__TensorProto *tp, const char *field, size_t have,
                                   int64_t want, graft_err *e) {
    return err_set(e, GRAFT_E_MALFORMED_MODEL,
                   "tensor '%s': %s holds %zu values but its shape needs %lld", tname(tp), field,
                   have, (long long)want);
}

/* The typed field that holds dtype dt's values and how many it holds. */
static size_t typed_count(const Onnx__TensorProto *tp, graft_dtype dt, const char **field) {
    switch (dt) {
    case GRAFT_DTYPE_F32:
        *field = "float_data";
        return tp->n_float_data;
    case GRAFT_DTYPE_F64:
        *field = "double_data";
        return tp->n_double_data;
    case GRAFT_DTYPE_I64:
        *field = "int64_data";
        return tp->n_int64_data;
    case GRAFT_DTYPE_U32:
    case GRAFT_DTYPE_U64:
        *field = "uint64_data";
        return tp->n_uint64_data;
    default:
        *field = "int32_data";
        return tp->n_int32_data;
    }
}

/* Typed repeated fields: each dtype is stored in one of them as ONNX's spec says. */
static graft_status copy_typed(const Onnx__TensorProto *tp, tensor *t, int64_t numel,
                               graft_err *e) {
    graft_dtype dt = t->dtype;
    if (numel == 0) return GRAFT_OK; /* typed fields may be NULL then */
    switch (dt) {
    case GRAFT_DTYPE_F32:
        if ((int64_t)tp->n_float_data != numel)
            return count_mismatch(tp, "float_data", tp->n_float_data, numel, e);
        memcpy(t->data, tp->float_data, (size_t)numel * 4);
        return GRAFT_OK;
    case GRAFT_DTYPE_F64:
        if ((int64_t)tp->n_double_data != numel)
            return count_mismatch(tp, "double_data", tp->n_double_data, numel, e);
        memcpy(t->data, tp->double_data, (size_t)numel * 8);
        return GRAFT_OK;
    case GRAFT_DTYPE_I64:
        if ((int64_t)tp->n_int64_data != numel)
            return count_mismatch(tp, "int64_data", tp->n_int64_data, numel, e);
        memcpy(t->data, tp->int64_data, (size_t)numel * 8);
        return GRAFT_OK;
    case GRAFT_DTYPE_U32:
    case GRAFT_DTYPE_U64:
        if ((int64_t)tp->n_uint64_data != numel)
            return count_mismatch(tp, "uint64_data", tp->n_uint64_data, numel, e);
        for (int64_t i = 0; i < numel; i++) {
            if (dt == GRAFT_DTYPE_U32)
                ((uint32_t *)t->data)[i] = (uint32_t)tp->uint64_data[i];
            else
                ((uint64_t *)t->data)[i] = tp->uint64_data[i];
        }
        return GRAFT_OK;
    default:
        break;
    }
    /* int32, int16, int8, uint16, uint8, bool, f16 and bf16 live in int32_data. */
    if ((int64_t)tp->n_int32_data != numel)
        return count_mismatch(tp, "int32_data", tp->n_int32_data, numel, e);
    for (int64_t i = 0; i < numel; i++) {
        int32_t v = tp->int32_data[i];
        switch (dt) {
        case GRAFT_DTYPE_I32:
            ((int32_t *)t->data)[i] = v;
            break;
        case GRAFT_DTYPE_I16:
            ((int16_t *)t->data)[i] = (int16_t)v;
            break;
        case GRAFT_DTYPE_I8:
            ((int8_t *)t->data)[i] = (int8_t)v;
            break;
        case GRAFT_DTYPE_U16:
        case GRAFT_DTYPE_F16:
        case GRAFT_DTYPE_BF16:
            ((uint16_t *)t->data)[i] = (uint16_t)v;
            break;
        case GRAFT_DTYPE_U8:
            ((uint8_t *)t->data)[i] = (uint8_t)v;
            break;
        case GRAFT_DTYPE_BOOL:
            ((uint8_t *)t->data)[i] = v != 0;
            break;
        default:
            return err_set(e, GRAFT_E_INTERNAL, "unhandled dtype %d", (int)dt);
        }
    }
    return GRAFT_OK;
}

graft_status onnx_tensor_from_proto(const Onnx__TensorProto *tp, const char *base_dir, tensor *out,
                                    graft_err *e) {
    memset(out, 0, sizeof *out);
    graft_dtype dt = (graft_dtype)tp->data_type;
    if (tp->data_type == 8)
        return err_set(e, GRAFT_E_UNSUPPORTED,
                       "tensor '%s' holds strings, which graft does not "
                       "support",
                       tname(tp));
    if (!dtype_is_valid(dt))
        return err_set(e, GRAFT_E_UNSUPPORTED,
                       "tensor '%s' has data type %d, which graft does "
                       "not support",
                       tname(tp), (int)tp->data_type);
    if (tp->n_dims > GRAFT_MAX_DIMS)
        return err_set(e, GRAFT_E_UNSUPPORTED, "tensor '%s' has rank %zu (at most %d supported)",
                       tname(tp), tp->n_dims, GRAFT_MAX_DIMS);
    if (tp->segment)
        return err_set(e, GRAFT_E_UNSUPPORTED,
                       "tensor '%s' is segmented, which graft does not "
                       "support",
                       tname(tp));
    out->dtype = dt;
    out->ndim = (int)tp->n_dims;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0)
            return err_set(e, GRAFT_E_MALFORMED_MODEL, "tensor '%s' has negative dimension %lld",
                           tname(tp), (long long)tp->dims[i]);
        out->dims[i] = tp->dims[i];
    }
    int64_t numel = tensor_numel(out);
    int64_t nbytes = tensor_nbytes(out);
    char s[256];
    if (numel < 0 || nbytes < 0 || nbytes > ((int64_t)1 << 40))
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "tensor '%s' has shape %s, whose size overflows",
                       tname(tp), shape_str(s, sizeof s, out->ndim, out->dims));
    graft_status st;
    bool external =
        tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (!external && tp->has_raw_data && (int64_t)tp->raw_data.len != nbytes)
        return err_set(e, GRAFT_E_MALFORMED_MODEL,
                       "tensor '%s' of shape %s and type %s needs %lld bytes but raw_data holds "
                       "%zu",
                       tname(tp), shape_str(s, sizeof s, out->ndim, out->dims),
                       graft_dtype_name(dt), (long long)nbytes, tp->raw_data.len);
    /* The data present must match the declared size before anything is allocated. */
    int fd = -1;
    int64_t offset = 0;
    const char *field;
    size_t have = typed_count(tp, dt, &field);
    if (external)
        TRY(open_external(tp, base_dir, nbytes, &fd, &offset, e));
    else if (!tp->has_raw_data && numel != 0 && (int64_t)have != numel)
        return count_mismatch(tp, field, have, numel, e);
    if ((st = tensor_alloc(out, e)) != GRAFT_OK) {
        if (fd >= 0) close(fd);
        return st;
    }
    if (external) {
        st = read_at(fd, out->data, (size_t)nbytes, offset)
                 ? GRAFT_OK
                 : err_set(e, GRAFT_E_IO, "tensor '%s': short read of %lld bytes of external data",
                           tname(tp), (long long)nbytes);
        close(fd);
    } else if (tp->has_raw_data) {
        if (nbytes) memcpy(out->data, tp->raw_data.data, (size_t)nbytes);
        st = GRAFT_OK;
    } else
        st = copy_typed(tp, out, numel, e);
    if (st != GRAFT_OK) tensor_release(out);
    return st;
}

graft_status onnx_read_tensor_file(const char *path, tensor *out, char **name, graft_err *e) {
    void *buf = NULL;
    size_t size = 0;
    memset(out, 0, sizeof *out);
    if (name) *name = NULL;
    TRY(read_file(path, &buf, &size, e));
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, size, buf);
    free(buf);
    if (!tp)
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "'%s' is not a serialized TensorProto", path);
    char *dir = strdup(path);
    char *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash) *slash = '\0';
    graft_status st = onnx_tensor_from_proto(tp, slash ? dir : ".", out, e);
    if (st == GRAFT_OK && name) {
        *name = strdup(tp->name ? tp->name : "");
        if (!*name) st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    }
    if (st != GRAFT_OK) {
        tensor_release(out);
        err_prefix(e, "%s", path);
    }
    free(dir);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return st;
}
