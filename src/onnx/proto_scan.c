/* proto_scan.c: a bound on message nesting in a serialized ModelProto, checked on the wire
 * format before protobuf-c (which recurses once per nested message) unpacks it. */
#include <stdint.h>

#include "onnx_io.h"

/* The message types on the recursive paths of onnx.proto; every other field is skipped. */
enum { M_NONE, M_MODEL, M_TRAINING, M_FUNCTION, M_GRAPH, M_NODE, M_ATTR, M_VALUE, M_TYPE, M_ELEM };

/* The message type of field `field` of a `msg`, or M_NONE for a leaf. */
static int child_type(int msg, uint64_t field) {
    switch (msg) {
    case M_MODEL:
        return field == 7 ? M_GRAPH : field == 20 ? M_TRAINING : field == 25 ? M_FUNCTION : M_NONE;
    case M_TRAINING: /* initialization, algorithm */
        return field == 1 || field == 2 ? M_GRAPH : M_NONE;
    case M_FUNCTION: /* node, attribute_proto, value_info */
        return field == 7 ? M_NODE : field == 11 ? M_ATTR : field == 12 ? M_VALUE : M_NONE;
    case M_GRAPH: /* node; input, output, value_info */
        return field == 1 ? M_NODE : field >= 11 && field <= 13 ? M_VALUE : M_NONE;
    case M_NODE:
        return field == 5 ? M_ATTR : M_NONE;
    case M_ATTR: /* g, graphs; tp, type_protos */
        return field == 6 || field == 11 ? M_GRAPH : field == 14 || field == 15 ? M_TYPE : M_NONE;
    case M_VALUE:
        return field == 2 ? M_TYPE : M_NONE;
    case M_TYPE: /* sequence_type, map_type, optional_type */
        return field == 4 || field == 5 || field == 9 ? M_ELEM : M_NONE;
    case M_ELEM: /* Sequence/Optional elem_type (1), Map value_type (2) */
        return field == 1 || field == 2 ? M_TYPE : M_NONE;
    default:
        return M_NONE;
    }
}

static int read_varint(const uint8_t *p, size_t end, size_t *pos, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && *pos < end; shift += 7) {
        uint8_t b = p[(*pos)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return 0;
    }
    return -1;
}

graft_status onnx_check_nesting(const void *data, size_t size, const char *what, graft_err *e) {
    const uint8_t *p = data;
    size_t ends[ONNX_MAX_MESSAGE_DEPTH + 1];
    int types[ONNX_MAX_MESSAGE_DEPTH + 1], graphs[ONNX_MAX_MESSAGE_DEPTH + 1];
    int depth = 0;
    ends[0] = size, types[0] = M_MODEL, graphs[0] = 0;
    size_t pos = 0;
    for (;;) {
        while (depth > 0 && pos >= ends[depth]) depth--;
        if (pos >= size) return GRAFT_OK;
        uint64_t tag, v;
        /* Malformed wire data stops the scan: protobuf-c then reports it. */
        if (read_varint(p, ends[depth], &pos, &tag)) return GRAFT_OK;
        size_t left = ends[depth] - pos;
        switch (tag & 7) {
        case 0:
            if (read_varint(p, ends[depth], &pos, &v)) return GRAFT_OK;
            continue;
        case 1:
            if (left < 8) return GRAFT_OK;
            pos += 8;
            continue;
        case 5:
            if (left < 4) return GRAFT_OK;
            pos += 4;
            continue;
        case 2:
            break;
        default:
            return GRAFT_OK;
        }
        if (read_varint(p, ends[depth], &pos, &v) || v > ends[depth] - pos) return GRAFT_OK;
        int child = child_type(types[depth], tag >> 3);
        if (child == M_NONE) {
            pos += (size_t)v;
            continue;
        }
        int g = graphs[depth] + (child == M_GRAPH);
        if (depth + 1 > ONNX_MAX_MESSAGE_DEPTH || g > ONNX_MAX_GRAPH_DEPTH)
            return err_set(e, GRAFT_E_MALFORMED_MODEL,
                           "%s: the model nests %s deeper than graft's limit of %d (near byte %zu)",
                           what, g > ONNX_MAX_GRAPH_DEPTH ? "subgraphs" : "protobuf messages",
                           g > ONNX_MAX_GRAPH_DEPTH ? ONNX_MAX_GRAPH_DEPTH : ONNX_MAX_MESSAGE_DEPTH,
                           pos);
        depth++;
        ends[depth] = pos + (size_t)v, types[depth] = child, graphs[depth] = g;
    }
}
