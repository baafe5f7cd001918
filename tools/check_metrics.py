#!/usr/bin/env python3
"""check_metrics.py FILE [SCHEMA.md]: checks a run's metrics.jsonl against the schema documented in
docs/metrics.md (read from its tables, so the page and the check cannot drift apart): every line
parses, its kind is known, its fields are exactly the documented ones, in order, with the
documented JSON types; the config comes first, the summary last. Prints PASS/FAIL lines.
Importable: check_records(records, schema) returns the list of problems."""
import json
import math
import os
import re
import sys

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "metrics.md")
SCALARS = ("string", "integer", "float", "boolean")


def is_type(value, name):
    """Whether a parsed JSON value has the documented scalar type (integer: no fraction or
    exponent in the text, float: one of them; json gives int and float for these)."""
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "float":
        return isinstance(value, float) and math.isfinite(value)
    raise ValueError(f"unknown type {name!r}")


def type_checker(text):
    """A function value -> bool for a type as the tables write it; ValueError for an unknown
    one, so that a typo in the page fails the check rather than passing everything."""
    text = text.strip()
    if text in SCALARS:
        return lambda v: is_type(v, text)
    m = re.fullmatch(r"(\w+) or null", text)
    if m and m.group(1) in SCALARS:
        return lambda v: v is None or is_type(v, m.group(1))
    m = re.fullmatch(r"array of (.+)", text)
    if m:
        inner = type_checker(m.group(1))
        return lambda v: isinstance(v, list) and all(inner(x) for x in v)
    m = re.fullmatch(r"object of (.+)", text)
    if m:
        kinds = [k.strip() for k in re.split(r",| or ", m.group(1)) if k.strip()]
        if not kinds or any(k not in SCALARS for k in kinds):
            raise ValueError(f"unknown type {text!r}")
        return lambda v: isinstance(v, dict) and all(
            any(is_type(x, k) for k in kinds) or (x is None and "float" in kinds)
            for x in v.values())
    raise ValueError(f"unknown type {text!r}")


def read_schema(path=DOC):
    """{kind: [(field, checker, optional)]} from the page's `### `kind`` tables."""
    schema, kind = {}, None
    for line in open(path, encoding="utf-8"):
        m = re.match(r"### `(\w+)`", line)
        if m:
            kind = m.group(1)
            schema[kind] = []
            continue
        if line.startswith("## "):
            kind = None
        m = re.match(r"\| `(\w+)` \| ([^|]+) \|", line)
        if kind and m:
            text = m.group(2).strip()
            optional = text.startswith("optional ")
            schema[kind].append((m.group(1), type_checker(text.removeprefix("optional ")),
                                 optional))
    return schema


def check_record(i, rec, schema):
    """Problems of one record (line i, from 1)."""
    kind = rec.get("kind") if isinstance(rec, dict) else None
    if kind not in schema:
        return [f"line {i}: unknown kind {kind!r}"]
    fields = schema[kind]
    want = [f for f, _, opt in fields if not opt or f in rec]
    if list(rec) != want:
        return [f"line {i} ({kind}): fields {list(rec)}, documented {want}"]
    problems = [f"line {i} ({kind}): {f} = {rec[f]!r} is not {kind}'s documented type"
                for f, ok, _ in fields if f in rec and not ok(rec[f])]
    noted = rec.get("nonfinite", {})
    if problems or not isinstance(noted, dict):
        return problems
    for where in ("options", "metrics"):
        for key, value in rec.get(where, {}).items():
            if value is None and f"{where}.{key}" not in noted:
                problems.append(f"line {i}: {where}.{key} is null but not in nonfinite")
    if kind == "scalar" and rec["value"] is None and "value" not in noted:
        problems.append(f"line {i}: a null scalar value not in nonfinite")
    for name, what in noted.items():
        where, _, key = name.partition(".")
        holder = rec.get(where) if key else rec
        value = holder.get(key or name, 0) if isinstance(holder, dict) else 0
        if value is not None or what not in ("nan", "inf", "-inf"):
            problems.append(f"line {i}: nonfinite names {name} = {value!r} as {what!r}")
    return problems


def check_records(records, schema):
    """Problems of a whole file's records: each record's, and their order."""
    problems = []
    for i, rec in enumerate(records, 1):
        problems += check_record(i, rec, schema)
    kinds = [r.get("kind") if isinstance(r, dict) else None for r in records]
    if not kinds or kinds[0] != "config" or kinds.count("config") != 1:
        problems.append(f"the first record and only it must be the config, kinds {kinds[:3]}")
    elif records[0].get("schema") != 1:
        problems.append(f"schema {records[0].get('schema')!r}, this check knows 1")
    if not kinds or kinds[-1] != "summary" or kinds.count("summary") != 1:
        problems.append(f"the last record and only it must be the summary, last {kinds[-1:]}")
    if kinds.count("confusion") > 1:
        problems.append(f"{kinds.count('confusion')} confusion records")
    return problems


def load(path):
    """The records of a metrics.jsonl, and problems for lines that do not parse."""
    records, problems = [], []
    for i, line in enumerate(open(path, encoding="utf-8").read().splitlines(), 1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            problems.append(f"line {i} does not parse: {e}")
    return records, problems


def main():
    if len(sys.argv) not in (2, 3):
        print("FAIL usage: check_metrics.py FILE [SCHEMA.md]")
        return 1
    schema = read_schema(sys.argv[2] if len(sys.argv) == 3 else DOC)
    known = {"config", "scalar", "epoch", "confusion", "summary"}
    ok = set(schema) == known and all(schema.values())
    print("PASS metrics_schema_read" if ok else f"FAIL metrics_schema_read: kinds {sorted(schema)}")
    records, problems = load(sys.argv[1])
    print("PASS metrics_lines_parse" if records and not problems else
          f"FAIL metrics_lines_parse: {'; '.join(problems[:3]) or 'empty file'}")
    problems = check_records(records, schema)
    print("PASS metrics_schema" if not problems else
          f"FAIL metrics_schema: {len(problems)} problems: {'; '.join(problems[:3])}")
    return 0 if ok and records and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
