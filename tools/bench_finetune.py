#!/usr/bin/env python3
"""bench_finetune.py: a frozen-backbone fine-tune on a JPEG folder, graft against PyTorch in one run.

Makes the JPEG set (500x375 photos-like images in 10 classes, fixed seed), exports a torchvision
ResNet-50 (random weights, TorchScript exporter, opset 17, dynamic batch), then times, one after
another on the same GPU and cores:
  torch_loop    the loop users write: ImageFolder + DataLoader workers, frozen backbone under
                autocast, a linear head; the backbone runs every epoch (timed for --loop-epochs
                epochs and scaled to --epochs, said so in the table)
  torch_expert  the backbone once into GPU-resident features (same DataLoader), then the head's
                epochs on the GPU
  graft_cold    graft finetune --device cuda:0 --precision P --cache DIR (empty cache)
  graft_warm    the same again, every feature in the cache
  (--nvjpeg)    both again with --decode gpu (nvJPEG; a cache of their own)
Prints one table: wall seconds, graft's own backbone/head split, and each run's ratio to graft.
Usage: tools/bench_finetune.py [--train 20000] [--val 2000] [--epochs 10] [--batch 256]
       [--workers 16] [--precision bf16] [--graft build/release/graft] [--work DIR]
"""
import argparse
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor


def make_image(args):
    path, cls, seed = args
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    h, w = 375, 500
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.array([(cls * 37) % 255, (cls * 91) % 255, (cls * 53) % 255], np.float32)
    img = np.empty((h, w, 3), np.float32)
    for c in range(3):  # a class colour, a class-dependent stripe frequency, smooth noise
        f = 0.01 + 0.004 * cls + 0.002 * c
        img[..., c] = base[c] * 0.6 + 60 * np.sin(f * (xx + yy * (c + 1)) + rng.uniform(0, 6))
    img += rng.normal(0, 18, (h // 8 + 1, w // 8 + 1, 3)).repeat(8, 0).repeat(8, 1)[:h, :w]
    img += rng.normal(0, 6, img.shape)
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(path, quality=90)


def make_set(root, n, classes, seed, workers):
    if os.path.isdir(root) and sum(len(fs) for _, _, fs in os.walk(root)) == n:
        return
    jobs = []
    for i in range(n):
        cls = i % classes
        d = os.path.join(root, f"class_{cls:02d}")
        os.makedirs(d, exist_ok=True)
        jobs.append((os.path.join(d, f"{i:07d}.jpg"), cls, seed * 1000003 + i))
    with ProcessPoolExecutor(workers) as ex:
        list(ex.map(make_image, jobs, chunksize=64))


def export_resnet50(path):
    if os.path.exists(path):
        return
    import torch
    import torchvision

    torch.manual_seed(0)
    net = torchvision.models.resnet50(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    torch.onnx.export(net, x, path, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=17, dynamo=False)


def torch_runs(a, model_path):
    import torch
    import torchvision
    from torchvision import transforms

    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda:0")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.precision]
    tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
                             transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    train = torchvision.datasets.ImageFolder(os.path.join(a.work, "train"), tf)
    val = torchvision.datasets.ImageFolder(os.path.join(a.work, "val"), tf)
    torch.manual_seed(0)
    net = torchvision.models.resnet50(weights=None)
    net.fc = torch.nn.Identity()
    net = net.to(dev).eval().to(memory_format=torch.channels_last)
    for p in net.parameters():
        p.requires_grad_(False)

    def loader(ds, shuffle):
        return torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=shuffle, num_workers=a.workers,
                                           pin_memory=True, persistent_workers=False)

    def features(x):
        with torch.autocast("cuda", dtype=dtype, enabled=a.precision != "fp32"):
            return net(x.to(dev, non_blocking=True).to(memory_format=torch.channels_last)).float()

    out = {}
    # The loop users write: the backbone every epoch.
    head = torch.nn.Linear(2048, 10).to(dev)
    opt = torch.optim.AdamW(head.parameters(), lr=1e-3)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.loop_epochs):  # --loop-epochs 0: the expert's alone
        for x, y in loader(train, True):
            loss = torch.nn.functional.cross_entropy(head(features(x)), y.to(dev))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        with torch.no_grad():
            for x, y in loader(val, False):
                head(features(x))
    torch.cuda.synchronize()
    if a.loop_epochs:
        out["torch_loop"] = (time.perf_counter() - t0) * a.epochs / a.loop_epochs
    # The expert's: features once, GPU-resident, then the head's epochs.
    t0 = time.perf_counter()
    with torch.no_grad():
        f_tr, y_tr = zip(*[(features(x), y.to(dev)) for x, y in loader(train, False)])
        f_va, y_va = zip(*[(features(x), y.to(dev)) for x, y in loader(val, False)])
    f_tr, y_tr, f_va = torch.cat(f_tr), torch.cat(y_tr), torch.cat(f_va)
    torch.cuda.synchronize()
    t_backbone = time.perf_counter() - t0
    head = torch.nn.Linear(2048, 10).to(dev)
    opt = torch.optim.AdamW(head.parameters(), lr=1e-3)
    g = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.epochs):
        perm = torch.randperm(len(f_tr), device=dev, generator=g)
        for i in range(0, len(perm), a.batch):
            j = perm[i:i + a.batch]
            loss = torch.nn.functional.cross_entropy(head(f_tr[j]), y_tr[j])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        with torch.no_grad():
            head(f_va)
    torch.cuda.synchronize()
    out["torch_expert"] = time.perf_counter() - t0
    out["torch_expert_backbone"] = t_backbone
    return out


def graft_run(a, model_path, cache, log, extra=(), threads=None):
    """threads None: --threads a.workers on the CPU-decoding runs, graft's default with --decode
    gpu and gpu+cpu (there every core but three beside nvJPEG)."""
    if threads is None and not any(x.startswith("gpu") for x in extra):
        threads = a.workers
    cmd = [a.graft, "finetune", "--model", model_path, "--data", os.path.join(a.work, "train"),
           "--val", os.path.join(a.work, "val"), "--out", os.path.join(a.work, "head.onnx"),
           "--device", a.device, "--precision", a.precision, "--cache", cache, "--epochs",
           str(a.epochs), "--batch", str(a.batch)] + (["--threads", str(threads)] if threads else []) + list(extra)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout + p.stderr)
    if p.returncode != 0:
        sys.exit(f"graft finetune failed ({p.returncode}); see {log}:\n{p.stderr[-2000:]}")
    m = re.search(r"time\s+backbone ([0-9.]+)s.*head ([0-9.]+)s", p.stdout + p.stderr)
    return wall, (float(m.group(1)), float(m.group(2))) if m else (None, None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", type=int, default=20000)
    ap.add_argument("--val", type=int, default=2000)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--loop-epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--graft", default="build/release/graft")
    ap.add_argument("--work", default="/tmp/bench_finetune")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--nvjpeg", action="store_true", help="also graft with --decode gpu")
    ap.add_argument("--nvjpeg-cpu", action="store_true",
                    help="also graft with --decode gpu+cpu (CPU threads beside nvJPEG)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    t0 = time.perf_counter()
    make_set(os.path.join(a.work, "train"), a.train, 10, 1, a.workers)
    make_set(os.path.join(a.work, "val"), a.val, 10, 2, a.workers)
    model = os.path.join(a.work, "resnet50.onnx")
    export_resnet50(model)
    print(f"data and model ready in {time.perf_counter() - t0:.1f} s ({a.train} + {a.val} JPEGs "
          f"500x375, ResNet-50, {a.epochs} epochs, batch {a.batch}, {a.workers} workers, {a.precision})")
    cache = os.path.join(a.work, "cache")
    subprocess.run(["rm", "-rf", cache])
    rows = {}
    rows["graft_cold"] = graft_run(a, model, cache, os.path.join(a.work, "graft_cold.log"))
    rows["graft_warm"] = graft_run(a, model, cache, os.path.join(a.work, "graft_warm.log"))
    if a.nvjpeg:
        gpu = ["--decode", "gpu"]
        rows["graft_cold_nvjpeg"] = graft_run(a, model, cache, os.path.join(a.work, "graft_cold_nvjpeg.log"), gpu)
        rows["graft_warm_nvjpeg"] = graft_run(a, model, cache, os.path.join(a.work, "graft_warm_nvjpeg.log"), gpu)
    if a.nvjpeg_cpu:  # a fresh cache: the features' identity differs
        subprocess.run(["rm", "-rf", cache])
        rows["graft_cold_nvjpeg_cpu"] = graft_run(
            a, model, cache, os.path.join(a.work, "graft_cold_nvjpeg_cpu.log"), ["--decode", "gpu+cpu"])
    if not a.no_torch:
        t = torch_runs(a, model)
        if "torch_loop" in t:
            rows["torch_loop"] = (t["torch_loop"], (None, None))
        rows["torch_expert"] = (t["torch_expert"], (t["torch_expert_backbone"], None))
    cold = rows["graft_cold"][0]
    print(f"\n| run | wall s | backbone s | head s | wall / graft_cold |")
    print("|---|---|---|---|---|")
    for name, (wall, (bb, hd)) in rows.items():
        note = f" (timed {a.loop_epochs} epochs, scaled to {a.epochs})" if name == "torch_loop" else ""
        fmt = lambda v: "" if v is None else f"{v:.2f}"
        print(f"| {name}{note} | {wall:.2f} | {fmt(bb)} | {fmt(hd)} | {wall / cold:.2f} |")


if __name__ == "__main__":
    main()
