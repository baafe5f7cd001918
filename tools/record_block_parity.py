#!/usr/bin/env python3
"""record_block_parity.py: records PyTorch's per-step losses of fine-tuning ResNet-18's last stage
(layer4, BatchNorm in eval mode) plus a new Linear head, for graft's block-training parity test
(issue 15: within 1e-4 relative of PyTorch over 100 fp32 steps, SGD, AdamW and LAMB).

Usage: python3 tools/record_block_parity.py [--out tests/data/gen] [--force] [--sensitivity]
Needs torch (and onnx, onnxruntime to check the export). The outputs are not committed:
tools/test.sh makes them next to the other generated models. A second run with the files present
and the same GENERATOR_VERSION is skipped (--force rebuilds).

Writes into --out:
  block_parity_resnet18.onnx         the whole network (TorchScript exporter, dynamo=False,
                                     opset 17, input `x` (batch, 3, 64, 64), output `logits`
                                     (batch, 1000), dynamic batch, BatchNormalization kept as
                                     nodes: TrainingMode.PRESERVE on a model in eval mode).
  block_parity_resnet18.safetensors  the fixture (keys below).

The network: torchvision's resnet18 layout (module names, shapes, forward, init: Kaiming-normal
fan_out convs, BN scale 1 bias 0, default Linear), written out here because torchvision is not
a dependency; random weights (seed 1515). So that BatchNorm is not the identity, its running
statistics are then measured on 32 seeded calibration images (train mode, cumulative average)
and its scale and bias jittered (1 + 0.1 N(0,1), 0.1 N(0,1)), as training would have left them.

The problem: 64 images N(0, 1) (3, 64, 64) where image i + 32 repeats image i with another
label (labels uniform in 0..9, seed 2): 64 distinct samples would be memorized (the loss going
to 0, where a relative comparison means nothing); a pair with two labels keeps it >= log 2.
Frozen part: the network up to layer3's output (`from` in the metadata: the input of layer4's
first Conv and of its downsample Conv). Trainable part: layer4 in eval mode (running statistics frozen; conv
weights and BN scale/bias trained), global average pool, flatten and a new Linear(512, 10) head
(default init, seed 3). Batch 16, 4 steps per epoch, 25 epochs = 100 steps; epoch e's order is
a permutation of 0..63 from numpy.random.default_rng(4) (drawn in epoch order); step s uses
order[s // 4][16 * (s % 4) : 16 * (s % 4) + 16]. Loss: cross-entropy, mean over the batch, of
the batch before that step's update. Weight decay applies to parameters with ndim > 1 (conv and
Linear weights), not to biases nor BN scale/bias. Optimizers:
  sgd    torch.optim.SGD lr 0.05, momentum 0.9, dampening 0, nesterov off, weight_decay 1e-4.
  adamw  torch.optim.AdamW lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2.
  lamb   LAMB as src/train/optim.h writes it (You et al. 2019, Algorithm 2, phi = identity):
         m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; u = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)
         + wd w; r = ||w|| / ||u|| per tensor (norms in float64; 1 if either is 0);
         w -= lr r u. lr 1e-3, betas (0.9, 0.999), eps 1e-6, wd 1e-2. In torch float32.
float32 throughout on the CPU, deterministic algorithms, 2 threads.

Fixture (safetensors; row-major, little-endian):
  images        F32 (64, 3, 64, 64)  the training images (the ONNX model's input `x`)
  labels        I64 (64)             class indices in 0..9
  order         I64 (25, 64)         per epoch, the sample order (see above)
  frozen        F32 (64, 256, 4, 4)  PyTorch's layer3 output for all 64 images (eval mode)
  head.weight   F32 (10, 512)        the new head's initial weight (logits = f @ W^T + b)
  head.bias     F32 (10)             its initial bias
  logits0       F32 (16, 10)         the trainable part's output for step 0's batch, before
                                     any update (the same for every optimizer)
  losses.sgd    F32 (100)            per step, the loss of that step's batch before its update
  losses.adamw  F32 (100)
  losses.lamb   F32 (100)
  metadata: from (layer3's output tensor name), to (layer4's output before the pool), model
  (the ONNX file name), input, batch, steps, classes, the recipes (sgd, adamw, lamb, decay,
  trainable), torch, generator_version, and stable_steps.{sgd,adamw,lamb}: how many leading
  steps' losses move less than 1e-5 relative when the frozen features are multiplied by
  (1 + 1e-7 N(0, 1)) (a second run per optimizer). Training is chaotic past them (a 1e-7
  change grows to percents: AdamW's sign-like first steps amplify rounding), so a parity test
  can hold losses to 1e-4 for those steps only, and later ones to a looser bound.
The trainable part's initial conv and BN values are the ONNX model's initializers
(layer4.*.weight / .bias; running_mean / running_var frozen).
"""
import argparse
import copy
import json
import os
import struct
import sys
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

GENERATOR_VERSION = 2
N, C, HW, CLASSES = 64, 3, 64, 10
BATCH, EPOCHS = 16, 25
STEPS_PER_EPOCH = N // BATCH
STEPS = EPOCHS * STEPS_PER_EPOCH
MODEL_FILE = "block_parity_resnet18.onnx"
FIXTURE_FILE = "block_parity_resnet18.safetensors"
SGD = dict(lr=0.05, momentum=0.9, dampening=0.0, nesterov=False, weight_decay=1e-4)
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
LAMB = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=1e-2)


# ---- torchvision's resnet18 layout ---------------------------------------------------------

class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        widths, cin = [64, 128, 256, 512], 64
        for i, w in enumerate(widths):
            stride = 1 if i == 0 else 2
            setattr(self, f"layer{i + 1}",
                    nn.Sequential(BasicBlock(cin, w, stride), BasicBlock(w, w, 1)))
            cin = w
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def frozen(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer3(self.layer2(self.layer1(x)))

    def forward(self, x):
        x = self.layer4(self.frozen(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build_network():
    torch.manual_seed(1515)
    net = ResNet18()
    calib = torch.randn(32, C, HW, HW, generator=torch.Generator().manual_seed(5))
    bns = [m for m in net.modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average: one batch gives that batch's statistics
    net.train()
    with torch.no_grad():
        net(calib)
        g = torch.Generator().manual_seed(6)
        for bn in bns:
            bn.momentum = 0.1
            bn.weight.copy_(1 + 0.1 * torch.randn(bn.weight.shape, generator=g))
            bn.bias.copy_(0.1 * torch.randn(bn.bias.shape, generator=g))
    return net.eval()


# ---- export ----------------------------------------------------------------------------------

def export(net, path):
    x = torch.zeros(2, C, HW, HW)
    with warnings.catch_warnings():
        # the TorchScript exporter's deprecation notice, and its advice against constant folding
        # with PRESERVE (which is about models in training mode; this one is in eval mode)
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (x,), path, dynamo=False, opset_version=17, input_names=["x"],
                          output_names=["logits"],
                          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}},
                          training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=True)


def layer3_output(path):
    """The tensor layer4's first Conv and its downsample Conv read: layer3's output."""
    import onnx
    g = onnx.load(path).graph
    convs = [n for n in g.node if n.op_type == "Conv" and n.name.startswith("/layer4/layer4.0/")]
    first = [n for n in convs if "/conv1/" in n.name]
    down = [n for n in convs if "/downsample/" in n.name]
    if len(first) != 1 or len(down) != 1 or first[0].input[0] != down[0].input[0]:
        sys.exit(f"{path}: cannot find layer4's first Conv and downsample Conv")
    name = first[0].input[0]
    producers = [n for n in g.node if name in n.output]
    if len(producers) != 1 or not producers[0].name.startswith("/layer3/"):
        sys.exit(f"{path}: '{name}' is not computed by layer3")
    n_bn = sum(n.op_type == "BatchNormalization" for n in g.node)
    if n_bn != 20:
        sys.exit(f"{path}: {n_bn} BatchNormalization nodes, want 20 (BN folded by the exporter?)")
    last = [n for n in g.node if n.name.startswith("/layer4/")][-1]
    return name, last.output[0]


def check_export(path, net, images):
    import onnxruntime as ort
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {"x": images[:8].numpy()})[0]
    with torch.no_grad():
        want = net(images[:8]).numpy()
    rel = float(np.abs(got - want).max() / np.abs(want).max())
    if rel > 1e-4:
        sys.exit(f"{path}: ONNX Runtime differs from torch by {rel:.3g}")
    return rel


# ---- training --------------------------------------------------------------------------------

def make_problem():
    """Images i and i + 32 are the same image with different labels: layer4 and the head could
    memorize 64 distinct samples (the loss would go to 0, where relative errors mean nothing);
    a pair with two labels keeps the loss at or above log 2."""
    half = N // 2
    g = torch.Generator().manual_seed(2)
    images = torch.randn(half, C, HW, HW, generator=g).repeat(2, 1, 1, 1)
    first = torch.randint(0, CLASSES, (half,), generator=g)
    other = (first + torch.randint(1, CLASSES, (half,), generator=g)) % CLASSES
    labels = torch.cat([first, other])
    torch.manual_seed(3)
    head = nn.Linear(512, CLASSES)
    rng = np.random.default_rng(4)
    order = np.stack([rng.permutation(N) for _ in range(EPOCHS)]).astype(np.int64)
    return images, labels, head.weight.detach().clone(), head.bias.detach().clone(), order


def batch_indices(order, s):
    at = BATCH * (s % STEPS_PER_EPOCH)
    return torch.from_numpy(order[s // STEPS_PER_EPOCH][at:at + BATCH].copy())


class Trainable(nn.Module):
    """layer4 (eval mode) -> global average pool -> flatten -> the new head."""

    def __init__(self, net, w0, b0):
        super().__init__()
        self.layer4 = copy.deepcopy(net.layer4).eval()
        self.head = nn.Linear(512, CLASSES)
        with torch.no_grad():
            self.head.weight.copy_(w0)
            self.head.bias.copy_(b0)

    def forward(self, f):
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.layer4(f), 1), 1))


def param_groups(model, wd):
    decay = [p for p in model.parameters() if p.ndim > 1]
    rest = [p for p in model.parameters() if p.ndim <= 1]
    return [{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}]


class Lamb:
    """LAMB exactly as src/train/optim.h writes it (float32 elementwise, norms in float64)."""

    def __init__(self, groups, lr, betas, eps):
        self.groups, self.lr, self.b1, self.b2, self.eps = groups, lr, betas[0], betas[1], eps
        self.state, self.t = {}, 0

    def zero_grad(self):
        for g in self.groups:
            for p in g["params"]:
                p.grad = None

    @torch.no_grad()
    def step(self):
        self.t += 1
        f32 = torch.float32
        bc1 = torch.tensor(1.0 - self.b1 ** self.t, dtype=f32)
        bc2 = torch.tensor(1.0 - self.b2 ** self.t, dtype=f32)
        b1, b2 = torch.tensor(self.b1, dtype=f32), torch.tensor(self.b2, dtype=f32)
        w1, w2 = torch.tensor(1.0 - self.b1, dtype=f32), torch.tensor(1.0 - self.b2, dtype=f32)
        for g in self.groups:
            wd = torch.tensor(g["weight_decay"], dtype=f32)
            for p in g["params"]:
                m, v = self.state.setdefault(id(p), (torch.zeros_like(p), torch.zeros_like(p)))
                grad = p.grad
                m.copy_(b1 * m + w1 * grad)
                v.copy_(b2 * v + w2 * (grad * grad))
                u = (m / bc1) / (torch.sqrt(v / bc2) + torch.tensor(self.eps, dtype=f32)) + wd * p
                wn, un = float(p.double().norm()), float(u.double().norm())
                ratio = torch.tensor(wn / un if wn > 0 and un > 0 else 1.0, dtype=f32)
                p.copy_(p - (torch.tensor(self.lr, dtype=f32) * ratio) * u)


def make_optimizer(kind, model):
    if kind == "sgd":
        cfg = {k: v for k, v in SGD.items() if k != "weight_decay"}
        return torch.optim.SGD(param_groups(model, SGD["weight_decay"]), foreach=False, **cfg)
    if kind == "adamw":
        cfg = {k: v for k, v in ADAMW.items() if k != "weight_decay"}
        return torch.optim.AdamW(param_groups(model, ADAMW["weight_decay"]), foreach=False,
                                 **cfg)
    return Lamb(param_groups(model, LAMB["weight_decay"]), LAMB["lr"], LAMB["betas"],
                LAMB["eps"])


def train(kind, net, frozen, labels, w0, b0, order):
    model = Trainable(net, w0, b0)
    opt = make_optimizer(kind, model)
    losses, logits0 = [], None
    for s in range(STEPS):
        idx = batch_indices(order, s)
        logits = model(frozen[idx])
        if s == 0:
            logits0 = logits.detach().clone()
        loss = F.cross_entropy(logits, labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return np.array(losses, dtype=np.float32), logits0


def perturbed_losses(kind, net, frozen, labels, w0, b0, order, scale):
    g = torch.Generator().manual_seed(7)
    noisy = frozen * (1 + scale * torch.randn(frozen.shape, generator=g))
    return train(kind, net, noisy, labels, w0, b0, order)[0]


def rel_change(got, want):
    return np.abs(got - want) / np.maximum(np.abs(want), 1e-30)


def stable_steps(rel, tol=1e-5):
    """The leading steps whose loss moved less than tol."""
    return int(np.argmax(rel >= tol)) if (rel >= tol).any() else len(rel)


def sensitivity(net, frozen, labels, w0, b0, order, losses):
    """How far the losses move when the frozen features move by 1e-7 or 1e-6 relative (the
    rounding of another implementation's fp32 arithmetic): the tolerance a parity test can hope
    for, and from which step on."""
    for scale in (1e-7, 1e-6):
        for kind, want in losses.items():
            rel = rel_change(perturbed_losses(kind, net, frozen, labels, w0, b0, order, scale),
                             want)
            print(f"  features x (1 + {scale:g} N(0,1)), {kind:5s}: max rel loss change "
                  f"{rel.max():.2g}; steps below 1e-5: {stable_steps(rel)}, below 1e-4: "
                  f"{stable_steps(rel, 1e-4)}")


# ---- output ----------------------------------------------------------------------------------

def write_safetensors(path, tensors, meta):
    """The safetensors layout (src/train/safetensors.h), written by hand (no extra package)."""
    names = {np.float32: "F32", np.int64: "I64"}
    header, blobs, at = {"__metadata__": meta}, [], 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": names[arr.dtype.type], "shape": list(arr.shape),
                        "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def up_to_date(out):
    model, fixture = os.path.join(out, MODEL_FILE), os.path.join(out, FIXTURE_FILE)
    if not (os.path.exists(model) and os.path.exists(fixture)):
        return False
    try:
        with open(fixture, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            meta = json.loads(f.read(n))["__metadata__"]
        return meta.get("generator_version") == str(GENERATOR_VERSION)
    except (OSError, ValueError, KeyError, struct.error):
        return False


def recipe(cfg):
    return " ".join(f"{k}={v}" for k, v in cfg.items())


def record(out, check_sensitivity):
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(2)
    os.makedirs(out, exist_ok=True)
    net = build_network()
    images, labels, w0, b0, order = make_problem()
    model_path = os.path.join(out, MODEL_FILE)
    export(net, model_path)
    from_name, to_name = layer3_output(model_path)
    ort_rel = check_export(model_path, net, images)
    with torch.no_grad():
        frozen = net.frozen(images)
    losses, logits0, stable = {}, None, {}
    for kind in ("sgd", "adamw", "lamb"):
        losses[kind], logits0 = train(kind, net, frozen, labels, w0, b0, order)
        noisy = perturbed_losses(kind, net, frozen, labels, w0, b0, order, 1e-7)
        stable[kind] = stable_steps(rel_change(noisy, losses[kind]))
        print(f"{kind:6s} loss {losses[kind][0]:.4f} -> {losses[kind][-1]:.4f}; "
              f"{stable[kind]} steps stable to 1e-7 feature noise")
    if check_sensitivity:
        sensitivity(net, frozen, labels, w0, b0, order, losses)
    tensors = {
        "images": images.numpy(), "labels": labels.numpy().astype(np.int64), "order": order,
        "frozen": frozen.numpy(), "head.weight": w0.numpy(), "head.bias": b0.numpy(),
        "logits0": logits0.numpy(),
        **{f"losses.{k}": v for k, v in losses.items()},
    }
    meta = {
        "from": from_name, "to": to_name, "model": MODEL_FILE, "input": "x",
        "batch": str(BATCH), "steps": str(STEPS), "classes": str(CLASSES),
        "sgd": recipe(SGD), "adamw": recipe(ADAMW), "lamb": recipe(LAMB),
        "decay": "parameters with ndim > 1 (conv and Linear weights) only",
        "trainable": "layer4 (BatchNormalization in eval mode: running statistics frozen, "
                     "scale and bias trained) + global average pool + flatten + Linear(512, 10)",
        "torch": torch.__version__, "generator_version": str(GENERATOR_VERSION),
        **{f"stable_steps.{k}": str(v) for k, v in stable.items()},
    }
    write_safetensors(os.path.join(out, FIXTURE_FILE), tensors, meta)
    print(f"from '{from_name}' to '{to_name}'; ONNX Runtime vs torch {ort_rel:.2g}; wrote "
          f"{model_path} and {os.path.join(out, FIXTURE_FILE)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--out", default=os.path.join(root, "tests", "data", "gen"))
    ap.add_argument("--force", action="store_true", help="rebuild even when up to date")
    ap.add_argument("--sensitivity", action="store_true",
                    help="also train on features moved by 1e-6 and print how far losses move")
    args = ap.parse_args()
    if not args.force and not args.sensitivity and up_to_date(args.out):
        print(f"{FIXTURE_FILE}: up to date (generator version {GENERATOR_VERSION})")
        return
    record(args.out, args.sensitivity)


if __name__ == "__main__":
    main()
