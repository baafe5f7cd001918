#!/usr/bin/env python3
"""make_transform_fixtures.py: records torchvision's transform outputs (PIL path) for test_transforms.

Needs torchvision and Pillow (not in CI). Writes tests/data/transforms/fixtures.bin, a list of
records (about 250 KB): name (32 bytes, NUL padded), kind (int32: 0 u8, 1 f32, 2 f64), h, w, c (int32), then
h*w*c values little-endian. Source images: "noise" (57x43 random bytes, stored as a record),
"grad" (43 wide, 57 tall) and "large" (300x200), both from integer formulas that
tests/test_transforms.c repeats (grad_pixel, large_pixel).
"""
import argparse
import os
import struct

import numpy as np
import torch
from PIL import Image
from torchvision import transforms as T
from torchvision.transforms import functional as F

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def grad_image(w, h):
    y, x = np.mgrid[0:h, 0:w]
    r = (x * 255) // (w - 1)
    g = (y * 255) // (h - 1)
    b = ((x + y) * 255) // (w + h - 2)
    return np.stack([r, g, b], -1).astype(np.uint8)


def large_image(w, h):
    """A smooth ramp in R, a chirp (rising frequency) in G, a checkerboard in B."""
    y, x = np.mgrid[0:h, 0:w]
    r = (x * 255) // (w - 1)
    g = ((x * x + 3 * x * y) // 7) % 256
    b = np.where(((x // 3) + (y // 5)) % 2 == 0, 230, 20)
    return np.stack([r, g, b], -1).astype(np.uint8)


class Writer:
    def __init__(self):
        self.buf = bytearray()

    def add(self, name, arr):
        arr = np.asarray(arr)
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if arr.ndim == 1:
            arr = arr[None, None, :]
        kind = {np.dtype(np.uint8): 0, np.dtype(np.float32): 1, np.dtype(np.float64): 2}[arr.dtype]
        assert len(name) < 32
        self.buf += name.encode().ljust(32, b"\0")
        self.buf += struct.pack("<4i", kind, *arr.shape)
        self.buf += np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()


def u8(img):
    return np.asarray(img.convert("RGB"), dtype=np.uint8)


def record_image(wr, tag, img, up):
    wr.add(f"{tag}/resize32", u8(T.Resize(32)(img)))
    wr.add(f"{tag}/resize{up}", u8(T.Resize(up)(img)))
    wr.add(f"{tag}/resize20x30", u8(T.Resize((20, 30))(img)))
    wr.add(f"{tag}/resize7x5", u8(T.Resize((7, 5))(img)))
    # Height shrinks far more than width: Pillow >= 13 runs the vertical pass first.
    wr.add(f"{tag}/resize9x50", u8(T.Resize((9, 50))(img)))
    wr.add(f"{tag}/cc24", u8(T.CenterCrop(24)(img)))
    wr.add(f"{tag}/cc25x30", u8(T.CenterCrop((25, 30))(img)))
    wr.add(f"{tag}/cc60x70", u8(T.CenterCrop((60, 70))(img)))  # larger: padded
    wr.add(f"{tag}/cc30x64", u8(T.CenterCrop((30, 64))(img)))  # wider only
    # resized_crop(top, left, height, width, size=[h, w])
    wr.add(f"{tag}/rc_5_7_30_40", u8(F.resized_crop(img, 5, 7, 30, 40, [24, 24])))
    wr.add(f"{tag}/rc_m3_m4_20_50", u8(F.resized_crop(img, -3, -4, 20, 50, [16, 12])))
    wr.add(f"{tag}/hflip", u8(F.hflip(img)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/transforms")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    wr = Writer()

    noise = np.random.default_rng(1234).integers(0, 256, (43, 57, 3), dtype=np.uint8)
    wr.add("noise/src", noise)
    record_image(wr, "noise", Image.fromarray(noise), 100)
    record_image(wr, "grad", Image.fromarray(grad_image(43, 57)), 70)

    norm = T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)])
    t = norm(Image.fromarray(noise))  # (3, H, W) f32
    wr.add("noise/tensor_chw", t.numpy().astype(np.float32).reshape(3, 43, 57).transpose(1, 2, 0))

    large = Image.fromarray(large_image(300, 200))
    wr.add("large/resize64", u8(T.Resize(64)(large)))
    wr.add("large/resize37x53", u8(T.Resize((37, 53))(large)))
    wr.add("large/resize75x49", u8(T.Resize((75, 49))(large)))
    wr.add("large/resize40x280", u8(T.Resize((40, 280))(large)))  # vertical pass first
    chain = T.Compose([T.Resize(256), T.CenterCrop(224)])
    crop = chain(large)
    wr.add("large/chain_u8_even", u8(crop)[::2, ::2])  # every other row and column: smaller
    tens = norm(crop).numpy().astype(np.float64)  # (3, 224, 224)
    stats = np.concatenate([tens.sum(axis=(1, 2)), (tens * tens).sum(axis=(1, 2))])
    wr.add("large/chain_stats", stats)

    path = os.path.join(args.out, "fixtures.bin")
    with open(path, "wb") as f:
        f.write(wr.buf)
    print(f"wrote {path} ({len(wr.buf)} bytes), torch {torch.__version__}, PIL {Image.__version__}")


if __name__ == "__main__":
    main()
