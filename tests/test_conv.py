"""Both frameworks' conv op against the float64 oracle and each other, on 1 and 8 replicas."""

import os

import numpy as np
import pytest

from parity.api.variants import MANY
from parity.common import float64 as oracle
from parity.common.tolerances import BF16_TOLERANCE
from parity.judging.roofline import isa_capped_below_bf16
from parity.workloads.conv import ConvSpec

TOL = 1e-5  # float32 at highest precision, relative to max |reference|

SHAPES = [
    ConvSpec(batch=8, height=9, width=11, cin=3, cout=4, kh=5, kw=5, stride=2, padding="SAME"),
    ConvSpec(batch=8, height=10, width=7, cin=2, cout=3, kh=3, kw=3, stride=1, padding="SAME"),
    ConvSpec(batch=16, height=13, width=13, cin=3, cout=5, kh=5, kw=5, stride=2, padding="VALID"),
    ConvSpec(batch=8, height=6, width=6, cin=1, cout=2, kh=2, kw=3, stride=1, padding="VALID"),
]


def rel_err(got, ref):
    return oracle.errors(np.asarray(got), ref)["max_rel_err"]


@pytest.mark.parametrize("spec", SHAPES, ids=lambda s: f"{s.height}x{s.width}k{s.kh}{s.kw}s{s.stride}{s.padding}")
def test_conv_op_matches_oracle(impl, spec):
    mod, _ = impl
    x, w = spec.inputs()
    out = mod.adapter("conv").conv_op(x, w, stride=spec.stride, padding=spec.padding)
    assert tuple(out.shape) == spec.output_shape
    assert rel_err(out, oracle.conv2d(x, w, spec.stride, spec.padding)) < TOL


@pytest.mark.parametrize("replicas", [1, 8])
def test_every_variant_matches_oracle(impl, replicas):
    mod, devices = impl
    spec = SHAPES[0]
    x, w = spec.inputs()
    ref = oracle.conv2d(x, w, spec.stride, spec.padding)
    variants = mod.variants("conv", replicas)
    if not variants:  # PyTorch's data parallelism is its trained models' (torch_impl.catalog): no conv over 8
        assert replicas > 1 and not any(v.span == MANY and v.kind == "conv" for v in mod.VARIANTS)
        return
    for v in variants:
        variant = v.name
        if v.dtype == "bfloat16" and isa_capped_below_bf16(os.environ):
            continue  # oneDNN refuses a bfloat16 conv under such a cap; the harness never runs one there
        p = mod.adapter("conv").prepare(variant, x, w, devices[:replicas], spec.stride, spec.padding)
        out = p.run()
        mod.block(out)
        assert p.shape(out) == spec.output_shape, variant
        assert p.placement(out) == [f"cpu:{i}" for i in range(replicas)], variant
        idx = list(range(spec.batch))
        err = rel_err(p.rows(out, idx), ref)
        if v.dtype == "bfloat16":  # bfloat16 in and out: rounding, not float32 accumulation
            assert 1e-4 < err < BF16_TOLERANCE, (variant, err)
        else:
            assert err < TOL, variant


@pytest.mark.parametrize("replicas", [1, 8])
def test_compiler_flop_count_agrees_with_the_formula(impl, replicas):
    # XLA leaves out SAME padding's zeros, TF's profiler counts them: each matches one analytic count
    mod, devices = impl
    spec = ConvSpec(batch=8, height=32, width=32, cin=3, cout=8, kh=5, kw=5, stride=2)
    x, w = spec.inputs()
    for variant in (v.name for v in mod.variants("conv", replicas)):
        flops, source = mod.adapter("conv").prepare(variant, x, w, devices[:replicas], spec.stride, spec.padding).cost()
        assert flops is not None, (variant, source)
        closest = min(abs(flops / spec.flops() - 1), abs(flops / spec.flops_unpadded() - 1))
        assert closest < 0.01, (variant, source, flops, spec.flops(), spec.flops_unpadded())


def test_frameworks_agree():
    import jax_impl
    import tf_impl

    spec = SHAPES[2]
    x, w = spec.inputs()
    a = np.asarray(jax_impl.adapter("conv").conv_op(x, w, spec.stride, spec.padding))
    b = tf_impl.adapter("conv").conv_op(x, w, spec.stride, spec.padding).numpy()
    assert rel_err(a, b.astype(np.float64)) < TOL


def test_non_dividing_batch_raises(impl):
    mod, devices = impl
    spec = ConvSpec(batch=12, height=8, width=8, cout=2)
    x, w = spec.inputs()
    many = mod.variants("conv", 8)
    with pytest.raises(ValueError, match="does not divide by 8 replicas" if many else r"for 8 replicas; have \(\)"):
        name, devs = (many[0].name, devices) if many else (mod.variants("conv", 1)[0].name, devices[:1] * 8)
        mod.adapter("conv").prepare(name, x, w, devs, 2, "SAME")


def test_unknown_variant_raises(impl):
    mod, devices = impl
    x, w = SHAPES[0].inputs()
    with pytest.raises(ValueError, match="unknown"):
        mod.adapter("conv").prepare("nope", x, w, devices[:1])


def test_mirror_images_expose_the_same_names():
    import jax_impl
    import tf_impl

    assert sorted(jax_impl.__all__) == sorted(tf_impl.__all__)
    for name in jax_impl.__all__:
        assert hasattr(jax_impl, name) and hasattr(tf_impl, name), name
