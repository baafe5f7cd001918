"""GPU op cases for the element-wise ops that exporters emit around activations, masks and
position buckets (MobileNetV3's HardSwish, ELU/SELU nets, BERT's GreaterOrEqual / And masks,
Swin's Mod, DeBERTa's Sign / Ceil): one case per op in the three float types where the op has a
float path, plus the bool and integer forms. Registered into gpu_op_cases.CASES."""

import numpy as np
from gpu_op_cases import CNN1, SMALL, case, unary

# --- activations (float tolerance: the GPU's exp / log1p / tanh differ from glibc's by ulps) ---
for suffix, shape in (("", CNN1), ("_small", SMALL)):
    unary("hardswish" + suffix, "HardSwish", shape, gen=4.0)  # MobileNetV3
    unary("hardsigmoid" + suffix, "HardSigmoid", shape, gen=4.0, alpha=1.0 / 6.0, beta=0.5)
unary("hardsigmoid_default_small", "HardSigmoid", SMALL, gen=4.0)
unary("softplus_small", "Softplus", SMALL, gen=8.0)  # both branches, and large |x|
unary("softsign_small", "Softsign", SMALL, gen=3.0)
unary("mish_small", "Mish", SMALL, gen=4.0, opset=18)
unary("elu_small", "Elu", SMALL, gen=2.0, alpha=0.7)
unary("selu_small", "Selu", SMALL, gen=2.0)
unary("celu_small", "Celu", SMALL, gen=2.0, alpha=1.5)
unary("thresholdedrelu_small", "ThresholdedRelu", SMALL, gen=2.0, tol="exact", alpha=0.5)
# Rounding and Sign give values exact in every float type.
unary("floor_small", "Floor", SMALL, gen=5.0, tol="exact")
unary("ceil_small", "Ceil", SMALL, gen=5.0, tol="exact")
unary("sign_small", "Sign", SMALL, tol="exact")


@case("round_halves_small", tol="exact")
def _(g):  # ties go to even: -2.5 -> -2, 0.5 -> 0, 1.5 -> 2
    halves = np.arange(-8, 8, dtype=np.float32) + 0.5
    x = np.concatenate([halves, g.randn(89, scale=4.0)]).reshape(3, 7, 5)
    g.node("Round", [g.input("x", "T", x)], ["y"])
    g.output("y", "T")


@case("prelu_nchw_c11", tol="float")
def _(g):  # PyTorch's nn.PReLU(channels) on NCHW: the slope as (C, 1, 1)
    x = g.input("x", "T", g.randn(*CNN1))
    g.node("PRelu", [x, g.init("slope", "T", g.uniform(0.05, 0.5, 64, 1, 1))], ["y"])
    g.output("y", "T")


@case("prelu_small", tol="float")
def _(g):  # one shared slope, and a slope along the last dim
    x = g.input("x", "T", g.randn(*SMALL))
    y1 = g.node("PRelu", [x, g.init("s1", "T", np.array([0.25], np.float32))], ["y1"])
    g.node("PRelu", [y1, g.init("s5", "T", g.uniform(-0.5, 0.5, 5))], ["y"])
    g.output("y", "T")


@case("mod_fmod_small", tol="exact")
def _(g):  # C's remainder, both signs of dividend and divisor
    a = g.randn(*SMALL, scale=10.0)
    b = g.uniform(0.5, 3.0, 7, 5) * np.where(g.rng.random((7, 5)) < 0.5, -1, 1)
    g.node("Mod", [g.input("a", "T", a), g.input("b", "T", b)], ["y"], fmod=1)
    g.output("y", "T")


@case("isnan_isinf_small", tol="exact")
def _(g):  # the mask clean-up in dynamo's attention graphs: where(isnan(x), 0, x)
    x = np.concatenate([np.array([np.nan, np.inf, -np.inf, 0.0, -1.0], np.float32),
                        g.randn(100)]).reshape(3, 7, 5)
    x = g.input("x", "T", x)
    g.node("IsNaN", [x], ["nan"])
    g.node("IsInf", [x], ["inf"])
    g.node("IsInf", [x], ["pos"], detect_negative=0)
    g.node("IsInf", [x], ["neg"], detect_positive=0)
    for name in ("nan", "inf", "pos", "neg"):
        g.output(name, "bool")


# --- comparisons and logic: the attention-mask and bucket graphs' forms ---
def compare_eq(name, op, a_shape, b_shape, t="T"):
    dts = ("f32", "f16", "bf16") if t == "T" else (t,)

    @case(name, dtypes=dts, tol="exact")
    def build(g):
        if t == "T":
            a, b = g.randn(*a_shape), g.randn(*b_shape)
        else:
            a, b = g.rng.integers(-3, 4, a_shape), g.rng.integers(-3, 4, b_shape)
        a = np.where(g.rng.random(a_shape) < 0.3, np.broadcast_to(b, a_shape), a)  # ties
        g.node(op, [g.input("a", t, a), g.input("b", t, b)], ["y"])
        g.output("y", "bool")


for op in ("GreaterOrEqual", "LessOrEqual"):
    low = "greaterorequal" if op == "GreaterOrEqual" else "lessorequal"
    compare_eq(f"{low}_small", op, (4, 5, 6), (6,))
    compare_eq(f"{low}_i64", op, (4, 5, 6), (5, 6), t="i64")
compare_eq("greaterorequal_bsh", "GreaterOrEqual", (2, 128, 768), (768,))


def logical(name, op, a_shape, b_shape):
    @case(name, dtypes=("bool",), tol="exact")
    def build(g):
        a = g.input("a", "bool", g.rng.random(a_shape) < 0.5)
        b = g.input("b", "bool", g.rng.random(b_shape) < 0.5)
        g.node(op, [a, b], ["y"])
        g.output("y", "bool")


for op in ("And", "Or", "Xor"):
    logical(f"{op.lower()}_bool", op, (8, 1, 128, 128), (8, 1, 1, 128))  # mask & causal mask
    logical(f"{op.lower()}_bool_small", op, (4, 5, 6), (5, 1))


# --- integers ---
@case("sign_i64", dtypes=("i64",), tol="exact")
def _(g):
    g.node("Sign", [g.input("x", "i64", g.rng.integers(-5, 6, (8, 128)))], ["y"])
    g.output("y", "i64")


@case("prelu_i64", dtypes=("i64",), tol="exact")
def _(g):
    x = g.input("x", "i64", g.rng.integers(-100, 100, (4, 5, 6)))
    g.node("PRelu", [x, g.input("s", "i64", g.rng.integers(-3, 4, (6,)))], ["y"])
    g.output("y", "i64")


def int_mod(name, fmod):
    # Relative-position buckets (Swin, T5): integer Mod runs on the CPU (a zero divisor is an
    # error only the host reports), so the case checks the fallback's result.
    @case(name, dtypes=("i64",), tol="exact", flags=("fallback-ok",))
    def build(g):
        a = g.input("a", "i64", g.rng.integers(-50, 50, (8, 128)))
        d = g.rng.integers(1, 7, (128,)) * np.where(g.rng.random(128) < 0.5, -1, 1)
        g.node("Mod", [a, g.input("b", "i64", d)], ["y"], fmod=fmod)
        g.output("y", "i64")


int_mod("mod_i64", 0)
int_mod("mod_i64_fmod", 1)
