#!/usr/bin/env python3
"""Write ONNX's node tests of graft's ops again at every older opset where they still mean
something, with ONNX Runtime's outputs as the expected ones: the opsets 7 through 21 that
exporters write (old TorchScript exports say opset 9 to 13; the node tests say the newest).

For each node test of an op in src/ops/ops.def and for each version of that op's schema whose
range meets [7, 21] and graft's claimed range for it, the test's model is re-stamped with that
opset; it is kept when onnx's checker accepts it there (same inputs and attributes) and ONNX
Runtime runs it, and its outputs become the expected values. So a semantic that changed between
versions (Softmax's axis before 13, Clip's attributes, Squeeze's axes) is checked at each
version ONNX Runtime implements. Written as NAME_opsetV in the layout tests/conformance.c reads.

Usage: python3 tools/make_opset_sweep.py --out DIR [--ops-def src/ops/ops.def] [--known FILE] [OP ...]
"""

import argparse
import os
import re
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import checker, defs, numpy_helper
from onnx.backend.test.case import node as node_cases

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOW, HIGH = 7, 21
ort.set_default_logger_severity(3)


# Attribute values that a later version of an op added: onnx's checker does not look at values
# (ONNX Runtime accepts them early too), so a test using one is not re-stamped below it.
LATER_VALUES = {("Resize", "coordinate_transformation_mode", b"half_pixel_symmetric"): 19,
                ("ScatterND", "reduction", b"max"): 18, ("ScatterND", "reduction", b"min"): 18,
                ("ScatterElements", "reduction", b"max"): 18,
                ("ScatterElements", "reduction", b"min"): 18}


def uses_later_value(model, version):
    for n in model.graph.node:
        for a in n.attribute:
            since = LATER_VALUES.get((n.op_type, a.name, a.s))
            if since and version < since:
                return True
    return False


def known_tests(path):
    """The node tests tests/known_failures.txt lists: their older-opset copies fail for the
    same reason, so they are not written again."""
    names = set()
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    names.add(line.split()[0])
    return names


def claimed_ops(path):
    """{op: (first, last)} from ops.def's OP(name, family, first, last) lines; graft's own
    training ops (family backward) are no ONNX ops."""
    ops = {}
    with open(path) as f:
        for m in re.finditer(r"^OP\((\w+),\s*(\w+),\s*(\d+),\s*(\d+)\)", f.read(), re.M):
            if m.group(2) != "backward":
                ops[m.group(1)] = (int(m.group(3)), int(m.group(4)))
    return ops


def schema_versions(op):
    """The opsets at which op's definition changed, within [LOW, HIGH]: LOW itself when a
    version older than LOW is still the one in force there."""
    out = []
    for v in range(LOW, HIGH + 1):
        try:
            s = defs.get_schema(op, v)
        except defs.SchemaError:
            continue
        if s.deprecated:
            continue
        if v == LOW or s.since_version == v:
            out.append(v)
    return out


def default_opset(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return -1


def restamp(model, version):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = version
    # An IR version old enough for the opset (ONNX Runtime refuses IR 10 with opset 7 only for
    # some types; the IR that came with the opset is always accepted).
    m.ir_version = min(m.ir_version, 7 if version < 15 else 8 if version < 19 else m.ir_version)
    return m


def valid_at(model):
    try:
        checker.check_model(model, full_check=True)
        return True
    except Exception:  # noqa: BLE001 (any checker complaint: not a model of that opset)
        return False


def expected(model, inputs):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = {i.name: v for i, v in zip(sess.get_inputs(), inputs)}
    return sess.run(None, feeds)


def write_case(out, name, model, data_sets):
    d = os.path.join(out, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for i, (inputs, outputs) in enumerate(data_sets):
        ds = os.path.join(d, f"test_data_set_{i}")
        os.makedirs(ds)
        for kind, values, infos in (("input", inputs, model.graph.input),
                                    ("output", outputs, model.graph.output)):
            for j, v in enumerate(values):
                t = numpy_helper.from_array(np.asarray(v), infos[j].name)
                with open(os.path.join(ds, f"{kind}_{j}.pb"), "wb") as f:
                    f.write(t.SerializeToString())


def sweep_case(case, ops, out, counts):
    """Writes case at each older opset where it is valid and ONNX Runtime runs it."""
    node_ops = {n.op_type for n in case.model.graph.node}
    versions = set()
    for op in node_ops:
        first, last = ops[op]
        versions |= {v for v in schema_versions(op) if first <= v <= last}
    own = default_opset(case.model)
    for v in sorted(versions):
        if v >= own or any(not (ops[op][0] <= v <= ops[op][1]) for op in node_ops):
            continue
        model = restamp(case.model, v)
        if not valid_at(model) or uses_later_value(model, v):
            counts["invalid"] += 1
            continue
        try:
            sets = [(inputs, expected(model, inputs)) for inputs, _ in case.data_sets]
        except Exception:  # noqa: BLE001 (ONNX Runtime lacks that version or type: no reference)
            counts["no_reference"] += 1
            continue
        write_case(out, f"{case.name}_opset{v}", model, sets)
        counts["written"] += 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--ops-def", default=os.path.join(ROOT, "src/ops/ops.def"))
    ap.add_argument("--known", default=os.path.join(ROOT, "tests/known_failures.txt"),
                    help="node tests known to fail at their own opset: not swept")
    ap.add_argument("only", nargs="*")
    args = ap.parse_args(argv)
    ops = claimed_ops(args.ops_def)
    known = known_tests(args.known)
    os.makedirs(args.out, exist_ok=True)
    counts = {"written": 0, "invalid": 0, "no_reference": 0}
    for case in node_cases.collect_testcases():
        node_ops = {n.op_type for n in case.model.graph.node}
        if case.kind != "node" or "_expanded" in case.name or not node_ops <= set(ops) or \
                case.name in known:
            continue
        if args.only and not node_ops & set(args.only):
            continue
        if any(n.domain not in ("", "ai.onnx") for n in case.model.graph.node):
            continue
        sweep_case(case, ops, args.out, counts)
    print(f"{args.out}: {counts['written']} tests written at older opsets; "
          f"{counts['invalid']} not valid there, {counts['no_reference']} without an ONNX Runtime "
          "reference")
    return 0 if counts["written"] else 1


if __name__ == "__main__":
    sys.exit(main())
