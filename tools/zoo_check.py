#!/usr/bin/env python3
"""tools/zoo_check.py --graft BIN [--zoo models/zoo.tgz] [--out DIR] [--only SUBSTR] [--known FILE]
[--table docs/models.md]: the model zoo through graft as a user would take it. Each skeleton that
tools/zoo_export.py wrote (torchvision, timm and Hugging Face models as the TorchScript and dynamo
exporters write them) gets seeded random weights, then: `load` (graft info), `parity` (graft run
against ONNX Runtime on the same random input, max |diff| / max |reference| <= 1e-4), `finetune`
(graft finetune on a small folder of images or a CSV of texts, --epochs 2) and `export` (the
grafted model in graft and in ONNX Runtime on the same input). One line per model and stage:
PASS, FAIL, or KNOWN / FIXED for the stages tests/zoo_known.txt lists as expected to fail (with
the reason); --table writes the compatibility table."""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
import onnxruntime as ort

ort.set_default_logger_severity(3)  # exporters declare batch-1 outputs that a batch of 2 "mismatches"

ROOT = Path(__file__).resolve().parent.parent
STAGES = ["load", "parity", "finetune", "export", "prune"]
# Not in the default run (slow on the CPU: the last block trains): --stages unfreeze.
EXTRA_STAGES = ["unfreeze"]
GPU_STAGES = ["gpu_fp32", "gpu_bf16"]
TOL = 1e-4
# On the GPU (--device): fp32 as tight as the CPU's parity allows for cuDNN's and cuBLASLt's
# summation orders; bf16 as tests/test_parity.c's half-precision model check.
GPU_TOL = {"gpu_fp32": 1e-3, "gpu_bf16": 2e-1}


def positive_inputs(model):
    """Tensors that must be positive: BatchNormalization's scale and variance."""
    names = set()
    for n in model.graph.node:
        if n.op_type == "BatchNormalization" and len(n.input) >= 5:
            names.update([n.input[1], n.input[4]])
    return names


def fill(model):
    """Seeded random values for every tensor the skeleton stripped (doc_string marks them)."""
    positive = positive_inputs(model)
    tensors = list(model.graph.initializer)
    for node in model.graph.node:
        tensors += [a.t for a in node.attribute if a.type == onnx.AttributeProto.TENSOR]
    for t in tensors:
        if t.doc_string != "graft-zoo: random":
            continue
        dims = list(t.dims)
        seed = int.from_bytes(hashlib.sha256(t.name.encode()).digest()[:4], "little")
        rng = np.random.default_rng(seed)
        if t.name in positive:
            v = rng.uniform(0.5, 1.5, dims)
        else:
            fan_in = int(np.prod(dims[1:])) if len(dims) > 1 else max(int(np.prod(dims)), 1)
            v = rng.normal(0.0, 1.0 / np.sqrt(max(fan_in, 1)), dims)
        dtype = np.float16 if t.data_type == onnx.TensorProto.FLOAT16 else np.float32
        t.CopyFrom(numpy_helper.from_array(v.astype(dtype), t.name))
    return model


def model_inputs(model, kind, batch):
    """A random input for each graph input, at the declared fixed sizes (else batch / 16)."""
    inits = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        dims = [d.dim_value if d.dim_value > 0 else (batch if k == 0 else 16)
                for k, d in enumerate(tt.shape.dim)]
        if tt.elem_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
            dt = np.int64 if tt.elem_type == onnx.TensorProto.INT64 else np.int32
            low, high = (5, 1000) if ("mask" not in i.name and "type" not in i.name) else (0, 1)
            v = rng.integers(low, high + ("mask" in i.name), dims).astype(dt)
            if "mask" in i.name:
                v[:] = 1
                v[..., -3:] = 0
            feeds[i.name] = v
        else:
            feeds[i.name] = rng.normal(0, 1, dims).astype(np.float32)
    return feeds


def rel_err(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b))) / max(float(np.max(np.abs(b))), 1e-12)


def graft(args, cmd, timeout=300):
    p = subprocess.run([args.graft] + cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, (p.stderr.strip().splitlines() or [""])[-1][:300]


def run_and_compare(args, path, feeds, work, extra=(), tol=TOL):
    """graft run (with extra options such as --device) against ONNX Runtime: (ok, note)."""
    try:
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)
    except Exception as e:  # noqa: BLE001 (the reference cannot run it: say so)
        return False, f"ONNX Runtime fails too: {str(e).splitlines()[0][:160]}"
    names = [o.name for o in sess.get_outputs()]
    cmd = ["run", str(path), "--output-dir", str(work / "out")] + list(extra)
    for k, v in feeds.items():
        np.save(work / f"in_{len(cmd)}.npy", v)
        cmd += ["--input", f"{k}={work / f'in_{len(cmd)}.npy'}"]
    rc, err = graft(args, cmd)
    if rc != 0:
        return False, err
    worst = 0.0
    for name, w in zip(names, want):
        # graft run's file names: / : \\ become _ (long names are shortened with a hash).
        f = work / "out" / (name.replace("/", "_").replace(":", "_").replace("\\", "_") + ".npy")
        if not f.exists():
            return False, f"no output file for '{name}'"
        got = np.load(f)
        if got.shape != w.shape:
            return False, f"output '{name}': shape {got.shape}, ONNX Runtime {w.shape}"
        if w.dtype.kind == "f":
            worst = max(worst, rel_err(got, w))
    return worst <= tol, f"max relative error {worst:.2g}"


# The tokenizer each Hugging Face family ships, trained here at the zoo models' vocabulary size
# (1000) on the tokenizer tests' corpus: WordPiece (vocab.txt) for BERT, DistilBERT, ELECTRA and
# MPNet; byte-level BPE (vocab.json + merges.txt, RoBERTa's <s> <pad> </s> order) for RoBERTa;
# SentencePiece unigram (.model) for ALBERT and DeBERTa-v2 ([CLS] A [SEP]) and XLM-RoBERTa
# (<s> A </s>).
TOKENIZER_KIND = {"hf_roberta": "bpe", "hf_albert": "spm_cls", "hf_xlm_roberta": "spm",
                  "hf_deberta_v2": "spm_cls"}
_tokenizers = {}


def corpus_lines():
    sys.path.insert(0, str(ROOT / "tools"))
    import make_hf_tokenizers
    return make_hf_tokenizers.build_corpus()


def family_tokenizer(model, root):
    """The --tokenizer (or --vocab) arguments for a zoo model's family, made once per run."""
    kind = TOKENIZER_KIND.get(model, "wordpiece")
    if kind in _tokenizers:
        return _tokenizers[kind]
    out = root / f"tokenizer_{kind}"
    out.mkdir(parents=True, exist_ok=True)
    if kind == "wordpiece":
        vocab = out / "vocab.txt"
        lines = (ROOT / "tests/data/tokenizer/vocab.txt").read_text(encoding="utf-8").splitlines()
        vocab.write_text("\n".join(lines[:1000]) + "\n", encoding="utf-8")
        args = ["--vocab", str(vocab)]
    elif kind == "bpe":
        from tokenizers import ByteLevelBPETokenizer
        tok = ByteLevelBPETokenizer()
        tok.train_from_iterator(corpus_lines(), vocab_size=1000, min_frequency=2,
                                special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                show_progress=False)
        tok.save_model(str(out))
        args = ["--tokenizer", str(out)]
    else:
        import sentencepiece as spm
        text = out / "corpus.txt"
        text.write_text("\n".join(corpus_lines()) + "\n", encoding="utf-8")
        spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(out / "spiece"),
                                       vocab_size=1000, model_type="unigram", pad_id=0,
                                       unk_id=1, bos_id=2, eos_id=3, minloglevel=2,
                                       user_defined_symbols=["[CLS]", "[SEP]"]
                                       if kind == "spm_cls" else [])
        (out / "corpus.txt").unlink()
        (out / "spiece.vocab").unlink()
        args = ["--tokenizer", str(out / "spiece.model")]
    _tokenizers[kind] = args
    return args


def finetune_cmd(path, kind, work, model, out):
    # --cache: the feature cache needs the feature size known when the model loads (shape
    # inference through the whole backbone), as users' runs with a cache do.
    common = ["finetune", "--model", str(path), "--out", str(out), "--epochs", "2", "--seed", "0",
              "--cache", str(work / "cache")]
    if kind == "image":
        return common + ["--data", str(ROOT / "examples/digits/train"), "--val-split", "0.2",
                         "--batch", "8"]
    return common + ["--data", str(ROOT / "examples/reviews/train.csv"),
                     *family_tokenizer(model, work.parent), "--max-len", "16",
                     "--val-split", "0.2", "--batch", "8"]


def finetune(args, path, kind, work, model=""):
    out = work / "grafted.onnx"
    rc, err = graft(args, finetune_cmd(path, kind, work, model, out), timeout=600)
    return (rc == 0 and out.exists()), (err if rc else "trained 2 epochs"), out


def unfreeze(args, path, kind, work, model, batch):
    """graft finetune --unfreeze 1 (the last stage or layer trains with the head; on --device
    when one is given), then its export against ONNX Runtime. The note names the Backward nodes
    that ran on the CPU instead of the GPU."""
    out = work / "unfrozen.onnx"
    cmd = finetune_cmd(path, kind, work, model, out) + ["--unfreeze", "1"]
    if args.device:
        cmd += ["--device", args.device]
    t0 = time.perf_counter()
    p = subprocess.run([args.graft] + cmd, capture_output=True, text=True, timeout=900)
    secs = time.perf_counter() - t0
    lines = p.stderr.strip().splitlines()
    if p.returncode != 0 or not out.exists():
        return False, (lines or [""])[-1][:300]
    on_cpu = sorted({m.group(1) for m in (re.search(r"\(Backward of (\w+)\): no CUDA", x)
                                            for x in lines) if m})
    ok, note = run_and_compare(args, out, model_inputs(onnx.load(str(out)), kind, batch), work)
    where = f"; Backward on the CPU: {', '.join(on_cpu)}" if on_cpu else ""
    return ok, f"trained in {secs:.1f}s, export {note}{where}"


def prune(args, path, kind, feeds, work):
    """graft prune (channels for CNNs, heads for encoders): the pruned model must match ONNX
    Runtime; a refusal passes when it says why (a crash or a silent failure does not)."""
    out = work / "pruned.onnx"
    method = "channels" if kind == "image" else "heads"
    rc, err = graft(args, ["prune", "--model", str(path), "--method", method, "--sparsity",
                           "0.25", "--iters", "1", "--out", str(out)])
    if rc != 0:
        clear = rc == 1 and err.startswith("graft prune: ") and len(err) > len("graft prune: ") + 10
        return clear, f"refused: {err}" if clear else f"exit status {rc}: {err}"
    ok, note = run_and_compare(args, out, feeds, work)
    return ok, f"{method} 0.25: {note}"


def check_gpu(args, path, feeds, work, res):
    """graft run on the GPU (fp32 and bf16) against ONNX Runtime on the CPU."""
    for stage in GPU_STAGES:
        extra = ["--device", args.device, "--precision", stage.split("_")[1]]
        res[stage] = run_and_compare(args, path, feeds, work, extra, GPU_TOL[stage])


def check_model(args, rec, tmp):
    """The stages' results for one zoo model: {stage: (ok, note)}."""
    res = {}
    work = tmp / rec["name"]
    work.mkdir(parents=True, exist_ok=True)
    model = fill(onnx.load(str(Path(args.zoo_dir) / f"{rec['name']}.onnx")))
    path = work / "model.onnx"
    onnx.save(model, str(path))
    rc, err = graft(args, ["info", str(path)])
    res["load"] = (rc == 0, err if rc else "")
    if rc != 0:
        return res
    # Images at batch 1 (TorchScript exports often bake the traced batch into Reshapes), texts
    # at 2 (two rows of one length).
    batch = 1 if rec["kind"] == "image" else 2
    feeds = model_inputs(model, rec["kind"], batch)
    res["parity"] = run_and_compare(args, path, feeds, work)
    if args.device and not args.no_gpu_run:
        check_gpu(args, path, feeds, work, res)
    if "finetune" in args.stages:
        ok, note, out = finetune(args, path, rec["kind"], work, rec["model"])
        res["finetune"] = (ok, note)
    if "finetune" in args.stages and ok:
        grafted = onnx.load(str(out))
        res["export"] = run_and_compare(args, out, model_inputs(grafted, rec["kind"], batch), work)
    if "prune" in args.stages:
        res["prune"] = prune(args, path, rec["kind"], feeds, work)
    if "unfreeze" in args.stages:
        res["unfreeze"] = unfreeze(args, path, rec["kind"], work, rec["model"], batch)
    return res


def read_known(path):
    known = {}
    if path and Path(path).exists():
        for line in Path(path).read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                parts = line.split(None, 2)
                known[(parts[0], parts[1])] = parts[2] if len(parts) > 2 else ""
    return known


def report(rec, res, known, stages):
    """PASS/FAIL/KNOWN/FIXED lines; returns the table row's cells {stage: text}."""
    cells = {}
    for stage in stages:
        if stage not in res:
            cells[stage] = "-"
            continue
        ok, note = res[stage]
        key = (rec["name"], stage)
        tag = f"zoo_{rec['name']}_{stage}"
        if key in known:
            print(f"{'FIXED' if ok else 'KNOWN'} {tag}: {note if not ok else 'passes now'} ({known[key]})")
        else:
            said = not ok or stage in EXTRA_STAGES  # unfreeze's note: time, CPU fallbacks
            print(f"{'PASS' if ok else 'FAIL'} {tag}" + (f": {note}" if said else ""))
        text = ("yes" if not note.startswith("refused") else f"refused: {note[9:]}") if ok \
            else f"no: {note}"
        cells[stage] = text.replace("|", "/")[:120]
    return cells


def summary(rows, stages):
    exported = [cells for rec, cells in rows if rec["ok"]]
    counts = {st: sum(1 for c in exported if c.get(st, "-") == "yes") for st in stages}
    line = (f"{len(rows)} exports tried, {len(exported)} written by the exporter; of those: "
            + ", ".join(f"{st} {counts[st]}" for st in stages) + ".")
    refused = sum(1 for c in exported if c.get("prune", "").startswith("refused"))
    return line + (f" prune refused with a reason: {refused}." if refused else "")


def write_table(path, manifest, rows, gpu):
    """docs/models.md: the CPU run's rows, with the GPU columns of the last GPU run (gpu: the
    --results JSON that run wrote, or None)."""
    stages = STAGES + (GPU_STAGES if gpu else [])
    for rec, cells in rows:
        for st in GPU_STAGES:
            if gpu:
                cells[st] = gpu["models"].get(rec["name"], {}).get(st, "-")
    gpu_note = (f" `gpu_fp32` / `gpu_bf16`: graft run --device {gpu['device']} against ONNX "
                f"Runtime on the CPU (max relative error <= {GPU_TOL['gpu_fp32']:g} / "
                f"{GPU_TOL['gpu_bf16']:g}), from the GPU run at {gpu['commit']} on {gpu['date']} "
                f"({gpu['gpu']})." if gpu else " The GPU columns: not measured yet.")
    later = "".join(
        f"; the {', '.join(r.get('exporters', []))} exports later with torch {r.get('torch')}, "
        f"transformers {r.get('transformers')}, optimum {r.get('optimum', '-')}"
        for r in manifest.get("runs", []))
    lines = ["# Model zoo: what graft loads, matches and fine-tunes", "",
             "Written by `tools/zoo_check.py --table docs/models.md` (the CPU build) from the",
             "skeletons in `models/zoo.tgz` that `tools/zoo_export.py` exported with torch "
             f"{manifest.get('torch')}, torchvision {manifest.get('torchvision')}, timm "
             f"{manifest.get('timm')}, transformers {manifest.get('transformers')}{later} (random weights, "
             "reduced depth for the transformers; default names untouched). `load`: graft info; "
             "`parity`: graft run vs ONNX Runtime (max relative error <= 1e-4); `finetune`: graft "
             "finetune --epochs 2 --cache DIR on examples/digits/train or examples/reviews/train.csv (with the family's kind of tokenizer: WordPiece, byte-level BPE files or a SentencePiece model); `export`: "
             "the grafted model in graft vs ONNX Runtime; `prune`: graft prune --method channels "
             "(images) or heads (texts) --sparsity 0.25, the pruned model in graft vs ONNX Runtime, "
             "or the reason graft gives for refusing. `-`: not reached." + gpu_note, "",
             summary(rows, stages), "",
             "| model | exporter | opset | inputs | " + " | ".join(stages) + " |",
             "|---|---|---|---|" + "---|" * len(stages)]
    for rec, cells in rows:
        if not rec["ok"]:
            lines.append(f"| {rec['model']} | {rec['exporter']} | | | export failed: "
                         f"{rec['error'][:100]} |" + " - |" * (len(stages) - 1))
            continue
        lines.append(f"| {rec['model']} | {rec['exporter']} | {rec.get('opset', '')} | "
                     f"{', '.join(rec.get('inputs', []))} | "
                     + " | ".join(cells.get(st, "-") for st in stages) + " |")
    Path(path).write_text("\n".join(lines) + "\n")


def write_results(path, args, rows):
    """The GPU columns of this run, for the CPU run's --table (docs/zoo-gpu.json)."""
    # The device tool's copy of the tree may carry an older .git: GRAFT_COMMIT names the commit.
    git = os.environ.get("GRAFT_COMMIT") or subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
        text=True).stdout.strip()
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         capture_output=True, text=True) if args.device else None
    out = {"device": args.device, "commit": git, "date": time.strftime("%Y-%m-%d"),
           "gpu": (smi.stdout.strip().splitlines() or ["?"])[0] if smi else "",
           "models": {rec["name"]: {st: cells[st] for st in GPU_STAGES if st in cells}
                      for rec, cells in rows if rec["ok"]}}
    Path(path).write_text(json.dumps(out, indent=1) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graft", required=True)
    ap.add_argument("--zoo", default=str(ROOT / "models/zoo.tgz"))
    ap.add_argument("--only", default="")
    ap.add_argument("--known", default=str(ROOT / "tests/zoo_known.txt"))
    ap.add_argument("--table")
    ap.add_argument("--device", default="",
                    help="also run on this GPU (cuda:0) in fp32 and bf16 against ONNX Runtime")
    ap.add_argument("--no-gpu-run", action="store_true",
                    help="with --device: leave out the gpu_fp32 / gpu_bf16 runs (for --stages "
                    "unfreeze on the GPU alone)")
    ap.add_argument("--results", help="write this run's GPU columns to this JSON file")
    ap.add_argument("--gpu-results", default=str(ROOT / "docs/zoo-gpu.json"),
                    help="the GPU columns for --table (written by a --device --results run)")
    ap.add_argument("--stages", default=",".join(STAGES[2:]),
                    help="stages after load and parity: finetune,export,prune,unfreeze (or "
                    "none; unfreeze: --unfreeze 1, on --device when given)")
    args = ap.parse_args()
    args.stages = [s for s in args.stages.split(",") if s]
    args.graft = os.path.abspath(args.graft)
    known = read_known(args.known)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        with tarfile.open(args.zoo) as tar:
            tar.extractall(tmp / "skel")
        args.zoo_dir = tmp / "skel" / "zoo"
        manifest = json.loads((args.zoo_dir / "manifest.json").read_text())
        rows = []
        for rec in manifest["models"]:
            if args.only and not any(s in rec["name"] for s in args.only.split(",")):
                continue
            if not rec["ok"]:
                print(f"SKIP zoo_{rec['name']}: the exporter failed: {rec['error'][:200]}")
                rows.append((rec, {}))
                continue
            try:
                res = check_model(args, rec, tmp / "work")
            except Exception as e:  # noqa: BLE001 (a broken check is one failure, not a stop)
                res = {"load": (False, f"check error: {type(e).__name__}: {e}"[:200])}
            stages = STAGES[:2] + (GPU_STAGES if args.device and not args.no_gpu_run else []) + \
                [s for s in STAGES[2:] + EXTRA_STAGES if s in args.stages]
            rows.append((rec, report(rec, res, known, stages)))
            sys.stdout.flush()
        if args.results:
            write_results(args.results, args, rows)
        if args.table:
            gpu = Path(args.gpu_results)
            write_table(args.table, manifest, rows,
                        json.loads(gpu.read_text()) if gpu.exists() else None)


if __name__ == "__main__":
    main()
