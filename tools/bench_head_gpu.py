#!/usr/bin/env python3
"""tools/bench_head_gpu.py: a head's training over cached features on the GPU, graft
(tests/bench_head_device: trainer_run through the head's step graph) beside PyTorch doing the
same in one run: the features already on the GPU, a Linear head (or one hidden layer), AdamW,
cross-entropy, a fresh permutation each epoch, batch 256; PyTorch eager and PyTorch replaying its
whole step as a CUDA graph. Prints seconds per epoch and the ratios.
  python3 tools/bench_head_gpu.py BUILD MODEL [--rows N] [--width W] [--epochs E] [--hidden H]"""
import argparse
import subprocess
import time

import torch


def problem(rows, width, hidden):
    """The same seeded features, labels and head for every PyTorch variant (on the GPU)."""
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.rand(rows, width, device=dev, generator=g) - 0.5
    y = torch.randint(0, 10, (rows,), device=dev, generator=g)
    layers = [torch.nn.Linear(width, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10)] \
        if hidden else [torch.nn.Linear(width, 10)]
    return dev, x, y, torch.nn.Sequential(*layers).to(dev)


def torch_epochs(rows, width, batch, epochs, hidden, dtype):
    dev, x, y, head = problem(rows, width, hidden)
    opt = torch.optim.AdamW(head.parameters(), lr=1e-3, foreach=True)
    loss_fn = torch.nn.CrossEntropyLoss()
    times = []
    for _ in range(epochs):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        order = torch.randperm(rows, device=dev)
        for at in range(0, rows, batch):
            idx = order[at:at + batch]
            with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
                loss = loss_fn(head(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def torch_graphed_epochs(rows, width, batch, epochs, hidden, dtype):
    """PyTorch at its best for a loop this small: the whole step (gather, forward, loss,
    backward, a capturable AdamW) captured once as a CUDA graph and replayed per batch from a
    static index buffer. Full batches only: the epoch's short last batch is left out (graft
    runs it), which flatters PyTorch by one step an epoch."""
    dev, x, y, head = problem(rows, width, hidden)
    opt = torch.optim.AdamW(head.parameters(), lr=1e-3, foreach=True, capturable=True)
    loss_fn = torch.nn.CrossEntropyLoss()
    idx = torch.arange(batch, device=dev)
    half = dtype != torch.float32

    def step():
        with torch.autocast("cuda", dtype=dtype, enabled=half, cache_enabled=False):
            loss = loss_fn(head(x[idx]), y[idx])
        loss.backward()
        opt.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        step()
    times = []
    for _ in range(epochs):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        order = torch.randperm(rows, device=dev)
        for at in range(0, rows - batch + 1, batch):
            idx.copy_(order[at:at + batch])
            graph.replay()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("model")
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--hidden", type=int, default=0)
    a = ap.parse_args()
    rows = []
    for prec, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        cmd = [f"{a.build}/tests/bench_head_device", a.model, "cuda:0", str(a.rows), str(a.width),
               str(a.batch), str(a.epochs), str(a.hidden), prec]
        out = subprocess.run(cmd, capture_output=True, text=True)
        print(out.stdout.strip(), out.stderr.strip()[-400:])
        later = float(out.stdout.split("later ")[1].split(" s")[0]) if out.returncode == 0 else float("nan")
        first = float(out.stdout.split("first ")[1].split(" s")[0]) if out.returncode == 0 else float("nan")
        t = torch_epochs(a.rows, a.width, a.batch, a.epochs, a.hidden, dt)
        tl = sum(t[1:]) / max(1, len(t) - 1)
        try:
            tg = torch_graphed_epochs(a.rows, a.width, a.batch, a.epochs, a.hidden, dt)
            tgl = sum(tg[1:]) / max(1, len(tg) - 1)
        except RuntimeError as err:  # a capture this torch refuses: say so, keep the rest
            print(f"PyTorch CUDA graph ({prec}): {err}"[:300])
            tgl = float("nan")
        rows.append((prec, first, later, t[0], tl, tgl))
    print(f"| head {a.width}->{'%d->' % a.hidden if a.hidden else ''}10, {a.rows} rows, batch {a.batch} "
          "| graft first / later epoch | PyTorch eager first / later | PyTorch CUDA graph later "
          "| graft / PyTorch eager | graft / PyTorch CUDA graph |")
    print("|---|---|---|---|---|---|")
    for prec, f, l, tf, tl, tgl in rows:
        print(f"| {prec} | {f:.4f} / {l:.4f} s | {tf:.4f} / {tl:.4f} s | {tgl:.4f} s | {l / tl:.2f} "
              f"| {l / tgl:.2f} |")


if __name__ == "__main__":
    main()
