#!/usr/bin/env python3
"""tools/make_tokenizer_fixtures.py: writes a WordPiece vocab, a varied test corpus and Hugging Face BertTokenizer's encodings of it into tests/data/tokenizer/.

Needs `pip install transformers tokenizers` (not needed by the tests). Files written:
  vocab.txt     assembled vocabulary (specials, characters, words, ## pieces)
  corpus.txt    one sample a line; a tab separates the two texts of a pair
  expected.txt  per corpus line, one FNV-1a hash per configuration (see CONFIGS) of
                input_ids, token_type_ids and attention_mask
  full.txt      the first FULL_LINES lines' input_ids in full, per configuration, for diagnosis
The C test (tests/test_wordpiece.c) reproduces every hash.
"""
import os
import random
import sys

N_LINES = 3000
FULL_LINES = 60
# name, lowercase, pair, max_len (0: no truncation)
CONFIGS = [("uncased", True, False, 0), ("cased", False, False, 0),
           ("uncased_pair", True, True, 0), ("cased_pair", False, True, 0),
           ("uncased_16", True, False, 16), ("uncased_pair_21", True, True, 21),
           ("cased_pair_16", False, True, 16)]

WORDS = """the of and to in is was for on that with as by at from his he it an were are which this be
or has had first one their its new after who they have two her she been other when there all during
into school time may years more most only over city some world would where later up such used many
can state about national out known university united then made team also year between water house
run running runner play played playing player quick quickly brown fox jumps lazy dog hello world
token tokenizer model learning transfer graft engine train trained training data image text label
music river mountain history people government language english french spanish german japanese
chinese number example because however although international development performance""".split()
SUFFIXES = "s es ed ing ly er est ion ions ment ness able ful less ize ized al ic ous ive ity".split()
ACCENTED = "é è ê ë à â ä á ã å ç ñ ö ô ó ò ü ú ù û ï î í ø æ œ ß É Å Ñ Ö Ü Ç".split()
ACCENTED_WORDS = "café naïve résumé señor Ångström Zürich façade crème brûlée São Paulo Malmö Ñandú".split()
CJK = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持音"
KANA = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテト"
EMOJI = ["😀", "🎉", "👍🏽", "❤️", "🇯🇵", "👨‍👩‍👧", "🤖", "✨"]
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["¡", "¿", "«", "»", "—", "–", "…", "“", "”", "‘", "’", "、", "。", "「", "」", "・", "§", "¶"]
ODD_SPACES = ["\t", "\u00a0", "\u3000", "\u2028", "\u2029", "\u2003", "\u202f", "\x0b", "\x0c", "\x85", "\x1f"]
ODD_CHARS = ["\x01", "\x07", "\x7f", "\u200b", "\u200d", "\ufeff", "\ufffd", "\u00ad", "\u0301", "\u0308",
             "İ", "ǅ", "ẞ", "Σ", "ΟΔΟΣ", "Ωμέγα", "Привет", "МИР", "한국어", "안녕하세요", "ﬁ", "Ⅻ", "①",
             "ｆｕｌｌ", "Ａ", "ﾊﾝｶｸ", "℃", "²", "½", "→", "∑", "€", "£", "¥", "#1", "[SEP]", "[CLS]",
             "[MASK]", "[PAD]", "[UNK]", "[sep]", "a[SEP]b", "Ǆ", "Ꙁ", "ı", "ŉ", "ﬀ", "\u037e", "\u0387",
             "\uf900", "\U00020000", "\U0002b820"]


def char_pieces(lines):
    """Every character of the corpus, cased and normalised the uncased way, alone and as ##piece,
    except a held-out few that must become [UNK]."""
    import unicodedata as ud
    held_out = set(EMOJI[:2]) | set(CJK[300:]) | set(KANA[40:])
    chars = set()
    for line in lines:
        for c in line:
            if c in held_out or ud.category(c)[0] in "CZ" or c.isspace():
                continue
            chars.add(c)
            for d in ud.normalize("NFD", c.lower()) + ud.normalize("NFD", c).lower():
                if ud.category(d) != "Mn":
                    chars.add(d)
    ordered = sorted(chars)
    return ordered + ["##" + c for c in ordered if not ud.category(c).startswith("P")]


def build_vocab(lines):
    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"[unused{i}]" for i in range(20)]
    chars = [chr(c) for c in range(33, 127)] + [c for c in "".join(ACCENTED)] + list(KANA)
    chars += list(CJK[:300]) + ["€", "£", "¥", "…", "—", "–", "“", "”", "‘", "’", "«", "»", "¡", "¿",
                                "、", "。", "「", "」", "ω", "μ", "σ", "ς", "π", "и", "р", "м", "в", "е", "т"]
    seen = set()
    out = []
    for t in toks + chars:
        if t not in seen:
            seen.add(t), out.append(t)
    pieces = []
    for w in WORDS + ACCENTED_WORDS:
        pieces += [w, w.lower(), w.capitalize()]
    for w in WORDS[:80]:
        pieces += [w + s for s in SUFFIXES[:4]]
    pieces += ["##" + c for c in "abcdefghijklmnopqrstuvwxyz0123456789" + "".join(ACCENTED) + KANA[:20]]
    pieces += ["##" + s for s in SUFFIXES] + ["##" + w for w in WORDS[:200]]
    pieces += [str(n) for n in range(100)] + ["##" + str(n) for n in range(100)]
    pieces += ["un", "re", "pre", "anti", "##ization", "##ational", "ab", "##cd", "##ab"]
    for t in pieces + char_pieces(lines):
        if t not in seen:
            seen.add(t), out.append(t)
    return out


def rand_word(rng):
    r = rng.random()
    if r < 0.45:
        w = rng.choice(WORDS)
    elif r < 0.55:
        w = rng.choice(WORDS) + rng.choice(SUFFIXES)
    elif r < 0.62:
        w = rng.choice(ACCENTED_WORDS)
    elif r < 0.68:
        w = "".join(rng.choice(CJK) for _ in range(rng.randint(1, 6)))
    elif r < 0.72:
        w = "".join(rng.choice(KANA) for _ in range(rng.randint(1, 6)))
    elif r < 0.75:
        w = rng.choice(EMOJI)
    elif r < 0.80:
        w = str(rng.randint(0, 10 ** rng.randint(1, 9)))
    elif r < 0.82:
        w = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzé") for _ in range(rng.choice([3, 12, 99, 100, 101, 130])))
    elif r < 0.90:
        w = rng.choice(ODD_CHARS)
    else:
        w = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 10)))
    c = rng.random()
    if c < 0.15:
        w = w.capitalize()
    elif c < 0.2:
        w = w.upper()
    return w


def rand_text(rng, n_words):
    parts = []
    for _ in range(n_words):
        parts.append(rand_word(rng))
        r = rng.random()
        if r < 0.15:
            parts.append(rng.choice(PUNCT))
        if r > 0.93:
            parts.append(rng.choice(ODD_SPACES))
        else:
            parts.append(" " * (1 if rng.random() < 0.95 else rng.randint(0, 3)))
    return "".join(parts)


def build_corpus():
    rng = random.Random(20240611)
    lines = ["", " ", "Hello, world!", "HeLLo WoRLD", "un\tpaired", "café\tCAFÉ", "[SEP]", "a" * 101,
             "日本語のテキストです。", "\u00e9\u0301", "x\x7fy", "don't stop—now!", "1,234.56 $ 7%"]
    while len(lines) < N_LINES:
        n = rng.choice([1, 2, 3, 4, 6, 9, 14])
        text = rand_text(rng, n)
        if rng.random() < 0.5:
            text = text.replace("\t", " ") + "\t" + rand_text(rng, rng.choice([1, 3, 6, 12])).replace("\t", " ")
        lines.append(text)
    for t in lines:
        assert "\n" not in t and "\r" not in t and "\0" not in t
    return lines


def fnv32(values):
    h = 2166136261
    for v in values:
        for b in int(v).to_bytes(4, "little", signed=True):
            h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def encode(tok, line, pair, max_len):
    kw = dict(truncation="longest_first", max_length=max_len) if max_len else {}
    if pair:
        a, _, b = line.partition("\t")
        enc = tok(a, b, **kw)
    else:
        enc = tok(line, **kw)
    return enc["input_ids"], enc["token_type_ids"], enc["attention_mask"]


def main(out_dir):
    from transformers import BertTokenizer
    os.makedirs(out_dir, exist_ok=True)
    lines = build_corpus()
    vocab = build_vocab(lines)
    vocab_path = os.path.join(out_dir, "vocab.txt")
    with open(vocab_path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(vocab) + "\n")
    with open(os.path.join(out_dir, "corpus.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    toks = {lc: BertTokenizer(vocab=vocab_path, do_lower_case=lc) for lc in (True, False)}
    hashes = [[] for _ in lines]
    full = []
    for name, lc, pair, max_len in CONFIGS:
        for i, line in enumerate(lines):
            ids, types, mask = encode(toks[lc], line, pair, max_len)
            hashes[i].append(f"{fnv32(list(ids) + list(types) + list(mask)):08x}")
            if i < FULL_LINES:
                full.append(f"{name} {i} " + " ".join(map(str, ids)))
    with open(os.path.join(out_dir, "expected.txt"), "w") as f:
        f.write("# " + " ".join(c[0] for c in CONFIGS) + "\n")
        f.write("".join(" ".join(h) + "\n" for h in hashes))
    with open(os.path.join(out_dir, "full.txt"), "w") as f:
        f.write("\n".join(full) + "\n")
    print(f"{len(vocab)} tokens, {len(lines)} lines, {len(CONFIGS)} configurations")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/tokenizer")
