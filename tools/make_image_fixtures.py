#!/usr/bin/env python3
"""tools/make_image_fixtures.py: writes the small test images of tests/data/images and the RGB
pixels PIL decodes from each (Image.open(p).convert("RGB") then ImageOps.exif_transpose) as .npy.

Needs Pillow and numpy. Run from the repository root:
    python3 tools/make_image_fixtures.py [--out tests/data/images]
Every image NAME.EXT gets NAME.EXT.npy ((height, width, 3) uint8). DCT-scaled references are
NAME.EXT.scaleD.npy, decoded with PIL's draft() at 1/D. large.jpg (512x384) gets instead the
Resize(64) + CenterCrop(56) of its full-size decode (large.jpg.r64c56.npy: torchvision's
ImageFolder + PIL) and of its 1/4 draft() decode (large.jpg.fast_r64c56.npy). Bad inputs (bad_*)
get no reference; the test checks their error instead.
"""
import argparse
import os
import struct
import zlib

import numpy as np
from PIL import Image, ImageOps, PngImagePlugin


def pattern(w, h, seed):
    """A smooth gradient plus a few hard edges and noise: exercises IDCT and upsampling."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    r = (x * 255 // max(w - 1, 1))
    g = (y * 255 // max(h - 1, 1))
    b = ((x + y) * 7) % 256
    img = np.stack([r, g, b], axis=-1).astype(np.int32)
    img[h // 3:h // 2, w // 4:w // 2] = [250, 20, 30]  # a red block: chroma edges
    img += rng.integers(-12, 13, size=img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def write_png(path, arr, color_type, bit_depth, interlace=False, extra=b""):
    """A minimal PNG writer for what PIL cannot write (16-bit RGB/RGBA/LA, Adam7)."""
    h, w = arr.shape[:2]
    arr = arr.reshape(h, w, -1)
    dtype = ">u2" if bit_depth == 16 else "u1"

    def rows(a):
        return b"".join(b"\x00" + a[i].astype(dtype).tobytes() for i in range(a.shape[0]))

    if interlace:
        passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4),
                  (1, 0, 2, 2), (0, 1, 1, 2)]
        raw = b"".join(rows(arr[y0::dy, x0::dx]) for x0, y0, dx, dy in passes
                       if arr[y0::dy, x0::dx].size)
    else:
        raw = rows(arr)
    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 1 if interlace else 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + extra +
                png_chunk(b"IDAT", zlib.compress(raw, 9)) + png_chunk(b"IEND", b""))


def exif_orientation(o):
    ex = Image.Exif()
    ex[0x0112] = o
    return ex.tobytes()


def reference(path):
    with Image.open(path) as im:
        return np.asarray(ImageOps.exif_transpose(im).convert("RGB"))


def resize_crop(im, size, crop):
    """torchvision's Resize(size) + CenterCrop(crop) on a PIL image, written out (torchvision is
    not in the environment): the shorter side to size, the longer int(size * long / short),
    bilinear with antialiasing; then the crop at int(round((side - crop) / 2))."""
    w, h = im.size
    nw, nh = (size, int(size * h / w)) if w <= h else (int(size * w / h), size)
    im = im.resize((nw, nh), Image.BILINEAR)
    top, left = int(round((nh - crop) / 2.0)), int(round((nw - crop) / 2.0))
    return np.asarray(im.crop((left, top, left + crop, top + crop)))


def save_ref(out, name, arr):
    arr = np.ascontiguousarray(arr, dtype=np.uint8)
    assert arr.ndim == 3 and arr.shape[2] == 3
    np.save(os.path.join(out, name), arr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/images")
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))
    p = lambda n: os.path.join(out, n)  # noqa: E731

    rgb = pattern(40, 30, 1)
    odd = pattern(13, 9, 2)
    gray = rgb.mean(axis=2).astype(np.uint8)
    # JPEG: 4:2:0, 4:4:4, odd size, gray, progressive, CMYK (PIL writes Adobe-inverted CMYK).
    Image.fromarray(rgb).save(p("rgb420.jpg"), quality=90)
    Image.fromarray(rgb).save(p("rgb444.jpg"), quality=90, subsampling=0)
    Image.fromarray(odd).save(p("odd13x9.jpg"), quality=85)
    Image.fromarray(gray).save(p("gray.jpg"), quality=90)
    Image.fromarray(rgb).save(p("progressive.jpg"), quality=90, progressive=True)
    Image.fromarray(rgb).convert("CMYK").save(p("cmyk.jpg"), quality=95)
    # EXIF orientations 1..8 on a non-square JPEG (24x16) and one PNG (eXIf chunk).
    small = pattern(24, 16, 3)
    for o in range(1, 9):
        Image.fromarray(small).save(p(f"orient{o}.jpg"), quality=92, exif=exif_orientation(o))
    Image.fromarray(small).save(p("orient6.png"), exif=exif_orientation(6))
    # PIL's fallbacks when there is no EXIF orientation: XMP (JPEG APP1, PNG iTXt) and PNG's
    # "Raw profile type exif" text (ImageMagick's form: header lines, then hex).
    xmp = (b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description '
           b'xmlns:tiff="http://ns.adobe.com/tiff/1.0/" tiff:Orientation="8"/></rdf:RDF>'
           b'</x:xmpmeta>')
    Image.fromarray(small).save(p("orient_xmp.jpg"), quality=92, xmp=xmp)
    info = PngImagePlugin.PngInfo()
    info.add_itxt("XML:com.adobe.xmp", "<x:xmpmeta><tiff:Orientation>3</tiff:Orientation>"
                  "</x:xmpmeta>")
    Image.fromarray(small).save(p("orient_xmp.png"), pnginfo=info)
    raw = exif_orientation(5)  # starts with b"Exif\0\0", as ImageMagick writes it
    info = PngImagePlugin.PngInfo()
    info.add_text("Raw profile type exif", "\nexif\n%8d\n" % len(raw) + raw.hex(), zip=True)
    Image.fromarray(small).save(p("orient_raw.png"), pnginfo=info)
    # DCT scaling: 64x48 decoded at 1/2, 1/4, 1/8 through PIL's draft().
    big = pattern(64, 48, 4)
    Image.fromarray(big).save(p("scale.jpg"), quality=90)
    for d in (2, 4, 8):
        with Image.open(p("scale.jpg")) as im:
            im.draft("RGB", (64 // d, 48 // d))
            assert im.size == (64 // d, 48 // d), im.size
            save_ref(out, f"scale.jpg.scale{d}.npy", np.asarray(im.convert("RGB")))
    # A large JPEG (at least twice the resize target) through torchvision's eval transform as
    # ImageFolder + PIL give it: decoded at full size, then Resize(64) + CenterCrop(56); and the
    # same after a reduced-size decode (draft() at 1/4, what --fast-decode does) for comparison.
    Image.fromarray(pattern(512, 384, 5)).save(p("large.jpg"), quality=90)
    with Image.open(p("large.jpg")) as im:
        save_ref(out, "large.jpg.r64c56.npy", resize_crop(im.convert("RGB"), 64, 56))
    with Image.open(p("large.jpg")) as im:
        im.draft("RGB", (128, 96))
        assert im.size == (128, 96), im.size
        save_ref(out, "large.jpg.fast_r64c56.npy", resize_crop(im.convert("RGB"), 64, 56))
    # PNG: RGB, RGBA, gray, gray+alpha, palette with tRNS, 1-bit and 4-bit, 16-bit, Adam7.
    alpha = (np.arange(40 * 30).reshape(30, 40) % 256).astype(np.uint8)
    Image.fromarray(rgb).save(p("rgb.png"))
    Image.fromarray(np.dstack([rgb, alpha])).save(p("rgba.png"))
    Image.fromarray(gray).save(p("gray.png"))
    Image.fromarray(np.dstack([gray, alpha])).save(p("gray_alpha.png"))
    pal = Image.fromarray(rgb).quantize(16)
    pal.save(p("palette_trns.png"), transparency=3)
    pal.save(p("palette4.png"), bits=4)
    Image.fromarray(gray > 128).save(p("bilevel.png"))
    rgb16 = (rgb.astype(np.uint16) * 257 + np.arange(40)[None, :, None] * 3).astype(np.uint16)
    write_png(p("rgb16.png"), rgb16, 2, 16)
    write_png(p("rgba16.png"), np.dstack([rgb16, rgb16[..., :1]]), 6, 16)
    write_png(p("interlaced.png"), odd, 2, 8, interlace=True)
    # 16-bit gray: PIL opens it as I;16 and convert("RGB") clips at 255 (a white image); graft
    # keeps the high byte like PIL does for 16-bit RGB, so its reference is written by hand.
    g16 = (gray.astype(np.uint16) * 256 + 200).astype(np.uint16)
    write_png(p("gray16.png"), g16, 0, 16)

    for name in sorted(os.listdir(out)):
        base, ext = os.path.splitext(name)
        if ext not in (".jpg", ".png"):
            continue
        if base == "large":
            continue  # its references are the resized crops above (the full image is 590 KB)
        if base == "gray16":
            save_ref(out, "gray16.png.npy", np.repeat((g16 >> 8).astype(np.uint8)[..., None], 3, 2))
            continue
        save_ref(out, name + ".npy", reference(p(name)))
    # PIL keeps the high byte of 16-bit RGB samples: check that the references agree.
    assert np.array_equal(np.load(p("rgb16.png.npy")), (rgb16 >> 8).astype(np.uint8))

    # Bad inputs.
    open(p("bad_empty.jpg"), "wb").close()
    with open(p("bad_text.jpg"), "w") as f:
        f.write("this is not an image\n")
    data = open(p("rgb420.jpg"), "rb").read()
    open(p("bad_truncated.jpg"), "wb").write(data[:len(data) * 2 // 3])
    data = open(p("rgb.png"), "rb").read()
    open(p("bad_truncated.png"), "wb").write(data[:len(data) * 2 // 3])
    ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)
    open(p("bad_huge.png"), "wb").write(
        b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) +
        png_chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + png_chunk(b"IEND", b""))
    # 2x6000 (346 bytes): its Resize(256) would be 256x768000 pixels, over the pixel limit.
    Image.new("L", (2, 6000), 128).save(p("bad_aspect.jpg"), quality=50, optimize=True)
    Image.fromarray(odd).save(p("bad_format.gif"))
    Image.fromarray(odd).save(p("bad_format.bmp"))
    total = sum(os.path.getsize(p(n)) for n in os.listdir(out))
    print(f"wrote {len(os.listdir(out))} files, {total} bytes, to {out}")


if __name__ == "__main__":
    main()
