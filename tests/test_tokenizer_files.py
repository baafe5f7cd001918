#!/usr/bin/env python3
"""tests/test_tokenizer_files.py: `graft tokenize --tokenizer` with the tokenizer files that are
not a tokenizer.json: GPT-2/RoBERTa byte-level BPE (vocab.json + merges.txt, trained here with
the tokenizers package) against tokenizers.ByteLevelBPETokenizer with RobertaProcessing, and
SentencePiece .model files (unigram and bpe, trained here with the sentencepiece package, nmt_nfkc
normalization) against SentencePieceProcessor.encode wrapped in [CLS]/[SEP] or <s>/</s> as graft's
rule says; then broken files. Every line of tools/make_hf_tokenizers.py's corpus (4,000 lines).
Then `graft finetune` of the tiny BERT with a SentencePiece unigram .model and with RoBERTa's
vocab.json + merges.txt: the export carries them (graft.text.sentencepiece, graft.text.bpe),
predict and eval need no tokenizer, predictions equal those with --tokenizer, and broken
carried tokenizers are clear errors.

usage: tests/test_tokenizer_files.py path/to/graft [DIR [GEN]]
       (DIR default build/hf-tokenizers, GEN default tests/data/gen)
Prints PASS/FAIL/SKIP lines; without the tokenizers or sentencepiece package, a SKIP.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def graft_ids(graft, tok, corpus, *extra):
    p = subprocess.run([graft, "tokenize", "--tokenizer", tok, *extra, corpus], capture_output=True,
                       text=True, encoding="utf-8")
    return p.returncode, [json.loads(x) for x in p.stdout.splitlines()], p.stderr


def compare(test, lines, want, got, rc, err, tie=None):
    """tie(i): line i's two segmentations are equally scored (a float tie, broken by rounding)."""
    if rc != 0 or len(got) != len(want):
        print(f"FAIL {test}: graft exited {rc} with {len(got)} of {len(want)} lines: {err[:400]}")
        return
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    ties = [i for i in bad if tie and tie(got[i], want[i])]
    bad = [i for i in bad if i not in ties]
    if bad:
        i = bad[0]
        print(f"FAIL {test}: {len(bad)} of {len(want)} lines differ; line {i + 1} {lines[i]!r}:\n"
              f"  graft {got[i]}\n  want  {want[i]}")
    else:
        print(f"PASS {test} ({len(want)} lines" + (f", {len(ties)} equal-score ties)" if ties else ")"))


def bpe_files(graft, out, lines, corpus):
    from tokenizers import AddedToken, ByteLevelBPETokenizer, processors
    for name, specials, size in [("roberta", SPECIALS, 2000), ("gpt2", ["<|endoftext|>"], 1200)]:
        d = os.path.join(out, "files_" + name)
        os.makedirs(d, exist_ok=True)
        if not os.path.exists(os.path.join(d, "merges.txt")):
            trainer = ByteLevelBPETokenizer()
            trainer.train_from_iterator([t.replace("\t", " ") for t in lines], vocab_size=size,
                                        min_frequency=2, show_progress=False,
                                        special_tokens=specials)
            trainer.save_model(d)
        vocab, merges = os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt")
        ref = ByteLevelBPETokenizer(vocab, merges)
        ref.add_special_tokens([AddedToken(t, lstrip=t == "<mask>", normalized=False)
                                for t in SPECIALS + ["<|endoftext|>"]
                                if ref.token_to_id(t) is not None])
        if ref.token_to_id("<s>") is not None:
            ref.post_processor = processors.RobertaProcessing(
                ("</s>", ref.token_to_id("</s>")), ("<s>", ref.token_to_id("<s>")))
        want = [e.ids for e in ref.encode_batch(lines)]
        for form, path in [("dir", d), ("vocab_json", vocab)]:
            rc, got, err = graft_ids(graft, path, corpus)
            compare(f"bpe_{name}_{form}", lines, want, [g["input_ids"] for g in got], rc, err)
        if name == "roberta":  # pairs: <s> a </s></s> b </s>, type ids 0
            pairs = [ln for ln in lines if "\t" in ln][:500]
            pc = os.path.join(out, "files_pairs.txt")
            with open(pc, "w", encoding="utf-8", newline="\n") as f:
                f.write("\n".join(pairs) + "\n")
            want = [{"input_ids": e.ids, "token_type_ids": e.type_ids}
                    for e in ref.encode_batch([tuple(p.split("\t", 1)) if p.split("\t", 1)[1]
                                               else p.split("\t", 1)[0] for p in pairs])]
            rc, got, err = graft_ids(graft, d, pc, "--pair")
            got = [{k: g[k] for k in ("input_ids", "token_type_ids")} for g in got]
            compare("bpe_roberta_pair", pairs, want, got, rc, err)


SPM = [("unigram_800", "unigram", 800, {}), ("unigram_2000", "unigram", 2000, {}),
       ("bpe_800", "bpe", 800, {}), ("bpe_2000", "bpe", 2000, {}),
       ("albert", "unigram", 1500, dict(pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
                                        control_symbols=["[CLS]", "[SEP]", "[MASK]"])),
       ("t5", "unigram", 1000, dict(pad_id=0, eos_id=1, unk_id=2, bos_id=-1)),
       ("bpe_fallback", "bpe", 1000, dict(byte_fallback=True, character_coverage=0.98))]


def spm_files(graft, out, lines, corpus):
    import sentencepiece as spm
    train = os.path.join(out, "files_spm_train.txt")
    if not os.path.exists(train):
        with open(train, "w", encoding="utf-8", newline="\n") as f:
            f.write("\n".join(t.replace("\t", " ") for t in lines) + "\n")
    for name, kind, size, kw in SPM:
        prefix = os.path.join(out, "files_spm_" + name)
        if not os.path.exists(prefix + ".model"):
            kw = dict(dict(character_coverage=0.995), **kw)
            spm.SentencePieceTrainer.train(input=train, model_prefix=prefix, model_type=kind,
                                           vocab_size=size, num_threads=1, minloglevel=2,
                                           hard_vocab_limit=False, **kw)
        sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
        pieces = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
        if "[CLS]" in pieces and "[SEP]" in pieces:
            head, tail = [pieces["[CLS]"]], [pieces["[SEP]"]]
        elif "</s>" in pieces:
            head, tail = [pieces["<s>"]] if "<s>" in pieces else [], [pieces["</s>"]]
        else:
            head, tail = [], []
        want = [head + ids + tail for ids in sp.encode(lines)]
        rc, got, err = graft_ids(graft, prefix + ".model", corpus)

        def tie(a, b, sp=sp):  # the same pieces' text, scores equal to float precision
            if a.count(sp.unk_id()) != b.count(sp.unk_id()) or sp.decode(a) != sp.decode(b):
                return False
            return abs(sum(sp.get_score(i) for i in a) - sum(sp.get_score(i) for i in b)) < 1e-4
        compare(f"spm_{name}", lines, want, [g["input_ids"] for g in got], rc, err,
                tie if kind == "unigram" else None)


def errors(graft, out):
    import shutil
    d = os.path.join(out, "files_bad")
    os.makedirs(d, exist_ok=True)
    good = os.path.join(out, "files_spm_unigram_800.model")
    data = open(good, "rb").read()
    cases = []
    with open(os.path.join(d, "truncated.model"), "wb") as f:
        f.write(data[: len(data) // 2])
    cases.append(("spm_truncated", os.path.join(d, "truncated.model"), "not a SentencePiece model"))
    with open(os.path.join(d, "garbage.model"), "wb") as f:
        f.write(bytes((i * 131 + 7) % 256 for i in range(3000)))
    cases.append(("spm_garbage", os.path.join(d, "garbage.model"), "not a SentencePiece model"))
    with open(os.path.join(d, "empty.model"), "wb") as f:
        pass
    cases.append(("spm_empty", os.path.join(d, "empty.model"), "of 0 bytes"))
    bm = os.path.join(d, "badmerge")
    os.makedirs(bm, exist_ok=True)
    shutil.copy(os.path.join(out, "files_roberta", "vocab.json"), bm)
    with open(os.path.join(bm, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\nzzq qzz\n")
    cases.append(("merges_unknown", os.path.join(bm, "vocab.json"),
                  "merges.txt line 2: merge 0 names 'zzq', which is not in the vocabulary"))
    nm = os.path.join(d, "nomerges")
    os.makedirs(nm, exist_ok=True)
    shutil.copy(os.path.join(out, "files_roberta", "vocab.json"), nm)
    cases.append(("merges_missing", os.path.join(nm, "vocab.json"), "needs merges.txt beside it"))
    cases.append(("file_missing", os.path.join(d, "nothing.model"),
                  "cannot open SentencePiece model"))
    cases.append(("vocab_missing", os.path.join(d, "nothing.txt"), "cannot open vocabulary"))
    empty = os.path.join(d, "emptydir")
    os.makedirs(empty, exist_ok=True)
    cases.append(("dir_empty", empty, "the folder has no tokenizer.json"))
    for name, path, want in cases:
        p = subprocess.run([graft, "tokenize", "--tokenizer", path], input="hello\n",
                           capture_output=True, text=True)
        lines = p.stderr.strip().split("\n")
        if p.returncode == 1 and len(lines) == 1 and want in lines[0] and path in lines[0]:
            print(f"PASS error_{name}")
        else:
            print(f"FAIL error_{name}: exit {p.returncode}, stderr {p.stderr[:300]!r} (want {want!r})")


def run(graft, *args):
    p = subprocess.run([graft, *args], capture_output=True, text=True, encoding="utf-8")
    return p.returncode, p.stdout, p.stderr


def set_meta(src, dst, key, value):
    import onnx
    m = onnx.load(src)
    props = [(p.key, p.value) for p in m.metadata_props if p.key != key]
    del m.metadata_props[:]
    for k, v in props + ([(key, value)] if value is not None else []):
        m.metadata_props.add(key=k, value=v)
    onnx.save(m, dst)


def check_carried(name, model, tok):
    """The export's metadata holds the tokenizer files, readable with onnx and json/base64."""
    import base64
    import onnx
    meta = {p.key: p.value for p in onnx.load(model).metadata_props}
    keys = sorted(k for k in meta if k in ("graft.text.vocab", "graft.text.tokenizer",
                                           "graft.text.bpe", "graft.text.sentencepiece"))
    if tok.endswith(".model"):
        ok = keys == ["graft.text.sentencepiece"] and \
            base64.b64decode(meta[keys[0]], validate=True) == open(tok, "rb").read()
    else:
        bundle = json.loads(meta.get("graft.text.bpe", "{}"))
        ok = keys == ["graft.text.bpe"] and sorted(bundle) == ["merges.txt", "vocab.json"] and \
            bundle["vocab.json"] == json.load(open(os.path.join(tok, "vocab.json"))) and \
            bundle["merges.txt"] == open(os.path.join(tok, "merges.txt"), encoding="utf-8",
                                         newline="").read()
    print(f"PASS {name}_carried" if ok else f"FAIL {name}_carried: keys {keys}")


def finetune(graft, out, gen):
    """finetune with the files, then predict / eval from the export alone."""
    bert = os.path.join(gen, "bert_tiny_decomposed.onnx")
    if not os.path.exists(bert):
        print(f"SKIP finetune_files: {bert} not generated")
        return
    from tokenizers import ByteLevelBPETokenizer
    rob = os.path.join(out, "files_roberta_600")  # ids within the tiny BERT's 1,000
    if not os.path.exists(os.path.join(rob, "merges.txt")):
        os.makedirs(rob, exist_ok=True)
        trainer = ByteLevelBPETokenizer()
        with open(os.path.join(out, "corpus.txt"), encoding="utf-8") as f:
            trainer.train_from_iterator([t.replace("\t", " ") for t in f], vocab_size=600,
                                        min_frequency=2, show_progress=False,
                                        special_tokens=SPECIALS)
        trainer.save_model(rob)
    d = os.path.join(out, "files_finetune")
    os.makedirs(d, exist_ok=True)
    train, lines = os.path.join(d, "train.csv"), os.path.join(d, "lines.txt")
    with open(train, "w", encoding="utf-8") as f:
        f.write("text,label\n")
        for w in ["good", "great", "fine", "nice", "happy", "bad", "poor", "sad", "awful", "dull"]:
            lab = "pos" if w in ("good", "great", "fine", "nice", "happy") else "neg"
            f.write(f"the {w} movie,{lab}\na {w} day,{lab}\n")
    with open(lines, "w", encoding="utf-8") as f:
        f.write("the good movie\na dull day\nHello, World! café naïve <mask> 日本語\n"
                "an unknownword xyzzy that runs on and on past the sixteen token limit\n")
    spm_model = os.path.join(out, "files_spm_t5.model")  # unigram, with <pad>
    for name, tok in [("finetune_spm_unigram", spm_model), ("finetune_bpe_files", rob)]:
        model = os.path.join(d, name + ".onnx")
        rc, _, err = run(graft, "finetune", "--model", bert, "--data", train, "--tokenizer", tok,
                         "--max-len", "16", "--pooling", "mean", "--val-split", "0", "--epochs",
                         "4", "--lr", "0.01", "--no-cache", "--out", model)
        if rc != 0 or not os.path.exists(model):
            print(f"FAIL {name}: exit {rc}: {err[-400:]}")
            continue
        print(f"PASS {name}")
        check_carried(name, model, tok)
        pred = ["predict", "--model", model, "--lines", lines, "--format", "jsonl", "--top-k", "2"]
        rc1, alone, err1 = run(graft, *pred)
        rc2, given, err2 = run(graft, *pred, "--tokenizer", tok)
        if rc1 == 0 and rc2 == 0 and alone == given and len(alone.splitlines()) == 4:
            print(f"PASS {name}_predict_alone")
        else:
            print(f"FAIL {name}_predict_alone: exits {rc1} {rc2}, {err1[-300:]} {err2[-300:]}")
        rc, res, err = run(graft, "eval", "--model", model, "--data", train, "--json")
        ok = rc == 0 and '"accuracy"' in res
        print(f"PASS {name}_eval_alone" if ok else f"FAIL {name}_eval_alone: {rc} {err[-300:]}")
    corrupt(graft, d, os.path.join(d, "finetune_spm_unigram.onnx"),
            os.path.join(d, "finetune_bpe_files.onnx"), spm_model)


def corrupt(graft, d, spm_onnx, bpe_onnx, spm_model):
    import base64
    if not (os.path.exists(spm_onnx) and os.path.exists(bpe_onnx)):
        return
    half = base64.b64encode(open(spm_model, "rb").read()[:5000]).decode()
    cases = [("not_base64", spm_onnx, "graft.text.sentencepiece", "QUJD!!==",
              "metadata graft.text.sentencepiece: not base64 (character 5)"),
             ("bad_length", spm_onnx, "graft.text.sentencepiece", "QUJDR",
              "metadata graft.text.sentencepiece: base64 of 5 characters"),
             ("spm_truncated", spm_onnx, "graft.text.sentencepiece", half,
              "the model's tokenizer: the vocabulary: not a SentencePiece model"),
             ("bpe_no_merges", bpe_onnx, "graft.text.bpe", '{"vocab.json": {"a": 0}}',
              "the model's tokenizer: the vocabulary: not the object {\"vocab.json\""),
             ("bpe_not_json", bpe_onnx, "graft.text.bpe", '{"vocab.json": {"a": 0}, "merges',
              "the model's tokenizer: the vocabulary: not valid JSON"),
             ("bpe_merge_unknown", bpe_onnx, "graft.text.bpe",
              '{"vocab.json": {"a": 0}, "merges.txt": "a b\\n"}',
              "merges.txt line 1: merge 0 names 'b', which is not in the vocabulary")]
    for name, src, key, value, want in cases:
        bad = os.path.join(d, f"corrupt_{name}.onnx")
        set_meta(src, bad, key, value)
        rc, _, err = run(graft, "predict", "--model", bad, "--text", "a good day")
        if rc == 1 and want in err:
            print(f"PASS carried_{name}")
        else:
            print(f"FAIL carried_{name}: exit {rc}, stderr {err[:300]!r} (want {want!r})")


def main():
    graft = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else "build/hf-tokenizers"
    gen = sys.argv[3] if len(sys.argv) > 3 else "tests/data/gen"
    try:
        import sentencepiece  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as e:
        print(f"SKIP tokenizer_files: {e} (tools/install-deps.sh installs tokenizers and sentencepiece)")
        return 0
    corpus = os.path.join(out, "corpus.txt")
    if not os.path.exists(corpus):
        sys.path.insert(0, os.path.join(HERE, "..", "tools"))
        import make_hf_tokenizers
        make_hf_tokenizers.main(out)
    with open(corpus, encoding="utf-8", newline="\n") as f:
        lines = f.read().split("\n")[:-1]
    bpe_files(graft, out, lines, corpus)
    spm_files(graft, out, lines, corpus)
    errors(graft, out)
    finetune(graft, out, gen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
