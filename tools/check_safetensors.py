#!/usr/bin/env python3
"""tools/check_safetensors.py: interop of graft's safetensors code with the Python package.

  write DIR: writes DIR/python.safetensors with safetensors.numpy.save_file (read by
             tests/test_safetensors.c)
  read DIR:  checks DIR/graft.safetensors, written by tests/test_safetensors.c
Prints PASS/FAIL/SKIP lines; exits non-zero on a failure."""
import os
import sys

import numpy as np

try:
    from safetensors import safe_open
    from safetensors.numpy import save_file
except ImportError:  # the package is optional outside CI
    print("SKIP safetensors_py: the Python safetensors package is not installed")
    sys.exit(0)


def write(folder):
    os.makedirs(folder, exist_ok=True)
    tensors = {
        "a": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": np.array([1, -2, 3], dtype=np.int64),
        "c": np.array([0.5, 2.0], dtype=np.float16),
        "d": np.array([True, False]),
        "e": np.array(2.5, dtype=np.float64),
    }
    save_file(tensors, os.path.join(folder, "python.safetensors"), metadata={"source": "python"})
    print("PASS py_write")
    return 0


def check(name, cond, why):
    print(f"PASS {name}" if cond else f"FAIL {name}: {why}")
    return 0 if cond else 1


def read(folder):
    path = os.path.join(folder, "graft.safetensors")
    if not os.path.exists(path):
        print(f"FAIL py_read: {path} is missing (tests/test_safetensors did not write it)")
        return 1
    try:  # the numpy API has no bf16: load every other tensor by name
        with safe_open(path, framework="np") as f:
            keys = set(f.keys())
            t = {k: f.get_tensor(k) for k in keys if k != "brain"}
        if "brain" not in keys:
            raise ValueError("tensor 'brain' is missing")
    except Exception as e:  # noqa: BLE001 - any failure to parse is the test's finding
        print(f"FAIL py_read: {e}")
        return 1
    fails = check("py_read", True, "")
    want = {
        "weight": np.array([[1.5, -2, 3.25], [0, 1e-30, 7]], dtype=np.float32),
        "half": np.array([0x3C00, 0xC000, 0x7BFF, 0x0001], dtype=np.uint16).view(np.float16),
        "scalar": np.array(3.141592653589793),
        "step": np.array([-1, 0, 1234567890123], dtype=np.int64),
        "i32": np.array([-7, 42], dtype=np.int32),
        'bytes "q"\n': np.array([0, 1, 2, 254, 255], dtype=np.uint8),
        "mask": np.array([True, False, True]),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }
    for name, w in want.items():
        got = t.get(name)
        ok = (got is not None and got.dtype == w.dtype and got.shape == w.shape
              and np.array_equal(got, w))
        fails += check(f"py_read_{name.split()[0]}", ok,
                       f"got {None if got is None else (got.dtype, got.shape, got)}")
    # bf16 has no numpy dtype; the numpy API cannot load it, so check the raw header instead
    import json
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    fails += check("py_read_bf16", header.get("brain", {}).get("dtype") == "BF16"
                   and header["brain"]["shape"] == [2, 2], f"{header.get('brain')}")
    meta = header.get("__metadata__", {})
    fails += check("py_read_metadata", meta == {"format": "pt",
                                                "note\t\"x\"": "caf\u00e9 \u20ac \U0001F600"},
                   f"{meta}")
    return 1 if fails else 0


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "read"):
        print(__doc__)
        return 2
    return write(sys.argv[2]) if sys.argv[1] == "write" else read(sys.argv[2])


if __name__ == "__main__":
    sys.exit(main())
