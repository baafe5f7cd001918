#!/usr/bin/env python3
"""tools/make_fortunes_text.py OUT [--fortunes DIR]: real labelled text from Debian's `fortunes`
package (fortune-mod's cookie files, BSD licence: /usr/share/doc/fortunes/copyright): each
category file (computers, food, law, ...) is a class, each cookie a text. Writes OUT/train.csv and
OUT/test.csv (columns text,label) and OUT/about.json (source, licence, counts, the recipe), the same
bytes on every run: cookies are cleaned (overstrikes removed, whitespace collapsed), kept when 20 to
300 characters long and found in one category only, then each class is shuffled with a fixed seed,
capped, and split 2/3 train, 1/3 test. Prints a SKIP line (exit 0) when the package is not
installed.
"""
import argparse
import csv
import hashlib
import json
import re
import sys
from pathlib import Path

import numpy as np

CATEGORIES = ["computers", "food", "law", "love", "politics", "science", "sports"]
PER_CLASS = 150      # at most this many cookies of a category (the CI's time budget)
TEST_FRACTION = 1 / 3
MIN_CHARS, MAX_CHARS = 20, 300
SEED = 0


def cookies(path):
    """The cookies of one fortune file, cleaned: one string each."""
    raw = path.read_bytes().decode("utf-8", errors="replace")
    out = []
    for item in re.split(r"^%\n", raw, flags=re.M):
        item = re.sub(r".\x08", "", item)          # overstrike (x BS x, _ BS x): the letter
        item = " ".join(item.split())               # tabs, newlines, runs of spaces
        if MIN_CHARS <= len(item) <= MAX_CHARS:
            out.append(item)
    return out


def build(fortunes):
    """{category: [texts]}: each text in one category only, first occurrence kept."""
    per = {c: cookies(fortunes / c) for c in CATEGORIES}
    seen = {}
    for c, items in per.items():
        for t in items:
            seen.setdefault(t, set()).add(c)
    classes = {}
    for c, items in per.items():
        keep, done = [], set()
        for t in items:
            if len(seen[t]) == 1 and t not in done:
                keep.append(t)
                done.add(t)
        classes[c] = keep
    return classes


def split(classes):
    rng = np.random.default_rng(SEED)
    train, test = [], []
    for c in CATEGORIES:
        items = classes[c]
        order = rng.permutation(len(items))[:PER_CLASS]
        chosen = [items[i] for i in order]
        n_test = int(round(len(chosen) * TEST_FRACTION))
        test += [(t, c) for t in chosen[:n_test]]
        train += [(t, c) for t in chosen[n_test:]]
    # Interleave the classes (a file sorted by class reads oddly; the trainer shuffles anyway).
    for rows in (train, test):
        rows[:] = [rows[i] for i in rng.permutation(len(rows))]
    return train, test


def write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["text", "label"])
        w.writerows(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--fortunes", default="/usr/share/games/fortunes")
    args = ap.parse_args()
    fortunes = Path(args.fortunes)
    missing = [c for c in CATEGORIES if not (fortunes / c).is_file()]
    if missing:
        print(f"SKIP fortunes_data: no {fortunes}/{missing[0]} (Debian's `fortunes` package is not "
              "installed: apt-get install fortunes)")
        return 0
    classes = build(fortunes)
    train, test = split(classes)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "train.csv", train)
    write_csv(out / "test.csv", test)
    about = {
        "source": "Debian package `fortunes` (fortune-mod's cookie files), " + str(fortunes),
        "licence": "BSD (the Regents of the University of California; "
                   "/usr/share/doc/fortunes/copyright)",
        "categories": CATEGORIES,
        "recipe": {"min_chars": MIN_CHARS, "max_chars": MAX_CHARS, "per_class": PER_CLASS,
                   "test_fraction": TEST_FRACTION, "seed": SEED,
                   "cleaning": "overstrikes removed, whitespace collapsed to one space, cookies "
                               "found in more than one category dropped"},
        "available": {c: len(v) for c, v in classes.items()},
        "train": len(train), "test": len(test),
        "sha256": {n: hashlib.sha256((out / n).read_bytes()).hexdigest()
                   for n in ("train.csv", "test.csv")},
    }
    (out / "about.json").write_text(json.dumps(about, indent=1) + "\n")
    print(f"PASS fortunes_data: {len(train)} train, {len(test)} test texts in {len(CATEGORIES)} "
          f"classes ({out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
