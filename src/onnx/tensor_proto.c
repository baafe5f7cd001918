/* tensor_proto.c: TensorProto to tensor: raw, typed and external data, with size checks. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "onnx_io.h"

graft_status read_file(const char *path, void **data, size_t *size, graft_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(e, GRAFT_E_IO, "cannot open '%s': %s", path, strerror(errno));
    if (fseeko(f, 0, SEEK_END) != 0) {
        fclose(f);
        return err_set(e, GRAFT_E_IO, "cannot seek in '%s': %s", path, strerror(errno));
    }
    off_t len = ftello(f);
    rewind(f);
    if (len < 0) {
        fclose(f);
        return err_set(e, GRAFT_E_IO, "cannot size '%s'", path);
    }
    void *buf = malloc(len ? (size_t)len : 1);
    if (!buf) {
        fclose(f);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "cannot allocate %lld bytes to read '%s'",
                       (long long)len, path);
    }
    size_t got = fread(buf, 1, (size_t)len, f);
    fclose(f);
    if (got != (size_t)len) {
        free(buf);
        return err_set(e, GRAFT_E_IO, "short read of '%s' (%zu of %lld bytes)", path, got,
                       (long long)len);
    }
    *data = buf;
    *size = (size_t)len;
    return GRAFT_OK;
}

static const char *tname(const Onnx__TensorProto *tp) {
    return tp->name && tp->name[0] ? tp->name : "<unnamed>";
}

/* Read `length` bytes at `offset` of an external-data file into dst. */
static graft_status read_external(const Onnx__TensorProto *tp, const char *base_dir, void *dst,
                                  int64_t nbytes, graft_err *e) {
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
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", base_dir, location);
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, GRAFT_E_IO, "tensor '%s': cannot open external data file '%s': %s",
                       tname(tp), path, strerror(errno));
    graft_status st = GRAFT_OK;
    if (fseeko(f, (off_t)offset, SEEK_SET) != 0 ||
        fread(dst, 1, (size_t)nbytes, f) != (size_t)nbytes)
        st = err_set(e, GRAFT_E_IO,
                     "tensor '%s': external data file '%s' is too short for %lld bytes at offset "
                     "%lld",
                     tname(tp), path, (long long)nbytes, (long long)offset);
    fclose(f);
    return st;
}

static graft_status count_mismatch(const Onnx__TensorProto *tp, const char *field, size_t have,
                                   int64_t want, graft_err *e) {
    return err_set(e, GRAFT_E_MALFORMED_MODEL,
                   "tensor '%s': %s holds %zu values but its shape needs %lld", tname(tp), field,
                   have, (long long)want);
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
    TRY(tensor_alloc(out, e));
    if (external)
        st = read_external(tp, base_dir, out->data, nbytes, e);
    else if (tp->has_raw_data) {
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
