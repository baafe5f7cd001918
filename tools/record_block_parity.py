#!/usr/bin/env python3
"""record_block_parity.py: records PyTorch's per-step losses of fine-tuning ResNet-18's last stage
(layer4, BatchNorm in eval mode) plus a new Linear head, for graft's block-training parity test
(issue 15; tests/test_block_parity.c), into a small committed fixture.

Usage: /path/to/venv/python3 tools/record_block_parity.py [--gen tests/data/gen]
           [--out tests/data/block_parity_fixture.txt] [--sensitivity]
Needs torch, onnx and numpy. Run by hand when the model, the problem or a recipe changes; CI has
no torch and only regenerates the model (tools/make_models.py, torch-free) and reads the fixture.

The network is tools/make_models.py's `block_parity_resnet18` (torchvision's resnet18 layout at
input `x` (batch, 3, 64, 64), seeded numpy weights, calibrated BN statistics, BN kept as nodes;
its initializers carry torchvision's state_dict names): this script loads its initializers into
a torch module of that layout (made first with make_models' builder when --gen lacks it) and
checks the module against the model's ONNX Runtime output recorded by make_models.

The problem: the model's 32 recorded images (block_parity_resnet18.in.x.npy, N(0, 1), numpy seed
1516) twice: image i + 32 repeats image i with another label (labels from
numpy.random.default_rng(2): first = integers(0, 10, 32), other = (first + integers(1, 10, 32))
% 10): 64 distinct samples would be memorized (the loss going to 0, where a relative comparison
means nothing); a pair with two labels keeps it >= log 2. Frozen part: the network up to
layer3's output (`from`: the input of layer4's first Conv and of its downsample Conv).
Trainable part: layer4 in eval mode (running statistics frozen; conv weights and BN scale/bias
trained), global average pool, flatten and a new Linear(512, 10) head (weight and bias
U(-1/sqrt(512), 1/sqrt(512)) from numpy.random.default_rng(3), stored). Batch 16, 4 steps per
epoch, 25 epochs = 100 steps; epoch e's order is a permutation of 0..63 from
numpy.random.default_rng(4) (drawn in epoch order); step s uses
order[s // 4][16 * (s % 4) : 16 * (s % 4) + 16]. Loss: cross-entropy, mean over the batch, of the
batch before that step's update. Weight decay applies to parameters with ndim > 1 (conv and
Linear weights), not to biases nor BN scale/bias. Optimizers:
  sgd    torch.optim.SGD lr 0.05, momentum 0.9, dampening 0, nesterov off, weight_decay 1e-4.
  adamw  torch.optim.AdamW lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2.
  lamb   LAMB as src/train/optim.h writes it (You et al. 2019, Algorithm 2, phi = identity):
         m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; u = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)
         + wd w; r = ||w|| / ||u|| per tensor (norms in float64; 1 if either is 0);
         w -= lr r u. lr 1e-3, betas (0.9, 0.999), eps 1e-6, wd 1e-2. In torch float32.
float32 throughout on the CPU, deterministic algorithms, 2 threads.

Sensitivity: the training is chaotic. Per optimizer a second run on features moved by noise of
the size of graft's difference from PyTorch's frozen features (NOISE_REL: max |d| / max |f| =
4e-6; graft measures 1.9e-6, what folding BN into the frozen convs gives in torch too, and its
trainable part rounds differently as well) gives stable_steps (the leading steps whose loss moves
less than 1e-5 relative) and the relative change of every step's loss (noise_max_rel) and of the
last epoch's mean (noise_final_rel): what a parity test can honestly hold past the stable steps.
--sensitivity also prints that for noise 1e-7 and 1e-6 and for the BN-folded features.

The fixture (text, `key n v1 ... vn`, values %.9g; `key s STRING` for a string; `#` comments):
  from, to (s)       layer3's output tensor name, layer4's output before the pool
  labels (64), order (25*64)           as above
  head.weight (10*512, row-major: logits = f W^T + b), head.bias (10)
  frozen0 (1024)     PyTorch's layer3 output of image 0, its first 1024 values (64 channels)
  logits0 (16*10)    the trainable part's output for step 0's batch before any update
  recipe.KIND.{lr,momentum,weight_decay,beta1,beta2,eps} (1 each), KIND in sgd, adamw, lamb
  losses.KIND (100)  per step, the loss of that step's batch before its update
  stable_steps.KIND (1), noise_max_rel.KIND (1), noise_final_rel.KIND (1)
  noise_rel (1), generator_version (1), model_generator_version (1)
"""
import argparse
import copy
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

GENERATOR_VERSION = 3
MODEL = "block_parity_resnet18"
N, C, HW, CLASSES = 64, 3, 64, 10
BATCH, EPOCHS = 16, 25
STEPS_PER_EPOCH = N // BATCH
STEPS = EPOCHS * STEPS_PER_EPOCH
NOISE_REL = 4e-6
SGD = dict(lr=0.05, momentum=0.9, dampening=0.0, nesterov=False, weight_decay=1e-4)
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
LAMB = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=1e-2)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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

    def frozen(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer3(self.layer2(self.layer1(x)))

    def forward(self, x):
        x = self.layer4(self.frozen(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# ---- the ONNX model (tools/make_models.py) -------------------------------------------------

def model_files(gen):
    """The model's path, recorded input and output and generator version (made when missing)."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import make_models
    from pathlib import Path
    if not make_models.is_up_to_date(Path(gen), MODEL):
        os.makedirs(gen, exist_ok=True)
        make_models.build_one(Path(gen), MODEL)
    paths = [os.path.join(gen, f"{MODEL}{s}") for s in (".onnx", ".in.x.npy", ".out.logits.npy")]
    return paths, make_models.GENERATOR_VERSION


def load_network(path, images, want_logits):
    """A torch ResNet18 with the ONNX model's initializers (torchvision state_dict names)."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(path)
    state = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
             for t in model.graph.initializer}
    net = ResNet18()
    missing, unexpected = net.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        sys.exit(f"{path}: initializers do not fit torchvision's resnet18: missing {missing[:4]}, "
                 f"unexpected {unexpected[:4]}")
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d) and m.eps != 1e-5:
            sys.exit("BN epsilon")
    net.eval()
    with torch.no_grad():
        got = net(torch.from_numpy(images)).numpy()
    rel = float(np.abs(got - want_logits).max() / np.abs(want_logits).max())
    if rel > 1e-4:
        sys.exit(f"{path}: torch differs from the recorded ONNX Runtime output by {rel:.3g}")
    return net, model.graph, rel


def layer3_output(g):
    """The tensor layer4's first Conv and its downsample Conv read: layer3's output."""
    convs = [n for n in g.node if n.op_type == "Conv" and n.name.startswith("/layer4/layer4.0/")]
    first = [n for n in convs if "/conv1/" in n.name]
    down = [n for n in convs if "/downsample" in n.name]
    if len(first) != 1 or len(down) != 1 or first[0].input[0] != down[0].input[0]:
        sys.exit("cannot find layer4's first Conv and downsample Conv")
    name = first[0].input[0]
    producers = [n for n in g.node if name in n.output]
    if len(producers) != 1 or not producers[0].name.startswith("/layer3/"):
        sys.exit(f"'{name}' is not computed by layer3")
    n_bn = sum(n.op_type == "BatchNormalization" for n in g.node)
    if n_bn != 20:
        sys.exit(f"{n_bn} BatchNormalization nodes, want 20")
    last = [n for n in g.node if n.name.startswith("/layer4/")][-1]
    return name, last.output[0]


# ---- training --------------------------------------------------------------------------------

def make_problem(images32):
    """Images i and i + 32 are the same image with different labels (see the docstring)."""
    half = N // 2
    rng = np.random.default_rng(2)
    first = rng.integers(0, CLASSES, half)
    other = (first + rng.integers(1, CLASSES, half)) % CLASSES
    labels = np.concatenate([first, other]).astype(np.int64)
    bound = 1.0 / np.sqrt(512.0)
    rng = np.random.default_rng(3)
    w0 = rng.uniform(-bound, bound, (CLASSES, 512)).astype(np.float32)
    b0 = rng.uniform(-bound, bound, CLASSES).astype(np.float32)
    rng = np.random.default_rng(4)
    order = np.stack([rng.permutation(N) for _ in range(EPOCHS)]).astype(np.int64)
    images = np.concatenate([images32, images32])
    return torch.from_numpy(images), torch.from_numpy(labels), w0, b0, order


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
            self.head.weight.copy_(torch.from_numpy(w0))
            self.head.bias.copy_(torch.from_numpy(b0))

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
    return train_model(kind, Trainable(net, w0, b0), lambda m, idx: m(frozen[idx]), labels,
                       order)


def train_model(kind, model, forward, labels, order):
    """STEPS steps of the recipe on model; forward(model, idx) gives a batch's logits."""
    opt = make_optimizer(kind, model)
    losses, logits0 = [], None
    for s in range(STEPS):
        idx = batch_indices(order, s)
        logits = forward(model, idx)
        if s == 0:
            logits0 = logits.detach().clone()
        loss = F.cross_entropy(logits, labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return np.array(losses, dtype=np.float32), logits0


# ---- sensitivity -----------------------------------------------------------------------------

def noisy(frozen, max_rel):
    """frozen * (1 + s N(0, 1)), s such that max |change| / max |frozen| = max_rel."""
    n = torch.randn(frozen.shape, generator=torch.Generator().manual_seed(7))
    d = frozen * n
    return frozen + d * (max_rel * float(frozen.abs().max()) / float(d.abs().max()))


def folded_frozen(net, images):
    """The frozen part with every BN folded into the Conv before it, as graft's frozen part."""
    net = copy.deepcopy(net)
    pairs = [(net.conv1, net.bn1)]
    for layer in (net.layer1, net.layer2, net.layer3):
        for b in layer:
            pairs += [(b.conv1, b.bn1), (b.conv2, b.bn2)]
            if b.downsample is not None:
                pairs.append((b.downsample[0], b.downsample[1]))
    with torch.no_grad():
        for conv, bn in pairs:
            scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
            conv.weight.mul_(scale.reshape(-1, 1, 1, 1))
            conv.bias = nn.Parameter(bn.bias - bn.running_mean * scale)
            bn.running_mean.zero_(), bn.running_var.fill_(1 - bn.eps)
            bn.weight.fill_(1), bn.bias.zero_()
        return net.frozen(images)


def max_rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


def rel_change(got, want):
    return np.abs(got - want) / np.maximum(np.abs(want), 1e-30)


def stable_steps(rel, tol=1e-5):
    """The leading steps whose loss moved less than tol."""
    return int(np.argmax(rel >= tol)) if (rel >= tol).any() else len(rel)


def final_rel(got, want):
    """Relative change of the last epoch's mean loss."""
    return abs(float(got[-4:].mean()) - float(want[-4:].mean())) / float(want[-4:].mean())


def sensitivity(net, images, frozen, labels, w0, b0, order, losses):
    """How far the losses move for other perturbations of the frozen features."""
    folded = folded_frozen(net, images)
    cases = [(f"x (1 + s N(0,1)), max rel {r:g}", noisy(frozen, r)) for r in (1e-7, 1e-6)]
    cases.append((f"BN folded (max rel {max_rel(folded, frozen):.2g})", folded))
    for what, f in cases:
        for kind, want in losses.items():
            got = train(kind, net, f, labels, w0, b0, order)[0]
            rel = rel_change(got, want)
            print(f"  features {what}, {kind:5s}: max rel loss change {rel.max():.2g}; steps "
                  f"below 1e-5: {stable_steps(rel)}, below 1e-4: {stable_steps(rel, 1e-4)}; "
                  f"last epoch's mean {final_rel(got, want):.2g}")


# ---- output ----------------------------------------------------------------------------------

def write_fixture(path, items, header):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for line in header:
            f.write(f"# {line}\n")
        for key, val in items:
            if isinstance(val, str):
                f.write(f"{key} s {val}\n")
                continue
            vals = np.asarray(val, dtype=np.float64).ravel()
            f.write(f"{key} {len(vals)}")
            for i, v in enumerate(vals):
                f.write(("\n" if i % 16 == 0 and len(vals) > 1 else " ") + f"{v:.9g}")
            f.write("\n")
    os.replace(tmp, path)


def recipe_items(kind, cfg):
    b1, b2 = cfg.get("betas", (0.9, 0.999))
    vals = dict(lr=cfg["lr"], momentum=cfg.get("momentum", 0.0), weight_decay=cfg["weight_decay"],
                beta1=b1, beta2=b2, eps=cfg.get("eps", 0.0))
    return [(f"recipe.{kind}.{k}", [v]) for k, v in vals.items()]


def record(gen, out, check_sensitivity):
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(2)
    (model_path, in_path, out_path), model_version = model_files(gen)
    images32 = np.load(in_path)
    images, labels, w0, b0, order = make_problem(images32)
    net, graph, ort_rel = load_network(model_path, images32, np.load(out_path))
    from_name, to_name = layer3_output(graph)
    with torch.no_grad():
        frozen = net.frozen(images)
    perturbed = noisy(frozen, NOISE_REL)
    losses, logits0, items = {}, None, []
    for kind in ("sgd", "adamw", "lamb"):
        losses[kind], logits0 = train(kind, net, frozen, labels, w0, b0, order)
        got = train(kind, net, perturbed, labels, w0, b0, order)[0]
        rel = rel_change(got, losses[kind])
        noise_final = final_rel(got, losses[kind])
        items += [(f"losses.{kind}", losses[kind]), (f"stable_steps.{kind}", [stable_steps(rel)]),
                  (f"noise_max_rel.{kind}", [rel.max()]),
                  (f"noise_final_rel.{kind}", [noise_final])]
        print(f"{kind:6s} loss {losses[kind][0]:.4f} -> {losses[kind][-1]:.4f}; under "
              f"{NOISE_REL:g} feature noise: {stable_steps(rel)} steps within 1e-5, max rel "
              f"change {rel.max():.2g}")
    if check_sensitivity:
        sensitivity(net, images, frozen, labels, w0, b0, order, losses)
    for kind, cfg in (("sgd", SGD), ("adamw", ADAMW), ("lamb", LAMB)):
        items += recipe_items(kind, cfg)
    items = [("from", from_name), ("to", to_name), ("labels", labels.numpy()), ("order", order),
             ("head.weight", w0), ("head.bias", b0),
             ("frozen0", frozen[0].numpy().ravel()[:1024]), ("logits0", logits0.numpy()),
             ("noise_rel", [NOISE_REL]), ("generator_version", [GENERATOR_VERSION]),
             ("model_generator_version", [int(model_version)])] + items
    header = [f"{os.path.basename(out)}: written by tools/record_block_parity.py (torch "
              f"{torch.__version__}); do not edit. Layout and recipes: that script's docstring.",
              f"Model: tools/make_models.py's {MODEL} (generator version {model_version}); "
              f"torch vs its ONNX Runtime output {ort_rel:.2g}."]
    write_fixture(out, items, header)
    print(f"from '{from_name}' to '{to_name}'; wrote {out} ({os.path.getsize(out)} bytes)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gen", default=os.path.join(ROOT, "tests", "data", "gen"),
                    help="where the model is (made there when missing)")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data",
                                                  "block_parity_fixture.txt"))
    ap.add_argument("--sensitivity", action="store_true",
                    help="also train on other perturbations of the features and print how far "
                         "losses move")
    args = ap.parse_args()
    record(args.gen, args.out, args.sensitivity)


if __name__ == "__main__":
    main()
