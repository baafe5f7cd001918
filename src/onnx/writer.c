/* writer.c: graph IR to an ONNX ModelProto (protobuf-c): initializers, nodes, typed graph inputs
 * and outputs, opsets, metadata, optional float16 weights; written atomically. */
#include "writer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/file.h>

#include "../core/half.h"
#include "../core/temp_files.h"
#include "onnx_write.h"

#define EXPORT_IR_VERSION 8
#define FP16_MIN_ELEMENTS 16

void *w_alloc(writer *w, size_t size) {
    if (w->n_allocs == w->cap_allocs) {
        size_t cap = w->cap_allocs ? w->cap_allocs * 2 : 256;
        void **grown = realloc(w->allocs, cap * sizeof *grown);
        if (!grown) goto oom;
        w->allocs = grown;
        w->cap_allocs = cap;
    }
    void *p = calloc(1, size ? size : 1);
    if (!p) goto oom;
    w->allocs[w->n_allocs++] = p;
    return p;
oom:
    err_set(w->e, GRAFT_E_OUT_OF_MEMORY, "out of memory writing the model");
    return NULL;
}

char *w_strdup(writer *w, const char *s) {
    size_t n = strlen(s);
    char *c = w_alloc(w, n + 1);
    if (c) memcpy(c, s, n + 1);
    return c;
}

static bool name_taken(const writer *w, const char *name) {
    if (ir_find_value(w->g, name) >= 0) return true;
    for (size_t i = 0; i < w->n_new; i++)
        if (strcmp(w->new_names[i], name) == 0) return true;
    return false;
}

char *w_unique_name(writer *w, const char *base) {
    /* Sized for the whole base and any suffix: a truncated name could never become unique. */
    size_t size = strlen(base) + 16;
    char *name = malloc(size);
    if (!name) {
        err_set(w->e, GRAFT_E_OUT_OF_MEMORY, "out of memory writing the model");
        return NULL;
    }
    snprintf(name, size, "%s", base);
    for (int i = 1; name_taken(w, name); i++) snprintf(name, size, "%s_%d", base, i);
    if (w->n_new == w->cap_new) {
        size_t cap = w->cap_new ? w->cap_new * 2 : 64;
        char **grown = realloc(w->new_names, cap * sizeof *grown);
        if (!grown) {
            free(name);
            err_set(w->e, GRAFT_E_OUT_OF_MEMORY, "out of memory writing the model");
            return NULL;
        }
        w->new_names = grown;
        w->cap_new = cap;
    }
    char *c = w_strdup(w, name);
    free(name);
    if (c) w->new_names[w->n_new++] = c;
    return c;
}

static bool host_is_little_endian(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* A TensorProto of t with raw_data (little-endian). With `to_f16` the float32 data is stored as
 * float16. On little-endian hosts the data is referenced, not copied: t must outlive the write. */
static Onnx__TensorProto *tensor_proto(writer *w, const char *name, const tensor *t, bool to_f16) {
    Onnx__TensorProto *tp = w_alloc(w, sizeof *tp);
    int64_t *dims = w_alloc(w, sizeof(int64_t) * (size_t)(t->ndim + 1));
    if (!tp || !dims) return NULL;
    onnx__tensor_proto__init(tp);
    tp->name = (char *)name;
    tp->has_data_type = 1;
    tp->data_type = to_f16 ? GRAFT_DTYPE_F16 : (int32_t)t->dtype;
    tp->n_dims = (size_t)t->ndim;
    tp->dims = dims;
    for (int i = 0; i < t->ndim; i++) dims[i] = t->dims[i];
    int64_t numel = tensor_numel(t);
    size_t elem = numel > 0 ? (size_t)(tensor_nbytes(t) / numel) : 1;
    uint8_t *raw = (uint8_t *)t->data;
    size_t nbytes = (size_t)tensor_nbytes(t);
    if (to_f16) {
        nbytes = (size_t)numel * 2;
        raw = w_alloc(w, nbytes);
        if (!raw) return NULL;
        const float *src = t->data;
        for (int64_t i = 0; i < numel; i++) {
            uint16_t h = f32_to_f16(src[i]);
            raw[2 * i] = (uint8_t)(h & 0xff);
            raw[2 * i + 1] = (uint8_t)(h >> 8);
        }
    } else if (!host_is_little_endian() && elem > 1) {
        raw = w_alloc(w, nbytes);
        if (!raw) return NULL;
        const uint8_t *src = t->data;
        for (size_t i = 0; i < nbytes; i += elem)
            for (size_t b = 0; b < elem; b++) raw[i + b] = src[i + elem - 1 - b];
    }
    tp->has_raw_data = 1;
    tp->raw_data.len = nbytes;
    tp->raw_data.data = nbytes ? raw : NULL;
    return tp;
}

static graft_status push_init(writer *w, Onnx__TensorProto *tp) {
    if (!tp) return w->e->status;
    if (w->n_inits == w->cap_inits)
        return err_set(w->e, GRAFT_E_INTERNAL, "writer: too many initializers");
    w->inits[w->n_inits++] = tp;
    return GRAFT_OK;
}

char *w_add_const(writer *w, const char *base, const tensor *t) {
    char *name = w_unique_name(w, base);
    tensor *copy = w_alloc(w, sizeof *copy);
    if (!name || !copy) return NULL;
    *copy = *t;
    size_t nbytes = (size_t)tensor_nbytes(t);
    copy->data = w_alloc(w, nbytes);
    if (!copy->data) return NULL;
    if (nbytes) memcpy(copy->data, t->data, nbytes);
    return push_init(w, tensor_proto(w, name, copy, false)) == GRAFT_OK ? name : NULL;
}

char *w_add_const_i64(writer *w, const char *base, const int64_t *vals, int64_t n) {
    tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = GRAFT_DTYPE_I64;
    t.ndim = 1;
    t.dims[0] = n;
    t.data = (void *)vals;
    return w_add_const(w, base, &t);
}

static graft_status attr_proto(writer *w, const ir_attr *a, Onnx__AttributeProto **out) {
    Onnx__AttributeProto *ap = w_alloc(w, sizeof *ap);
    if (!ap) return w->e->status;
    onnx__attribute_proto__init(ap);
    ap->name = a->name;
    ap->has_type = 1;
    ap->type = (Onnx__AttributeProto__AttributeType)a->type;
    switch (a->type) {
    case IR_ATTR_FLOAT:
        ap->has_f = 1, ap->f = a->f;
        break;
    case IR_ATTR_INT:
        ap->has_i = 1, ap->i = a->i;
        break;
    case IR_ATTR_STRING:
        ap->has_s = 1;
        ap->s.len = strlen(a->s);
        ap->s.data = (uint8_t *)a->s;
        break;
    case IR_ATTR_TENSOR:
        ap->t = tensor_proto(w, NULL, &a->t, false);
        if (!ap->t) return w->e->status;
        break;
    case IR_ATTR_FLOATS:
        ap->n_floats = (size_t)a->n, ap->floats = a->floats;
        break;
    case IR_ATTR_INTS:
        ap->n_ints = (size_t)a->n, ap->ints = a->ints;
        break;
    case IR_ATTR_STRINGS:
        ap->n_strings = (size_t)a->n;
        ap->strings = w_alloc(w, sizeof(ProtobufCBinaryData) * (size_t)(a->n + 1));
        if (!ap->strings) return w->e->status;
        for (int64_t i = 0; i < a->n; i++) {
            ap->strings[i].len = strlen(a->strings[i]);
            ap->strings[i].data = (uint8_t *)a->strings[i];
        }
        break;
    default:
        return err_set(w->e, GRAFT_E_UNSUPPORTED,
                       "attribute '%s' has type %d (graphs and sparse tensors cannot be written)",
                       a->name, (int)a->type);
    }
    *out = ap;
    return GRAFT_OK;
}

static const char *value_name(const writer *w, int v, bool as_input) {
    if (v < 0) return "";
    return as_input ? w->read_name[v] : w->g->values[v].name;
}

static graft_status node_proto(writer *w, const ir_node *n) {
    Onnx__NodeProto *np = w_alloc(w, sizeof *np);
    char **ins = w_alloc(w, sizeof(char *) * (size_t)(n->n_in + 1));
    char **outs = w_alloc(w, sizeof(char *) * (size_t)(n->n_out + 1));
    Onnx__AttributeProto **attrs = w_alloc(w, sizeof *attrs * (size_t)(n->n_attrs + 1));
    if (!np || !ins || !outs || !attrs) return w->e->status;
    onnx__node_proto__init(np);
    np->name = n->name;
    np->op_type = n->op_type;
    np->domain = n->domain;
    np->n_input = (size_t)n->n_in;
    np->input = ins;
    for (int k = 0; k < n->n_in; k++) ins[k] = (char *)value_name(w, n->inputs[k], true);
    np->n_output = (size_t)n->n_out;
    np->output = outs;
    for (int k = 0; k < n->n_out; k++) outs[k] = (char *)value_name(w, n->outputs[k], false);
    np->attribute = attrs;
    for (int k = 0; k < n->n_attrs; k++)
        TRY(attr_proto(w, &n->attrs[k], &attrs[np->n_attribute++]));
    if (n->domain[0] == '\0' && n->opset < w->opset) {
        graft_status st = w_upgrade_node(w, n, np);
        if (st != GRAFT_OK)
            return err_prefix(w->e, "node '%s' (%s) from opset %d to %lld", n->name, n->op_type,
                              n->opset, (long long)w->opset);
    }
    if (w->n_nodes == w->cap_nodes)
        return err_set(w->e, GRAFT_E_INTERNAL, "writer: too many nodes");
    w->nodes[w->n_nodes++] = np;
    return GRAFT_OK;
}

/* Initializers for the constants nodes read (and constant graph outputs); with fp16_weights the
 * large float ones are stored as float16 behind a Cast back to float32. */
static graft_status write_constants(writer *w) {
    const ir_graph *g = w->g;
    char *read = calloc((size_t)g->n_values + 1, 1);
    if (!read) return err_set(w->e, GRAFT_E_OUT_OF_MEMORY, "out of memory writing the model");
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (!g->nodes[i].dead && g->nodes[i].inputs[k] >= 0) read[g->nodes[i].inputs[k]] = 1;
    for (int i = 0; i < g->n_outputs; i++) read[g->outputs[i]] |= 2;
    graft_status st = GRAFT_OK;
    for (int v = 0; v < g->n_values && st == GRAFT_OK; v++) {
        const ir_value *val = &g->values[v];
        if (!val->is_const || !read[v]) continue;
        if (!val->data.data && tensor_numel(&val->data) != 0) {
            st = err_set(w->e, GRAFT_E_INTERNAL, "constant '%s' has no data", val->name);
            break;
        }
        bool half = w->opts && w->opts->fp16_weights && val->data.dtype == GRAFT_DTYPE_F32 &&
                    tensor_numel(&val->data) >= FP16_MIN_ELEMENTS && read[v] == 1;
        st = push_init(w, tensor_proto(w, val->name, &val->data, half));
        if (st != GRAFT_OK || !half) continue;
        char base[512];
        snprintf(base, sizeof base, "%s/float32", val->name);
        char *cast_out = w_unique_name(w, base);
        Onnx__NodeProto *np = w_alloc(w, sizeof *np);
        char **io = w_alloc(w, 2 * sizeof(char *));
        Onnx__AttributeProto **attrs = w_alloc(w, sizeof *attrs);
        ir_attr to = {.name = "to", .type = IR_ATTR_INT, .i = GRAFT_DTYPE_F32};
        if (!cast_out || !np || !io || !attrs || (st = attr_proto(w, &to, &attrs[0]))) {
            st = w->e->status;
            break;
        }
        onnx__node_proto__init(np);
        io[0] = val->name;
        io[1] = cast_out;
        np->name = cast_out;
        np->op_type = "Cast";
        np->domain = "";
        np->n_input = np->n_output = 1;
        np->input = &io[0];
        np->output = &io[1];
        np->n_attribute = 1;
        np->attribute = attrs;
        w->nodes[w->n_nodes++] = np;
        w->read_name[v] = cast_out;
    }
    free(read);
    return st;
}

static Onnx__ValueInfoProto *value_info(writer *w, int v) {
    const ir_value *val = &w->g->values[v];
    Onnx__ValueInfoProto *vi = w_alloc(w, sizeof *vi);
    Onnx__TypeProto *tp = w_alloc(w, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = w_alloc(w, sizeof *tt);
    if (!vi || !tp || !tt) return NULL;
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    vi->name = val->name;
    vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = val->dtype != GRAFT_DTYPE_UNDEFINED;
    tt->elem_type = (int32_t)val->dtype;
    if (val->ndim < 0) return vi;
    Onnx__TensorShapeProto *sp = w_alloc(w, sizeof *sp);
    Onnx__TensorShapeProto__Dimension **dims = w_alloc(w, sizeof *dims * (size_t)(val->ndim + 1));
    if (!sp || !dims) return NULL;
    onnx__tensor_shape_proto__init(sp);
    sp->n_dim = (size_t)val->ndim;
    sp->dim = dims;
    tt->shape = sp;
    for (int i = 0; i < val->ndim; i++) {
        Onnx__TensorShapeProto__Dimension *d = w_alloc(w, sizeof *d);
        if (!d) return NULL;
        onnx__tensor_shape_proto__dimension__init(d);
        dims[i] = d;
        if (val->dims[i] >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = val->dims[i];
            continue;
        }
        char unk[32];
        snprintf(unk, sizeof unk, "unk_%d", w->n_unknown_dims++);
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        d->dim_param = w_strdup(w, val->dim_names[i] ? val->dim_names[i] : unk);
        if (!d->dim_param) return NULL;
    }
    return vi;
}

static graft_status write_io(writer *w, Onnx__GraphProto *gp) {
    const ir_graph *g = w->g;
    gp->input = w_alloc(w, sizeof *gp->input * (size_t)(g->n_inputs + 1));
    gp->output = w_alloc(w, sizeof *gp->output * (size_t)(g->n_outputs + 1));
    if (!gp->input || !gp->output) return w->e->status;
    for (int i = 0; i < g->n_inputs; i++)
        if (!(gp->input[gp->n_input++] = value_info(w, g->inputs[i]))) return w->e->status;
    for (int i = 0; i < g->n_outputs; i++)
        if (!(gp->output[gp->n_output++] = value_info(w, g->outputs[i]))) return w->e->status;
    return GRAFT_OK;
}

/* JSON string literal of s (quotes, backslashes and control characters escaped). */
static void json_string(char **p, const char *s) {
    *(*p)++ = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            *(*p)++ = '\\';
            *(*p)++ = (char)c;
        } else if (c < 0x20) {
            *p += sprintf(*p, "\\u%04x", c);
        } else {
            *(*p)++ = (char)c;
        }
    }
    *(*p)++ = '"';
}

static char *classes_json(writer *w) {
    const graft_export_options *o = w->opts;
    size_t size = 3;
    for (int i = 0; i < o->n_class_names; i++)
        size += 6 * strlen(o->class_names[i] ? o->class_names[i] : "") + 4;
    char *json = w_alloc(w, size);
    if (!json) return NULL;
    char *p = json;
    *p++ = '[';
    for (int i = 0; i < o->n_class_names; i++) {
        if (i) *p++ = ',';
        json_string(&p, o->class_names[i] ? o->class_names[i] : "");
    }
    *p++ = ']';
    *p = '\0';
    return json;
}

/* The model's metadata, with graft.classes / graft.preprocessing from the options replacing any
 * earlier entries of those keys. */
static graft_status write_metadata(writer *w, Onnx__ModelProto *mp) {
    const ir_graph *g = w->g;
    const graft_export_options *o = w->opts;
    const char *classes = o && o->n_class_names > 0 ? classes_json(w) : NULL;
    const char *prep = o ? o->preprocessing : NULL;
    if (o && o->n_class_names > 0 && !classes) return w->e->status;
    mp->metadata_props = w_alloc(w, sizeof *mp->metadata_props * (size_t)(g->n_metadata + 3));
    if (!mp->metadata_props) return w->e->status;
    for (int i = 0; i < g->n_metadata + 2; i++) {
        const char *k, *v;
        if (i < g->n_metadata) {
            k = g->metadata[i].key, v = g->metadata[i].value;
            if ((classes && strcmp(k, "graft.classes") == 0) ||
                (prep && strcmp(k, "graft.preprocessing") == 0))
                continue;
        } else {
            k = i == g->n_metadata ? "graft.classes" : "graft.preprocessing";
            v = i == g->n_metadata ? classes : prep;
            if (!v) continue;
        }
        Onnx__StringStringEntryProto *kv = w_alloc(w, sizeof *kv);
        if (!kv) return w->e->status;
        onnx__string_string_entry_proto__init(kv);
        kv->key = (char *)k;
        kv->value = (char *)v;
        mp->metadata_props[mp->n_metadata_props++] = kv;
    }
    return GRAFT_OK;
}

static graft_status write_opsets(writer *w, Onnx__ModelProto *mp) {
    const ir_graph *g = w->g;
    mp->opset_import = w_alloc(w, sizeof *mp->opset_import * (size_t)(g->n_opsets + 1));
    if (!mp->opset_import) return w->e->status;
    bool have_default = false;
    for (int i = 0; i <= g->n_opsets; i++) {
        if (i == g->n_opsets && have_default) break;
        Onnx__OperatorSetIdProto *op = w_alloc(w, sizeof *op);
        if (!op) return w->e->status;
        onnx__operator_set_id_proto__init(op);
        op->domain = i < g->n_opsets ? g->opsets[i].domain : "";
        op->has_version = 1;
        op->version = i < g->n_opsets ? g->opsets[i].version : w->opset;
        if (op->domain[0] == '\0' || strcmp(op->domain, "ai.onnx") == 0) {
            if (have_default) continue;
            have_default = true;
            op->domain = "";
            op->version = w->opset;
        }
        mp->opset_import[mp->n_opset_import++] = op;
    }
    return GRAFT_OK;
}

static graft_status build_model(writer *w, Onnx__ModelProto *mp, Onnx__GraphProto *gp) {
    const ir_graph *g = w->g;
    onnx__model_proto__init(mp);
    onnx__graph_proto__init(gp);
    w->cap_inits = (size_t)g->n_values + 4 * (size_t)g->n_nodes + 1;
    w->cap_nodes = (size_t)g->n_values + (size_t)g->n_nodes + 1;
    w->inits = w_alloc(w, sizeof *w->inits * w->cap_inits);
    w->nodes = w_alloc(w, sizeof *w->nodes * w->cap_nodes);
    w->read_name = w_alloc(w, sizeof *w->read_name * (size_t)(g->n_values + 1));
    if (!w->inits || !w->nodes || !w->read_name) return w->e->status;
    for (int v = 0; v < g->n_values; v++) w->read_name[v] = g->values[v].name;
    TRY(write_constants(w));
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead) TRY(node_proto(w, &g->nodes[i]));
    TRY(write_io(w, gp));
    gp->name = g->graph_name && g->graph_name[0] ? g->graph_name : "graft";
    gp->n_node = w->n_nodes;
    gp->node = w->nodes;
    gp->n_initializer = w->n_inits;
    gp->initializer = w->inits;
    mp->has_ir_version = 1;
    mp->ir_version = w->opset >= 21 ? 10 : w->opset >= 19 ? 9 : EXPORT_IR_VERSION;
    mp->producer_name = "graft";
    mp->producer_version = (char *)graft_version();
    mp->graph = gp;
    TRY(write_opsets(w, mp));
    return write_metadata(w, mp);
}

typedef struct file_buffer {
    ProtobufCBuffer base;
    FILE *f;
    int failed;
} file_buffer;

static void file_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
    file_buffer *fb = (file_buffer *)b;
    if (!fb->failed && len && fwrite(data, 1, len, fb->f) != len) fb->failed = errno ? errno : EIO;
}

/* Serialize mp to a temporary file next to path, sync it, and rename it over path. */
static graft_status write_atomically(const Onnx__ModelProto *mp, const char *path, graft_err *e) {
    (void)temp_files_remove_stale(path); /* what a killed export left */
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory writing '%s'", path);
    snprintf(tmp, n + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        graft_status st = err_set(e, GRAFT_E_IO, "cannot write '%s': %s", path, strerror(errno));
        free(tmp);
        return st;
    }
    fchmod(fd, 0644);         /* mkstemp's 0600 is too narrow for a model file */
    (void)flock(fd, LOCK_EX); /* held until closed or killed: an unlocked temporary is stale */
    FILE *f = fdopen(fd, "wb");
    int failed = f ? 0 : errno;
    if (f) {
        file_buffer fb = {{file_append}, f, 0};
        errno = 0;
        onnx__model_proto__pack_to_buffer(mp, &fb.base);
        failed = fb.failed;
        if (!failed && (fflush(f) != 0 || fsync(fileno(f)) != 0)) failed = errno;
        if (fclose(f) != 0 && !failed) failed = errno;
    } else {
        close(fd);
    }
    if (!failed && rename(tmp, path) != 0) failed = errno;
    if (failed) {
        unlink(tmp);
        free(tmp);
        return err_set(e, GRAFT_E_IO, "cannot write '%s': %s", path, strerror(failed));
    }
    free(tmp);
    return GRAFT_OK;
}

static int64_t target_opset(const ir_graph *g) {
    int64_t v = ir_opset_version(g, "");
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && g->nodes[i].domain[0] == '\0' && g->nodes[i].opset > v)
            v = g->nodes[i].opset;
    return v;
}

graft_status onnx_write_model(const ir_graph *g, const char *path, const graft_export_options *opts,
                              graft_err *e) {
    writer w;
    memset(&w, 0, sizeof w);
    w.g = g;
    w.opts = opts;
    w.e = e;
    w.opset = target_opset(g);
    Onnx__ModelProto mp;
    Onnx__GraphProto gp;
    graft_status st = build_model(&w, &mp, &gp);
    /* Protobuf caps a message at 2 GiB; larger models would need external data files. */
    if (st == GRAFT_OK && onnx__model_proto__get_packed_size(&mp) > (size_t)INT32_MAX)
        st = err_set(e, GRAFT_E_UNSUPPORTED,
                     "the model is over 2 GiB, which needs ONNX external data (not written yet)");
    if (st == GRAFT_OK) st = write_atomically(&mp, path, e);
    for (size_t i = 0; i < w.n_allocs; i++) free(w.allocs[i]);
    free(w.allocs);
    free(w.new_names);
    return st;
}
