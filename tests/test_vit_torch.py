"""The ViT in PyTorch against the float64 oracle (parity.workloads.vit.oracle) within the bounds derived on the same
inputs (parity.workloads.vit.tolerances): Keras's weights and layouts, every block, the loss and every gradient, both
attention paths (written out, and PyTorch's fused scaled_dot_product_attention), each convention PyTorch's or JAX's
default would break, every variant on the one device; tiny sizes (the compiled ones slow)."""

import numpy as np
import pytest
import torch
from adapter_checks import check_float32_counterparts, check_torch_variants_are_its_own, check_weights_round_trip
from frameworks_setup import TORCH_DEVICES
from test_torch_conventions import _poured

import torch_impl
from parity.api.variants import ONE
from parity.api.vit import LN_EPSILON, VitArchitecture
from parity.workloads.trained.checks import trajectory
from parity.workloads.vit import oracle
from parity.workloads.vit.tolerances import bf16_loss_tolerance, vit_block_tolerances, vit_bounds, vit_tolerances
from torch_impl import vit

ARCH = VitArchitecture(dim=8, depth=1, heads=2, mlp=16)
SIZES, BATCH = (ARCH.dim, ARCH.depth, ARCH.heads, ARCH.mlp), 4
PATHS = pytest.mark.parametrize("fused", [False, True], ids=["written", "sdpa"])  # the attention's two paths
COUNTER = "torch.utils.flop_counter"


def images(n=BATCH, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 28, 28, 1)).astype(np.float32), rng.integers(0, 10, n)


def random_weights(arch=ARCH, seed=1):
    """Every array drawn, the biases included, so that each one matters; LayerNorm's gammas about 1; the patch and
    position embeddings small (sd 0.03: a ViT's scale at initialisation, its position embedding's 0.02), where
    LayerNorm's epsilon is felt."""
    rng = np.random.default_rng(seed)
    out = []
    for w in arch.weights:
        sd = 0.03 if w.layer in ("patch_embed", "pos_embed") else 0.4
        out.append((1.0 if w.field == "gamma" else 0.0) + rng.normal(0, 0.2 if w.field == "gamma" else sd, w.shape))
    return [a.astype(np.float32) for a in out]


def model_with(weights, fused=False):
    m = torch_impl.adapter("vit").build(*SIZES)
    torch_impl.adapter("vit").set_weights(m, weights)
    m.fused = fused  # what the '+sdpa' variants set (vit.train_with)
    return m


def rel(got, ref):
    return float(np.max(np.abs(np.asarray(got, np.float64) - ref)) / np.max(np.abs(ref)))


# ---- weights ----


def test_weights_round_trip_in_keras_order(tmp_path):
    w, adapter = random_weights(), torch_impl.adapter("vit")
    check_weights_round_trip(adapter, model_with(w), w, adapter.build(*SIZES, seed=5), tmp_path / "w.npz", ARCH.weights)


def test_weights_taken_are_a_copy_training_leaves_alone():
    w = random_weights()
    m = model_with(w)
    taken = torch_impl.adapter("vit").get_weights(m)
    with torch.no_grad():  # as Trainer.model() writes the trained weights back into the model
        for p in m.parameters():
            p.add_(1.0)
    assert all(np.array_equal(a, b) for a, b in zip(w, taken, strict=True))


def test_weights_for_other_sizes_are_refused():
    m = torch_impl.adapter("vit").build(*SIZES)
    with pytest.raises(ValueError, match="block1_attn.query_kernel"):  # 4 heads of 2, not 2 of 4
        torch_impl.adapter("vit").set_weights(m, random_weights(VitArchitecture(8, 1, 4, 16)))
    with pytest.raises(ValueError, match="expected 23 weight arrays"):
        torch_impl.adapter("vit").set_weights(m, random_weights()[:-1])


def test_parameters_are_counted_as_keras_does_and_every_one_trains():
    m, n = torch_impl.adapter("vit").build(*SIZES), ARCH.params()
    assert torch_impl.adapter("vit").count_params(m) == {"total": n, "trainable": n, "non_trainable": 0}
    assert sum(p.numel() for p in m.parameters() if p.requires_grad) == sum(p.numel() for p in m.parameters()) == n


def test_weights_start_as_kerass_initialisers_draw_them():
    """Kernels glorot_uniform: within L = sqrt(6 / (fan_in + fan_out)) and reaching L/2 (the attention's as a dense
    layer D -> D); biases and betas zero, gammas one; the position embedding normal(0, 0.02) (its sample sd within
    six of its own sd, 0.02 / sqrt(2n)); another seed, other numbers."""
    m = torch_impl.adapter("vit").build(*SIZES, seed=3)
    for w, a in zip(ARCH.weights, torch_impl.adapter("vit").get_weights(m), strict=True):
        if w.field.endswith("kernel"):
            fans = ARCH.dim * 2 if w.layer.endswith("_attn") else np.prod(a.shape[:-2]) * sum(a.shape[-2:])
            assert np.sqrt(6 / fans) / 2 < np.abs(a).max() <= np.sqrt(6 / fans), w.name
        elif w.field == "embeddings":
            assert abs(a.std() - vit.POS_STD) < 6 * vit.POS_STD / np.sqrt(2 * a.size), w.name
        else:
            assert np.array_equal(a, np.full_like(a, w.field == "gamma")), w.name
    assert not np.array_equal(
        torch_impl.adapter("vit").get_weights(m)[0],
        torch_impl.adapter("vit").get_weights(torch_impl.adapter("vit").build(*SIZES))[0],
    )


# ---- the forward pass: every block, both attention paths ----


@PATHS
def test_forward_blocks_are_the_oracles(fused):
    w, (x, _) = random_weights(), images()
    got, ref = torch_impl.adapter("vit").forward_layers(model_with(w, fused), x), oracle.forward(w, x)
    tols = vit_block_tolerances(w, x, "cpu", "highest")  # each block's bound, derived on these inputs
    assert list(got) == list(ARCH.blocks.values()) == list(ref)
    for k, a in got.items():
        assert a.shape == ref[k].shape and a.dtype == np.float32, k
        assert rel(a, ref[k]) <= tols[k], (k, rel(a, ref[k]), tols[k])


def _ops(m, x) -> set[str]:
    with torch.profiler.profile() as prof:
        torch_impl.adapter("vit").forward_layers(m, x)
    return {e.key for e in prof.key_averages()}


def test_the_two_attention_paths_agree_and_run_different_ops():
    """Each within its block's bound of float64, so within twice it of each other; the fused path runs PyTorch's
    one attention op, the written one its matmuls."""
    w, (x, _) = random_weights(), images()
    written, fused = (torch_impl.adapter("vit").forward_layers(model_with(w, f), x) for f in (False, True))
    tols = vit_block_tolerances(w, x, "cpu", "highest")
    assert all(rel(fused[k], written[k].astype(np.float64)) <= 2 * tols[k] for k in tols)
    ops = [_ops(model_with(w, f), x) for f in (False, True)]
    assert "aten::scaled_dot_product_attention" in ops[1] - ops[0] and "aten::matmul" in ops[0] - ops[1]


# ---- the loss and every gradient ----


@PATHS
def test_loss_and_gradients_are_the_oracles(fused):
    """Every gradient within its derived bound as an absolute error (vit_bounds' grad_abs): the key bias's, zero in
    exact arithmetic (the softmax ignores a shift every key of a query shares), on its terms' scale. The model is
    left as it was."""
    w, (x, y) = random_weights(), images()
    m = model_with(w, fused)
    g = torch_impl.adapter("vit").loss_and_grads(m, x, y)
    loss, grads = oracle.loss_and_grads(w, x, y)
    bounds = vit_bounds(w, x, y, "cpu", "highest")
    assert g.routing == [] and [a.shape for a in g.grads] == [t.shape for t in ARCH.weights]
    assert abs(g.loss - loss) <= bounds["loss"] * loss
    for t, a, ref, bound in zip(ARCH.weights, g.grads, grads, bounds["grad_abs"], strict=True):
        assert a.dtype == np.float32 and np.max(np.abs(a - ref)) <= bound, (t.name, np.max(np.abs(a - ref)), bound)
    assert all(np.array_equal(a, b) for a, b in zip(w, torch_impl.adapter("vit").get_weights(m), strict=True))


# ---- each convention: within the bounds with it, beyond them with a default put back ----


def _forward_figure() -> float:
    """The worst block's error against float64 over its derived bound."""
    w, (x, _) = random_weights(), images()
    got, ref = torch_impl.adapter("vit").forward_layers(model_with(w), x), oracle.forward(w, x)
    tols = vit_block_tolerances(w, x, "cpu", "highest")
    return max(rel(got[k], ref[k]) / tols[k] for k in tols)


def _grads_figure() -> float:
    """The worst gradient's error against float64 over its derived bound."""
    w, (x, y) = random_weights(), images()
    g, (_, grads) = torch_impl.adapter("vit").loss_and_grads(model_with(w), x, y), oracle.loss_and_grads(w, x, y)
    bounds = vit_bounds(w, x, y, "cpu", "highest")["grad_abs"]
    return max(np.max(np.abs(a - r)) / b for a, r, b in zip(g.grads, grads, bounds, strict=True))


def _set(name, value):
    """An undo: torch_impl.vit's `name` replaced by `value` for the test (the model reads it as it is built or
    runs)."""
    return lambda mp: mp.setattr(vit, name, value)


# what torch_impl.vit sets: (figure() -> the error over its bound, undo(monkeypatch) putting a default back)
CONVENTIONS = {
    "layernorm epsilon 1e-6 (torch's 1e-5)": (_forward_figure, _set("LN_EPSILON", 1e-5)),
    "gelu exact (jax's and flax's tanh)": (_forward_figure, _set("_gelu", lambda: torch.nn.GELU(approximate="tanh"))),
    "patch kernel HWIO to OIHW": (_forward_figure, _set("to_torch", _poured(4))),
    "dense kernels (in, out) to (out, in)": (_forward_figure, _set("to_torch", _poured(2))),
    "tokens in (h, w) order, not (w, h)": (
        _forward_figure,
        _set("_tokens", lambda h: h.permute(0, 3, 2, 1).flatten(1, 2)),
    ),
    "tokens with channels last, not nchw's order": (
        _forward_figure,
        _set("_tokens", lambda h: h.reshape(len(h), -1, h.shape[1])),
    ),
    "gradients of kernels back to (in, out)": (_grads_figure, _set("to_keras", _poured(2, back=True))),
    "gradient of the patch kernel back to HWIO": (_grads_figure, _set("to_keras", _poured(4, back=True))),
}


@pytest.mark.parametrize("figure, undo", CONVENTIONS.values(), ids=CONVENTIONS)
def test_each_convention_keeps_its_figure_within_bounds_where_a_default_does_not(figure, undo, monkeypatch):
    assert figure() <= 1, "off with the convention"
    with monkeypatch.context() as mp:
        undo(mp)
        assert figure() > 1, "within with the default"


def test_every_layernorm_and_gelu_is_set_explicitly():
    m = torch_impl.adapter("vit").build(*SIZES)
    norms = [n for n in m.modules() if isinstance(n, torch.nn.LayerNorm)]
    assert len(norms) == 2 * ARCH.depth + 1 and all(n.eps == LN_EPSILON for n in norms)
    assert [g.approximate for g in m.modules() if isinstance(g, torch.nn.GELU)] == ["none"]


# ---- training: every variant, on the one device ----


def _stepwise(variant, w, steps=3):
    """A trainer's per-step [loss, accuracy], each step's weights before it and its batch."""
    x, y = images(steps * BATCH, seed=4)
    x, y = x.reshape(steps, BATCH, 28, 28, 1), y.reshape(steps, BATCH)
    t = torch_impl.adapter("vit").make_trainer(model_with(w), TORCH_DEVICES, variant)
    rows = []
    for k in range(steps):
        before = torch_impl.adapter("vit").get_weights(t.model())
        rows.append((t.steps(x[k : k + 1], y[k : k + 1])[0], before, x[k], y[k]))
    return t, rows


def _trajectory(variant, t, rows):
    """A trainer's trajectory as a worker saves it, for parity.workloads.trained.checks.trajectory."""
    saved = {f"traj/{variant}/loss": np.array([r[0][0] for r in rows])}
    return saved | {
        f"traj/{variant}/w{i:03d}": a for i, a in enumerate(torch_impl.adapter("vit").get_weights(t.model()))
    }


def test_eager_and_sdpa_steps_are_the_same_losses():
    """Every step's loss within its derived bound of the float64 loss of the weights it trained from, in both
    attention paths; their first steps, from the same weights, within twice it of each other; the trajectories as
    the harness judges them."""
    w, saved, first = random_weights(), {}, {}
    for variant in ("eager", "eager+sdpa"):
        t, rows = _stepwise(variant, w)
        for (loss, _), before, x, y in rows:
            ref = oracle.loss_and_grads(before, x, y)[0]
            assert abs(loss - ref) <= vit_bounds(before, x, y, "cpu", "highest")["loss"] * ref, variant
        first[variant] = rows[0][0][0]
        saved |= _trajectory(variant, t, rows)
    x, y = images(BATCH, seed=4)
    bound = vit_bounds(w, x, y, "cpu", "highest")["loss"] * abs(first["eager"])
    assert abs(first["eager"] - first["eager+sdpa"]) <= 2 * bound
    tols = vit_tolerances("cpu", "highest", depth=ARCH.depth)
    rows = trajectory(saved, saved, "eager", "eager+sdpa", tols, 1, ("torch", "torch"), None, ARCH.weights)
    assert len(rows) == 2 and all(r["passed"] for r in rows), rows


def test_every_eager_variant_trains_and_counts_its_products():
    """Each eager variant trains float32 parameters and Adam slots in its compute dtype; the counted FLOPs of a
    step: every product forward and its two backward ones but the patch embedding's input gradient (none taken),
    the fused attention's counted too; mixed precision within bfloat16's bound of its float32 counterpart."""
    w, saved = random_weights(), {}
    variants = torch_impl.variants("vit_train", 1)
    assert variants and all(v.span == ONE for v in variants)  # over several devices: test_torch_ddp.py
    assert any(v.options.compile for v in variants)  # the compiled one: test_the_compiled_step_is_the_eager_step
    written = BATCH * (3 * ARCH.forward_flops() - 2 * ARCH.tokens * ARCH.patch_pixels * ARCH.dim)
    for v in (v for v in variants if not v.options.compile):
        t, rows = _stepwise(v.name, w, steps=2)
        assert np.all(np.isfinite([r[0] for r in rows])) and t.compute_dtype == v.dtype, v.name
        assert t.batchnorm == "none" and t.kernel_path is None and t.placement() == ["cpu:0"], v.name
        assert t.compute.fused == v.options.sdpa, v.name
        assert all(p.dtype == torch.float32 for p in (*t.params, *t.state["m"], *t.state["v"])), v.name
        flops, source = t.step_cost()
        assert source == COUNTER and (flops == written if not v.options.sdpa else flops >= written), v.name
        saved |= _trajectory(v.name, t, rows)
    for v in (v for v in variants if v.dtype == "bfloat16"):
        tols = vit_tolerances("cpu", "highest", "bfloat16", depth=ARCH.depth)
        rows = trajectory(saved, saved, v.name, v.float32, tols, 1, ("torch", "torch"), None, ARCH.weights)
        assert all(r["passed"] for r in rows), rows


@pytest.mark.slow
def test_the_compiled_step_is_the_eager_step():
    """torch.compile's step (its first call compiles, tens of seconds): the eager step's loss within twice its
    derived bound, and the same trajectory as the harness judges it."""
    w = random_weights()
    (te, re), (tc, rc) = _stepwise("eager", w, steps=1), _stepwise("compile", w, steps=1)
    assert tc.compute_dtype == "float32" and tc.kernel_path is None
    x, y = images(BATCH, seed=4)
    bound = vit_bounds(w, x, y, "cpu", "highest")["loss"] * abs(re[0][0][0])
    assert abs(rc[0][0][0] - re[0][0][0]) <= 2 * bound
    saved = _trajectory("eager", te, re) | _trajectory("compile", tc, rc)
    tols = vit_tolerances("cpu", "highest", depth=ARCH.depth)
    assert all(
        r["passed"] for r in trajectory(saved, saved, "eager", "compile", tols, 1, ("a", "b"), None, ARCH.weights)
    )


def test_vit_variants_are_their_own_row_kinds():
    adapter = torch_impl.adapter("vit")
    check_torch_variants_are_its_own(adapter, adapter.build(*SIZES), images()[0], TORCH_DEVICES, "vit")
    with pytest.raises(ValueError, match="not a model torch_impl.vit builds"):
        torch_impl.adapter("vit").get_weights(torch.nn.Linear(2, 2))
    check_float32_counterparts(torch_impl, "vit_train")  # each bfloat16 variant's float32 counterpart: the same step


# ---- mixed precision and inference ----


def test_mixed_precision_computes_in_bfloat16_on_float32_parameters():
    """bfloat16 compute, float32 parameters and outputs: the probabilities within bfloat16's bound of float64 (one
    run's R roundings, LAMBDA u sqrt(R)) and beyond float32's."""
    w, (x, _) = random_weights(), images()
    m = torch_impl.adapter("vit").mixed_precision(model_with(w))
    assert m.mixed and all(
        np.array_equal(a, b) and b.dtype == np.float32
        for a, b in zip(w, torch_impl.adapter("vit").get_weights(m), strict=True)
    )
    out, ref = torch_impl.adapter("vit").forward_layers(m, x), oracle.forward(w, x)["probs"]
    assert out["logits"].dtype == out["probs"].dtype == np.float32
    bf16 = bf16_loss_tolerance(ARCH.depth) / np.sqrt(2)  # one run against exact arithmetic, not two runs' sqrt(2 R)
    assert vit_block_tolerances(w, x, "cpu", "highest")["probs"] < rel(out["probs"], ref) <= bf16


@pytest.mark.parametrize(
    "variant", ["predict", "predict+sdpa", pytest.param("predict+compile", marks=pytest.mark.slow)]
)
def test_inference_is_the_forward_pass(variant):
    """Each variant's probabilities within their derived bound of float64; its FLOPs counted, every product's (the
    fused attention's too), the architecture's formula."""
    w, (x, _) = random_weights(), images()
    p = torch_impl.adapter("vit").prepare_inference(model_with(w), x, TORCH_DEVICES, variant)
    out = p.run()
    assert p.shape(out) == (BATCH, 10) and p.placement(out) == ["cpu:0"] and p.kernel_path is None
    bound = vit_block_tolerances(w, x, "cpu", "highest")["probs"]
    assert rel(p.rows(out, range(BATCH)), oracle.forward(w, x)["probs"]) <= bound
    assert p.cost() == (BATCH * ARCH.forward_flops(), COUNTER)
