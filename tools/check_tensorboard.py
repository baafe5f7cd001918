#!/usr/bin/env python3
"""check_tensorboard.py DIR...: for each graft run log DIR, checks metrics.jsonl against the
documented schema (docs/metrics.md, through check_metrics.py), reads the TensorBoard event file
with the tensorboard package and checks its scalars' tags, steps and values against the records,
and reads the HParams plugin's data through TensorBoard's own HParams backend (what its HPARAMS
tab shows): the options as hparams with their types, the final metrics, the session's status.
PASS/FAIL/SKIP lines."""
import copy
import math
import os
import sys

import check_metrics

failures = 0
label = ""


def check(name, ok, why=""):
    global failures
    name = f"{label}{name}"
    print(f"PASS {name}" if ok else f"FAIL {name}: {why}", flush=True)
    failures += 0 if ok else 1


def float_of(rec, field, where=None):
    """A float field as a number: NaN/inf from its nonfinite note, None when not measured."""
    holder = rec[where] if where else rec
    v = holder[field]
    if v is not None:
        return float(v)
    what = rec.get("nonfinite", {}).get(f"{where}.{field}" if where else field)
    return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(what)


def check_schema(records, problems, schema):
    check("jsonl_parses", records and not problems, "; ".join(problems[:3]) or "empty file")
    problems = check_metrics.check_records(records, schema)
    check("jsonl_schema", not problems, f"{len(problems)}: {'; '.join(problems[:3])}")
    return not problems


def check_the_checker(records, schema):
    """The schema check fails on records that break the schema (so its PASS means something)."""
    i = next((k for k, r in enumerate(records) if r["kind"] in ("scalar", "epoch")), None)
    if i is None:
        return
    field = "step"
    broken = []
    for change in ("as text", "as float", "extra field", "missing field", "unknown kind"):
        recs = copy.deepcopy(records)
        r = recs[i]
        if change == "as text":
            r[field] = str(r[field])
        elif change == "as float":
            r[field] = float(r[field])
        elif change == "extra field":
            r["extra"] = 1
        elif change == "missing field":
            del r[field]
        else:
            r["kind"] = "scalars"
        broken.append(change) if check_metrics.check_records(recs, schema) else None
    check("jsonl_schema_check_fails_on_bad_records", len(broken) == 5,
          f"only {broken} were caught")


def expected_scalars(records):
    """TensorBoard's scalars as the records say: by tag, lists of (step, value, wall_time)."""
    out, last_step = {}, 0
    epoch_tags = (("epoch/train_loss", "train_loss"), ("train/accuracy", "train_accuracy"),
                  ("val/loss", "val_loss"), ("val/accuracy", "val_accuracy"))
    for r in records:
        if r["kind"] == "scalar":
            out.setdefault(r["tag"], []).append((r["step"], float_of(r, "value"), r["wall_time"]))
            last_step = max(last_step, r["step"])
        elif r["kind"] == "epoch":
            for tag, field in epoch_tags:
                v = float_of(r, field)
                if v is not None:
                    out.setdefault(tag, []).append((r["step"], v, r["wall_time"]))
            last_step = max(last_step, r["step"])
        elif r["kind"] == "summary":
            for key, value in r["metrics"].items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) or value is None:
                    out[f"summary/{key}"] = [(last_step, float_of(r, key, "metrics"),
                                              r["end_time"])]
    return out


def same_value(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-30)


def compare_scalars(acc, expected, records):
    tags = sorted(acc.Tags().get("scalars", []))
    check("tb_tags", tags == sorted(expected), f"tensorboard {tags} vs records {sorted(expected)}")
    if any(r["kind"] == "epoch" for r in records):
        for tag in ("train/loss", "train/lr", "epoch/train_loss", "val/loss", "val/accuracy"):
            check(f"tb_has_{tag.replace('/', '_')}", tag in tags, "missing")
    for tag in sorted(set(tags) & set(expected)):
        events, want = acc.Scalars(tag), expected[tag]
        steps_ok = [e.step for e in events] == [w[0] for w in want]
        check(f"tb_steps {tag}", steps_ok, f"{len(events)} events vs {len(want)} records")
        if not steps_ok:
            continue
        bad = [(e.step, e.value, w[1]) for e, w in zip(events, want) if not same_value(e.value, w[1])]
        check(f"tb_values {tag}", not bad, f"{len(bad)} differ, first {bad[:1]}")
        bad_t = [e.step for e, w in zip(events, want) if abs(e.wall_time - w[2]) > 1e-3]
        check(f"tb_wall_time {tag}", not bad_t, f"{len(bad_t)} differ")


def hparams_backend(d):
    """The experiment and the session groups as TensorBoard's HParams plugin serves them."""
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider
    from tensorboard.backend.event_processing import plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import (api_pb2, backend_context, get_experiment,
                                             list_session_groups)
    mux = plugin_event_multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(d)
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, d)
    ctx = backend_context.Context(
        base_plugin.TBContext(logdir=d, multiplexer=mux, data_provider=provider))
    req = context.RequestContext()
    experiment = get_experiment.Handler(req, ctx, "", api_pb2.GetExperimentRequest()).run()
    groups = list_session_groups.Handler(req, ctx, "", api_pb2.ListSessionGroupsRequest(
        start_index=0, slice_size=100, allowed_statuses=[0, 1, 2, 3])).run()
    return api_pb2, experiment, groups.session_groups


def hparam_type_and_value(api_pb2, config, key):
    """The hparam type and value an option should have (non-finite floats as text)."""
    v = config["options"][key]
    if v is None:
        return api_pb2.DATA_TYPE_STRING, config["nonfinite"][f"options.{key}"]
    if isinstance(v, bool):
        return api_pb2.DATA_TYPE_BOOL, v
    if isinstance(v, (int, float)):
        return api_pb2.DATA_TYPE_FLOAT64, float(v)
    return api_pb2.DATA_TYPE_STRING, v


def proto_value(v):
    kind = v.WhichOneof("kind")
    return {"number_value": v.number_value, "string_value": v.string_value,
            "bool_value": v.bool_value}.get(kind)


def compare_hparams(d, records, expected):
    config, summary = records[0], records[-1]
    api_pb2, experiment, groups = hparams_backend(d)
    options = config["options"]
    types = {h.name: h.type for h in experiment.hparam_infos}
    want_types = {k: hparam_type_and_value(api_pb2, config, k)[0] for k in options}
    check("hparams_experiment_options", types == want_types, f"{types} vs {want_types}")
    want_metrics = [f"summary/{k}" for k, v in summary["metrics"].items()
                    if v is None or isinstance(v, (int, float)) and not isinstance(v, bool)]
    want_metrics += [t for t in expected if t.startswith("val/")]
    metrics = [m.name.tag for m in experiment.metric_infos]
    check("hparams_experiment_metrics", metrics == want_metrics, f"{metrics} vs {want_metrics}")
    check("hparams_one_session", len(groups) == 1 and len(groups[0].sessions) == 1,
          f"{len(groups)} groups")
    if len(groups) != 1 or len(groups[0].sessions) != 1:
        return
    group, session = groups[0], groups[0].sessions[0]
    values = {k: proto_value(v) for k, v in group.hparams.items()}
    want = {k: hparam_type_and_value(api_pb2, config, k)[1] for k in options}
    check("hparams_session_values", values == want, f"{values} vs {want}")
    status = api_pb2.STATUS_SUCCESS if summary["status"] == "completed" else api_pb2.STATUS_FAILURE
    check("hparams_session_status", session.status == status, f"{session.status} vs {status}")
    times_ok = (abs(session.start_time_secs - config["start_time"]) < 1e-3 and
                abs(session.end_time_secs - summary["end_time"]) < 1e-3)
    check("hparams_session_times", times_ok, f"{session.start_time_secs} {session.end_time_secs}")
    got = {m.name.tag: m.value for m in session.metric_values}
    bad = [t for t in want_metrics if t not in got or not same_value(got[t], expected[t][-1][1])]
    check("hparams_session_metrics", not bad, f"{bad}: {got}")


def check_dir(d, schema):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    files = [f for f in os.listdir(d) if f.startswith("events.out.tfevents.")]
    check("tb_one_event_file", len(files) == 1, f"{files}")
    records, problems = check_metrics.load(os.path.join(d, "metrics.jsonl"))
    if not check_schema(records, problems, schema):
        return
    check_the_checker(records, schema)
    expected = expected_scalars(records)
    acc = EventAccumulator(d, size_guidance={"scalars": 0})
    acc.Reload()
    check("tb_file_version", acc.file_version == 2.0, f"file_version {acc.file_version}")
    compare_scalars(acc, expected, records)
    compare_hparams(d, records, expected)


def main():
    global label
    if len(sys.argv) < 2:
        print("FAIL usage: check_tensorboard.py DIR...")
        return 1
    try:
        import tensorboard  # noqa: F401
    except ImportError as e:
        print(f"SKIP tensorboard: the tensorboard package is not installed ({e})")
        return 0
    schema = check_metrics.read_schema()
    for d in sys.argv[1:]:
        label = f"{os.path.basename(os.path.normpath(d))}: " if len(sys.argv) > 2 else ""
        check_dir(d, schema)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
