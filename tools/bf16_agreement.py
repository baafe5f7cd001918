#!/usr/bin/env python3
"""tools/bf16_agreement.py: top-1 agreement of graft's bf16 CPU inference with its fp32 (issue
17's "at least 99% on a generated validation set"), on a CPU with AVX512_BF16 or AMX.

Runs each model through build/release/libgraft.so twice, fp32 and bf16 (graft_model_set_precision
on the CPU), on the same inputs, and prints how many top-1 classes agree, the accuracy of each
where labels exist, and the largest logit difference over the largest logit:
  - models/digits_cnn.onnx (the demo's CNN, trained on digits 0-4) on scikit-learn's 1,797 real
    digits (accuracy over the 901 of classes 0-4);
  - the generated ResNet-50 (tests/data/gen, random weights: many near ties between its top two
    logits, which bf16's rounding may flip) on --images generated images; agreement is also
    given over the images whose fp32 top two logits are further apart than 1% of the largest.
Usage: python3 tools/bf16_agreement.py [--lib build/release/libgraft.so] [--gen tests/data/gen]
           [--images 256] [--threads 2]
"""
import argparse
import ctypes as C

import numpy as np

from bench_cpu import CtxOptions, Named, Tensor

BF16 = 16  # GRAFT_DTYPE_BF16


class Model:
    """A graft model on the CPU in fp32 or bf16; logits(x) runs it on a float32 batch."""

    def __init__(self, lib, path, input_name, threads, bf16):
        self.lib, self.ctx, self.m = lib, C.c_void_p(), C.c_void_p()
        self.input_name = input_name.encode()
        opts = CtxOptions(threads, 2, None, None, 0, None, 0)
        if lib.graft_ctx_create(C.byref(opts), C.byref(self.ctx)) != 0:
            raise RuntimeError("graft_ctx_create failed")
        if lib.graft_model_load(self.ctx, path.encode(), C.byref(self.m)) != 0:
            raise RuntimeError(lib.graft_last_error(self.ctx).decode())
        if bf16 and lib.graft_model_set_precision(self.m, BF16) != 0:
            raise RuntimeError(lib.graft_last_error(self.ctx).decode())

    def logits(self, x):
        x = np.ascontiguousarray(x, dtype=np.float32)
        arr = (Named * 1)()
        arr[0] = Named(self.input_name,
                       Tensor(1, x.ndim, (C.c_int64 * 8)(*x.shape), x.ctypes.data))
        if self.lib.graft_model_run(self.m, arr, 1) != 0:
            raise RuntimeError(self.lib.graft_last_error(self.ctx).decode())
        out = C.POINTER(Tensor)()
        if self.lib.graft_model_output(self.m, 0, C.byref(out)) != 0:
            raise RuntimeError(self.lib.graft_last_error(self.ctx).decode())
        t = out.contents
        shape = tuple(t.dims[i] for i in range(t.ndim))
        n = int(np.prod(shape))
        buf = (C.c_float * n).from_address(t.data)
        return np.frombuffer(buf, dtype=np.float32, count=n).reshape(shape).copy()


def batched(model, x, batch):
    return np.concatenate([model.logits(x[i:i + batch]) for i in range(0, len(x), batch)])


def report(name, a, b, labels=None):
    """One line: agreement of the argmaxes of a (fp32) and b (bf16) logits."""
    top_a, top_b = a.argmax(1), b.argmax(1)
    agree = int((top_a == top_b).sum())
    line = (f"{name}: top-1 agreement {agree}/{len(a)} ({100.0 * agree / len(a):.2f}%), "
            f"logits within {np.abs(a - b).max() / np.abs(a).max():.2g} of the largest")
    srt = np.sort(a, axis=1)
    clear = (srt[:, -1] - srt[:, -2]) > 0.01 * np.abs(a).max()
    if not clear.all():
        ac = int((top_a[clear] == top_b[clear]).sum())
        line += (f"; {ac}/{int(clear.sum())} ({100.0 * ac / max(int(clear.sum()), 1):.2f}%) "
                 "where fp32's top two are more than 1% of the largest apart")
    if labels is not None:
        known = labels < a.shape[1]  # the classes the model was trained on
        line += (f"; accuracy on its {int(known.sum())} classes' images: fp32 "
                 f"{100.0 * (top_a == labels)[known].mean():.2f}%, "
                 f"bf16 {100.0 * (top_b == labels)[known].mean():.2f}%")
    print(line)
    return agree / len(a)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/release/libgraft.so")
    ap.add_argument("--gen", default="tests/data/gen")
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    lib = C.CDLL(args.lib)
    lib.graft_last_error.restype = C.c_char_p
    from sklearn.datasets import load_digits
    d = load_digits()
    x = ((d.data.astype(np.float32) / 16.0 - 0.3053) / 0.376).reshape(-1, 1, 8, 8)
    fp32 = Model(lib, "models/digits_cnn.onnx", "input", args.threads, False)
    bf16 = Model(lib, "models/digits_cnn.onnx", "input", args.threads, True)
    report("digits_cnn on 1,797 real digits", batched(fp32, x, 256), batched(bf16, x, 256),
           d.target)
    rng = np.random.default_rng(17)
    imgs = rng.normal(0, 1, (args.images, 3, 224, 224)).astype(np.float32)
    path = f"{args.gen}/resnet50.onnx"
    fp32 = Model(lib, path, "input", args.threads, False)
    bf16 = Model(lib, path, "input", args.threads, True)
    report(f"resnet50 (random weights) on {args.images} generated images",
           batched(fp32, imgs, 32), batched(bf16, imgs, 32))


if __name__ == "__main__":
    main()
