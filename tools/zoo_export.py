#!/usr/bin/env python3
"""tools/zoo_export.py OUT: exports the model zoo as users export it (torchvision, timm and Hugging
Face transformers models with random weights and reduced depth where the family allows; the
TorchScript exporter at opsets 14 and 17 and the dynamo exporter; default names untouched), and
writes each as a skeleton: the exporter's graph with every large float tensor's data removed
(tools/zoo_fill.py puts seeded random values back), so the zoo's graphs fit in git. Needs torch,
torchvision, timm, transformers (the GPU machine has them); writes OUT/<name>.onnx and
OUT/manifest.json (each model's family, exporter, inputs, and the error of an export that failed).

tools/zoo_export.py OUT WORKERS --exporters optimum --merge: only the given exporters (ts14, ts17,
dynamo, optimum: Hugging Face optimum's `main_export` on the text models, saved with
save_pretrained first as users export a checkpoint folder), their records merged into an existing
OUT/manifest.json (the versions of each run kept under "runs").
"""
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import onnx
import torch

STRIP_MIN = 64  # float tensors with at least this many elements lose their data

def vision_models():
    import torchvision.models as tv
    from torchvision.models.vision_transformer import VisionTransformer
    from torchvision.models.swin_transformer import SwinTransformer
    m = {
        "tv_resnet18": lambda: tv.resnet18(),
        "tv_resnet50": lambda: tv.resnet50(),
        "tv_resnext50_32x4d": lambda: tv.resnext50_32x4d(),
        "tv_wide_resnet50_2": lambda: tv.wide_resnet50_2(),
        "tv_mobilenet_v2": lambda: tv.mobilenet_v2(),
        "tv_mobilenet_v3_small": lambda: tv.mobilenet_v3_small(),
        "tv_efficientnet_b0": lambda: tv.efficientnet_b0(),
        "tv_regnet_y_400mf": lambda: tv.regnet_y_400mf(),
        "tv_convnext_tiny": lambda: tv.convnext_tiny(),
        "tv_densenet121": lambda: tv.densenet121(),
        "tv_squeezenet1_0": lambda: tv.squeezenet1_0(),
        "tv_shufflenet_v2_x0_5": lambda: tv.shufflenet_v2_x0_5(),
        "tv_vit_b_16_l2": lambda: VisionTransformer(image_size=224, patch_size=16, num_layers=2,
                                                   num_heads=4, hidden_dim=64, mlp_dim=128),
        "tv_swin_t_small": lambda: SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2],
                                                   num_heads=[2, 4], window_size=[7, 7]),
    }
    try:
        import timm
        m.update({
            "timm_resnet18": lambda: timm.create_model("resnet18", pretrained=False),
            "timm_mobilenetv3_small_100": lambda: timm.create_model("mobilenetv3_small_100",
                                                                    pretrained=False),
            "timm_convnext_atto": lambda: timm.create_model("convnext_atto", pretrained=False),
            "timm_vit_tiny_l2": lambda: timm.create_model("vit_tiny_patch16_224", pretrained=False,
                                                          depth=2),
        })
    except ImportError:
        pass
    return m


def text_models():
    import transformers as tr
    small = dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, max_position_embeddings=128)
    return {
        "hf_bert": (lambda: tr.BertModel(tr.BertConfig(**small)), 3),
        "hf_bert_seqcls": (lambda: tr.BertForSequenceClassification(
            tr.BertConfig(**small, num_labels=3)), 3),
        "hf_distilbert": (lambda: tr.DistilBertModel(tr.DistilBertConfig(
            vocab_size=1000, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
            max_position_embeddings=128)), 2),
        "hf_roberta": (lambda: tr.RobertaModel(tr.RobertaConfig(**small, pad_token_id=1)), 2),
        "hf_xlm_roberta": (lambda: tr.XLMRobertaModel(tr.XLMRobertaConfig(**small, pad_token_id=1)), 2),
        "hf_albert": (lambda: tr.AlbertModel(tr.AlbertConfig(**small, embedding_size=32)), 3),
        "hf_electra": (lambda: tr.ElectraModel(tr.ElectraConfig(**small, embedding_size=32)), 3),
        "hf_deberta_v2": (lambda: tr.DebertaV2Model(tr.DebertaV2Config(**small)), 3),
        "hf_mpnet": (lambda: tr.MPNetModel(tr.MPNetConfig(**small)), 2),
    }


def strip(model):
    """Remove the data of large float tensors (initializers and Constant values)."""
    stripped = 0
    def clear(t):
        nonlocal stripped
        n = int(np.prod(t.dims)) if len(t.dims) else 1
        if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16) and n >= STRIP_MIN:
            t.ClearField("raw_data"); t.ClearField("float_data"); t.ClearField("int32_data")
            t.ClearField("data_location"); del t.external_data[:]
            t.doc_string = "graft-zoo: random"
            stripped += 1
    for t in model.graph.initializer:
        clear(t)
    for node in model.graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                clear(a.t)
    return stripped


class ByName(torch.nn.Module):
    """Calls a Hugging Face model with its inputs by name, as users wrap one for the TorchScript
    exporter (transformers 5 changed the positions of forward's arguments, and the exporter passes
    keyword inputs positionally)."""

    def __init__(self, model, names):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *inputs):
        return self.model(**dict(zip(self.names, inputs)), return_dict=False)


def export(module, args, names, dynamic, path, how):
    """Export as users call torch.onnx.export: a text model's inputs by name (keyword arguments
    for the dynamo exporter, a wrapper for the TorchScript one)."""
    module.eval()
    kwargs = None
    if how == "dynamo":
        if names and len(args) > 1:
            kwargs = dict(zip(names[1:], args[1:]))
            args = args[:1]
        torch.onnx.export(module, args, str(path), kwargs=kwargs, input_names=names, dynamo=True)
    else:
        opset = int(how[2:])
        try:
            torch.onnx.export(module, args, str(path), input_names=names, opset_version=opset,
                              dynamic_axes=dynamic, dynamo=False)
        except TypeError:
            if not names:
                raise
            # What users do when the positional call fails: call the model by name.
            torch.onnx.export(ByName(module, names).eval(), args, str(path), input_names=names,
                              opset_version=opset, dynamic_axes=dynamic, dynamo=False)


def job_table():
    """(name, kind, make, args, input names, dynamic axes) for every zoo model."""
    jobs = {}
    for name, make in vision_models().items():
        jobs[name] = ("image", make, (torch.randn(1, 3, 224, 224),), None, None)
    for name, (make, n_in) in text_models().items():
        ids = torch.randint(5, 1000, (2, 16))
        mask = torch.ones(2, 16, dtype=torch.int64)
        types = torch.zeros(2, 16, dtype=torch.int64)
        names = ["input_ids", "attention_mask", "token_type_ids"][:n_in]
        dyn = {k: {0: "batch", 1: "sequence"} for k in names}
        jobs[name] = ("text", make, (ids, mask, types)[:n_in], names, dyn)
    return jobs


def optimum_export(module, kind, path):
    """Export as optimum's users do: the model saved as a checkpoint folder, then
    `optimum-cli export onnx --model DIR --task T OUT` through its Python entry (default opset,
    default names); the model file moved to path."""
    import shutil
    import tempfile
    from optimum.exporters.onnx import main_export
    task = "text-classification" if getattr(module.config, "num_labels", 0) and \
        type(module).__name__.endswith("ForSequenceClassification") else "feature-extraction"
    with tempfile.TemporaryDirectory() as tmp:
        ckpt, out = Path(tmp) / "ckpt", Path(tmp) / "onnx"
        module.save_pretrained(ckpt)
        main_export(str(ckpt), output=str(out), task=task, no_post_process=False,
                    do_validation=False)
        shutil.move(str(out / "model.onnx"), str(path))
        for extra in out.glob("model.onnx_data"):
            shutil.move(str(extra), str(path) + "_data")


def run_job(task):
    """Export one (model, exporter) into OUT; its manifest record."""
    out, name, how = task
    torch.manual_seed(0)
    torch.set_num_threads(2)
    kind, make, args, names, dyn = job_table()[name]
    tag = f"{name}__{how}"
    rec = {"name": tag, "model": name, "kind": kind, "exporter": how}
    t0 = time.time()
    path = Path(out) / f"{tag}.onnx"
    try:
        module = make()
        dynamic = dyn
        if how == "optimum":
            if kind != "text":
                raise ValueError("optimum exports Hugging Face models only")
            optimum_export(module, kind, path)
        elif kind == "image" and how != "dynamo":
            # The exporter's own input name, then a dynamic batch under it (as users write
            # dynamic_axes={"<that name>": {0: "batch"}}).
            export(module, args, None, None, path, how)
            first = onnx.load(str(path), load_external_data=False).graph.input[0].name
            dynamic = {first: {0: "batch"}}
        if how != "optimum":
            export(module, args, names, dynamic, path, how)
        m = onnx.load(str(path))
        rec["stripped"] = strip(m)
        rec["opset"] = max((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
                           default=0)
        inits = {t.name for t in m.graph.initializer}
        rec["inputs"] = [i.name for i in m.graph.input if i.name not in inits]
        for f in Path(out).glob(f"{tag}.onnx*"):
            f.unlink()
        onnx.save(m, str(path))
        rec["bytes"] = path.stat().st_size
        rec["ok"] = True
    except Exception as e:  # noqa: BLE001 (recorded in the manifest)
        rec["ok"] = False
        first_line = str(e).splitlines()[0][:300] if str(e) else ""
        rec["error"] = f"{type(e).__name__}: {first_line}"
        (Path(out) / f"{tag}.error.txt").write_text(traceback.format_exc()[-4000:])
        for f in Path(out).glob(f"{tag}.onnx*"):
            f.unlink()
    rec["seconds"] = round(time.time() - t0, 1)
    print(f"{tag}: {'ok' if rec['ok'] else rec['error']} ({rec['seconds']}s)", flush=True)
    return rec


def main():
    import argparse
    import multiprocessing as mp
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("workers", type=int, nargs="?", default=8)
    ap.add_argument("--exporters", default="ts14,ts17,dynamo")
    ap.add_argument("--merge", action="store_true",
                    help="add these records to OUT/manifest.json instead of replacing it")
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    versions = {"torch": torch.__version__, "onnx": onnx.__version__}
    from importlib import metadata
    for mod in ("transformers", "timm", "torchvision", "optimum", "optimum-onnx"):
        try:
            versions[mod] = metadata.version(mod)
        except metadata.PackageNotFoundError:
            pass
    exporters = args.exporters.split(",")
    jobs = job_table()
    tasks = [(str(out), name, how) for name in jobs for how in exporters
             if how != "optimum" or jobs[name][0] == "text"]
    with mp.get_context("spawn").Pool(args.workers) as pool:
        records = pool.map(run_job, tasks, chunksize=1)
    if args.merge and (out / "manifest.json").exists():
        manifest = json.loads((out / "manifest.json").read_text())
        names = {r["name"] for r in records}
        manifest["models"] = [r for r in manifest["models"] if r["name"] not in names] + records
        manifest.setdefault("runs", []).append(dict(versions, exporters=exporters))
    else:
        manifest = dict(versions, models=records)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))


if __name__ == "__main__":
    main()
