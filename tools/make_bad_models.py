#!/usr/bin/env python3
"""Write malformed models and inputs for graft's error-path tests.

Why: a loader meets truncated downloads, wrong files, hostile or corrupt tensors and missing
side files; graft must answer each with an error status and a message naming the file and
the tensor/node involved, never crash, abort or allocate absurd sizes. All cases derive from
one tiny valid model, Conv(3->4, 3x3) -> Relu -> Flatten -> Gemm(256 -> 5), input `input`
float32 (1, 3, 8, 8), output `output`, opset 17, so that each file differs from a loadable
one in exactly one way.

Files written into --out (default tests/data/gen/bad/ under the repository root):
  valid_small.onnx                 the valid model (weights inline)
  valid_small.in.input.npy         a correct input; valid_small.out.output.npy: ORT's output
  valid_small_external.onnx(.data) the same model with every tensor in external data
  truncated.onnx                   valid_small.onnx cut in half (protobuf parse error)
  not_protobuf.onnx                text garbage (protobuf parse error)
  empty.onnx                       0 bytes: parses as an empty ModelProto, no graph
  size_mismatch.onnx               fc.weight raw_data holds half the bytes its dims need
  overflow_shape.onnx              fc.weight dims [2^40, 2^40, 2^40] (product overflows
                                   int64), no data
  unsupported_op.onnx              node `mystery_node` of op type `FancyUnknownOp`
  missing_external.onnx            fc.weight in external file `missing_weights.bin`,
                                   which does not exist
  external_out_of_range.onnx(.data) fc.weight's offset+length run past the data file's end
  external_escape.onnx             external location `../outside_model_dir.bin` leaves the
                                   model's folder (must be refused before any open)
  wrong_shape.npy                  float32 (1, 3, 7, 7) for an input declared (1, 3, 8, 8)
  hostile/                         inputs built to crash or exhaust a loader (no ONNX Runtime
                                   verdicts: some would crash, hang or exhaust it too):
    npy_no_colon.npy               header 'fortran_order' with no ':' after it
    npy_overflow_shape.npy         shape (2^40, 2^40): the size overflows int64
    npy_beyond_file.npy            shape (2^30,) float32 in a 128-byte file
    deep_if.onnx                   If subgraphs nested 3000 deep (~121 KB)
    deep_type.onnx                 an input's TypeProto nested 5000 sequences deep
    constant_of_shape_huge.onnx    ConstantOfShape to 2^30 floats (folding would take 4 GB)
    huge_initializer.onnx          an initializer of 2^38 floats with no data
    ext_link/outside.onnx          external data `weights.bin`, a symbolic link to
                                   ../outside_weights.bin (out of the model's folder)
    ext_link/inside.onnx           external data `alias.bin`, a link to real.bin in the
                                   same folder (loads)
    fifo_external.onnx             external data `fifo_weights.bin`, a FIFO
  wrong_dtype.npy                  float64 (1, 3, 8, 8)
  bad_models.json                  each file, what is wrong with it and what a loader
                                   must do, plus whether ONNX Runtime rejected it here

Usage: python3 tools/make_bad_models.py [--out DIR]
"""

import argparse
import json
import os
import struct
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import set_external_data

GENERATOR_VERSION = "1"
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "tests" / "data" / "gen" / "bad"


def valid_small():
    rng = np.random.default_rng(4001)
    conv_w = (rng.standard_normal((4, 3, 3, 3), dtype=np.float32) * np.float32(0.27))
    conv_b = (rng.standard_normal(4, dtype=np.float32) * np.float32(0.1))
    fc_w = (rng.standard_normal((5, 256), dtype=np.float32) * np.float32(0.0625))
    fc_b = (rng.standard_normal(5, dtype=np.float32) * np.float32(0.1))
    inits = [numpy_helper.from_array(a, n) for n, a in
             (("conv.weight", conv_w), ("conv.bias", conv_b), ("fc.weight", fc_w),
              ("fc.bias", fc_b))]
    nodes = [
        helper.make_node("Conv", ["input", "conv.weight", "conv.bias"], ["/conv/Conv_output_0"],
                         name="/conv/Conv", dilations=[1, 1], group=1, kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["/conv/Conv_output_0"], ["/relu/Relu_output_0"],
                         name="/relu/Relu"),
        helper.make_node("Flatten", ["/relu/Relu_output_0"], ["/Flatten_output_0"],
                         name="/Flatten", axis=1),
        helper.make_node("Gemm", ["/Flatten_output_0", "fc.weight", "fc.bias"], ["output"],
                         name="/fc/Gemm", alpha=1.0, beta=1.0, transB=1),
    ]
    graph = helper.make_graph(
        nodes, "main_graph",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="graft tools/make_bad_models.py",
                              producer_version=GENERATOR_VERSION)
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def initializer(model, name):
    return next(t for t in model.graph.initializer if t.name == name)


def to_external(tensor, location, offset, length):
    set_external_data(tensor, location=location, offset=offset, length=length)
    tensor.data_location = TensorProto.EXTERNAL
    tensor.ClearField("raw_data")


def copy_model(model):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    return m


def write_model(path, model):
    path.write_bytes(model.SerializeToString())


def ort_verdict(path, feeds=None):
    """'rejected: <message>' if ONNX Runtime refuses to load (or run) it, else 'accepted'."""
    import onnxruntime as ort
    try:
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        if feeds is not None:
            sess.run(None, feeds)
    except Exception as exc:  # noqa: BLE001 - any failure is the answer we record
        # Paths made relative so that the manifest does not depend on where --out points.
        message = str(exc).strip().splitlines()[0]
        message = message.replace(str(path.parent), "<out>")
        message = message.replace(str(path.parent.parent), "<out>/..")
        return "rejected: " + message[:300]
    return "accepted"


def write_valid(out, base, x, case):
    write_model(out / "valid_small.onnx", base)
    np.save(out / "valid_small.in.input.npy", x)
    case("valid_small.onnx", "none", "loads and runs; output matches valid_small.out.output.npy")
    # Same model, every tensor in one external file (threshold 0: even the 4-float biases).
    (out / "valid_small_external.onnx.data").unlink(missing_ok=True)  # onnx would append
    onnx.save_model(copy_model(base), str(out / "valid_small_external.onnx"),
                    save_as_external_data=True, all_tensors_to_one_file=True,
                    location="valid_small_external.onnx.data", size_threshold=0)
    os.chmod(out / "valid_small_external.onnx.data", 0o644)  # onnx creates it owner-only
    onnx.checker.check_model(str(out / "valid_small_external.onnx"))
    case("valid_small_external.onnx", "none (weights in valid_small_external.onnx.data)",
         "loads and runs; output equals valid_small's")


def write_unparsable(out, case):
    data = (out / "valid_small.onnx").read_bytes()
    (out / "truncated.onnx").write_bytes(data[: len(data) // 2])
    case("truncated.onnx", f"valid_small.onnx cut to {len(data) // 2} of {len(data)} bytes",
         "parse error naming the file")
    (out / "not_protobuf.onnx").write_text(
        "This is not an ONNX model.\n<html><body>404 Not Found</body></html>\n"
        "{\"error\": \"model download failed\"}\n")
    case("not_protobuf.onnx", "text garbage", "parse error naming the file")
    (out / "empty.onnx").write_bytes(b"")
    case("empty.onnx", "0 bytes (a valid, empty ModelProto: no graph, no opset)",
         "error: empty file / model has no graph")


def write_bad_tensors(out, base, case):
    m = copy_model(base)
    w = initializer(m, "fc.weight")
    w.raw_data = w.raw_data[: len(w.raw_data) // 2]
    write_model(out / "size_mismatch.onnx", m)
    case("size_mismatch.onnx", "fc.weight dims (5, 256) float32 need 5120 bytes, raw_data has 2560",
         "error naming tensor fc.weight, expected vs actual byte count")

    m = copy_model(base)
    w = initializer(m, "fc.weight")
    w.ClearField("raw_data")
    del w.dims[:]
    w.dims.extend([2 ** 40] * 3)
    write_model(out / "overflow_shape.onnx", m)
    case("overflow_shape.onnx", "fc.weight dims [2^40, 2^40, 2^40]: element count overflows int64",
         "error naming tensor fc.weight (overflow), no allocation attempted; ONNX Runtime "
         "stops earlier, at Gemm's rank check (it drops unused initializers, so the bad "
         "tensor has to be a used one)")

    m = copy_model(base)
    relu = next(n for n in m.graph.node if n.op_type == "Relu")
    relu.output[0] = "/mystery/output_0"
    idx = list(m.graph.node).index(relu)
    m.graph.node.insert(idx + 1, helper.make_node(
        "FancyUnknownOp", ["/mystery/output_0"], ["/relu/Relu_output_0"], name="mystery_node",
        flavour="strange"))
    write_model(out / "unsupported_op.onnx", m)
    case("unsupported_op.onnx", "node mystery_node has op type FancyUnknownOp (domain ai.onnx)",
         "error naming op FancyUnknownOp and node mystery_node")


def write_bad_external(out, base, case):
    nbytes = 5 * 256 * 4
    m = copy_model(base)
    to_external(initializer(m, "fc.weight"), "missing_weights.bin", 0, nbytes)
    write_model(out / "missing_external.onnx", m)
    (out / "missing_weights.bin").unlink(missing_ok=True)
    case("missing_external.onnx", "fc.weight stored in missing_weights.bin, which does not exist",
         "error naming tensor fc.weight and the missing file path")

    m = copy_model(base)
    (out / "external_out_of_range.onnx.data").write_bytes(
        initializer(m, "fc.weight").raw_data[:64])
    to_external(initializer(m, "fc.weight"), "external_out_of_range.onnx.data", 0, nbytes)
    write_model(out / "external_out_of_range.onnx", m)
    case("external_out_of_range.onnx",
         "fc.weight offset 0 length 5120 in a 64-byte external_out_of_range.onnx.data",
         "error naming tensor fc.weight: data file too short")

    m = copy_model(base)
    to_external(initializer(m, "fc.weight"), "../outside_model_dir.bin", 0, nbytes)
    write_model(out / "external_escape.onnx", m)
    case("external_escape.onnx", "fc.weight external location ../outside_model_dir.bin "
         "points outside the model's folder (the file is not created)",
         "error: external data path escapes the model directory; nothing opened")


def write_bad_inputs(out, x, case):
    np.save(out / "wrong_shape.npy", np.random.default_rng(4003).standard_normal(
        (1, 3, 7, 7), dtype=np.float32))
    case("wrong_shape.npy", "float32 (1, 3, 7, 7) for valid_small input (1, 3, 8, 8)",
         "error naming input `input`, expected vs given shape")
    np.save(out / "wrong_dtype.npy", x.astype(np.float64))
    case("wrong_dtype.npy", "float64 (1, 3, 8, 8) for a float32 input",
         "error naming input `input`, expected vs given dtype")


def pb_varint(n):
    b = bytearray()
    while True:
        b.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(b)


def pb_field(num, payload):
    """A length-delimited field."""
    return pb_varint(num << 3 | 2) + pb_varint(len(payload)) + payload


def pb_int(num, value):
    return pb_varint(num << 3) + pb_varint(value)


def deep_if_model(depth):
    """ModelProto bytes written by hand (Python's protobuf refuses such depths): If nodes whose
    then_branch holds the next If, `depth` levels, an Identity at the bottom."""
    out = pb_field(12, pb_field(1, b"y"))
    graph = pb_field(1, pb_field(1, b"x") + pb_field(2, b"y") + pb_field(4, b"Identity")) + out
    for _ in range(depth):
        attr = pb_field(1, b"then_branch") + pb_field(6, graph) + pb_int(20, 5)
        node = pb_field(1, b"c") + pb_field(2, b"y") + pb_field(4, b"If") + pb_field(5, attr)
        graph = pb_field(1, node) + out
    return pb_int(1, 8) + pb_field(8, pb_field(1, b"") + pb_int(2, 17)) + pb_field(7, graph)


def deep_type_model(depth):
    """An input whose TypeProto is a sequence of a sequence ... of float tensors."""
    t = pb_field(1, pb_int(1, 1))  # TypeProto.tensor_type{elem_type FLOAT}
    for _ in range(depth):
        t = pb_field(4, pb_field(1, t))  # TypeProto.sequence_type{elem_type t}
    graph = pb_field(11, pb_field(1, b"x") + pb_field(2, t)) + pb_field(12, pb_field(1, b"x"))
    return pb_int(1, 8) + pb_field(8, pb_field(1, b"") + pb_int(2, 17)) + pb_field(7, graph)


def npy_bytes(header, data=b""):
    header = header + " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data


def write_hostile(out, base, note):
    h = out / "hostile"
    h.mkdir(exist_ok=True)
    (h / "npy_no_colon.npy").write_bytes(npy_bytes(
        "{'descr': '<f4', 'fortran_order' False, 'shape': (1, 3, 8, 8), }", bytes(768)))
    note("npy_no_colon.npy", "'fortran_order' without ':'", "error: malformed header")
    (h / "npy_overflow_shape.npy").write_bytes(npy_bytes(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }"))
    note("npy_overflow_shape.npy", "shape (2^40, 2^40)", "error: size overflows")
    (h / "npy_beyond_file.npy").write_bytes(npy_bytes(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824,), }"))
    note("npy_beyond_file.npy", "2^30 floats declared, no data", "error before allocating")
    (h / "deep_if.onnx").write_bytes(deep_if_model(3000))
    note("deep_if.onnx", "If nested 3000 deep", "error naming the subgraph depth limit 64")
    (h / "deep_type.onnx").write_bytes(deep_type_model(5000))
    note("deep_type.onnx", "TypeProto nested 10000 messages deep", "error naming the limit 256")

    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c"], name="huge_const",
                              value=numpy_helper.from_array(np.array([1.0], np.float32))),
             helper.make_node("Shape", ["c"], ["output"], name="shape_of")]
    graph = helper.make_graph(
        nodes, "huge_const", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("output", TensorProto.INT64, [1])],
        [numpy_helper.from_array(np.array([1 << 30], np.int64), "shape")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    write_model(h / "constant_of_shape_huge.onnx", m)
    note("constant_of_shape_huge.onnx", f"{len(m.SerializeToString())} bytes: ConstantOfShape "
         "to 2^30 floats", "loads without folding it (nothing allocated at load)")

    m = copy_model(base)
    w = initializer(m, "fc.weight")
    w.ClearField("raw_data")
    del w.dims[:]
    w.dims.extend([1 << 38])
    write_model(h / "huge_initializer.onnx", m)
    note("huge_initializer.onnx", "fc.weight dims [2^38] float32, no data",
         "error: float_data holds 0 values, before allocating")

    wbytes = initializer(base, "fc.weight").raw_data
    d = h / "ext_link"
    d.mkdir(exist_ok=True)
    (h / "outside_weights.bin").write_bytes(wbytes)
    (d / "real.bin").write_bytes(wbytes)
    for name, target in (("weights.bin", "../outside_weights.bin"), ("alias.bin", "real.bin")):
        (d / name).unlink(missing_ok=True)
        os.symlink(target, d / name)
    for fname, loc in (("outside.onnx", "weights.bin"), ("inside.onnx", "alias.bin")):
        m = copy_model(base)
        to_external(initializer(m, "fc.weight"), loc, 0, len(wbytes))
        write_model(d / fname, m)
    note("ext_link/outside.onnx", "external data through a link out of the folder",
         "error: resolves outside the model's folder")
    note("ext_link/inside.onnx", "external data through a link inside the folder", "loads")

    fifo = h / "fifo_weights.bin"
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    m = copy_model(base)
    to_external(initializer(m, "fc.weight"), "fifo_weights.bin", 0, len(wbytes))
    write_model(h / "fifo_external.onnx", m)
    note("fifo_external.onnx", "external data is a FIFO", "error: not a regular file, no hang")


def record_ort(out, x, cases):
    """Write ORT's reference output and note what ORT makes of every case."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    outputs = []
    for fname in ("valid_small.onnx", "valid_small_external.onnx"):
        sess = ort.InferenceSession(str(out / fname), opts, providers=["CPUExecutionProvider"])
        outputs.append(sess.run(None, {"input": x})[0])
    if not np.array_equal(outputs[0], outputs[1]):
        raise RuntimeError("external-data variant disagrees with the inline model")
    np.save(out / "valid_small.out.output.npy", outputs[0])
    for fname, info in cases.items():
        if fname.endswith(".onnx"):
            info["onnxruntime"] = ort_verdict(out / fname, {"input": x})
        else:
            info["onnxruntime"] = ort_verdict(out / "valid_small.onnx",
                                              {"input": np.load(out / fname)})
    cases["valid_small.onnx"]["reference_output"] = "valid_small.out.output.npy"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="output folder (default %(default)s)")
    ap.add_argument("--no-ort", action="store_true", help="do not record ONNX Runtime's verdicts")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cases = {}

    def case(fname, problem, expect):
        cases[fname] = dict(problem=problem, expect=expect)

    base = valid_small()
    x = np.random.default_rng(4002).standard_normal((1, 3, 8, 8), dtype=np.float32)
    write_valid(out, base, x, case)
    write_unparsable(out, case)
    write_bad_tensors(out, base, case)
    write_bad_external(out, base, case)
    write_bad_inputs(out, x, case)
    hostile = {}
    write_hostile(out, base, lambda f, p, e: hostile.__setitem__(f, dict(problem=p, expect=e)))
    if not args.no_ort:
        record_ort(out, x, cases)

    manifest = dict(generator_version=GENERATOR_VERSION, model="valid_small.onnx",
                    input=dict(name="input", dtype="float32", shape=[1, 3, 8, 8],
                               file="valid_small.in.input.npy"),
                    output=dict(name="output", dtype="float32", shape=[1, 5]), cases=cases,
                    hostile=hostile)
    tmp = out / "bad_models.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp, out / "bad_models.json")
    for fname, info in cases.items():
        print(f"  {fname:28s} {info.get('onnxruntime', '')[:100]}")
    print(f"done -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
