"""Both frameworks' matmul against the float64 oracle, on 1 and 8 replicas; the registry's every entry runs."""

import os

import numpy as np
import pytest

from parity.api.variants import ONE, Variant
from parity.common.tolerances import BF16_TOLERANCE
from parity.judging.roofline import isa_capped_below_bf16, native_bf16
from parity.workloads import WORKLOADS
from parity.workloads.matmul import MatmulSpec, bf16_matmul_peak, matmul_tolerance

SPEC = MatmulSpec(m=16, k=24, n=8)


def _run(mod, devices, variant, spec=SPEC):
    a, b = spec.inputs()
    p = mod.adapter("matmul").prepare(variant, a, b, devices)
    out = p.run()
    mod.block(out)
    return p, out


@pytest.mark.parametrize("replicas", [1, 8])
def test_every_variant_matches_oracle(impl, replicas):
    mod, devices = impl
    idx = list(range(SPEC.m))
    ref = SPEC.oracle(SPEC.inputs(), idx)
    for v in mod.variants("matmul", replicas):
        variant, dtype = v.name, v.dtype
        if dtype == "bfloat16" and isa_capped_below_bf16(os.environ):
            continue  # as for the conv: the harness never runs bfloat16 under an ISA cap below it
        p, out = _run(mod, devices[:replicas], variant)
        assert p.shape(out) == SPEC.output_shape, variant
        assert p.placement(out) == [f"cpu:{i}" for i in range(replicas)], variant
        err = np.abs(p.rows(out, idx) - ref).max() / np.abs(ref).max()
        if dtype == "bfloat16":  # bfloat16 operands: rounding, not float32 accumulation
            assert 1e-4 < err < BF16_TOLERANCE, (variant, err)
        else:
            assert err < matmul_tolerance("cpu", "highest", dtype), (variant, err)


@pytest.mark.parametrize("replicas", [1, 8])
def test_compiler_flop_count_agrees_with_the_formula(impl, replicas):
    mod, devices = impl
    for v in mod.variants("matmul", replicas):
        if v.dtype == "bfloat16" and isa_capped_below_bf16(os.environ):
            continue
        variant = v.name
        flops, source = _run(mod, devices[:replicas], variant)[0].cost()
        assert flops == pytest.approx(SPEC.flops(), rel=0.01), (variant, source)


def test_rows_that_do_not_divide_raise(impl):
    mod, devices = impl
    a, b = MatmulSpec(m=12, k=4, n=4).inputs()
    many = mod.variants("matmul", 8)  # none where an implementation has no data parallelism (PyTorch's)
    with pytest.raises(ValueError, match="does not divide by 8 replicas" if many else r"for 8 replicas; have \(\)"):
        name, devs = (many[0].name, devices) if many else (mod.variants("matmul", 1)[0].name, devices[:1] * 8)
        mod.adapter("matmul").prepare(name, a, b, devs)
    with pytest.raises(ValueError, match="unknown"):
        mod.adapter("matmul").prepare("nope", a, b, devices[:1])


def test_every_registered_row_kind_has_both_implementations(impl):
    # the registry's "run all" path: every kind's variants exist for 1 and 8 replicas, and an op's prepare
    mod, _ = impl
    for wl in WORKLOADS.values():
        assert wl.full.batch % 8 == 0 and wl.quick.batch % 8 == 0, wl.name
        for kind in wl.kinds:
            assert callable(kind.case), kind.name
            assert mod.variants(kind.name, 1), kind.name
            if kind.prepare:
                assert callable(kind.prepare(mod)), kind.name


def test_the_bf16_peak_is_a_checked_bfloat16_matmul(impl):
    """What the CPU's measured bfloat16 peak is: each framework's own bfloat16 matmul, timed, checked on float64.
    Under an ISA cap below bfloat16 oneDNN refuses TF's; the harness then never asks for it (no native bfloat16)."""
    mod, devices = impl
    if mod.__name__ == "tf_impl" and isa_capped_below_bf16(os.environ):
        assert not native_bf16("cpu", "cpu")
        return
    got = bf16_matmul_peak(mod, devices, {"n": 64, "reps": 2})
    assert {v.name: v.dtype for v in mod.variants("matmul", 1)}[got["variant"]] == "bfloat16" and got["flops"] > 0


def test_a_wrong_bf16_matmul_sets_no_peak():
    """A bfloat16 product off float64 is not a measurement: no figure, and the reason."""

    class Wrong:
        @staticmethod
        def variants(kind, replicas):
            return (Variant("jit", kind, ONE), Variant("jit+bf16", kind, ONE, "bfloat16"))

        @staticmethod
        def adapter(workload):
            def prepare(variant, a, b, devices):
                return type(
                    "P", (), {"run": staticmethod(lambda: a @ b * 1.1), "rows": staticmethod(lambda out, idx: out[idx])}
                )

            return type("A", (), {"prepare": staticmethod(prepare)})

        @staticmethod
        def block(out):
            pass

    got = bf16_matmul_peak(Wrong, [None], {"n": 32, "reps": 1})
    assert got["flops"] is None and "off float64" in got["why"]
