#!/usr/bin/env python3
"""record_block_parity_bert.py: records PyTorch's per-step losses of fine-tuning a 4-layer BERT's
last 2 layers and its pooler plus a new Linear head, for graft's block-training parity test
(issue 15; tests/test_block_parity.c with this fixture), into a small committed fixture.

Usage: /path/to/venv/python3 tools/record_block_parity_bert.py [--gen tests/data/gen]
           [--out tests/data/block_parity_bert_fixture.txt]
Needs torch, transformers, onnx and numpy. Run by hand when the model, the problem or a recipe
changes; CI has no torch and only regenerates the model (tools/make_models.py) and reads the
fixture.

The network is tools/make_models.py's `block_parity_bert4` (Hugging Face BertModel's layout: 64
hidden, 4 layers, 4 heads, 128 intermediate, vocab 1000, exact GELU, LayerNorm eps 1e-12, the
attention mask filled with float32's lowest value; seeded numpy weights). This script loads its
initializers into transformers.BertModel (eager attention; the MatMul weights, stored transposed
under exporter names, found by their nodes' scopes) and checks the pooler output against the
model's recorded ONNX Runtime output.

The problem: the model's 32 recorded texts (block_parity_bert4.in.*.npy: lengths 4..16, zero
padding) twice, text i + 32 with another label (labels as tools/record_block_parity.py draws
them: numpy.random.default_rng(2)). Frozen part: the embeddings and layers 0 and 1 (`from`:
layer 1's output LayerNorm, what `graft finetune --unfreeze 2` trains from); the extended
attention mask is the trainable part's side input. Trainable part: layers 2 and 3, the pooler
(dense + tanh on the first token) and a new Linear(64, 10) head (U(-1/8, 1/8) from
numpy.random.default_rng(3)); graft's features are the model's `pooler_output`. The data order,
batch (16), steps (100), loss, weight decay groups and the SGD / AdamW / LAMB recipes are
tools/record_block_parity.py's, and so is the fixture's layout (frozen0 is text 0's frozen
hidden states, 16 x 64 values), float32 on the CPU, deterministic algorithms, 2 threads.
"""
import argparse
import copy
import os
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_block_parity as rbp  # noqa: E402  (the shared recipes, optimizers and output)

GENERATOR_VERSION = 1
MODEL = "block_parity_bert4"
HIDDEN, LAYERS, HEADS, FFN, VOCAB, MAX_POS = 64, 4, 4, 128, 1000, 64
FROM_LAYER = 2  # layers FROM_LAYER.. train
N, CLASSES = rbp.N, rbp.CLASSES
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def model_files(gen):
    sys.path.insert(0, os.path.join(rbp.ROOT, "tools"))
    import make_models
    from pathlib import Path
    if not make_models.is_up_to_date(Path(gen), MODEL):
        os.makedirs(gen, exist_ok=True)
        make_models.build_one(Path(gen), MODEL)
    feeds = {k: np.load(os.path.join(gen, f"{MODEL}.in.{k}.npy")) for k in INPUTS}
    pooled = np.load(os.path.join(gen, f"{MODEL}.out.pooler_output.npy"))
    return os.path.join(gen, f"{MODEL}.onnx"), feeds, pooled, make_models.GENERATOR_VERSION


def hf_state(graph):
    """The initializers under BertModel's state_dict names (MatMul weights transposed back)."""
    from onnx import numpy_helper
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    state = {k: v for k, v in inits.items() if k.startswith(("embeddings.", "encoder.", "pooler."))
             and k != "embeddings.position_ids"}
    for n in graph.node:
        if n.op_type == "MatMul" and n.input[1] in inits:
            scope = n.name.rsplit("/", 1)[0].strip("/").replace("/", ".")
            state[f"{scope}.weight"] = inits[n.input[1]].T.copy()
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}


def load_network(path, feeds, want_pooled):
    import onnx
    from transformers import BertConfig, BertModel
    model = onnx.load(path)
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                     num_attention_heads=HEADS, intermediate_size=FFN,
                     max_position_embeddings=MAX_POS, type_vocab_size=2, layer_norm_eps=1e-12,
                     hidden_act="gelu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    cfg._attn_implementation = "eager"
    net = BertModel(cfg, add_pooling_layer=True)
    missing, unexpected = net.load_state_dict(hf_state(model.graph), strict=False)
    missing = [k for k in missing if "position_ids" not in k]
    if missing or unexpected:
        sys.exit(f"{path}: initializers do not fit BertModel: missing {missing[:4]}, "
                 f"unexpected {unexpected[:4]}")
    net.eval()
    t = {k: torch.from_numpy(v) for k, v in feeds.items()}
    with torch.no_grad():
        got = net(**t).pooler_output.numpy()
    rel = float(np.abs(got - want_pooled).max() / np.abs(want_pooled).max())
    if rel > 1e-4:
        sys.exit(f"{path}: torch differs from the recorded ONNX Runtime output by {rel:.3g}")
    return net, model.graph, rel


def from_tensor(graph):
    """Layer FROM_LAYER - 1's output LayerNorm: what --unfreeze 2 trains from."""
    scope = f"/encoder/layer.{FROM_LAYER - 1}/output/LayerNorm"
    ln = [n for n in graph.node if n.op_type == "LayerNormalization" and n.name.startswith(scope)]
    if len(ln) != 1:
        sys.exit(f"cannot find {scope}")
    return ln[0].output[0], "pooler_output"


def extended_mask(mask):
    return (1.0 - mask[:, None, None, :].to(torch.float32)) * torch.finfo(torch.float32).min


def frozen_part(net, t):
    with torch.no_grad():
        h = net.embeddings(input_ids=t["input_ids"], token_type_ids=t["token_type_ids"])
        ext = extended_mask(t["attention_mask"])
        for layer in net.encoder.layer[:FROM_LAYER]:
            h = run_layer(layer, h, ext)
    return h, ext


def run_layer(layer, h, ext):
    out = layer(h, attention_mask=ext)
    return out[0] if isinstance(out, tuple) else out


class Trainable(nn.Module):
    """Layers FROM_LAYER.. -> pooler -> the new head, on (hidden states, extended mask)."""

    def __init__(self, net, w0, b0):
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(net.encoder.layer[i])
                                    for i in range(FROM_LAYER, LAYERS)).eval()
        self.pooler = copy.deepcopy(net.pooler).eval()
        self.head = nn.Linear(HIDDEN, CLASSES)
        with torch.no_grad():
            self.head.weight.copy_(torch.from_numpy(w0))
            self.head.bias.copy_(torch.from_numpy(b0))

    def forward(self, h, ext):
        for layer in self.layers:
            h = run_layer(layer, h, ext)
        return self.head(self.pooler(h))


def make_problem():
    half = N // 2
    rng = np.random.default_rng(2)
    first = rng.integers(0, CLASSES, half)
    other = (first + rng.integers(1, CLASSES, half)) % CLASSES
    labels = np.concatenate([first, other]).astype(np.int64)
    bound = 1.0 / np.sqrt(float(HIDDEN))
    rng = np.random.default_rng(3)
    w0 = rng.uniform(-bound, bound, (CLASSES, HIDDEN)).astype(np.float32)
    b0 = rng.uniform(-bound, bound, CLASSES).astype(np.float32)
    rng = np.random.default_rng(4)
    order = np.stack([rng.permutation(N) for _ in range(rbp.EPOCHS)]).astype(np.int64)
    return torch.from_numpy(labels), w0, b0, order


def train(kind, net, frozen, ext, labels, w0, b0, order):
    return rbp.train_model(kind, Trainable(net, w0, b0), lambda m, idx: m(frozen[idx], ext[idx]),
                           labels, order)


def record(gen, out):
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(2)
    model_path, feeds32, pooled, model_version = model_files(gen)
    net, graph, ort_rel = load_network(model_path, feeds32, pooled)
    from_name, to_name = from_tensor(graph)
    feeds = {k: torch.from_numpy(np.concatenate([v, v])) for k, v in feeds32.items()}
    labels, w0, b0, order = make_problem()
    frozen, ext = frozen_part(net, feeds)
    perturbed = rbp.noisy(frozen, rbp.NOISE_REL)
    losses, logits0, items = {}, None, []
    for kind in ("sgd", "adamw", "lamb"):
        losses[kind], logits0 = train(kind, net, frozen, ext, labels, w0, b0, order)
        got = train(kind, net, perturbed, ext, labels, w0, b0, order)[0]
        rel = rbp.rel_change(got, losses[kind])
        items += [(f"losses.{kind}", losses[kind]),
                  (f"stable_steps.{kind}", [rbp.stable_steps(rel)]),
                  (f"noise_max_rel.{kind}", [rel.max()]),
                  (f"noise_final_rel.{kind}", [rbp.final_rel(got, losses[kind])])]
        print(f"{kind:6s} loss {losses[kind][0]:.4f} -> {losses[kind][-1]:.4f}; under "
              f"{rbp.NOISE_REL:g} feature noise: {rbp.stable_steps(rel)} steps within 1e-5, max "
              f"rel change {rel.max():.2g}")
    for kind, cfg in (("sgd", rbp.SGD), ("adamw", rbp.ADAMW), ("lamb", rbp.LAMB)):
        items += rbp.recipe_items(kind, cfg)
    items = [("model", MODEL), ("from", from_name), ("to", to_name), ("labels", labels.numpy()), ("order", order),
             ("head.weight", w0), ("head.bias", b0),
             ("frozen0", frozen[0].numpy().ravel()[:1024]), ("logits0", logits0.numpy()),
             ("noise_rel", [rbp.NOISE_REL]), ("generator_version", [GENERATOR_VERSION]),
             ("model_generator_version", [int(model_version)])] + items
    import transformers
    header = [f"{os.path.basename(out)}: written by tools/record_block_parity_bert.py (torch "
              f"{torch.__version__}, transformers {transformers.__version__}); do not edit. "
              f"Layout and recipes: that script's docstring.",
              f"Model: tools/make_models.py's {MODEL} (generator version {model_version}); "
              f"torch vs its ONNX Runtime output {ort_rel:.2g}."]
    rbp.write_fixture(out, items, header)
    print(f"from '{from_name}' to '{to_name}'; wrote {out} ({os.path.getsize(out)} bytes)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gen", default=os.path.join(rbp.ROOT, "tests", "data", "gen"),
                    help="where the model is (made there when missing)")
    ap.add_argument("--out", default=os.path.join(rbp.ROOT, "tests", "data",
                                                  "block_parity_bert_fixture.txt"))
    args = ap.parse_args()
    record(args.gen, args.out)


if __name__ == "__main__":
    main()
