#!/usr/bin/env python3
"""make_image_folder.py DIR [--per-class N] [--size S]: writes an ImageFolder-layout data set for
graft's data tests and benchmark: DIR/<class>/<image> for three classes ("circle", "square",
"stripes"), N images each (default 100; every tenth in a nested DIR/<class>/more/ folder),
mixed JPEG and PNG (RGB, gray, RGBA, palette, 16-bit gray PNG), sizes around S (default 96)
with varied aspect ratios; plus the bad files the loader must skip and report: a truncated
JPEG, a zero-byte file, a text file named .jpg, a PNG whose header claims 100000 x 100000
pixels, and a BMP (an image format graft does not decode); and files it must ignore without a
word: a GIF and a notes.txt (not image names by torchvision's list), a hidden .x.jpg and a
hidden folder .cache/ (with an image in it), a hidden class folder .trash/. Writes
DIR.expected_bad.txt listing the bad files' paths (one a line) and DIR.expected_count.txt the
number of good ones. Deterministic (seeded); needs numpy and Pillow only."""
import argparse
import os
import struct
import zlib

import numpy as np
from PIL import Image

CLASSES = ["circle", "square", "stripes"]


def draw(kind, w, h, rng):
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    base = rng.uniform(0, 80, size=3)
    img = np.zeros((h, w, 3), np.float32) + base
    color = rng.uniform(120, 255, size=3)
    cx, cy, r = w * rng.uniform(0.3, 0.7), h * rng.uniform(0.3, 0.7), min(w, h) * rng.uniform(0.2, 0.4)
    if kind == "circle":
        mask = (x - cx) ** 2 + (y - cy) ** 2 < r * r
    elif kind == "square":
        mask = (abs(x - cx) < r) & (abs(y - cy) < r)
    else:
        mask = ((x + y) // max(2, int(r / 2))) % 2 == 0
    img[mask] = color
    img += rng.normal(0, 8, size=img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def save_variant(arr, path_stem, i, rng):
    v = i % 6
    im = Image.fromarray(arr, "RGB")
    if v == 0:
        im.save(path_stem + ".jpg", quality=90)
    elif v == 1:
        im.convert("L").save(path_stem + ".jpg", quality=85)
    elif v == 2:
        im.save(path_stem + ".png")
    elif v == 3:
        a = Image.fromarray(rng.integers(0, 256, arr.shape[:2], dtype=np.uint8), "L")
        rgba = im.copy()
        rgba.putalpha(a)
        rgba.save(path_stem + ".png")
    elif v == 4:
        im.convert("P", palette=Image.ADAPTIVE, colors=64).save(path_stem + ".png")
    else:
        g16 = (np.asarray(im.convert("L"), np.uint16) * 257).astype(np.uint16)
        Image.fromarray(g16).save(path_stem + ".png")


def huge_png(path):
    def chunk(kind, data):
        c = struct.pack(">I", len(data)) + kind + data
        return c + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 16)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--per-class", type=int, default=100)
    ap.add_argument("--size", type=int, default=96)
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    good = 0
    for c, kind in enumerate(CLASSES):
        d = os.path.join(args.dir, kind)
        os.makedirs(d, exist_ok=True)
        for i in range(args.per_class):
            w = int(args.size * rng.uniform(0.8, 1.6))
            h = int(args.size * rng.uniform(0.8, 1.6))
            sub = os.path.join(d, "more") if i % 10 == 9 else d
            os.makedirs(sub, exist_ok=True)
            save_variant(draw(kind, w, h, rng), os.path.join(sub, f"{kind}_{i:04d}"), i + c, rng)
            good += 1
    bad = []
    d = os.path.join(args.dir, CLASSES[0])
    full = os.path.join(d, "zz_truncated.jpg")
    Image.fromarray(draw("circle", 120, 90, rng)).save(full, quality=90)
    data = open(full, "rb").read()
    open(full, "wb").write(data[: len(data) // 2])
    bad.append(full)
    empty = os.path.join(args.dir, CLASSES[1], "zz_empty.png")
    open(empty, "wb").close()
    bad.append(empty)
    text = os.path.join(args.dir, CLASSES[2], "zz_not_an_image.jpg")
    open(text, "w").write("this is a text file, not a JPEG\n")
    bad.append(text)
    huge = os.path.join(args.dir, CLASSES[0], "zz_huge.png")
    huge_png(huge)
    bad.append(huge)
    bmp = os.path.join(args.dir, CLASSES[1], "zz_bitmap.bmp")
    Image.fromarray(draw("square", 40, 40, rng)).save(bmp)
    bad.append(bmp)
    # Ignored: not image names, hidden files and folders.
    small = Image.fromarray(draw("square", 40, 40, rng))
    small.save(os.path.join(args.dir, CLASSES[1], "zz_animation.gif"))
    with open(os.path.join(args.dir, CLASSES[2], "notes.txt"), "w") as f:
        f.write("not an image\n")
    small.save(os.path.join(args.dir, CLASSES[0], ".x.jpg"))
    for hidden in (os.path.join(args.dir, CLASSES[2], ".cache"), os.path.join(args.dir, ".trash")):
        os.makedirs(hidden, exist_ok=True)
        small.save(os.path.join(hidden, "hidden.png"))
    with open(args.dir.rstrip("/") + ".expected_bad.txt", "w") as f:
        f.write("\n".join(sorted(bad)) + "\n")
    with open(args.dir.rstrip("/") + ".expected_count.txt", "w") as f:
        f.write(f"{good}\n")
    print(f"make_image_folder: {good} images and {len(bad)} bad files in {args.dir}")


if __name__ == "__main__":
    main()
