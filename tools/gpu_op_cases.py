"""The catalogue of GPU op cases that tools/make_gpu_op_cases.py writes: a small graph builder
(Graph) and one builder function per single-op case, registered in CASES (gpu_op_cases_fused.py
and gpu_op_cases_layout.py register the fused-group and channels-last cases). The module
docstring of make_gpu_op_cases.py describes the cases, their files and their tolerance classes."""

import numpy as np
from onnx import TensorProto, helper

OPSET = 17
SMALL_ELEMENTS = 1 << 16  # cases with at most this many input + weight elements are "small"

FLOAT_DTYPES = ("f32", "f16", "bf16")
ONNX_TYPE = {
    "f32": TensorProto.FLOAT,
    "f16": TensorProto.FLOAT16,
    "bf16": TensorProto.BFLOAT16,
    "f64": TensorProto.DOUBLE,
    "i64": TensorProto.INT64,
    "i32": TensorProto.INT32,
    "bool": TensorProto.BOOL,
}
NUMPY_TYPE = {"f32": np.float32, "f16": np.float32, "bf16": np.float32, "i64": np.int64,
              "i32": np.int32, "bool": np.bool_, "f64": np.float64}


def round_bf16(x):
    """float32 -> the nearest bf16 value (round to nearest even), kept as float32."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).reshape(np.shape(x))


def round_to(x, dt):
    x = np.asarray(x, dtype=np.float32)
    if dt == "f16":
        with np.errstate(over="ignore"):  # large values become inf, as in fp16
            return x.astype(np.float16).astype(np.float32)
    if dt == "bf16":
        return round_bf16(x)
    return x


def tensor_proto(name, arr, dt):
    """An initializer / attribute tensor of graft dtype dt from a numpy array."""
    arr = np.asarray(arr)
    if dt == "bf16":
        bits = (round_bf16(arr).view(np.uint32) >> 16).astype("<u2")
        t = helper.make_tensor(name, TensorProto.BFLOAT16, arr.shape, bits.tobytes(), raw=True)
        return t
    if dt == "f16":
        return helper.make_tensor(name, TensorProto.FLOAT16, arr.shape,
                                  arr.astype("<f2").tobytes(), raw=True)
    np_t = {"f32": "<f4", "f64": "<f8", "i64": "<i8", "i32": "<i4", "bool": "|b1"}[dt]
    return helper.make_tensor(name, ONNX_TYPE[dt], arr.shape, arr.astype(np_t).tobytes(),
                              raw=True)


class Graph:
    """Builds one case's graph. Element type "T" is the case's float type: `model_dt` in the
    graph (f32 for the twin), with values rounded to `data_dt` (the case's dtype) either way."""

    def __init__(self, name, data_dt, model_dt, seed):
        self.name, self.data_dt, self.model_dt = name, data_dt, model_dt
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inputs, self.inits, self.outputs = [], [], [], []
        self.feeds = []  # (input name, numpy array to store)
        self.opset = OPSET
        self.elements = 0

    def dt(self, t):
        return self.model_dt if t == "T" else t

    def values(self, t, arr):
        if t == "T" or t in ("f16", "bf16"):
            return round_to(arr, self.data_dt if t == "T" else t)
        return np.asarray(arr).astype(NUMPY_TYPE[t])

    def stored(self, t, arr):
        """What the .npy file holds for an input of type t (see the module docstring)."""
        dt = self.data_dt if t == "T" else t
        if dt == "f16":
            return arr.astype(np.float16)
        if dt == "bf16":
            return (round_bf16(arr).view(np.uint32) >> 16).astype(np.uint16)
        return arr

    # Random data helpers (float32; the caller's type rounds them).
    def randn(self, *shape, scale=1.0):
        return (self.rng.standard_normal(shape) * scale).astype(np.float32)

    def uniform(self, lo, hi, *shape):
        return self.rng.uniform(lo, hi, shape).astype(np.float32)

    def input(self, name, t, arr):
        arr = self.values(t, arr)
        self.inputs.append(helper.make_tensor_value_info(name, ONNX_TYPE[self.dt(t)],
                                                         list(arr.shape)))
        self.feeds.append((name, self.stored(t, arr)))
        self.elements += arr.size
        return name

    def init(self, name, t, arr):
        arr = self.values(t, arr)
        self.inits.append(tensor_proto(name, arr, self.dt(t)))
        self.elements += arr.size
        return name

    def const_i64(self, name, vals):
        return self.init(name, "i64", np.array(vals, dtype=np.int64))

    def node(self, op, inputs, outputs, **attrs):
        name = f"{op.lower()}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def output(self, name, t):
        self.outputs.append(helper.make_tensor_value_info(name, ONNX_TYPE[self.dt(t)], None))

    def model(self):
        g = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)],
                              producer_name="make_gpu_op_cases")
        m.ir_version = 9 if self.opset >= 20 else 8
        return m


# ------------------------------------------------------------------------------------------
# The cases: name -> (builder, dtypes, tol per dtype kind, flags). A builder takes a Graph and
# fills it; "T" is the float type of the variant.
# ------------------------------------------------------------------------------------------

CASES = []


def case(name, dtypes=FLOAT_DTYPES, tol="float", flags=()):
    """tol: "float" (f32 for fp32, half for fp16/bf16), "chain" (as float, but 3e-2 for fp16/bf16:
    a half intermediate feeds another op), "exact", or "argmax:A"."""

    def register(fn):
        CASES.append((name, fn, dtypes, tol, tuple(flags)))
        return fn

    return register


def unary(name, op, shape, gen="randn", tol="float", opset=None, **attrs):
    @case(name, tol=tol)
    def build(g):
        if gen == "randn":
            x = g.randn(*shape)
        elif gen == "positive":
            x = g.uniform(0.1, 10.0, *shape)
        elif gen == "away0":  # |x| in [0.5, 2], either sign
            x = g.uniform(0.5, 2.0, *shape) * np.where(g.rng.random(shape) < 0.5, -1, 1)
        else:
            x = g.randn(*shape, scale=gen)
        if opset:
            g.opset = opset
        g.node(op, [g.input("x", "T", x)], ["y"], **attrs)
        g.output("y", "T")


CNN = (2, 64, 56, 56)  # a ResNet stage-1 activation, batch 2
BERT = (8, 128, 768)  # BERT-base hidden states, batch 8, sequence 128
# Element-wise ops run one grid-stride kernel whatever the shape: smaller tensors keep the
# cases' files small.
CNN1 = (1, 64, 56, 56)
BERT2 = (2, 128, 768)
SMALL = (3, 7, 5)

# --- element-wise: unary ---
for suffix, shape in (("", CNN1), ("_small", SMALL)):
    unary("relu" + suffix, "Relu", shape, tol="exact")
    unary("leakyrelu" + suffix, "LeakyRelu", shape, alpha=0.1)
    unary("sigmoid" + suffix, "Sigmoid", shape, gen=3.0)
    unary("neg" + suffix, "Neg", shape, tol="exact")
    unary("abs" + suffix, "Abs", shape, tol="exact")
    unary("identity" + suffix, "Identity", shape, tol="exact")
    unary("dropout" + suffix, "Dropout", shape, tol="exact")
for suffix, shape in (("", BERT2), ("_small", SMALL)):
    unary("tanh" + suffix, "Tanh", shape, gen=2.0)
    unary("erf" + suffix, "Erf", shape, gen=1.5)
    unary("gelu" + suffix, "Gelu", shape, gen=2.0, opset=20)
    unary("gelu_tanh" + suffix, "Gelu", shape, gen=2.0, opset=20, approximate="tanh")
    unary("sqrt" + suffix, "Sqrt", shape, gen="positive")
    unary("reciprocal" + suffix, "Reciprocal", shape, gen="away0")
    unary("exp" + suffix, "Exp", shape, gen=2.0)
    unary("log" + suffix, "Log", shape, gen="positive")


def clip_case(name, shape, lo, hi):
    @case(name, tol="exact")
    def build(g):
        ins = [g.input("x", "T", g.randn(*shape, scale=4.0))]
        ins.append(g.init("min", "T", np.array(lo, np.float32)) if lo is not None else "")
        if hi is not None:
            ins.append(g.init("max", "T", np.array(hi, np.float32)))
        g.node("Clip", ins, ["y"])
        g.output("y", "T")


clip_case("clip_relu6", (1, 96, 56, 56), 0.0, 6.0)  # MobileNetV2's ReLU6
clip_case("clip_relu6_small", SMALL, 0.0, 6.0)
clip_case("clip_min_only_small", SMALL, -1.0, None)
clip_case("clip_max_only_small", SMALL, None, 0.5)


@case("pow_square", tol="float")
def _(g):  # LayerNorm decomposed: (x - mean) ^ 2
    g.node("Pow", [g.input("x", "T", g.randn(*BERT2)), g.init("two", "T", np.array(2.0))], ["y"])
    g.output("y", "T")


@case("pow_small", tol="float")
def _(g):
    x = g.uniform(0.2, 3.0, *SMALL)
    g.node("Pow", [g.input("x", "T", x), g.input("e", "T", g.uniform(-2.0, 2.0, 7, 5))], ["y"])
    g.output("y", "T")


# --- element-wise: binary with broadcasting ---
def binary(name, op, a_shape, b_shape, tol="float", b_gen="randn"):
    @case(name, tol=tol)
    def build(g):
        a = g.input("a", "T", g.randn(*a_shape))
        if b_gen == "away0":
            bv = g.uniform(0.5, 2.0, *b_shape) * np.where(g.rng.random(b_shape) < 0.5, -1, 1)
        else:
            bv = g.randn(*b_shape)
        if b_shape == ():
            bv = np.asarray(bv, np.float32).reshape(())
        b = g.input("b", "T", bv)
        g.node(op, [a, b], ["y"])
        g.output("y", "T")


for op in ("Add", "Sub", "Mul", "Div"):
    gen = "away0" if op == "Div" else "randn"
    low = op.lower()
    binary(f"{low}_nchw_c11", op, CNN1, (64, 1, 1), b_gen=gen)  # per-channel (bias, BN)
    binary(f"{low}_bsh_h", op, BERT2, (768,), b_gen=gen)  # per-feature (bias)
    binary(f"{low}_small", op, (4, 1, 6), (5, 1), b_gen=gen)  # both sides broadcast
binary("add_same", "Add", BERT2, BERT2)  # residual
binary("add_scalar_small", "Add", SMALL, ())
binary("mul_scalar", "Mul", (8, 12, 128, 128), ())  # attention scaling
binary("min_small", "Min", (4, 5, 6), (6,), tol="exact")
binary("max_small", "Max", (4, 5, 6), (5, 1), tol="exact")
binary("max_cnn", "Max", CNN1, (64, 1, 1), tol="exact")


@case("max3_small", tol="exact")
def _(g):  # variadic
    shapes = (("a", (4, 5, 6)), ("b", (5, 6)), ("c", (4, 1, 1)))
    ins = [g.input(n, "T", g.randn(*s)) for n, s in shapes]
    g.node("Max", ins, ["y"])
    g.output("y", "T")


@case("min3_small", tol="exact")
def _(g):
    ins = [g.input(n, "T", g.randn(*s)) for n, s in (("a", (4, 5, 6)), ("b", (1, 6)), ("c", ()))]
    g.node("Min", ins, ["y"])
    g.output("y", "T")


def compare(name, op, a_shape, b_shape, t="T"):
    dts = FLOAT_DTYPES if t == "T" else (t,)

    @case(name, dtypes=dts, tol="exact")
    def build(g):
        if t == "T":
            a = g.randn(*a_shape)
            b = g.randn(*b_shape)
        else:
            a = g.rng.integers(-3, 4, a_shape)
            b = g.rng.integers(-3, 4, b_shape)
        # Make some elements equal so Equal (and the strictness of Less/Greater) is exercised.
        a = np.array(a)
        bb = np.broadcast_to(b, np.broadcast_shapes(a.shape, np.shape(b)))
        if a.shape == bb.shape:
            mask = g.rng.random(a.shape) < 0.3
            a = np.where(mask, bb, a)
        g.node(op, [g.input("a", t, a), g.input("b", t, b)], ["y"])
        g.output("y", "bool")


for op in ("Equal", "Less", "Greater"):
    compare(f"{op.lower()}_small", op, (4, 5, 6), (6,))
    compare(f"{op.lower()}_bsh", op, BERT2, (768,))
    compare(f"{op.lower()}_i64", op, (4, 5, 6), (5, 6), t="i64")


@case("not_bool", dtypes=("bool",), tol="exact")
def _(g):
    g.node("Not", [g.input("x", "bool", g.rng.random((8, 1, 1, 128)) < 0.5)], ["y"])
    g.output("y", "bool")


@case("where_mask", tol="exact")
def _(g):  # attention mask fill: where(mask, scores, min)
    cond = g.input("cond", "bool", g.rng.random((8, 1, 1, 128)) < 0.8)
    x = g.input("x", "T", g.randn(8, 12, 128, 128))
    y = g.init("fill", "T", np.array(-1e4, np.float32))
    g.node("Where", [cond, x, y], ["y"])
    g.output("y", "T")


@case("where_small", tol="exact")
def _(g):
    cond = g.input("cond", "bool", g.rng.random((4, 1, 6)) < 0.5)
    g.node("Where", [cond, g.input("x", "T", g.randn(5, 1)), g.input("y", "T", g.randn(4, 5, 6))],
           ["out"])
    g.output("out", "T")


# --- integer element-wise ---
def int_binary(name, op, a_shape, b_shape, t="i64", lo=-1000, hi=1000):
    @case(name, dtypes=(t,), tol="exact")
    def build(g):
        a = g.input("a", t, g.rng.integers(lo, hi, a_shape))
        b = g.input("b", t, g.rng.integers(lo, hi, b_shape))
        g.node(op, [a, b], ["y"])
        g.output("y", t)


int_binary("add_i64", "Add", (8, 128), (128,))  # position ids + offset
int_binary("sub_i64", "Sub", (8, 128), (8, 1))
int_binary("mul_i64", "Mul", (4, 5, 6), ())
int_binary("add_i32", "Add", (4, 5, 6), (6,), t="i32")
int_binary("max_i64", "Max", (4, 5, 6), (5, 1))


@case("where_i64", dtypes=("i64",), tol="exact")
def _(g):
    cond = g.input("cond", "bool", g.rng.random((8, 128)) < 0.5)
    x = g.input("x", "i64", g.rng.integers(-2**40, 2**40, (8, 128)))
    y = g.init("y", "i64", np.array(-1, np.int64))
    g.node("Where", [cond, x, y], ["out"])
    g.output("out", "i64")


# --- Cast (the same model on both sides) ---
def cast(name, src, dst, values):
    @case(name, dtypes=(f"{src}->{dst}",), tol="exact")
    def build(g):
        g.node("Cast", [g.input("x", src, values(g))], ["y"], to=ONNX_TYPE[dst])
        g.output("y", dst)


SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, 65504.0, 65520.0, 70000.0, -70000.0, 1e-8, -6e-8,
                     3.4e38, np.inf, -np.inf, np.nan, 1.00048828125, 1.0009765625,
                     2.0 ** -24, 2.0 ** -25, 3.0 * 2.0 ** -26, 1.00390625, 1.005859375],
                    np.float32)


def floats_with_specials(g, n=4096):
    return np.concatenate([SPECIALS, g.randn(n, scale=100.0), g.randn(n, scale=1e-3)])


cast("cast_f32_f16", "f32", "f16", floats_with_specials)
cast("cast_f32_bf16", "f32", "bf16", floats_with_specials)
cast("cast_f16_f32", "f16", "f32", lambda g: round_to(floats_with_specials(g), "f16"))
cast("cast_bf16_f32", "bf16", "f32", lambda g: round_to(floats_with_specials(g), "bf16"))
cast("cast_f16_bf16", "f16", "bf16", lambda g: round_to(floats_with_specials(g), "f16"))
cast("cast_f32_i64", "f32", "i64", lambda g: g.randn(8, 128, scale=1e4))
cast("cast_i64_f32", "i64", "f32", lambda g: np.concatenate(
    [g.rng.integers(-1000, 1000, 512), g.rng.integers(-2**40, 2**40, 512),
     np.array([2**24 + 1, 2**24 + 3, -(2**53) - 1, 2**62], np.int64)]))
cast("cast_bool_f32", "bool", "f32", lambda g: g.rng.random((8, 1, 1, 128)) < 0.5)
cast("cast_bool_f16", "bool", "f16", lambda g: g.rng.random((8, 1, 1, 128)) < 0.5)
cast("cast_i64_bool", "i64", "bool", lambda g: g.rng.integers(-2, 3, (8, 128)))
cast("cast_i64_i32", "i64", "i32", lambda g: g.rng.integers(-2**40, 2**40, (8, 128)))
cast("cast_i32_i64", "i32", "i64", lambda g: g.rng.integers(-2**31, 2**31 - 1, (8, 128)))
cast("cast_f32_bool", "f32", "bool", lambda g: np.where(g.rng.random(1000) < 0.3, 0.0,
                                                         g.randn(1000)))

# --- neural-network layers ---


def conv(name, x_shape, w_shape, bias=True, tol="float", **attrs):
    @case(name, tol=tol)
    def build(g):
        x = g.input("x", "T", g.randn(*x_shape))
        fan_in = int(np.prod(w_shape[1:]))
        ins = [x, g.init("w", "T", g.randn(*w_shape, scale=float(np.sqrt(2.0 / fan_in))))]
        if bias:
            ins.append(g.init("b", "T", g.randn(w_shape[0], scale=0.1)))
        g.node("Conv", ins, ["y"], **attrs)
        g.output("y", "T")


conv("conv3x3_bias", (1, 64, 56, 56), (64, 64, 3, 3), pads=[1, 1, 1, 1])
conv("conv3x3_nobias", (1, 64, 56, 56), (64, 64, 3, 3), bias=False, pads=[1, 1, 1, 1])
conv("conv3x3_s2_b4", (4, 128, 28, 28), (256, 128, 3, 3), bias=False, pads=[1, 1, 1, 1],
     strides=[2, 2])
conv("conv1x1_s2", (1, 256, 56, 56), (512, 256, 1, 1), bias=False, strides=[2, 2])
conv("conv1x1", (2, 256, 14, 14), (1024, 256, 1, 1))
conv("conv7x7_s2_stem", (1, 3, 224, 224), (64, 3, 7, 7), bias=False, pads=[3, 3, 3, 3],
     strides=[2, 2])
conv("conv_dw3x3_g32", (1, 32, 112, 112), (32, 1, 3, 3), pads=[1, 1, 1, 1], group=32)
conv("conv_dw3x3_s2_g96", (1, 96, 56, 56), (96, 1, 3, 3), pads=[1, 1, 1, 1], strides=[2, 2],
     group=96)
conv("conv_small", (2, 4, 9, 9), (6, 4, 3, 3), pads=[1, 1, 1, 1])
conv("conv_small_nobias_s2", (2, 4, 9, 9), (6, 4, 3, 3), bias=False, strides=[2, 2])
conv("conv_small_group2_dil2", (1, 4, 11, 11), (6, 2, 3, 3), group=2, dilations=[2, 2],
     pads=[2, 1, 0, 2])
conv("conv_small_dw", (1, 8, 10, 10), (8, 1, 3, 3), group=8, pads=[1, 1, 1, 1])
conv("conv_small_autopad", (1, 3, 10, 10), (4, 3, 3, 3), auto_pad="SAME_UPPER", strides=[2, 2])
conv("conv1d_small", (2, 4, 17), (5, 4, 3), pads=[1, 1])


def pool(name, op, x_shape, tol="float", **attrs):
    @case(name, tol=tol)
    def build(g):
        g.node(op, [g.input("x", "T", g.randn(*x_shape))], ["y"], **attrs)
        g.output("y", "T")


pool("maxpool3x3_s2_p1", "MaxPool", (1, 64, 112, 112), tol="exact", kernel_shape=[3, 3],
     strides=[2, 2], pads=[1, 1, 1, 1])
pool("maxpool_small", "MaxPool", (2, 3, 9, 9), tol="exact", kernel_shape=[2, 2], strides=[2, 2])
pool("maxpool_small_ceil", "MaxPool", (2, 3, 9, 9), tol="exact", kernel_shape=[3, 3],
     strides=[2, 2], ceil_mode=1)
pool("avgpool3x3_s1_p1", "AveragePool", (1, 64, 28, 28), kernel_shape=[3, 3],
     pads=[1, 1, 1, 1])
pool("avgpool2x2_s2", "AveragePool", (1, 256, 14, 14), kernel_shape=[2, 2], strides=[2, 2])
pool("avgpool_small_incpad", "AveragePool", (2, 3, 9, 9), kernel_shape=[3, 3], strides=[2, 2],
     pads=[1, 1, 1, 1], count_include_pad=1)
pool("avgpool_small_excpad", "AveragePool", (2, 3, 9, 9), kernel_shape=[3, 3], strides=[2, 2],
     pads=[1, 1, 1, 1])
pool("globalavgpool_r50", "GlobalAveragePool", (8, 2048, 7, 7))
pool("globalavgpool_small", "GlobalAveragePool", (2, 5, 3, 3))


def batchnorm(name, x_shape):
    @case(name)
    def build(g):
        c = x_shape[1]
        # The input is a graph input (not a Conv output), so graft cannot fold the BN away.
        x = g.input("x", "T", g.randn(*x_shape, scale=2.0) + 0.5)
        ins = [x, g.init("scale", "T", 1.0 + g.randn(c, scale=0.1)),
               g.init("bias", "T", g.randn(c, scale=0.1)),
               g.init("mean", "T", g.randn(c, scale=0.5)),
               g.init("var", "T", g.uniform(0.5, 4.0, c))]
        g.node("BatchNormalization", ins, ["y"], epsilon=1e-5)
        g.output("y", "T")


batchnorm("batchnorm_unfolded", (1, 64, 56, 56))
batchnorm("batchnorm_small", (2, 8, 5, 5))


def gemm(name, a_shape, b_shape, c_shape, **attrs):
    @case(name)
    def build(g):
        a = g.input("a", "T", g.randn(*a_shape))
        k = a_shape[0] if attrs.get("transA") else a_shape[1]
        ins = [a, g.init("b", "T", g.randn(*b_shape, scale=float(1 / np.sqrt(k))))]
        if c_shape is not None:
            ins.append(g.init("c", "T", g.randn(*c_shape, scale=0.1)))
        g.node("Gemm", ins, ["y"], **attrs)
        g.output("y", "T")


gemm("gemm_fc_r50", (8, 2048), (1000, 2048), (1000,), transB=1)  # ResNet-50 classifier
gemm("gemm_pooler", (8, 768), (768, 768), (768,), transB=1)  # BERT pooler dense
gemm("gemm_small", (3, 5), (4, 5), (4,), transB=1)
gemm("gemm_small_transA_alpha", (5, 3), (5, 4), (3, 4), transA=1, alpha=0.5, beta=2.0)
gemm("gemm_small_noC", (3, 5), (5, 4), None)
gemm("gemm_small_c_scalar", (3, 5), (5, 4), (1,), alpha=1.5)


def matmul(name, a_shape, b_shape, b_const=False):
    @case(name)
    def build(g):
        a = g.input("a", "T", g.randn(*a_shape))
        k = a_shape[-1]
        bv = g.randn(*b_shape, scale=float(1 / np.sqrt(k)))
        b = g.init("b", "T", bv) if b_const else g.input("b", "T", bv)
        g.node("MatMul", [a, b], ["y"])
        g.output("y", "T")


matmul("matmul_attn_qk", (8, 12, 128, 64), (8, 12, 64, 128))
matmul("matmul_attn_v", (8, 12, 128, 128), (8, 12, 128, 64))
matmul("matmul_ffn", (8, 128, 768), (768, 3072), b_const=True)
matmul("matmul_ffn_out", (8, 128, 3072), (3072, 768), b_const=True)
matmul("matmul_2d", (64, 96), (96, 48))
matmul("matmul_1d_left", (96,), (96, 48))
matmul("matmul_1d_right", (64, 96), (96,))
matmul("matmul_1d_both", (96,), (96,))
matmul("matmul_bcast_batch", (2, 1, 16, 32), (3, 32, 8))
matmul("matmul_bcast_small", (2, 3, 5), (5, 4), b_const=True)
matmul("matmul_small_batched", (2, 3, 4, 5), (2, 3, 5, 6))
matmul("matmul_small_odd", (7, 13), (13, 3))

# --- softmax, normalisation and reductions ---


def softmax(name, op, shape, axis, scale=3.0):
    @case(name)
    def build(g):
        g.node(op, [g.input("x", "T", g.randn(*shape, scale=scale))], ["y"], axis=axis)
        g.output("y", "T")


softmax("softmax_attn", "Softmax", (8, 12, 128, 128), -1)
softmax("softmax_small_axis1", "Softmax", (4, 10, 7), 1)
softmax("softmax_small_last", "Softmax", (3, 7, 33), -1)
softmax("logsoftmax_1000", "LogSoftmax", (8, 1000), -1)
softmax("logsoftmax_small_axis0", "LogSoftmax", (5, 3, 4), 0)


def layernorm(name, shape, axis, eps=1e-12):
    @case(name)
    def build(g):
        norm = shape[axis:]
        x = g.input("x", "T", g.randn(*shape, scale=2.0) + 0.3)
        ins = [x, g.init("scale", "T", 1.0 + g.randn(*norm, scale=0.1)),
               g.init("bias", "T", g.randn(*norm, scale=0.1))]
        g.node("LayerNormalization", ins, ["y"], axis=axis, epsilon=eps)
        g.output("y", "T")


layernorm("layernorm_bert", BERT, -1)
layernorm("layernorm_small", (2, 5, 16), -1, eps=1e-5)
layernorm("layernorm_small_axis1", (2, 3, 4, 5), 1, eps=1e-5)


def reduce(name, op, shape, axes, keepdims=1, t="T"):
    dts = FLOAT_DTYPES if t == "T" else (t,)

    @case(name, dtypes=dts)
    def build(g):
        x = g.input("x", t, g.randn(*shape) if t == "T" else g.rng.integers(-100, 100, shape))
        if op == "ReduceSum":  # axes is an input from opset 13
            ins = [x] + ([g.const_i64("axes", axes)] if axes is not None else [])
            g.node(op, ins, ["y"], keepdims=keepdims)
        else:  # ReduceMean: an attribute before opset 18
            kw = {"axes": axes} if axes is not None else {}
            g.node(op, [x], ["y"], keepdims=keepdims, **kw)
        g.output("y", t)


reduce("reducemean_last", "ReduceMean", BERT, [-1])
reduce("reducemean_hw", "ReduceMean", CNN, [2, 3])
reduce("reducemean_small_hw_nokeep", "ReduceMean", (2, 3, 4, 5), [2, 3], keepdims=0)
reduce("reducemean_small_axis0", "ReduceMean", (6, 5, 4), [0])
reduce("reducesum_last", "ReduceSum", BERT, [-1], keepdims=0)
reduce("reducesum_hw", "ReduceSum", CNN, [2, 3])
reduce("reducesum_small_all", "ReduceSum", (3, 4, 5), None)
reduce("reducesum_small_mid", "ReduceSum", (3, 4, 5), [1])
reduce("reducesum_small_i64", "ReduceSum", (3, 4, 5), [-1], t="i64")


def argmax(name, shape, axis, keepdims=1, t="T"):
    dts = FLOAT_DTYPES if t == "T" else (t,)

    @case(name, dtypes=dts, tol=f"argmax:{axis % len(shape)}")
    def build(g):
        x = g.randn(*shape) if t == "T" else g.rng.integers(-5, 5, shape)
        g.node("ArgMax", [g.input("x", t, x)], ["y"], axis=axis, keepdims=keepdims)
        g.output("y", "i64")


argmax("argmax_1000", (8, 1000), -1, keepdims=0)
argmax("argmax_small_axis1", (4, 10, 7), 1)
argmax("argmax_small_i64_ties", (4, 10, 7), 2, t="i64")


def cumsum(name, shape, axis, t="T", **attrs):
    dts = FLOAT_DTYPES if t == "T" else (t,)

    @case(name, dtypes=dts, tol="exact" if t != "T" else "float")
    def build(g):
        x = g.randn(*shape) if t == "T" else g.rng.integers(0, 2, shape)
        g.node("CumSum", [g.input("x", t, x), g.const_i64("axis", axis)], ["y"], **attrs)
        g.output("y", t)


cumsum("cumsum_seq", (8, 128), 1)
cumsum("cumsum_long", (4, 4096), -1)
cumsum("cumsum_small_excl_rev", (4, 6, 5), 0, exclusive=1, reverse=1)
cumsum("cumsum_small_excl", (4, 6, 5), 1, exclusive=1)
cumsum("cumsum_i64_positions", (8, 128), 1, t="i64")  # position ids from an attention mask

# --- shape and data movement (exact) ---


def movement(name, dtypes=FLOAT_DTYPES, flags=()):
    return case(name, dtypes=dtypes, tol="exact", flags=flags)


def transpose(name, shape, perm):
    @movement(name)
    def build(g):
        g.node("Transpose", [g.input("x", "T", g.randn(*shape))], ["y"], perm=perm)
        g.output("y", "T")


transpose("transpose_0213", (8, 128, 12, 64), [0, 2, 1, 3])  # attention heads
transpose("transpose_0231", CNN, [0, 2, 3, 1])  # NCHW -> NHWC
transpose("transpose_0132", (8, 12, 128, 64), [0, 1, 3, 2])  # K^T
transpose("transpose_2d", (768, 1024), [1, 0])
transpose("transpose_small_5d", (2, 3, 4, 5, 6), [4, 2, 0, 3, 1])
transpose("transpose_small_odd", (7, 13), [1, 0])


def concat(name, shapes, axis, t="T"):
    dts = FLOAT_DTYPES if t == "T" else (t,)

    @movement(name, dtypes=dts)
    def build(g):
        ins = [g.input(f"x{i}", t, g.randn(*s) if t == "T" else g.rng.integers(-9, 9, s))
               for i, s in enumerate(shapes)]
        g.node("Concat", ins, ["y"], axis=axis)
        g.output("y", t)


concat("concat_channels", [(2, 32, 28, 28), (2, 64, 28, 28)], 1)
concat("concat_last3", [(8, 128, 64)] * 3, -1)
concat("concat_small_10", [(2, i + 1, 3) for i in range(10)], 1)  # more pieces than one launch
concat("concat_small_axis0", [(1, 5), (3, 5)], 0)
concat("concat_i64", [(1,), (1,), (1,)], 0, t="i64")
concat("concat_small_odd", [(3, 1, 3), (3, 2, 3)], 1)  # 3-element rows: unaligned pieces


def split(name, shape, axis, sizes, n_out):
    @movement(name)
    def build(g):
        ins = [g.input("x", "T", g.randn(*shape))]
        if sizes is not None:
            ins.append(g.const_i64("split", sizes))
        outs = [f"y{i}" for i in range(n_out)]
        g.node("Split", ins, outs, axis=axis)
        for o in outs:
            g.output(o, "T")


split("split_qkv", (8, 128, 2304), -1, None, 3)
split("split_small_uneven", (4, 6, 5), 1, [1, 2, 3], 3)
split("split_small_axis0", (6, 5), 0, [2, 4], 2)


def slice_(name, shape, starts, ends, axes=None, steps=None):
    @movement(name)
    def build(g):
        ins = [g.input("x", "T", g.randn(*shape)), g.const_i64("starts", starts),
               g.const_i64("ends", ends)]
        if axes is not None:
            ins.append(g.const_i64("axes", axes))
        if steps is not None:
            ins.append(g.const_i64("steps", steps))
        g.node("Slice", ins, ["y"])
        g.output("y", "T")


slice_("slice_cls", BERT, [0], [1], [1])  # [CLS] token
slice_("slice_qkv_part", (8, 128, 2304), [768], [1536], [2])
slice_("slice_small_steps", (4, 10, 12), [1, -1], [9, -100], [1, 2], [2, -3])
slice_("slice_small_neg", (4, 10, 12), [-3, 2], [100, -2], [0, 2])
slice_("slice_small_step3", (5, 17), [0, 1], [5, 17], [0, 1], [2, 3])


def gather(name, data_shape, idx, axis, t="T", idx_t="i64", const_data=False):
    dts = FLOAT_DTYPES if t == "T" else (t,)

    @movement(name, dtypes=dts)
    def build(g):
        dv = g.randn(*data_shape) if t == "T" else g.rng.integers(-99, 99, data_shape)
        data = g.init("data", t, dv) if const_data else g.input("data", t, dv)
        g.node("Gather", [data, g.input("idx", idx_t, idx(g))], ["y"], axis=axis)
        g.output("y", t)


gather("gather_embed", (1000, 768), lambda g: g.rng.integers(0, 1000, (8, 128)), 0,
       const_data=True)  # word embeddings (vocab cut to 1000)
gather("gather_cls_axis1", BERT, lambda g: np.array(0, np.int64), 1)  # hidden[:, 0]
gather("gather_embed_i32", (1000, 768), lambda g: g.rng.integers(0, 1000, (8, 128)), 0,
       idx_t="i32", const_data=True)
gather("gather_small_neg", (5, 6, 7), lambda g: np.array([[-1, 0], [2, -5]]), 1)
gather("gather_small_axis2_i32", (5, 6, 7), lambda g: np.array([6, 0, 3, -7]), 2, idx_t="i32")
gather("gather_i64_data", (10, 4), lambda g: np.array([3, 1, 9]), 0, t="i64")


def expand(name, shape, target, t="T"):
    dts = FLOAT_DTYPES if t == "T" else (t,)

    @movement(name, dtypes=dts)
    def build(g):
        x = g.randn(*shape) if t == "T" else g.rng.integers(-9, 9, shape)
        g.node("Expand", [g.input("x", t, x), g.const_i64("shape", target)], ["y"])
        g.output("y", t)


expand("expand_mask", (8, 1, 1, 128), [8, 12, 128, 128])
expand("expand_small", (3, 1), [2, 3, 4])
expand("expand_small_rank_up", (4,), [3, 1, 4])
expand("expand_i64", (1, 128), [8, 128], t="i64")  # position ids over the batch


def pad(name, shape, pads, mode="constant", value=None):
    @movement(name)
    def build(g):
        ins = [g.input("x", "T", g.randn(*shape)), g.const_i64("pads", pads)]
        if value is not None:
            ins.append(g.init("value", "T", np.array(value, np.float32)))
        g.node("Pad", ins, ["y"], mode=mode)
        g.output("y", "T")


pad("pad_hw1", (1, 64, 56, 56), [0, 0, 1, 1, 0, 0, 1, 1])
pad("pad_small_value", (2, 3, 4, 5), [0, 1, 2, 0, 1, 0, 1, 3], value=-1.5)
pad("pad_small_reflect", (2, 3, 4, 5), [0, 0, 2, 3, 0, 0, 1, 2], mode="reflect")
pad("pad_small_edge", (2, 3, 4, 5), [0, 0, 2, 3, 0, 0, 3, 1], mode="edge")
pad("pad_small_crop", (2, 3, 6, 7), [0, 0, -1, 2, 0, 0, 1, -2])


def reshape_like(name, op, shape, build_args):
    @movement(name)
    def build(g):
        ins, attrs = build_args(g)
        g.node(op, [g.input("x", "T", g.randn(*shape))] + ins, ["y"], **attrs)
        g.output("y", "T")


reshape_like("flatten_r50", "Flatten", (8, 2048, 1, 1), lambda g: ([], {"axis": 1}))
reshape_like("flatten_small_axis2", "Flatten", (2, 3, 4, 5), lambda g: ([], {"axis": 2}))
reshape_like("reshape_heads", "Reshape", BERT,
             lambda g: ([g.const_i64("shape", [8, 128, 12, 64])], {}))
reshape_like("reshape_small_infer", "Reshape", (2, 3, 4),
             lambda g: ([g.const_i64("shape", [0, -1])], {}))
reshape_like("squeeze_hw", "Squeeze", (8, 2048, 1, 1),
             lambda g: ([g.const_i64("axes", [2, 3])], {}))
reshape_like("squeeze_small_all", "Squeeze", (1, 3, 1, 5), lambda g: ([], {}))
reshape_like("unsqueeze_mask", "Unsqueeze", (8, 128),
             lambda g: ([g.const_i64("axes", [1, 2])], {}))
reshape_like("unsqueeze_small_neg", "Unsqueeze", (3, 5),
             lambda g: ([g.const_i64("axes", [-1, 0])], {}))


@movement("constantofshape")
def _(g):
    # The shape is a graph input (host memory; a constant input would let graft fold the node).
    shape = g.input("shape", "i64", np.array([8, 12, 128, 128], np.int64))
    g.node("ConstantOfShape", [shape], ["y"],
           value=tensor_proto("value", g.values("T", np.array([1.5])), g.dt("T")))
    g.output("y", "T")


@movement("constantofshape_i64", dtypes=("i64",))
def _(g):
    shape = g.input("shape", "i64", np.array([8, 128], np.int64))
    g.node("ConstantOfShape", [shape], ["y"], value=tensor_proto("value", np.array([7]), "i64"))
    g.output("y", "i64")


def range_(name, t, start, limit, delta):
    @case(name, dtypes=(t,), tol="exact")
    def build(g):
        ins = [g.input(n, t, np.array(v, NUMPY_TYPE[t]))
               for n, v in (("start", start), ("limit", limit), ("delta", delta))]
        g.node("Range", ins, ["y"])
        g.output("y", t)


range_("range_f32", "f32", -2.5, 7.1, 0.3)
range_("range_f32_long", "f32", 0.0, 100000.0, 0.75)
range_("range_i64", "i64", 0, 128, 1)
range_("range_i64_neg", "i64", 100, -7, -3)


@movement("shape_op", dtypes=("f32",), flags=("fallback-ok",))
def _(g):  # Shape reads no data: it may stay on the host
    g.node("Shape", [g.input("x", "T", g.randn(2, 3, 4))], ["y"])
    g.output("y", "i64")


@movement("constant_op", dtypes=("f32",), flags=("fallback-ok",))
def _(g):  # a Constant that is a graph output is not folded away
    g.node("Constant", [], ["y"], value=tensor_proto("v", g.randn(2, 3), "f32"))
    g.output("y", "T")
