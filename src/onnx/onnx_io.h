/* onnx_io.h: reading ONNX protobuf files into the IR and tensors (loader.c, tensor_proto.c,
 * proto_scan.c). */
#ifndef GRAFT_ONNX_IO_H
#define GRAFT_ONNX_IO_H

#include <stddef.h>

#include "../graph/ir.h"

struct Onnx__TensorProto;

/* Limits on a model file: its size (protobuf's own cap on one message; larger weights go in
 * external data), the nesting of subgraphs (If/Loop/Scan bodies) and of protobuf messages in
 * all (TypeProto nests too). Checked before protobuf-c, which recurses per nested message. */
#define ONNX_MAX_FILE_BYTES ((int64_t)2 << 30)
#define ONNX_MAX_GRAPH_DEPTH 64
#define ONNX_MAX_MESSAGE_DEPTH 256

/* GRAFT_E_MALFORMED_MODEL naming the limit if the serialized ModelProto nests past a limit. */
graft_status onnx_check_nesting(const void *data, size_t size, const char *what, graft_err *e);

/* Parse a serialized ModelProto into g. `base_dir` is where external-data files live (NULL: none
 * allowed); `what` names the source in messages (a path, or "<memory>"). */
graft_status onnx_parse_model(const void *data, size_t size, const char *base_dir, const char *what,
                              ir_graph *g, graft_err *e);
/* The same, freeing `owned` (the buffer data points into, malloc'ed; NULL: none) as soon as the
 * bytes are parsed, so a load does not hold the file beside the parsed weights. */
graft_status onnx_parse_model_owned(const void *data, size_t size, void *owned,
                                    const char *base_dir, const char *what, ir_graph *g,
                                    graft_err *e);

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
