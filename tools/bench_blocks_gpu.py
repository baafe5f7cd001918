#!/usr/bin/env python3
"""bench_blocks_gpu.py: fine-tuning ResNet-50's last stage (layer4) and a new head on the GPU from
the cache, graft against PyTorch in one run (issue 15's speed test).

Makes a JPEG set (tools/bench_finetune.py's images, 10 classes), exports a torchvision ResNet-50
(random weights, seed 0, opset 17, dynamic batch), then times on the same GPU, one after another,
the epochs that train layer4 + a Linear(2048, 10) head with SGD (momentum 0.9), fp32, BatchNorm
in eval mode (frozen statistics), validation after every epoch:
  graft_warm      graft finetune --unfreeze 1 --device cuda:0 --precision fp32 --cache DIR, run
                  a second time so every frozen row comes from the cache: its `head` time is the
                  epochs of the blocks and the head (and their validation); GRAFT_STEP_GRAPH=1:
                  blocks, head and loss one graph, everything resident on the GPU
  graft_warm_pause the same with GRAFT_STEP_GRAPH=0: the head and its loss on the host in the
                  blocks' pause (the path before the step graph), weights and optimizer resident
  graft_warm_host the same with GRAFT_RESIDENT=0: also the weights and optimizer on the host,
                  uploaded and downloaded every step (the path before residency)
  torch_frozen    the frozen part (stem..layer3) under no_grad every epoch, on images already
                  decoded and resident on the GPU, then layer4 + fc forward and backward
  torch_cached    layer3's activations computed once and kept on the GPU, then the same epochs
  torch_cached_tf32  the same with PyTorch's default TF32 convolutions (graft runs strict fp32)
Prints images/s of the training epochs (train images x epochs / seconds) and each run's ratio to
graft's. The frozen part's one pass (graft_cold's backbone time, PyTorch's caching pass) is shown
apart. Usage: tools/bench_blocks_gpu.py [--train 1280] [--val 256] [--epochs 3] [--batch 64]
       [--graft build/release/graft] [--work DIR]
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_finetune  # noqa: E402
from bench_finetune import export_resnet50, make_set  # noqa: E402


def graft_run(a, model, cache, log):
    """bench_finetune's graft run with the blocks' options: (wall, backbone s, head s)."""
    extra = ["--unfreeze", "1", "--optimizer", "sgd", "--lr", str(a.lr), "--momentum", "0.9"]
    wall, (backbone, head) = bench_finetune.graft_run(a, model, cache, log, extra)
    return wall, backbone, head

def torch_runs(a):
    import torch
    import torchvision
    from torchvision import transforms

    dev = torch.device("cuda:0")
    tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                             transforms.ToTensor(),
                             transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])

    def resident(split):
        ds = torchvision.datasets.ImageFolder(os.path.join(a.work, split), tf)
        dl = torch.utils.data.DataLoader(ds, batch_size=256, num_workers=a.threads)
        xs, ys = zip(*dl)
        return torch.cat(xs).to(dev), torch.cat(ys).to(dev)

    x_tr, y_tr = resident("train")
    x_va, y_va = resident("val")
    torch.manual_seed(0)
    net = torchvision.models.resnet50(weights=None)
    frozen = torch.nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool, net.layer1,
                                 net.layer2, net.layer3).to(dev).eval()
    for p in frozen.parameters():
        p.requires_grad_(False)

    def fresh_trainable():
        torch.manual_seed(1)
        r = torchvision.models.resnet50(weights=None)
        body = torch.nn.Sequential(r.layer4, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                   torch.nn.Linear(2048, 10)).to(dev).eval()
        opt = torch.optim.SGD(body.parameters(), lr=a.lr, momentum=0.9)
        return body, opt

    def epochs(source_tr, source_va):
        body, opt = fresh_trainable()
        g = torch.Generator(device=dev).manual_seed(0)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.epochs):
            perm = torch.randperm(len(y_tr), device=dev, generator=g)
            for i in range(0, len(perm), a.batch):
                j = perm[i:i + a.batch]
                loss = torch.nn.functional.cross_entropy(body(source_tr(j)), y_tr[j])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            with torch.no_grad():
                for i in range(0, len(y_va), a.batch):
                    body(source_va(slice(i, i + a.batch)))
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    out = {}
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False

    def frozen_of(x):
        with torch.no_grad():
            return frozen(x)

    epochs(lambda j: frozen_of(x_tr[j]), lambda s: frozen_of(x_va[s]))  # warm-up (cudnn choice)
    out["torch_frozen"] = epochs(lambda j: frozen_of(x_tr[j]), lambda s: frozen_of(x_va[s]))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.no_grad():
        a_tr = torch.cat([frozen(x_tr[i:i + 256]) for i in range(0, len(y_tr), 256)])
        a_va = torch.cat([frozen(x_va[i:i + 256]) for i in range(0, len(y_va), 256)])
    torch.cuda.synchronize()
    out["torch_cache_pass"] = time.perf_counter() - t0
    del x_tr, x_va
    out["torch_cached"] = epochs(lambda j: a_tr[j], lambda s: a_va[s])
    torch.backends.cudnn.allow_tf32 = True
    epochs(lambda j: a_tr[j], lambda s: a_va[s])
    out["torch_cached_tf32"] = epochs(lambda j: a_tr[j], lambda s: a_va[s])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", type=int, default=1280)
    ap.add_argument("--val", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--graft", default="build/release/graft")
    ap.add_argument("--work", default="/tmp/bench_blocks")
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args()
    a.precision, a.workers, a.device = "fp32", a.threads, "cuda:0"  # bench_finetune.graft_run's
    os.makedirs(a.work, exist_ok=True)
    make_set(os.path.join(a.work, "train"), a.train, 10, 1, a.threads)
    make_set(os.path.join(a.work, "val"), a.val, 10, 2, a.threads)
    model = os.path.join(a.work, "resnet50.onnx")
    export_resnet50(model)
    cache = os.path.join(a.work, "cache")
    subprocess.run(["rm", "-rf", cache])
    cold = graft_run(a, model, cache, os.path.join(a.work, "graft_cold.log"))
    os.environ["GRAFT_STEP_GRAPH"] = "1"  # blocks, head and loss as one graph (the default)
    warm = graft_run(a, model, cache, os.path.join(a.work, "graft_warm.log"))
    os.environ["GRAFT_STEP_GRAPH"] = "0"  # the head and its loss on the host, in the pause
    pause = graft_run(a, model, cache, os.path.join(a.work, "graft_warm_pause.log"))
    del os.environ["GRAFT_STEP_GRAPH"]
    os.environ["GRAFT_RESIDENT"] = "0"  # the same with the weights and optimizer on the host
    host = graft_run(a, model, cache, os.path.join(a.work, "graft_warm_host.log"))
    del os.environ["GRAFT_RESIDENT"]
    imgs = a.train * a.epochs
    rows = [("graft_warm (GRAFT_STEP_GRAPH=1: blocks, head and loss one graph, all resident)",
             warm[2]),
            ("graft_warm_pause (GRAFT_STEP_GRAPH=0: the head and loss on the host in a pause)",
             pause[2]),
            ("graft_warm_host (GRAFT_RESIDENT=0: also weights and optimizer on the host)",
             host[2])]
    print(f"ResNet-50 layer4 + head, {a.train} train / {a.val} val images, {a.epochs} epochs, "
          f"batch {a.batch}, SGD lr {a.lr}, fp32")
    print(f"frozen part's one pass: graft {cold[1]:.2f} s (cold run's backbone phase)", end="")
    if not a.no_torch:
        t = torch_runs(a)
        print(f", PyTorch {t['torch_cache_pass']:.2f} s (images already on the GPU)")
        rows += [("torch_frozen (frozen part every epoch)", t["torch_frozen"]),
                 ("torch_cached (activations on the GPU)", t["torch_cached"]),
                 ("torch_cached_tf32 (PyTorch's default convolutions)", t["torch_cached_tf32"])]
    else:
        print()
    g = warm[2]
    print("\n| run | seconds | train images/s | graft's time / run's |")
    print("|---|---|---|---|")
    for name, secs in rows:
        print(f"| {name} | {secs:.2f} | {imgs / secs:.0f} | {g / secs:.2f} |")


if __name__ == "__main__":
    main()
