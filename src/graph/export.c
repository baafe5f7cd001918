/* export.c: graft_model_export: the model's current graph written as one ONNX file. */
#include "../onnx/onnx_write.h"
#include "model.h"

graft_status graft_model_export(const graft_model *m, const char *path,
                                const graft_export_options *options) {
    if (!m) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &m->ctx->err;
    err_clear(e);
    if (!path || !path[0])
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "graft_model_export: no path given");
    if (options && options->n_class_names > 0 && !options->class_names)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "graft_model_export: n_class_names is %d but class_names is NULL",
                       options->n_class_names);
    graft_status st = onnx_write_model(&m->g, path, options, e);
    if (st != GRAFT_OK) err_prefix(e, "exporting to '%s'", path);
    return st;
}
