#!/usr/bin/env python3
"""tools/bench_gpu.py: graft against PyTorch on one GPU, side by side in one run.

graft: `graft bench --json` on the generated models (tests/data/gen: resnet50, bert_base), whole
graft_model_run calls (fp32 host input in, fp32 host output out; the recorded CUDA graph after
the first runs). PyTorch: the same architectures (torchvision resnet50; transformers BertModel
with BERT-base's config), random weights, eval mode under inference_mode, cudnn.benchmark on,
channels_last for the CNN in half precision (PyTorch's own best practice), and the same work per
call: the fp32 host input copied in, cast, the forward, the outputs cast back to fp32 and copied
to the host. Eager mode (torch.compile is left out: minutes of compiling per shape). Medians of
--iters timed calls after warm-up; the ratio is graft / PyTorch (below 1: graft is faster).
--resident: the forward alone, inputs and outputs left in GPU memory on both sides (`graft bench
--resident`; PyTorch with its inputs made on the device), PyTorch timed in eager mode and as a
replayed CUDA graph (torch.cuda.CUDAGraph, its best latency); ratios against the faster of the two.
Usage: python3 tools/bench_gpu.py [--graft build/release/graft] [--gen tests/data/gen]
    [--models resnet50,bert_base] [--precisions fp32,fp16] [--iters 30] [--resident]
    [--batches resnet50=1,256:bert_base=1,128]
"""
import argparse
import json
import statistics
import subprocess
import time

import torch

BATCHES = {"resnet50": (1, 32), "bert_base": (8, 32)}
SEQ = 128
DT = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def graft_ms(args, model, precision, batch):
    cmd = [args.graft, "bench", f"{args.gen}/{model}.onnx", "--device", "cuda:0", "--precision",
           precision, "--batch", str(batch), "--iters", str(args.iters), "--json"]
    if args.resident:
        cmd += ["--resident", "--warmup", str(args.warmup)]
    if model.startswith("bert"):
        cmd += ["--seq-len", str(SEQ)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["median_ms"]


def torch_model(model, precision):
    torch.manual_seed(0)
    if model == "resnet50":
        import torchvision
        net = torchvision.models.resnet50()
    else:
        from transformers import BertConfig, BertModel
        net = BertModel(BertConfig())  # BERT-base: 12 layers, hidden 768, 12 heads
    net = net.eval().to("cuda", DT[precision])
    if model == "resnet50" and precision != "fp32":
        net = net.to(memory_format=torch.channels_last)
    return net


def torch_ms(args, net, model, precision, batch):
    dt = DT[precision]
    if model == "resnet50":
        x = torch.randn(batch, 3, 224, 224)

        def call():
            xd = x.to("cuda").to(dt)
            if precision != "fp32":
                xd = xd.contiguous(memory_format=torch.channels_last)
            return [net(xd).float().cpu()]
    else:
        ids = torch.randint(0, 30522, (batch, SEQ))
        mask = torch.ones(batch, SEQ, dtype=torch.int64)
        types = torch.zeros(batch, SEQ, dtype=torch.int64)

        def call():
            o = net(input_ids=ids.to("cuda"), attention_mask=mask.to("cuda"),
                    token_type_ids=types.to("cuda"))
            return [o.last_hidden_state.float().cpu(), o.pooler_output.float().cpu()]
    with torch.inference_mode():
        return median_ms(args, call)


def median_ms(args, fn):
    """Median ms of --iters synchronised calls of fn after --warmup untimed ones."""
    times = []
    for i in range(args.warmup + args.iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        if i >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def resident_ms(args, net, model, precision, batch):
    """PyTorch's forward with its inputs already on the GPU: (eager ms, CUDA-graph ms)."""
    dt = DT[precision]
    dev = "cuda"
    if model == "resnet50":
        x = torch.randn(batch, 3, 224, 224, device=dev).to(dt)
        if precision != "fp32":
            x = x.contiguous(memory_format=torch.channels_last)

        def call():
            return net(x)
    else:
        ids = torch.randint(0, 30522, (batch, SEQ), device=dev)
        mask = torch.ones(batch, SEQ, dtype=torch.int64, device=dev)
        types = torch.zeros(batch, SEQ, dtype=torch.int64, device=dev)

        def call():
            return net(input_ids=ids, attention_mask=mask, token_type_ids=types)

    with torch.inference_mode():
        eager = median_ms(args, call)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up on a side stream, as CUDA graph capture requires
            for _ in range(3):
                call()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            call()
        graphed = median_ms(args, g.replay)
        del g
    return eager, graphed


def main_resident(args, batches):
    print(f"{'model':10} {'prec':5} {'batch':>5} {'graft ms':>9} {'eager ms':>9} {'graph ms':>9} "
          f"{'graft/best':>10} {'graft img|seq/s':>15}")
    for model in args.models.split(","):
        for precision in args.precisions.split(","):
            net = torch_model(model, precision)
            for batch in batches[model]:
                g = graft_ms(args, model, precision, batch)
                e, c = resident_ms(args, net, model, precision, batch)
                print(f"{model:10} {precision:5} {batch:5d} {g:9.3f} {e:9.3f} {c:9.3f} "
                      f"{g / min(e, c):10.2f} {1e3 * batch / g:15.0f}", flush=True)
            del net
            torch.cuda.empty_cache()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--graft", default="build/release/graft")
    p.add_argument("--gen", default="tests/data/gen")
    p.add_argument("--models", default="resnet50,bert_base")
    p.add_argument("--precisions", default="fp32,fp16")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--resident", action="store_true",
                   help="inputs and outputs stay on the GPU; PyTorch eager and CUDA graph")
    p.add_argument("--batches", default="", help="e.g. resnet50=1,256:bert_base=1,128")
    args = p.parse_args()
    batches = dict(BATCHES)
    for part in filter(None, args.batches.split(":")):
        name, sizes = part.split("=")
        batches[name] = tuple(int(b) for b in sizes.split(","))
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False  # graft's fp32 does not use TF32 either
    torch.backends.cudnn.allow_tf32 = False
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}")
    if args.resident:
        return main_resident(args, batches)
    print(f"{'model':10} {'prec':5} {'batch':>5} {'graft ms':>9} {'torch ms':>9} {'ratio':>6}")
    for model in args.models.split(","):
        for precision in args.precisions.split(","):
            net = torch_model(model, precision)
            for batch in batches[model]:
                g = graft_ms(args, model, precision, batch)
                t = torch_ms(args, net, model, precision, batch)
                print(f"{model:10} {precision:5} {batch:5d} {g:9.3f} {t:9.3f} {g / t:6.2f}",
                      flush=True)
            del net
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
