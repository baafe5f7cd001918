"""GPU op cases for InstanceNormalization, GroupNormalization (opset 18's per-group and 21's
per-channel scale), Resize (nearest, linear and cubic, the exporters' coordinate modes, scales
and sizes, opsets 10-19) and Einsum (the two-operand forms transformer exports use, diagonals,
reductions, three operands; src/cuda/einsum.cu). Antialiased Resize has no CUDA kernel: it runs on
the host (fallback-ok). Registered into gpu_op_cases.CASES."""

import numpy as np
from gpu_op_cases import case

HOST = ("fallback-ok",)
GPU = ()


def instancenorm_case(name, shape, eps=1e-5):
    @case(name, flags=GPU)
    def build(g):
        c = shape[1]
        ins = [g.input("x", "T", g.randn(*shape)), g.init("scale", "T", g.uniform(0.5, 1.5, c)),
               g.init("bias", "T", g.randn(c))]
        g.node("InstanceNormalization", ins, ["y"], epsilon=eps)
        g.output("y", "T")


instancenorm_case("instancenorm_small", (2, 4, 6, 6))
instancenorm_case("instancenorm_small_1d", (3, 5, 40), eps=1e-3)


def groupnorm_case(name, shape, groups, opset):
    @case(name, flags=GPU)
    def build(g):
        g.opset = opset
        n = shape[1] if opset >= 21 else groups  # opset 21: per channel; 18: per group
        ins = [g.input("x", "T", g.randn(*shape)), g.init("scale", "T", g.uniform(0.5, 1.5, n)),
               g.init("bias", "T", g.randn(n))]
        g.node("GroupNormalization", ins, ["y"], num_groups=groups, epsilon=1e-5)
        g.output("y", "T")


groupnorm_case("groupnorm_small_opset18", (2, 6, 5, 5), 3, 18)
groupnorm_case("groupnorm_small_opset21", (2, 8, 4, 4), 2, 21)
groupnorm_case("groupnorm_unet", (1, 64, 16, 16), 32, 21)  # a diffusion U-Net's GroupNorm(32)


def resize_case(name, shape, mode, opset=13, scales=None, sizes=None, **attrs):
    @case(name, flags=HOST if attrs.get("antialias") else GPU)
    def build(g):
        g.opset = opset
        ins = [g.input("x", "T", g.randn(*shape))]
        if opset == 10:
            ins.append(g.init("scales", "f32", np.array(scales, np.float32)))
        else:
            ins.append("")  # no roi
            ins.append(g.init("scales", "f32", np.array(scales, np.float32)) if scales else "")
            if sizes:
                ins.append(g.const_i64("sizes", sizes))
        g.node("Resize", ins, ["y"], mode=mode, **attrs)
        g.output("y", "T")


# torch.nn.Upsample(scale_factor=2) as the TorchScript exporter writes it
resize_case("resize_small_nearest_x2", (1, 3, 5, 5), "nearest", scales=[1, 1, 2, 2],
            coordinate_transformation_mode="asymmetric", nearest_mode="floor")
resize_case("resize_small_nearest_opset10", (1, 2, 4, 6), "nearest", opset=10,
            scales=[1, 1, 2, 1.5])
resize_case("resize_small_nearest_sizes_half_pixel", (2, 3, 7, 5), "nearest",
            sizes=[2, 3, 4, 11], coordinate_transformation_mode="half_pixel",
            nearest_mode="round_prefer_ceil")
resize_case("resize_small_linear_half_pixel", (1, 4, 6, 6), "linear", scales=[1, 1, 2, 2])
resize_case("resize_small_linear_pytorch_half_pixel", (2, 3, 8, 8), "linear",
            sizes=[2, 3, 5, 3], coordinate_transformation_mode="pytorch_half_pixel")
resize_case("resize_small_linear_align_corners", (1, 3, 5, 7), "linear", sizes=[1, 3, 9, 4],
            coordinate_transformation_mode="align_corners")
resize_case("resize_small_linear_asymmetric", (1, 2, 6, 4), "linear", scales=[1, 1, 0.5, 2.5],
            coordinate_transformation_mode="asymmetric")
resize_case("resize_small_cubic", (1, 3, 6, 6), "cubic", scales=[1, 1, 1.5, 2],
            coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75)
resize_case("resize_small_linear_antialias", (1, 2, 12, 12), "linear", opset=18,
            sizes=[1, 2, 5, 5], antialias=1)
resize_case("resize_vit_pos_embed", (1, 64, 14, 14), "cubic", sizes=[1, 64, 16, 16],
            coordinate_transformation_mode="align_corners")


def einsum_case(name, equation, *shapes):
    @case(name, flags=GPU)
    def build(g):
        g.opset = 12
        ins = [g.input(f"x{i}", "T", g.randn(*s)) for i, s in enumerate(shapes)]
        g.node("Einsum", ins, ["y"], equation=equation)
        g.output("y", "T")


einsum_case("einsum_small_bmm", "bij,bjk->bik", (3, 5, 7), (3, 7, 4))
einsum_case("einsum_small_attention_scores", "bhqd,bhkd->bhqk", (2, 3, 6, 8), (2, 3, 5, 8))
einsum_case("einsum_small_attention_context", "bhqk,bhkd->bhqd", (2, 3, 6, 5), (2, 3, 5, 8))
einsum_case("einsum_small_transpose", "ij->ji", (6, 9))
einsum_case("einsum_small_ellipsis_linear", "...d,ed->...e", (2, 4, 16), (12, 16))
einsum_case("einsum_small_implicit_outer", "i,j", (5,), (7,))
einsum_case("einsum_small_diagonal_trace", "bii->b", (3, 6, 6))
einsum_case("einsum_small_reduce_rows", "ij->i", (7, 33))
einsum_case("einsum_small_three_operands", "ij,jk,k->i", (4, 5), (5, 6), (6,))
einsum_case("einsum_small_broadcast_batch", "bij,jk->bik", (2, 3, 4), (4, 5))
