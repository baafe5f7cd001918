/* onnx_io.h: reading ONNX protobuf files into the IR and tensors (loader.c, tensor_proto.c). */
#ifndef GRAFT_ONNX_IO_H
#define GRAFT_ONNX_IO_H

#include <stddef.h>

#include "../graph/ir.h"

struct Onnx__TensorProto;

/* Parse a serialized ModelProto into g. `base_dir` is where external-data files live (NULL: none
 * allowed); `what` names the source in messages (a path, or "<memory>"). */
graft_status onnx_parse_model(const void *data, size_t size, const char *base_dir, const char *what,
                              ir_graph *g, graft_err *e);

/* Convert a TensorProto to a tensor (allocates out->data); checks that the stored data matches
 * the declared dims and type. */
graft_status onnx_tensor_from_proto(const struct Onnx__TensorProto *tp, const char *base_dir,
                                    tensor *out, graft_err *e);

/* Read a file holding one serialized TensorProto (as ONNX's test data sets do). *name receives a
 * malloc'ed copy of the tensor's name (may be ""); pass NULL to skip. */
graft_status onnx_read_tensor_file(const char *path, tensor *out, char **name, graft_err *e);

/* Read a whole file into memory (malloc'ed). */
graft_status read_file(const char *path, void **data, size_t *size, graft_err *e);

#endif
