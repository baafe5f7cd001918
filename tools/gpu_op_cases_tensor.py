"""GPU op cases for the reductions beyond ReduceSum/ReduceMean (Max, Min, Prod, L1, L2,
SumSquare, LogSum, LogSumExp, in their attribute and opset-18 input forms), TopK, and the
indexing and tiling ops (GatherElements, GatherND, ScatterND, Tile, Trilu). Registered into
gpu_op_cases.CASES."""

import numpy as np
from gpu_op_cases import FLOAT_DTYPES, case

# Inputs by kind: LogSum needs positive values, Prod values near 1 (so that products of many
# terms stay in range), the others normal values.
_GEN = {"ReduceLogSum": "positive", "ReduceProd": "near1"}


def _data(g, op, shape, t):
    if t != "T":
        return g.rng.integers(-4 if op == "ReduceProd" else -100, 5 if op == "ReduceProd" else 100,
                              shape)
    gen = _GEN.get(op)
    if gen == "positive":
        return g.uniform(0.1, 4.0, *shape)
    if gen == "near1":
        return g.uniform(0.95, 1.05, *shape)
    return g.randn(*shape, scale=2.0)


def reduce_case(name, op, shape, axes, keepdims=1, t="T", opset=None, noop=None):
    dts = FLOAT_DTYPES if t == "T" else (t,)

    @case(name, dtypes=dts, tol="float" if t == "T" else "exact")
    def build(g):
        x = g.input("x", t, _data(g, op, shape, t))
        attrs = {"keepdims": keepdims}
        if opset:  # opset 18: the axes are an input
            g.opset = opset
            ins = [x] + ([g.const_i64("axes", axes)] if axes is not None else [])
            if noop is not None:
                attrs["noop_with_empty_axes"] = noop
            g.node(op, ins, ["y"], **attrs)
        else:
            if axes is not None:
                attrs["axes"] = axes
            g.node(op, [x], ["y"], **attrs)
        g.output("y", t)


for op in ("ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
           "ReduceLogSum", "ReduceLogSumExp"):
    low = op[len("Reduce"):].lower()
    reduce_case(f"reduce{low}_last", op, (16, 384), [-1])  # per-row (L2 normalisation)
    reduce_case(f"reduce{low}_small_mid", op, (3, 7, 5), [1], keepdims=0)
    reduce_case(f"reduce{low}_small_all", op, (3, 4, 5), None)
    reduce_case(f"reduce{low}_small_opset18", op, (4, 6, 5), [0], opset=18)
reduce_case("reducel2_pooled_opset18", "ReduceL2", (8, 768), [-1], opset=18)
reduce_case("reducesumsquare_small_noop", "ReduceSumSquare", (3, 4), [], opset=18, noop=1)
reduce_case("reducemax_small_i64", "ReduceMax", (3, 7, 5), [2], t="i64")
reduce_case("reducemin_small_i32", "ReduceMin", (3, 7, 5), [0], t="i32")
reduce_case("reduceprod_small_i64", "ReduceProd", (3, 4, 5), [1], t="i64")
reduce_case("reducel1_small_i64", "ReduceL1", (3, 4, 5), [-1], t="i64")


def topk_case(name, shape, k, axis, t="T", **attrs):
    dts = FLOAT_DTYPES if t == "T" else (t,)

    @case(name, dtypes=dts, tol="exact")
    def build(g):
        x = g.randn(*shape) if t == "T" else g.rng.integers(-20, 20, shape)
        g.node("TopK", [g.input("x", t, x), g.const_i64("k", [k])], ["values", "indices"],
               axis=axis, **attrs)
        g.output("values", t)
        g.output("indices", "i64")


topk_case("topk_1000", (8, 1000), 5, -1)  # top-5 classes
topk_case("topk_small_axis1_smallest", (3, 9, 4), 4, 1, largest=0)
topk_case("topk_small_i64_ties", (4, 12), 6, 1, t="i64")  # repeated values: ties by index


def movement(name, dtypes=FLOAT_DTYPES, flags=()):
    return case(name, dtypes=dtypes, tol="exact", flags=flags)


@movement("gatherelements_small")
def _(g):
    x = g.input("x", "T", g.randn(4, 10, 7))
    idx = g.rng.integers(-10, 10, (4, 5, 7))
    g.node("GatherElements", [x, g.input("idx", "i64", idx)], ["y"], axis=1)
    g.output("y", "T")


@movement("gatherelements_small_i32_axis2", dtypes=("i64",))
def _(g):
    x = g.input("x", "i64", g.rng.integers(-99, 99, (3, 4, 6)))
    idx = g.rng.integers(0, 6, (3, 2, 5)).astype(np.int32)
    g.node("GatherElements", [x, g.input("idx", "i32", idx)], ["y"], axis=2)
    g.output("y", "i64")


@movement("gathernd_tokens")
def _(g):  # hidden states at (batch, position) pairs, as the dynamo exporter's pooling does
    x = g.input("x", "T", g.randn(8, 128, 64))
    idx = np.stack([np.arange(8), g.rng.integers(0, 128, 8)], axis=1)
    g.node("GatherND", [x, g.input("idx", "i64", idx)], ["y"])
    g.output("y", "T")


@movement("gathernd_small_batch_dims")
def _(g):
    x = g.input("x", "T", g.randn(2, 5, 4, 3))
    idx = g.rng.integers(-4, 4, (2, 3, 2))
    g.node("GatherND", [x, g.input("idx", "i64", idx)], ["y"], batch_dims=1)
    g.output("y", "T")


@movement("scatternd_rows")
def _(g):
    x = g.input("x", "T", g.randn(16, 64))
    rows = g.rng.permutation(16)[:5].reshape(5, 1)
    upd = g.input("upd", "T", g.randn(5, 64))
    g.node("ScatterND", [x, g.input("idx", "i64", rows), upd], ["y"])
    g.output("y", "T")


@movement("scatternd_small_points")
def _(g):
    x = g.input("x", "T", g.randn(4, 5, 3))
    flat = g.rng.permutation(20)[:6]
    idx = np.stack([flat // 5, flat % 5 - 5], axis=1)  # negative columns count from the end
    upd = g.input("upd", "T", g.randn(6, 3))
    g.node("ScatterND", [x, g.input("idx", "i64", idx), upd], ["y"])
    g.output("y", "T")


@case("scatternd_small_add", dtypes=("f32",), flags=("fallback-ok",))
def _(g):  # reductions run on the CPU
    g.opset = 16
    x = g.input("x", "T", g.randn(6, 4))
    idx = np.array([[1], [3], [1]])
    upd = g.input("upd", "T", g.randn(3, 4))
    g.node("ScatterND", [x, g.input("idx", "i64", idx), upd], ["y"], reduction="add")
    g.output("y", "T")


def tile_case(name, shape, reps, t="T", flags=()):
    dts = FLOAT_DTYPES if t == "T" else (t,)

    @movement(name, dtypes=dts, flags=flags)
    def build(g):
        x = g.randn(*shape) if t == "T" else g.rng.integers(-9, 9, shape)
        g.node("Tile", [g.input("x", t, x), g.const_i64("repeats", reps)], ["y"])
        g.output("y", t)


tile_case("tile_batch", (1, 128, 64), [8, 1, 1])
tile_case("tile_small", (2, 3, 4), [2, 1, 3])
tile_case("tile_small_i64", (1, 5), [4, 2], t="i64")
tile_case("tile_small_rank5", (2, 2, 2, 2, 2), [2, 2, 2, 2, 2], flags=("fallback-ok",))


def trilu_case(name, shape, k, upper):
    @movement(name)
    def build(g):
        ins = [g.input("x", "T", g.randn(*shape))]
        if k is not None:
            ins.append(g.init("k", "i64", np.array(k, np.int64)))
        g.node("Trilu", ins, ["y"], upper=upper)
        g.output("y", "T")


trilu_case("trilu_causal", (128, 128), None, 0)  # a causal mask's lower triangle
trilu_case("trilu_small_upper_k1", (2, 5, 7), 1, 1)
trilu_case("trilu_small_lower_neg", (3, 6, 4), -2, 0)
