#!/usr/bin/env python3
"""tools/check_venv.py: checks that the Python packages graft's tools need come from the project's
virtual environment (.venv), not from a system or user site: prints PASS/FAIL lines."""
import importlib
import os
import site
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".venv")
MODULES = ["numpy", "onnx", "onnxruntime", "safetensors", "sklearn", "PIL", "tensorboard",
           "tokenizers", "sentencepiece"]


def inside(path, folder):
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([path, folder]) == folder


def main():
    failed = 0
    if not inside(sys.prefix, VENV) or sys.prefix == sys.base_prefix:
        print(f"FAIL venv_interpreter: {sys.executable} is not the environment {VENV}")
        return 1
    print(f"PASS venv_interpreter {sys.executable}")
    if site.ENABLE_USER_SITE or any(not inside(p, VENV) for p in site.getsitepackages()):
        print("FAIL venv_isolated: the environment also sees system or user site-packages")
        failed += 1
    else:
        print("PASS venv_isolated")
    for name in MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError as e:
            print(f"FAIL venv_module_{name}: {e}")
            failed += 1
            continue
        where = os.path.dirname(mod.__file__)
        if inside(where, VENV):
            print(f"PASS venv_module_{name}")
        else:
            print(f"FAIL venv_module_{name}: imported from {where}, outside {VENV}")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
