#!/usr/bin/env python3
"""make_name_fixtures.py GEN OUT_DIR: models under the names exporters write, for
tests/test_cli_names.sh. From tools/make_models.py's mobilenet_tiny and bert_tiny_decomposed in
GEN (weights unchanged, only names and input plumbing) writes into OUT_DIR:
  img_<tag>.onnx     mobilenet_tiny (batch made dynamic) with its input named x, input,
                     input.1, pixel_values, images or 0 (tag: the name, '.' as '_')
  img_collide.onnx   input 'features', output 'probabilities', the pooled features 'logits', the
                     pool 'head/gemm', the classifier's weights 'head.0.weight' / 'head.0.bias',
                     a backbone convolution's weight 'head.1.weight': graft's own names
  img_collide2.onnx  input 'probabilities', output 'features', a backbone tensor 'logits' and one
                     'features/cls', a backbone weight 'head.0.weight'
  img_nhwc.onnx      input 'x' in NHWC (N, 64, 64, 3), a Transpose to the model's NCHW
  img_long.onnx      input and output names of over 600 characters
  txt3_<tag>.onnx    bert_tiny_decomposed with its 3 inputs renamed (and reordered):
                     tag torch: input.1 / input.3 / input.5 (the TorchScript exporter's names)
                     tag dotted: input_ids.1 / attention_mask.1 / token_type_ids.1
                     tag plain: input0 / input1 / input2 (optimum's older names)
  txt2_<tag>.onnx    the same without the token-type input (its embedding folded to row 0, as a
                     DistilBERT-style export has none): tag hf: input_ids / attention_mask,
                     tag short: ids / mask, tag torch: input.1 / input.3 (mask first)
  txt1_x.onnx        ids only (the mask folded to ones), input named 'x'
  txt3_collide.onnx  inputs 'features' / 'logits' / 'probabilities' (ids, mask, type ids),
                     outputs 'head/gemm' and 'features/mean'
  bad_position_ids.onnx  the 3 inputs and position_ids (4 inputs: an error naming them)
  bad_unknown.onnx   ids 'tokens', mask, and 'extra' whose shape only is used (no role)
  roles.txt          for every txt*.onnx: "FILE ids=NAME,mask=NAME[,type_ids=NAME]" (the roles
                     in the order graft records them)
Every model passes onnx.checker and keeps its value names unique. Needs numpy and onnx."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IMAGE_INPUTS = ["x", "input", "input.1", "pixel_values", "images", "0"]
LONG_NAME = "pixel_values/" + "long" * 150  # 612 characters, a '/' in it


def rename(graph, old, new):
    """Rename value `old` to `new` everywhere (inputs, outputs, initializers, node edges)."""
    names = {v.name for v in graph.input} | {v.name for v in graph.output}
    names |= {i.name for i in graph.initializer}
    for n in graph.node:
        names |= set(n.input) | set(n.output)
    assert old in names, old
    assert new not in names, f"{new} is already a name of the graph"
    for v in list(graph.input) + list(graph.output) + list(graph.value_info):
        if v.name == old:
            v.name = new
    for i in graph.initializer:
        if i.name == old:
            i.name = new
    for n in graph.node:
        n.input[:] = [new if x == old else x for x in n.input]
        n.output[:] = [new if x == old else x for x in n.output]


def save(model, path):
    onnx.checker.check_model(model)
    onnx.save(model, path)


def image_base(gen):
    m = onnx.load(os.path.join(gen, "mobilenet_tiny.onnx"))
    for v in list(m.graph.input) + list(m.graph.output):
        v.type.tensor_type.shape.dim[0].dim_param = "N"
    del m.graph.value_info[:]
    return m


def producer_of(graph, op):
    return next(n for n in graph.node if n.op_type == op)


def image_models(gen, out):
    for name in IMAGE_INPUTS:
        m = image_base(gen)
        if name != "input":
            rename(m.graph, "input", name)
        save(m, os.path.join(out, "img_%s.onnx" % name.replace(".", "_")))
    m = image_base(gen)
    g = m.graph
    gemm = producer_of(g, "Gemm")
    pool = producer_of(g, "GlobalAveragePool")
    conv = producer_of(g, "Conv")
    rename(g, "logits", "probabilities")
    rename(g, "input", "features")
    rename(g, gemm.input[0], "logits")
    rename(g, pool.output[0], "head/gemm")
    rename(g, gemm.input[1], "head.0.weight")
    rename(g, gemm.input[2], "head.0.bias")
    rename(g, conv.input[1], "head.1.weight")
    save(m, os.path.join(out, "img_collide.onnx"))
    m = image_base(gen)
    g = m.graph
    pool = producer_of(g, "GlobalAveragePool")
    conv = producer_of(g, "Conv")
    rename(g, "logits", "features")
    rename(g, "input", "probabilities")
    rename(g, conv.output[0], "logits")
    rename(g, pool.input[0], "features/cls")
    rename(g, conv.input[1], "head.0.weight")
    save(m, os.path.join(out, "img_collide2.onnx"))
    m = image_base(gen)
    g = m.graph
    rename(g, "input", "x_nchw")
    g.node.insert(0, helper.make_node("Transpose", ["x"], ["x_nchw"], perm=[0, 3, 1, 2]))
    g.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64, 64, 3]))
    save(m, os.path.join(out, "img_nhwc.onnx"))
    m = image_base(gen)
    rename(m.graph, "input", LONG_NAME)
    rename(m.graph, "logits", LONG_NAME + "/logits")
    save(m, os.path.join(out, "img_long.onnx"))


def fold_type_ids(g):
    """Replace the token-type embedding Gather by its row 0 (what all-zero type ids give)."""
    gather = next(n for n in g.node if n.op_type == "Gather" and n.input[1] == "token_type_ids")
    table = next(i for i in g.initializer if i.name == gather.input[0])
    row0 = numpy_helper.to_array(table)[0].copy()
    g.node.remove(gather)
    g.initializer.remove(table)
    g.initializer.append(numpy_helper.from_array(row0, gather.output[0]))
    g.input.remove(next(v for v in g.input if v.name == "token_type_ids"))


def fold_mask(g):
    """Replace the attention mask by ones of the ids' shape (every token attended)."""
    g.input.remove(next(v for v in g.input if v.name == "attention_mask"))
    ones = helper.make_tensor("mask_one", TensorProto.INT64, [1], [1])
    g.node.insert(0, helper.make_node("Shape", ["input_ids"], ["mask_shape"]))
    g.node.insert(1, helper.make_node("ConstantOfShape", ["mask_shape"], ["attention_mask"],
                                      value=ones))


def order_inputs(g, names):
    by_name = {v.name: v for v in g.input}
    kept = [onnx.ValueInfoProto() for _ in names]
    for k, n in zip(kept, names):
        k.CopyFrom(by_name[n])
    del g.input[:]
    g.input.extend(kept)


def text_model(gen, out, file, names, roles, keep=("ids", "mask", "type_ids"), outputs=None):
    """bert_tiny_decomposed with the inputs of `keep`, renamed to `names` (a role -> name map)
    and declared in the order of `roles` (role names); records the roles in roles.txt."""
    m = onnx.load(os.path.join(gen, "bert_tiny_decomposed.onnx"))
    g = m.graph
    del g.value_info[:]
    if "type_ids" not in keep:
        fold_type_ids(g)
    if "mask" not in keep:
        fold_mask(g)
    default = {"ids": "input_ids", "mask": "attention_mask", "type_ids": "token_type_ids"}
    for role in keep:
        if names[role] != default[role]:
            rename(g, default[role], names[role])
    for old, new in (outputs or {}).items():
        rename(g, old, new)
    order_inputs(g, [names[r] for r in roles])
    save(m, os.path.join(out, file))
    recorded = ",".join("%s=%s" % (r, names[r]) for r in ("ids", "mask", "type_ids") if r in keep)
    return "%s %s\n" % (file, recorded)


def text_models(gen, out):
    lines = []
    three = {
        "torch": ({"ids": "input.1", "mask": "input.3", "type_ids": "input.5"},
                  ["mask", "type_ids", "ids"]),
        "dotted": ({"ids": "input_ids.1", "mask": "attention_mask.1",
                    "type_ids": "token_type_ids.1"}, ["ids", "mask", "type_ids"]),
        "plain": ({"ids": "input0", "mask": "input1", "type_ids": "input2"},
                  ["type_ids", "ids", "mask"]),
    }
    for tag, (names, order) in three.items():
        lines.append(text_model(gen, out, "txt3_%s.onnx" % tag, names, order))
    two = {
        "hf": ({"ids": "input_ids", "mask": "attention_mask"}, ["ids", "mask"]),
        "short": ({"ids": "ids", "mask": "mask"}, ["ids", "mask"]),
        "torch": ({"ids": "input.1", "mask": "input.3"}, ["mask", "ids"]),
    }
    for tag, (names, order) in two.items():
        lines.append(text_model(gen, out, "txt2_%s.onnx" % tag, names, order, ("ids", "mask")))
    lines.append(text_model(gen, out, "txt1_x.onnx", {"ids": "x"}, ["ids"], ("ids",)))
    lines.append(text_model(
        gen, out, "txt3_collide.onnx",
        {"ids": "features", "mask": "logits", "type_ids": "probabilities"},
        ["ids", "mask", "type_ids"],
        outputs={"last_hidden_state": "head/gemm", "pooler_output": "features/mean"}))
    bad_text_models(gen, out)
    with open(os.path.join(out, "roles.txt"), "w") as f:
        f.writelines(lines)


def bad_text_models(gen, out):
    """Inputs graft cannot feed: position ids as a 4th input; an input the graph only asks the
    shape of, under a name that says nothing."""
    m = onnx.load(os.path.join(gen, "bert_tiny_decomposed.onnx"))
    g = m.graph
    del g.value_info[:]
    pos = next(n for n in g.node if n.op_type == "Gather" and
               n.input[0] == "embeddings.position_embeddings.weight")
    rename(g, pos.input[1], "position_ids")
    slicer = next(n for n in g.node if "position_ids" in n.output)
    g.node.remove(slicer)
    g.input.append(helper.make_tensor_value_info("position_ids", TensorProto.INT64,
                                                 ["batch", "sequence"]))
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "bad_position_ids.onnx"))
    m = onnx.load(os.path.join(gen, "bert_tiny_decomposed.onnx"))
    g = m.graph
    del g.value_info[:]
    fold_type_ids(g)
    rename(g, "input_ids", "tokens")
    shape = next(n for n in g.node if n.op_type == "Shape" and n.input[0] == "tokens")
    shape.input[0] = "extra"
    g.input.append(helper.make_tensor_value_info("extra", TensorProto.INT64, ["batch", "sequence"]))
    save(m, os.path.join(out, "bad_unknown.onnx"))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    gen, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    np.random.seed(0)
    image_models(gen, out)
    text_models(gen, out)


if __name__ == "__main__":
    main()
