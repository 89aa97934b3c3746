"""A gradient zero in exact arithmetic (each block's key bias: a softmax ignores what every key adds alike) judged as
the TPU computes it: the float64 oracle's terms cancel, the bound derived from the arithmetic
(parity.workloads.vit.tolerances.vanishing_terms) leaves every other bound as it was, and JAX's gradients with every
product's operands rounded to bfloat16, as a TPU's default precision multiplies (one pass), pass the check that
failed them before and fail it where a key bias's terms no longer cancel. Tiny widths, on the CPU."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from frameworks_setup import JAX_DEVICES  # noqa: F401  (starts the frameworks as every framework test does)
from jax.extend import core as jcore

import jax_impl
from jax_impl import models as jax_models
from parity.api.vit import VitArchitecture
from parity.common.tolerances import BF16_UNIT_ROUNDOFF, TF32_UNIT_ROUNDOFF
from parity.workloads.trained import model_checks
from parity.workloads.vit import MODEL, oracle
from parity.workloads.vit import errors as vit_errors
from parity.workloads.vit import tolerances as tol

ARCH = VitArchitecture(dim=8, depth=1, heads=2, mlp=16)
DEEPER = VitArchitecture(dim=16, depth=2, heads=2, mlp=32)
BATCH = 3
ATTENTION = ("einsum", "fused")
KEY_BIASES = {f"{b}_attn.key_bias" for b in ARCH.block_names}


def case(arch=ARCH, seed=1):
    """Every array N(0, 0.4), as test_vit_jax.py's (the biases and LayerNorms included), and BATCH images."""
    rng = np.random.default_rng(seed)
    w = [rng.normal(0, 0.4, t.shape).astype(np.float32) for t in arch.weights]
    return w, rng.integers(0, 256, (BATCH, 28, 28, 1)).astype(np.float32), rng.integers(0, 10, BATCH)


# ---- a TPU's products at default precision, on the CPU (which ignores jax.default_matmul_precision) ----

ROUNDED = ("dot_general", "conv_general_dilated")  # what the TPU's MXU multiplies
CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "custom_jvp_call": "call_jaxpr"}
NOT_ENTERED = ("cond", "while", "scan", "checkpoint", "remat", "custom_vjp_call", "shard_map")


def _bf16(a):
    """a's float32 values rounded to bfloat16's (to nearest even), kept in float32: reduce_precision, which a compiler
    keeps (a conversion to bfloat16 and back it may drop as excess precision)."""
    return jax.lax.reduce_precision(a, exponent_bits=8, mantissa_bits=7) if a.dtype == jnp.float32 else a


def _run(jaxpr, consts, args) -> list:
    """jaxpr's values, op by op, each product's float32 operands rounded to bfloat16 and their products summed in
    float32, as one bfloat16 pass."""
    env = dict(zip(jaxpr.constvars, consts, strict=True)) | dict(zip(jaxpr.invars, args, strict=True))
    read = lambda v: v.val if isinstance(v, jcore.Literal) else env[v]  # noqa: E731
    for eqn in jaxpr.eqns:
        ins, name = [read(v) for v in eqn.invars], eqn.primitive.name
        if name in CALLS:
            sub = eqn.params[CALLS[name]]
            outs = _run(sub.jaxpr, sub.consts, ins)
        else:
            if name in NOT_ENTERED:
                raise NotImplementedError(f"{name}: a nested program whose products this emulation would not round")
            outs = eqn.primitive.bind(*(map(_bf16, ins) if name in ROUNDED else ins), **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def one_bf16_pass(f):
    """f (a function of arrays, pytrees of them) computed with a TPU's default matrix products."""

    def g(*args):
        closed, shape = jax.make_jaxpr(f, return_shape=True)(*args)
        # one compiled program: run op by op, each primitive would be compiled on its own
        out = jax.jit(lambda consts, leaves: _run(closed.jaxpr, consts, leaves))(closed.consts, jax.tree.leaves(args))
        return jax.tree.unflatten(jax.tree.structure(shape), out)

    return g


def jax_grads(w, x, y, attention: str, bf16: bool = True) -> dict:
    """The JAX ViT's loss and gradients (the adapter's own loss_and_grads function), as the check reads them from a
    worker's file: {'loss', 'grad/000', ...} in Keras's order."""
    adapter = jax_impl.adapter("vit")
    m = adapter.build(ARCH.dim, ARCH.depth, ARCH.heads, ARCH.mlp)
    adapter.set_weights(m, w)
    m.attention = attention
    graphdef, params = nnx.split(m, nnx.Param)
    f = lambda p, x, y: jax_models._loss_and_grads(graphdef, p, x, y)  # noqa: E731
    loss, g = (one_bf16_pass(f) if bf16 else f)(params, jnp.asarray(x), jnp.asarray(y))
    grads = adapter.get_weights(nnx.merge(graphdef, g))  # the gradients in the parameters' places: Keras's order
    return {"loss": float(loss), **{f"grad/{i:03d}": np.asarray(a) for i, a in enumerate(grads)}}


def test_the_emulation_rounds_each_products_operands_once():
    a, b = (np.random.default_rng(s).normal(size=(16, 16)).astype(np.float32) for s in (0, 1))
    got = np.asarray(one_bf16_pass(jnp.matmul)(a, b), np.float64)
    ra, rb = (np.asarray(_bf16(jnp.asarray(v)), np.float64) for v in (a, b))
    assert np.max(np.abs(got - ra @ rb)) <= 16 * 2.0**-24 * np.max(np.abs(ra) @ np.abs(rb))  # float32's sum only
    assert np.max(np.abs(got - a.astype(np.float64) @ b)) > 1e-3  # bfloat16's rounding, not float32's


# ---- the oracle and the bound ----


def traced(w, x, y):
    tr = oracle.vit_trace(w, x)
    return tr, oracle.vit_backward(tr, y)


def test_only_the_key_biases_vanish_and_their_float64_terms_cancel():
    """Each query's ds sums to zero over the keys: the key bias's float64 gradient is float64 rounding of its terms
    (within 1e-12 of their |sum|, as float64 against float64 elsewhere)."""
    w, x, y = case(DEEPER)
    tr, bw = traced(w, x, y)
    terms = tol.vanishing_terms(tr, bw)
    assert {DEEPER.weights[i].name for i in terms} == {f"{b}_attn.key_bias" for b in DEEPER.block_names}
    for i, t in terms.items():
        assert t.shape == DEEPER.weights[i].shape and np.all(t > 0)
        assert np.all(np.abs(bw.grads[i]) <= 1e-12 * t), DEEPER.weights[i].name


@pytest.mark.parametrize("device, u", [("tpu", BF16_UNIT_ROUNDOFF), ("gpu", TF32_UNIT_ROUNDOFF), ("cpu", 0.0)])
def test_a_vanishing_gradients_bound_is_float32s_plus_its_operands_roundings_and_no_other_moves(device, u):
    """The key bias: its float32 bound plus 2 u Σ|terms| (u the products' operands' unit roundoff, 0 where they go in
    as float32), absolute; every other parameter: its float32 bound or the reduced table on its scale, as before."""
    w, x, y = case()
    tr, bw = traced(w, x, y)
    f32 = vit_errors.vit_grad_bounds(tr, bw, vit_errors.Errors(tr, y))
    terms = tol.vanishing_terms(tr, bw)
    got = tol.vit_bounds(w, x, y, device, "default")["grad_abs"]
    floor = tol.VIT_TOLERANCES_REDUCED["grads"] if device != "cpu" else 0.0
    for i, (b, g) in enumerate(zip(f32, bw.grads, strict=True)):
        if i in terms:
            assert got[i] == pytest.approx(float(np.max(b + tol.OPERAND_ROUNDINGS * u * terms[i])), rel=1e-12)
        else:
            assert got[i] == max(float(np.max(b)), floor * float(np.max(np.abs(g))))
    highest = tol.vit_bounds(w, x, y, device, "highest")["grad_abs"]
    assert highest == tol.vit_bounds(w, x, y, "cpu", "highest")["grad_abs"]  # float32 products: no operand rounds


# ---- the verdict on a TPU's arithmetic ----


def bounds_before(w, x, y, device, precision) -> dict:
    """vit_bounds as they were: the key bias too held to its float32 bound or the reduced table times its own
    float64 scale, which is noise (1e-19 of the others')."""
    out = tol.vit_bounds(w, x, y, device, precision)
    f32 = tol.vit_bounds(w, x, y, "cpu", "highest")["grad_abs"]
    _, ref = oracle.loss_and_grads(w, x, y)
    floor = tol.VIT_TOLERANCES_REDUCED["grads"]
    return out | {"grad_abs": [max(b, floor * float(np.max(np.abs(r)))) for b, r in zip(f32, ref, strict=True)]}


def verdict(saved: dict, w, x, y, model=MODEL, device="tpu") -> dict:
    """The gradients' row of the ViT's check for one framework's saved arrays (parity.workloads.trained)."""
    return model_checks.grads(model, {"jax": saved}, w, x, y, device, "default")[-1]


@pytest.fixture(scope="module", params=ATTENTION)
def on_a_tpu(request):
    w, x, y = case()
    return w, x, y, jax_grads(w, x, y, request.param)


def test_a_tpus_key_bias_passes_the_derived_bound_and_failed_the_one_before(on_a_tpu):
    w, x, y, saved = on_a_tpu
    now, before = verdict(saved, w, x, y), verdict(saved, w, x, y, dataclasses.replace(MODEL, bounds=bounds_before))
    assert now["passed"], now["detail"]
    assert not before["passed"] and "worst: JAX block1_attn.key_bias" in before["detail"], before["detail"]
    per = now["per_parameter"]  # the other parameters' figures: the same bounds either way
    assert all(per[n] == before["per_parameter"][n] for n in per if n not in KEY_BIASES)
    old = before["per_parameter"]
    assert all(old[n]["bound"] < old[n]["jax_vs_f64"] < per[n]["bound"] for n in KEY_BIASES)


def broken_cancellation(w, x, y) -> dict[int, np.ndarray]:
    """What each key bias's gradient becomes where a softmax's backward drops its row term (ds = p dp, not
    p (dp - Σ p dp)): Σ over samples and queries of (Σ_k p dp) q / sqrt(hd), its terms no longer cancelling."""
    tr, bw = traced(w, x, y)
    out = {}
    for i, blk, adj in zip(tol.vanishing_terms(tr, bw), tr.blocks, bw.blocks, strict=True):
        a = blk.attn
        row = (a.p * adj.attn.dp).sum(-1)
        out[i] = np.einsum("bhi,bhid->hd", row, a.q) / math.sqrt(a.q.shape[-1])
    return out


def planted_verdict(saved: dict, w, x, y, device: str) -> dict:
    planted = dict(saved)
    for i, g in broken_cancellation(w, x, y).items():
        planted[f"grad/{i:03d}"] = saved[f"grad/{i:03d}"] + g.astype(np.float32)
    return verdict(planted, w, x, y, device=device)


def test_a_key_bias_whose_terms_do_not_cancel_is_caught_on_a_tpu(on_a_tpu):
    w, x, y, saved = on_a_tpu
    row = planted_verdict(saved, w, x, y, "tpu")
    assert not row["passed"] and row["figures"]["jax_vs_f64"] > 10, row["detail"]
    assert "worst: JAX block1_attn.key_bias" in row["detail"]


@pytest.mark.parametrize("attention", ATTENTION)
def test_a_key_bias_whose_terms_do_not_cancel_is_caught_on_the_cpu(attention):
    w, x, y = case()
    saved = jax_grads(w, x, y, attention, bf16=False)
    assert verdict(saved, w, x, y, device="cpu")["passed"]
    row = planted_verdict(saved, w, x, y, "cpu")
    assert not row["passed"] and row["figures"]["jax_vs_f64"] > 10, row["detail"]
    assert "worst: JAX block1_attn.key_bias" in row["detail"]
