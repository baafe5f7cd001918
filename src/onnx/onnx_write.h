/* onnx_write.h: writing the graph IR back to an ONNX file (writer.c, writer_opset.c). */
#ifndef GRAFT_ONNX_WRITE_H
#define GRAFT_ONNX_WRITE_H

#include "../graph/ir.h"

/* Write g as one ONNX ModelProto to `path`, atomically (a temporary file in the same folder,
 * synced, then renamed). Nodes are written at one ai.onnx opset: the highest of the model's and
 * of every node's; nodes written in an older form are converted to the newer one. */
graft_status onnx_write_model(const ir_graph *g, const char *path, const graft_export_options *opts,
                              graft_err *e);

#endif
