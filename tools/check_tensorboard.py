#!/usr/bin/env python3
"""check_tensorboard.py DIR: reads a graft run log's TensorBoard event file with the tensorboard
package and checks its tags, steps and values against metrics.jsonl (PASS/FAIL/SKIP lines)."""
import json
import math
import os
import sys

failures = 0


def check(name, ok, why=""):
    global failures
    print(f"PASS {name}" if ok else f"FAIL {name}: {why}", flush=True)
    failures += 0 if ok else 1


def read_jsonl(path):
    """The scalars of metrics.jsonl by tag, as lists of (step, value, wall_time)."""
    lines = open(path, encoding="utf-8").read().splitlines()
    objs, bad = [], []
    for i, line in enumerate(lines):
        try:
            objs.append(json.loads(line))
        except json.JSONDecodeError as e:
            bad.append(f"line {i + 1}: {e}")
    check("jsonl_parses", not bad and objs, "; ".join(bad[:3]) or "empty file")
    if not objs:
        return {}
    check("jsonl_config_first", list(objs[0]) == ["config"] and isinstance(objs[0]["config"], dict),
          str(objs[0])[:80])
    check("jsonl_summary_last", list(objs[-1]) == ["summary"], str(objs[-1])[:80])
    scalars, shape_ok = {}, True
    for o in objs[1:-1]:
        if "step" in o:
            shape_ok &= set(o) == {"step", "tag", "value", "wall_time"}
            v = math.nan if o["value"] is None else float(o["value"])
            scalars.setdefault(o["tag"], []).append((o["step"], v, o["wall_time"]))
    check("jsonl_scalar_fields", shape_ok, "a scalar line has other keys")
    return scalars


def same_value(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-30)


def compare(acc, expected):
    tags = sorted(acc.Tags().get("scalars", []))
    check("tb_tags", tags == sorted(expected), f"tensorboard {tags} vs jsonl {sorted(expected)}")
    for tag in ("train/loss", "train/accuracy", "train/lr", "val/loss", "val/accuracy"):
        check(f"tb_has_{tag.replace('/', '_')}", tag in tags, "missing")
    for tag in sorted(set(tags) & set(expected)):
        events, want = acc.Scalars(tag), expected[tag]
        steps_ok = [e.step for e in events] == [w[0] for w in want]
        check(f"tb_steps {tag}", steps_ok, f"{len(events)} events vs {len(want)} lines")
        if not steps_ok:
            continue
        bad = [(e.step, e.value, w[1]) for e, w in zip(events, want) if not same_value(e.value, w[1])]
        check(f"tb_values {tag}", not bad, f"{len(bad)} differ, first {bad[:1]}")
        bad_t = [e.step for e, w in zip(events, want) if abs(e.wall_time - w[2]) > 1e-3]
        check(f"tb_wall_time {tag}", not bad_t, f"{len(bad_t)} differ")


def main():
    if len(sys.argv) != 2:
        print("FAIL usage: check_tensorboard.py DIR")
        return 1
    d = sys.argv[1]
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError as e:
        print(f"SKIP tensorboard: the tensorboard package is not installed ({e})")
        return 0
    files = [f for f in os.listdir(d) if f.startswith("events.out.tfevents.")]
    check("tb_one_event_file", len(files) == 1, f"{files}")
    expected = read_jsonl(os.path.join(d, "metrics.jsonl"))
    acc = EventAccumulator(d, size_guidance={"scalars": 0})
    acc.Reload()
    check("tb_file_version", acc.file_version == 2.0, f"file_version {acc.file_version}")
    compare(acc, expected)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
