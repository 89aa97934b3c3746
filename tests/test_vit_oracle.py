"""The ViT's float64 oracle and its derived float32 bounds, in NumPy alone: every gradient and the layers' input
gradients against central differences, the forward pass against a per-sample computation in Keras's einsums, the
softmax's and LayerNorm's edge cases, NumPy's own float32 arithmetic (the oracle run in float32) within the derived
bounds and a planted 1e-3 error in one weight outside them, and the bounds' tables and monotonicity, at tiny shapes."""

import math

import numpy as np
import pytest

from parity.api.vit import LN_EPSILON, PIXEL_SCALE, VitArchitecture
from parity.common.float64 import conv2d, errors
from parity.common.tolerances import F32_UNIT_ROUNDOFF
from parity.workloads.trained.data import synthetic
from parity.workloads.vit import errors as vit_errors
from parity.workloads.vit import oracle
from parity.workloads.vit import tolerances as tol
from parity.workloads.vit.spec import VIT_CPU

TINY = VitArchitecture(dim=8, depth=2, heads=2, mlp=8)
SMALL = VitArchitecture(dim=16, depth=2, heads=2, mlp=32)


def weights(arch: VitArchitecture, seed: int = 0, scale: float = 1.0, dtype=np.float32) -> list[np.ndarray]:
    """Random weights in kind: gammas near 1, small betas, biases and position embeddings, kernels of variance
    scale^2 / fan-in (scale 3: large scores and saturated softmaxes, as trained weights may have)."""
    rng = np.random.default_rng(seed)
    out = []
    for w in arch.weights:
        if w.field == "gamma":
            a = 1 + 0.1 * rng.normal(size=w.shape)
        elif w.field in ("beta", "embeddings") or "bias" in w.field:
            a = 0.05 * rng.normal(size=w.shape)
        else:
            projection = w.field in ("query_kernel", "key_kernel", "value_kernel")  # (D, H, hd): D inputs
            fan_in = w.shape[0] if projection else int(np.prod(w.shape[:-1]))
            a = rng.normal(size=w.shape) * scale / math.sqrt(fan_in)
        out.append(a.astype(dtype))
    return out


def batch(b: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    ds = synthetic(train_size=b, test_size=1, seed=seed)
    return ds.x_train.astype(np.float32), ds.y_train


# ---- the oracle against central differences


def _loss(w, x, y) -> float:
    logits = oracle.vit_trace(w, x).logits
    top = logits.max(-1)
    return float(np.mean(top + np.log(np.exp(logits - top[:, None]).sum(-1)) - logits[np.arange(len(y)), y]))


def test_gradients_match_central_differences():
    """Every gradient element of a 2-block, width-8 ViT on 2 images, against (L(w + h) - L(w - h)) / 2h, h = 1e-5:
    truncation and rounding near 1e-9 of max |gradient|, inside 1e-8, where no token's LayerNorm divides by a
    near-zero spread (at width 4, a black patch at a small position embedding makes the loss's third derivative 10^5
    times its gradient: truncation 3e-6 at this h). The key bias's gradient is zero in exact arithmetic (the
    softmax ignores what every key adds alike): float64 rounding on both sides."""
    w = weights(TINY, seed=1, dtype=np.float64)
    w[2] += np.random.default_rng(1).normal(0, 0.5, w[2].shape)  # no token near-constant: LayerNorm well-conditioned
    x, y = batch(2, seed=1)
    _, grads = oracle.loss_and_grads(w, x, y)
    assert [g.shape for g in grads] == [v.shape for v in TINY.weights]
    top, h = max(float(np.max(np.abs(g))) for g in grads), 1e-5
    for i, (g, spec) in enumerate(zip(grads, TINY.weights, strict=True)):
        fd = np.zeros_like(g)
        for k in np.ndindex(g.shape):
            up, down = [a.copy() for a in w], [a.copy() for a in w]
            up[i][k] += h
            down[i][k] -= h
            fd[k] = (_loss(up, x, y) - _loss(down, x, y)) / (2 * h)
        if spec.field == "key_bias":
            assert np.max(np.abs(g)) < 1e-14 * top and np.max(np.abs(fd)) < 1e-8 * top, spec.name
        else:
            assert np.max(np.abs(fd - g)) <= 1e-8 * np.max(np.abs(g)), spec.name


def _input_gradient_check(f, backward, x: np.ndarray, seed: int) -> None:
    """backward(dout) against central differences of <dout, f(x)> in each element of x."""
    dout = np.random.default_rng(seed).normal(size=f(x).shape)
    got, fd, h = backward(dout), np.zeros_like(x), 1e-6
    for k in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[k] += h
        down[k] -= h
        fd[k] = (np.sum(dout * f(up)) - np.sum(dout * f(down))) / (2 * h)
    assert np.max(np.abs(fd - got)) <= 1e-7 * np.max(np.abs(got))


def test_the_layers_input_gradients_match_central_differences():
    """LayerNorm's, the attention's and a whole block's gradient for their input (the parts no weight's gradient
    isolates), on 3 tokens of width 8."""
    w = weights(TINY, seed=2, scale=2.0, dtype=np.float64)
    _, p = oracle.named(w)
    x = np.random.default_rng(3).normal(size=(2, 3, TINY.dim))
    gamma, beta = p["block1_ln1.gamma"], p["block1_ln1.beta"]
    _input_gradient_check(lambda a: oracle.Norm.run(a, gamma, beta).out,
                          lambda d: oracle.Norm.run(x, gamma, beta).backward(d)[0], x, 0)  # fmt: skip
    attn = {k.split(".")[1]: v for k, v in p.items() if k.startswith("block1_attn.")}
    _input_gradient_check(lambda a: oracle.Attention.run(a, attn).out,
                          lambda d: oracle.Attention.run(x, attn).backward(d).dx, x, 1)  # fmt: skip
    _input_gradient_check(lambda a: oracle.Block.run(a, p, "block2").out,
                          lambda d: oracle.Block.run(x, p, "block2").backward(d, p, "block2").dx, x, 2)  # fmt: skip


# ---- the forward pass against a straightforward computation


def _per_sample(w: list[np.ndarray], image: np.ndarray, arch: VitArchitecture) -> dict[str, np.ndarray]:
    """One image through the model as its contract states it: a stride-4 VALID conv, Keras's attention einsums,
    np.var's LayerNorm, math.erf's GELU, one softmax row at a time."""
    named = dict(zip((v.name for v in arch.weights), (np.asarray(a, np.float64) for a in w), strict=True))
    t = conv2d(image[None].astype(np.float64) * PIXEL_SCALE, named["patch_embed.kernel"], 4, "VALID")[0]
    t = t.reshape(arch.tokens, arch.dim) + named["patch_embed.bias"] + named["pos_embed.embeddings"]
    out = {"embed": t}

    def ln(a, name):
        normed = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + LN_EPSILON)
        return normed * named[f"{name}.gamma"] + named[f"{name}.beta"]

    def softmax_rows(z):
        return np.array([np.exp(r - r.max()) / np.exp(r - r.max()).sum() for r in z.reshape(-1, z.shape[-1])])

    gelu = np.vectorize(lambda z: 0.5 * z * (1 + math.erf(z / math.sqrt(2))))
    for b in arch.block_names:
        a = ln(t, f"{b}_ln1")
        q, kk, v = (np.einsum("td,dhk->thk", a, named[f"{b}_attn.{n}_kernel"]) + named[f"{b}_attn.{n}_bias"]
                    for n in ("query", "key", "value"))  # fmt: skip
        s = np.einsum("qhk,thk->hqt", q, kk) / math.sqrt(arch.head_dim)
        p = softmax_rows(s).reshape(s.shape)
        o = np.einsum("hqt,thk->qhk", p, v)
        t = t + np.einsum("qhk,hkd->qd", o, named[f"{b}_attn.output_kernel"]) + named[f"{b}_attn.output_bias"]
        m = gelu(ln(t, f"{b}_ln2") @ named[f"{b}_mlp1.kernel"] + named[f"{b}_mlp1.bias"])
        t = t + m @ named[f"{b}_mlp2.kernel"] + named[f"{b}_mlp2.bias"]
        out[b] = t
    out["pool"] = ln(t, "norm").mean(0)
    out["logits"] = out["pool"] @ named["dense.kernel"] + named["dense.bias"]
    out["probs"] = softmax_rows(out["logits"][None])[0]
    return out


@pytest.mark.parametrize("arch", [TINY, VitArchitecture(dim=6, depth=1, heads=3, mlp=5)], ids=["2x2heads", "3heads"])
def test_forward_matches_a_per_sample_computation(arch):
    w = weights(arch, seed=4, scale=2.0)
    x, _ = batch(3, seed=4)
    got = oracle.forward(w, x)
    assert list(got) == list(arch.blocks.values())
    assert got["embed"].shape == (3, 49, arch.dim) and got["pool"].shape == (3, arch.dim)
    for n in range(3):
        want = _per_sample(w, x[n], arch)
        for b in got:
            np.testing.assert_allclose(got[b][n], want[b], rtol=1e-12, atol=1e-13)


def test_the_oracle_refuses_weights_and_images_of_another_shape():
    w = weights(TINY)
    with pytest.raises(ValueError, match="block1_mlp2.kernel"):
        oracle.forward([*w[:17], w[17][:, :3], *w[18:]], batch(2)[0])
    with pytest.raises(ValueError, match="ViT"):
        oracle.forward(w[:-1], batch(2)[0])
    with pytest.raises(ValueError, match="images of shape"):
        oracle.forward(w, batch(2)[0][:, :14])


# ---- edge cases


def test_softmax_and_layernorm_edge_cases():
    """The softmax of large or equal scores: no overflow, uniform where equal; a LayerNorm of a constant token: its
    variance zero, epsilon keeps it finite (the output is beta), as is its gradient; a shift of every feature alike
    changes nothing; GELU's erf against math.erf and its derivative against central differences."""
    p = oracle.softmax(np.array([[1000.0, 0.0, -1000.0], [3.0, 3.0, 3.0]]))
    assert np.all(np.isfinite(p)) and p[0, 0] == 1.0 and np.allclose(p[1], 1 / 3, rtol=1e-15)
    gamma, beta = np.array([1.0, 2.0, 3.0]), np.array([0.5, -0.5, 0.25])
    flat = oracle.Norm.run(np.full((1, 1, 3), 7.0), gamma, beta)
    assert np.allclose(flat.out, beta, atol=1e-12) and flat.rstd[0, 0, 0] == pytest.approx(1 / math.sqrt(LN_EPSILON))
    assert all(np.all(np.isfinite(g)) for g in flat.backward(np.ones((1, 1, 3))))
    x = np.random.default_rng(5).normal(size=(2, 5, 3))
    np.testing.assert_allclose(oracle.Norm.run(x + 100.0, gamma, beta).out, oracle.Norm.run(x, gamma, beta).out,
                               rtol=1e-11, atol=1e-11)  # fmt: skip
    z = np.linspace(-9.0, 9.0, 181)
    np.testing.assert_allclose(oracle.erf(z), [math.erf(v) for v in z], rtol=4e-16, atol=4e-16)
    h = 1e-6
    np.testing.assert_allclose(oracle.gelu_grad(z), (oracle.gelu(z + h) - oracle.gelu(z - h)) / (2 * h), atol=1e-9)


# ---- NumPy's own float32 arithmetic against the derived bounds


def run(w, x, y, dtype=np.float64) -> tuple[dict, float, list[np.ndarray]]:
    """The oracle's blocks, loss and gradients computed in `dtype` (float32: NumPy's own arithmetic, BLAS's float32
    products and pairwise sums, a framework's stand-in)."""
    tr = oracle.vit_trace(w, x, dtype)
    bw = oracle.vit_backward(tr, y)
    blocks = {"embed": tr.embed, **{n: b.out for n, b in zip(tr.arch.block_names, tr.blocks, strict=True)}}
    return {**blocks, "pool": tr.pool, "logits": tr.logits, "probs": tr.probs}, bw.loss, bw.grads


def ratios(ref: tuple, got: tuple, blocks: dict, bounds: dict) -> tuple[float, float, float]:
    """Errors of `got` against `ref` (each run()'s) as fractions of their derived bounds: the worst forward block's,
    the loss's, the worst gradient's (as an absolute error, vit_bounds' grad_abs)."""
    fwd = max(errors(got[0][b], ref[0][b])["max_rel_err"] / blocks[b] for b in blocks)
    loss = abs(got[1] - ref[1]) / ref[1] / bounds["loss"]
    grads = max(float(np.max(np.abs(g - r))) / t for g, r, t in zip(got[2], ref[2], bounds["grad_abs"], strict=True))
    return fwd, loss, grads


def derived(w, x, y) -> tuple[dict, dict]:
    return tol.vit_forward_tolerances(w, x), tol.vit_bounds(w, x, y, "cpu", "highest")


PLANTED = ("block1_attn.query_kernel", "block2_mlp1.kernel")


def planted_ratio(w, x, y, ref, blocks, bounds, name: str) -> float:
    """How far a 1e-3 error in one weight array moves the float64 oracle, as a multiple of the bound it must fail:
    the worst of the forward blocks' and the gradients' figures (the loss's left out: too little to judge alone)."""
    i = [v.name for v in TINY.weights].index(name)
    w = [a * np.float32(1.001) if k == i else a for k, a in enumerate(w)]
    fwd, _, grads = ratios(ref, run(w, x, y), blocks, bounds)
    return max(fwd, grads)


@pytest.mark.parametrize("seed,scale", [(0, 1.0), (1, 3.0)], ids=["initial", "saturating"])
def test_float32_lies_within_the_derived_bounds_and_a_planted_error_outside(seed, scale):
    """Width 16, 2 blocks, 4 images: float32's errors are a fraction of each bound; a 1e-3 error planted in one
    weight array (a query kernel, an MLP kernel) is more than twice its bound in a forward block or a gradient."""
    arch = VitArchitecture(dim=16, depth=2, heads=2, mlp=32)
    assert [v.name for v in arch.weights] == [v.name for v in TINY.weights]
    w, (x, y) = weights(arch, seed, scale), batch(4, seed)
    ref, (blocks, bounds) = run(w, x, y), derived(w, x, y)
    assert max(ratios(ref, run(w, x, y, np.float32), blocks, bounds)) < 1
    assert min(planted_ratio(w, x, y, ref, blocks, bounds, name) for name in PLANTED) > 2


def test_the_cpu_defaults_bounds_hold_float32_and_catch_a_planted_error():
    """The CPU default's model (width 64, 2 blocks of 4 heads, MLP 256) on 8 images: the same two claims."""
    arch = VIT_CPU.architecture
    w, (x, y) = weights(arch, seed=2), batch(8, seed=2)
    ref, (blocks, bounds) = run(w, x, y), derived(w, x, y)
    assert max(blocks.values()) < 1e-4 and max(bounds["grad_abs"]) < 1e-4
    assert max(ratios(ref, run(w, x, y, np.float32), blocks, bounds)) < 1
    assert min(planted_ratio(w, x, y, ref, blocks, bounds, name) for name in PLANTED) > 2


# ---- the bounds' tables and what they grow with


def test_every_bound_is_finite_and_positive_and_the_checks_functions_agree():
    w, (x, y) = weights(TINY, seed=3), batch(3, seed=3)
    blocks, bounds = derived(w, x, y)
    assert list(blocks) == list(TINY.blocks.values())
    assert all(0 < v < 1e-3 for v in blocks.values()) and 0 < bounds["loss"] < 1e-3
    assert len(bounds["grads"]) == len(bounds["grad_abs"]) == len(TINY.weights)
    assert all(0 < b < np.inf for b in bounds["grad_abs"]) and all(b > 0 for b in bounds["grads"])
    assert bounds["forward"] == max(blocks.values()) == tol.vit_forward_tolerance(w, x, "cpu", "highest")
    assert tol.vit_block_tolerances(w, x, "cpu", "default") == blocks  # the CPU multiplies in float32 either way


def test_the_bounds_grow_with_the_input_error_and_the_reduction_length():
    """A layer's output error grows with its input's (LayerNorm's, the attention's, a block's, elementwise), and a
    reduction's own rounding with its length: u sqrt(n) of its terms' sum."""
    w, x = weights(TINY, seed=4), batch(2, seed=4)[0]
    tr = oracle.vit_trace(w, x)
    blk, small = tr.blocks[0], vit_errors.U * np.abs(tr.embed)
    for errs in (
        lambda sd: vit_errors.NormErrors(blk.ln1, sd),
        lambda sd: vit_errors.AttentionErrors(blk.attn, sd),
        lambda sd: vit_errors.BlockErrors(blk, sd, tr.weights, "block1"),
    ):
        lo, hi = errs(small).out, errs(10 * small).out
        assert np.all(hi >= lo) and np.any(hi > lo)
    for n in (16, 64, 256):
        sd = vit_errors._dense_sd(np.zeros((1, n)), np.ones((1, n)), np.ones((n, 1)))
        assert sd[0, 0] == pytest.approx(F32_UNIT_ROUNDOFF * math.sqrt(n) * n)


def test_reduced_precision_and_bfloat16_tables():
    """TF32 and bfloat16 passes ('default' on GPUs and TPUs): at least the CNN's reduced table; mixed precision:
    3 u sqrt(2 R) with R = 10 + 20 per block, above float32's and growing with the depth."""
    w, (x, y) = weights(TINY), batch(2)
    assert tol.vit_forward_tolerance(w, x, "tpu", "default") >= tol.VIT_TOLERANCES_REDUCED["forward"]
    assert min(tol.vit_bounds(w, x, y, "gpu", "default")["grads"]) >= tol.VIT_TOLERANCES_REDUCED["grads"]
    assert tol.vit_forward_tolerance(w, x, "gpu", "highest") < 1e-4
    assert tol.vit_tolerances("cpu", "highest") == tol.VIT_TOLERANCES
    assert tol.vit_tolerances("tpu", "default")["trajectory_loss"] == tol.VIT_TOLERANCES_REDUCED["trajectory_loss"]
    f32 = tol.vit_tolerances("cpu", "highest")
    for depth in (1, 2, 4, 6):
        bf16 = tol.vit_tolerances("cpu", "highest", "bfloat16", depth)
        assert bf16["trajectory_loss"] == pytest.approx(3 * 2**-8 * math.sqrt(2 * (10 + 20 * depth)))
        assert bf16["trajectory_params"] == 2 * bf16["trajectory_loss"]
        assert bf16["trajectory_loss"] > f32["trajectory_loss"] and bf16["trajectory_params"] > f32["trajectory_params"]
    assert tol.bf16_loss_tolerance(6) > tol.bf16_loss_tolerance(4) > tol.bf16_loss_tolerance(2)


def test_numerics_page_quotes_the_bfloat16_bounds():
    """docs/numerics-models.md's mixed-precision figures are bf16_loss_tolerance's at the CPU default's and the full
    depth."""
    from pathlib import Path

    from parity.workloads.vit.spec import VIT_CPU, VIT_FULL
    from parity.workloads.vit.tolerances import bf16_loss_tolerance

    page = " ".join((Path(__file__).resolve().parent.parent / "docs/numerics-models.md").read_text().split())
    cpu, full = (f"{bf16_loss_tolerance(s.depth):.3f}" for s in (VIT_CPU, VIT_FULL))
    assert (
        f"**{cpu}** at the CPU default's {VIT_CPU.depth} blocks, **{full}** at the full size's {VIT_FULL.depth}" in page
    )


def test_workloads_page_quotes_the_cpu_defaults_size():
    """docs/workloads.md's figures for the CPU default's step are VIT_CPU's."""
    from pathlib import Path

    from parity.workloads.vit.spec import VIT_CPU

    page = " ".join((Path(__file__).resolve().parent.parent / "docs/workloads.md").read_text().split())
    rows = VIT_CPU.architecture.tokens * VIT_CPU.global_batch
    said = f"({VIT_CPU.architecture.tokens} tokens x {VIT_CPU.global_batch} images = {rows:,} rows by"
    assert said in page and f"{VIT_CPU.step_flops() / 1e9:.1f} GFLOP a step" in page
