#!/usr/bin/env python3
"""Write ONNX's own node tests, as the installed onnx package generates them (its newer opsets:
the Debian libonnx-testdata the conformance suite reads stops at ONNX 1.12, opset 17), for the
ops given, in the layout tests/conformance.c reads (NAME/model.onnx, NAME/test_data_set_N/).

These cover the opset-18 forms (Reduce* with the axes input and noop_with_empty_axes, Split
with num_outputs, Pad with axes, ScatterND's max/min) and later versions up to opset 21. A test
whose model imports a default-domain opset above 21 (graft's range ends there) is written at
opset 21 when its ops mean the same there (Einsum-28 and InstanceNormalization-22 only added
bfloat16, so their float tests run at 21), else left out.

Usage: python3 tools/make_onnx_node_tests.py --out DIR [OP ...]
  (default ops: the Reduce* family, Split, Pad, ScatterND, GatherElements, GatherND, Tile,
  Trilu, TopK, InstanceNormalization, GroupNormalization, Resize, Einsum)
"""

import argparse
import os
import shutil
import sys

from onnx import TensorProto, defs, numpy_helper
from onnx.backend.test.case import node as node_cases

DEFAULT_OPS = ["ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
               "ReduceLogSum", "ReduceLogSumExp", "ReduceSum", "ReduceMean", "Split", "Pad",
               "ScatterND", "GatherElements", "GatherND", "Tile", "Trilu", "TopK",
               "InstanceNormalization", "GroupNormalization", "Resize", "Einsum"]
MAX_OPSET = 21


def default_opset(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return -1


def same_at_max_opset(model):
    """True when every node's op means at MAX_OPSET what the model's opset makes it mean: the
    same definition, or later versions that only added types (same text and attributes) and
    the test's tensors have types MAX_OPSET's version takes."""
    opset = default_opset(model)
    elem_types = {"tensor(%s)" % TensorProto.DataType.Name(v.type.tensor_type.elem_type).lower()
                  for v in list(model.graph.input) + list(model.graph.output)}
    try:
        for n in model.graph.node:
            new, old = defs.get_schema(n.op_type, opset), defs.get_schema(n.op_type, MAX_OPSET)
            if new.since_version == old.since_version:
                continue
            if new.doc != old.doc or set(new.attributes) != set(old.attributes):
                return False
            allowed = {t for c in old.type_constraints for t in c.allowed_type_strs}
            if not elem_types <= allowed:
                return False
        return True
    except defs.SchemaError:
        return False


def lower_opset(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = MAX_OPSET


def write_case(out, case):
    d = os.path.join(out, case.name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    for i, (inputs, outputs) in enumerate(case.data_sets):
        ds = os.path.join(d, f"test_data_set_{i}")
        os.makedirs(ds)
        for kind, values, infos in (("input", inputs, case.model.graph.input),
                                    ("output", outputs, case.model.graph.output)):
            for j, v in enumerate(values):
                t = numpy_helper.from_array(v, infos[j].name)
                with open(os.path.join(ds, f"{kind}_{j}.pb"), "wb") as f:
                    f.write(t.SerializeToString())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("ops", nargs="*", default=DEFAULT_OPS)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    written = skipped = 0
    wanted = set(args.ops)
    for case in node_cases.collect_testcases():
        ops = {n.op_type for n in case.model.graph.node}
        if case.kind != "node" or not ops & wanted or "_expanded" in case.name:
            continue
        if default_opset(case.model) > MAX_OPSET:
            if not same_at_max_opset(case.model):
                skipped += 1
                continue
            lower_opset(case.model)
        write_case(args.out, case)
        written += 1
    print(f"{args.out}: {written} node tests written, {skipped} above opset {MAX_OPSET} left out")
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
