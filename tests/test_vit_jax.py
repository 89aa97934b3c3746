"""The ViT in Flax NNX: Keras's weights and layout, every block and gradient against the float64 oracle to bounds
derived from the shared rounding model, both attention paths, the conventions Flax's defaults would break, every
training variant, mixed precision and inference; tiny widths."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from adapter_checks import check_float32_counterparts, check_weights_round_trip
from flax import nnx
from frameworks_setup import JAX_DEVICES

import jax_impl
from jax_impl import vit
from parity.api.variants import MANY, ONE
from parity.api.vit import LN_EPSILON, VitArchitecture
from parity.common.float64 import errors
from parity.common.tolerances import ROUNDING_LAMBDA, rounding_bound
from parity.workloads.vit import oracle
from parity.workloads.vit.tolerances import bf16_loss_tolerance, vit_block_tolerances, vit_bounds

ARCH = VitArchitecture(dim=8, depth=1, heads=2, mlp=16)
BATCH, LR = 3, 1e-3
PATHS = ("einsum", "fused")
INFER = ("predict", "predict+fused")  # the inference variants of each path


def images(n=BATCH, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 28, 28, 1)).astype(np.float32), rng.integers(0, 10, n)


def random_weights(arch=ARCH, seed=1, **scaled):
    """Every array drawn alike, N(0, 0.4), the LayerNorms' and the biases included, so that each matters; `scaled`:
    a weight's name (dots as '__') -> a function of the drawn array."""
    rng = np.random.default_rng(seed)
    out = []
    for w in arch.weights:
        a = rng.normal(0, 0.4, w.shape)
        out.append(scaled.get(w.name.replace(".", "__"), lambda a: a)(a).astype(np.float32))
    return out


def model_with(weights, attention="einsum", arch=ARCH):
    m = jax_impl.adapter("vit").build(arch.dim, arch.depth, arch.heads, arch.mlp)
    jax_impl.adapter("vit").set_weights(m, weights)
    m.attention = attention
    return m


def rel(got, ref) -> float:
    return errors(got, ref)["max_rel_err"]


def block_bounds(weights, x) -> dict[str, float]:
    """Each forward block's float32 bound on these inputs, derived by the workload (parity.workloads.vit.tolerances)."""
    return vit_block_tolerances(weights, x, "cpu", "highest")


def grad_bounds(weights, x, y) -> tuple[float, list[float]]:
    """The loss's bound relative to it, and each gradient's bound as an absolute error (the key bias's gradient is 0
    in exact arithmetic: judged on its terms' scale), derived by the workload."""
    b = vit_bounds(weights, x, y, "cpu", "highest")
    return b["loss"], b["grad_abs"]


# ---- the model: Keras's weights ----


def test_weights_round_trip_in_keras_order(tmp_path):
    w, adapter = random_weights(), jax_impl.adapter("vit")
    m, other = model_with(w), adapter.build(ARCH.dim, ARCH.depth, ARCH.heads, ARCH.mlp, seed=5)
    check_weights_round_trip(adapter, m, w, other, tmp_path / "w.npz", ARCH.weights)
    n = ARCH.params()
    assert jax_impl.adapter("vit").count_params(m) == {"total": n, "trainable": n, "non_trainable": 0}


def test_a_weight_list_for_another_size_is_refused():
    m = model_with(random_weights())
    with pytest.raises(ValueError, match="patch_embed.kernel"):
        jax_impl.adapter("vit").set_weights(m, random_weights(VitArchitecture(dim=12, depth=1, heads=2, mlp=16)))
    with pytest.raises(ValueError, match="expected 23 weight arrays"):
        jax_impl.adapter("vit").set_weights(m, random_weights()[:-1])


@pytest.mark.parametrize(
    "sizes, match",
    [((8, 1, 3, 16), "divide"), ((8.0, 1, 2, 16), "dim"), ((8, 0, 2, 16), "depth"), ((8, 1, 2, True), "mlp")],
)
def test_sizes_out_of_their_bounds_are_refused(sizes, match):
    with pytest.raises(ValueError, match=match):
        jax_impl.adapter("vit").build(*sizes)


def test_a_seed_out_of_its_bounds_is_refused():
    with pytest.raises(ValueError, match="seed"):
        jax_impl.adapter("vit").build(8, 1, 2, 16, seed=-1)


# ---- the forward pass and the gradients against float64, both attention paths ----


@pytest.mark.parametrize("attention", PATHS)
def test_forward_blocks_match_the_oracle(attention):
    w, (x, _) = random_weights(), images()
    got, ref = jax_impl.adapter("vit").forward_layers(model_with(w, attention), x), oracle.forward(w, x)
    bounds = block_bounds(w, x)
    assert list(got) == list(ARCH.blocks.values()) == list(ref)
    for k, a in got.items():
        assert a.shape == ref[k].shape and a.dtype == np.float32, k
        assert rel(a, ref[k]) <= bounds[k], (k, rel(a, ref[k]), bounds[k])


def test_the_attention_paths_are_two_programs_of_one_function():
    w, (x, _) = random_weights(), images()
    bounds = block_bounds(w, x)
    einsum, fused = (jax_impl.adapter("vit").forward_layers(model_with(w, a), x) for a in PATHS)
    assert all(rel(fused[k], einsum[k]) <= 2 * bounds[k] for k in bounds)  # each within its bound of float64
    m = model_with(w, "einsum")
    programs = {
        a: jax_impl.adapter("vit").prepare_inference(m, x, JAX_DEVICES, v).program()
        for a, v in zip(PATHS, INFER, strict=True)
    }
    # the option reaches the program: Keras's einsum, or dot_product_attention's own (B, T, N, H) layout
    assert "bqhk,bthk->bhqt" in programs["einsum"] and "BTNH,BSNH->BNTS" not in programs["einsum"]
    assert "BTNH,BSNH->BNTS" in programs["fused"] and "bqhk,bthk->bhqt" not in programs["fused"]
    assert m.attention == "einsum"  # the variant's path on a copy


@pytest.mark.parametrize("attention", PATHS)
def test_loss_and_gradients_match_the_oracle(attention):
    w, (x, y) = random_weights(), images()
    m = model_with(w, attention)
    g = jax_impl.adapter("vit").loss_and_grads(m, x, y)
    assert all(
        np.array_equal(a, b) for a, b in zip(w, jax_impl.adapter("vit").get_weights(m), strict=True)
    )  # the model unchanged
    assert g.routing == [] and [a.shape for a in g.grads] == [t.shape for t in ARCH.weights]
    loss, ref = oracle.loss_and_grads(w, x, y)
    loss_bound, grad_abs = grad_bounds(w, x, y)
    assert abs(g.loss - loss) <= loss_bound * loss
    for t, a, r, bound in zip(ARCH.weights, g.grads, ref, grad_abs, strict=True):
        assert a.dtype == np.float32 and np.max(np.abs(a - r)) <= bound, t.name


# ---- the conventions: each within the bounds as set, beyond them with another framework's default ----


def eager_blocks(m, x) -> dict[str, np.ndarray]:
    """forward_layers without jit (a compiled program would keep the gelu it traced first)."""
    return {k: np.asarray(v) for k, v in m.blocks(jnp.asarray(x)).items()}


def _worst(m, w, x) -> float:
    """The worst block's error over its bound."""
    got, ref, bounds = eager_blocks(m, x), oracle.forward(w, x), block_bounds(w, x)
    return max(rel(got[k], ref[k]) / bounds[k] for k in bounds)


# The MLP's inputs near -3, where GELU's tanh form is 10% off the exact one, and its second kernel large, so that
# the MLP's branch carries the block's output
GELU_CASE = {"block1_mlp1__bias": lambda a: a - 3.0, "block1_mlp2__kernel": lambda a: 100.0 * a}
# Tokens of a small spread (their variance near 1e-4): an epsilon of 1e-3 or 1e-5 moves 1/std by 500% or 5%
EPSILON_CASE = {"patch_embed__kernel": lambda a: 0.01 * a, "pos_embed__embeddings": lambda a: 0.01 * a}


@pytest.mark.parametrize(
    "case, undo",
    [
        (GELU_CASE, lambda mp: mp.setattr(vit, "gelu", jax.nn.gelu)),  # jax.nn.gelu's and Flax's default: tanh
        (EPSILON_CASE, lambda mp: mp.setattr(vit, "LN_EPSILON", 1e-3)),  # Keras's default
        (EPSILON_CASE, lambda mp: mp.setattr(vit, "LN_EPSILON", 1e-5)),  # PyTorch's
    ],
    ids=["gelu tanh", "epsilon keras", "epsilon torch"],
)
def test_each_convention_keeps_the_blocks_within_their_bounds_where_a_default_does_not(case, undo, monkeypatch):
    w, (x, _) = random_weights(**case), images()
    assert _worst(model_with(w), w, x) <= 1.0
    with monkeypatch.context() as mp:
        undo(mp)
        assert _worst(model_with(w), w, x) > 1.0


def test_layer_norm_takes_the_variance_as_the_mean_of_squared_deviations():
    """Tokens of mean 1000 and spread 1: Flax's default variance, E[x^2] - E[x]^2, loses 6e-8 x 1000^2 of it (the
    workload's tolerances allow for that form, the larger error, on every side: judged here by the two-pass one's)."""
    rng = np.random.default_rng(3)
    x = (1000.0 + rng.normal(0, 1, (4, ARCH.dim))).astype(np.float32)
    ref = oracle.Norm.run(x, np.ones(ARCH.dim), np.zeros(ARCH.dim))
    # the mean's and the variance's sums (the shared model), an error relative to the input's scale carried to the
    # output's by max |x| max(1/std) / max |xhat|
    gain = np.abs(ref.x).max() * ref.rstd.max() / np.abs(ref.xhat).max()
    bound = rounding_bound([ARCH.dim, ARCH.dim]) * gain
    ln = vit.layer_norm(ARCH.dim, nnx.Rngs(0))
    assert ln.epsilon == LN_EPSILON == 1e-6  # Flax's default too: Keras's (1e-3) and PyTorch's (1e-5) differ
    assert rel(ln(jnp.asarray(x)), ref.out) <= bound
    fast = nnx.LayerNorm(ARCH.dim, epsilon=LN_EPSILON, rngs=nnx.Rngs(0))  # Flax's use_fast_variance=True
    assert rel(fast(jnp.asarray(x)), ref.out) > 10 * bound


def test_gelu_is_the_exact_form_and_its_derivative_is_exact_too():
    z = np.linspace(-6, 6, 1200).astype(np.float32)  # no 0: errors relative to each value
    ref, slope = oracle.gelu(z.astype(np.float64)), oracle.gelu_grad(z.astype(np.float64))
    # erfc and exp within a few ulps (ULPS 4, as the LSTM's sigmoid and tanh), the products' own roundings, and the
    # rounding of erfc's argument a = -z / sqrt 2, which erfc's condition number 2 a^2 = z^2 carries for z < 0
    bound = ROUNDING_LAMBDA * 2.0**-24 * (2 * 4 + z.astype(np.float64) ** 2)
    assert np.all(np.abs(vit.gelu(jnp.asarray(z)) - ref) <= bound * np.abs(ref))
    slope_got = jax.vmap(jax.grad(vit.gelu))(jnp.asarray(z))
    assert rel(slope_got, slope) <= bound.min()  # it crosses 0: relative to its scale
    assert np.max(np.abs(jax.nn.gelu(jnp.asarray(z)) - ref) / (bound * np.abs(ref))) > 1000  # the tanh form


# ---- training ----


def _apart(out_a, out_b, w, x, y) -> bool:
    """Whether two trainers' two steps on one batch (x, y) from weights w compute the same losses: step 1's each within
    the loss's bound of float64, step 2's too, and apart by at most the learning rate times the sum over weights of
    how far apart their first gradients may be (each within its bound of float64)."""
    loss_bound, grad_abs = grad_bounds(w, x, y)
    loss = oracle.loss_and_grads(w, x, y)[0]
    gradients = 2 * sum(b * a.size for b, a in zip(grad_abs, w, strict=True))
    first = abs(out_a[0, 0] - out_b[0, 0]) <= 2 * loss_bound * loss
    return first and abs(out_a[1, 0] - out_b[1, 0]) <= 2 * loss_bound * out_a[1, 0] + LR * gradients


def _train(variant, w, devices=JAX_DEVICES[:1], steps=2, same=False):
    """`steps` steps on batches of 8; same: on one batch, images(8, seed=4), every step."""
    x, y = images(8 if same else steps * 8, seed=4)
    if same:
        x, y = np.concatenate([x] * steps), np.concatenate([y] * steps)
    t = jax_impl.adapter("vit").make_trainer(model_with(w), devices, variant)
    return t, t.steps(x.reshape(steps, 8, 28, 28, 1), y.reshape(steps, 8))


def test_both_attention_paths_train_alike():
    """Step 1 runs the same weights: each path's loss within its bound of float64. Step 2's weights differ by Adam's
    first update, lr g / (|g| + eps'), whose derivative in g is at most 1 / (|g| + eps'): gradients d apart move a
    weight at most lr d / (|g| + eps') apart, which moves the loss (on the same batch) by |g| times that, at most
    lr d per weight."""
    w, (x, y) = random_weights(), images(8, seed=4)
    (t, einsum), (_, fused) = (_train(v, w, same=True) for v in ("jit", "jit+fused"))
    assert t.kernel_path is None and t.batchnorm == "none" and t.compute_dtype == "float32"
    assert _apart(einsum, fused, w, x, y)


@pytest.mark.slow
@pytest.mark.parametrize("replicas", [1, len(JAX_DEVICES)])
def test_every_variant_trains(replicas):
    w = random_weights()
    variants = jax_impl.variants("vit_train", replicas)
    assert variants and all(v.span == (ONE if replicas == 1 else MANY) for v in variants)
    for v in variants:
        t, out = _train(v.name, w, JAX_DEVICES[:replicas])
        assert out.shape == (2, 2) and np.all(np.isfinite(out)), v.name
        assert t.compute_dtype == v.dtype and t.batchnorm == "none" and t.kernel_path is None, v.name
        assert t.placement() == [f"cpu:{i}" for i in range(replicas)]
        trained = jax_impl.adapter("vit").get_weights(t.model())
        assert not all(np.array_equal(a, b) for a, b in zip(w, trained, strict=True)), v.name


@pytest.mark.slow
def test_data_parallel_steps_are_the_one_device_steps():
    """The same program on a split batch: step 1's losses within both bounds of float64 (the batch's mean sums in
    another order), step 2's as test_both_attention_paths_train_alike's."""
    w, (x, y) = random_weights(), images(8, seed=4)
    one, many = _train("jit", w, same=True)[1], _train("shard_map", w, JAX_DEVICES, same=True)[1]
    assert _apart(one, many, w, x, y)


def test_the_step_carries_keras_layer_names_and_counts_flops():
    t, _ = _train("jit", random_weights())
    hlo = t.program_text()  # each op's name holds its layer's scope, forward and backward (parity.judging.layers)
    for n in ("patch_embed", "pos_embed", "block1", "norm", "pool", "dense"):
        assert f"jvp({n})/" in hlo and f"transpose(jvp({n}))/" in hlo, n
    assert "jvp(scale)/" in hlo and "/optimizer/" in hlo and "loss" in hlo
    # no loop: XLA counts every product, forward and backward (3 x the formula's forward, as the spec counts a step)
    assert t.step_cost()[0] >= 0.9 * 3 * 8 * ARCH.forward_flops()
    assert t.evaluate(*images(8))["loss"] > 0


def test_vit_variants_are_their_own_row_kinds():
    m = model_with(random_weights())
    with pytest.raises(ValueError, match="vit_train"):
        jax_impl.adapter("vit").make_trainer(m, JAX_DEVICES, "pmap")
    with pytest.raises(ValueError, match="vit_infer"):
        jax_impl.adapter("vit").prepare_inference(m, images()[0], JAX_DEVICES, "predict+unroll")
    check_float32_counterparts(jax_impl, "vit_train")  # each bfloat16 variant's float32 counterpart: the same program


# ---- mixed precision and inference ----


@pytest.mark.parametrize("attention", PATHS)
def test_mixed_precision_computes_in_bfloat16_on_float32_parameters(attention):
    w, (x, _) = random_weights(), images()
    m = jax_impl.adapter("vit").mixed_precision(model_with(w, attention))
    assert m.attention == attention and vit.compute_dtype(m) == "bfloat16"
    assert all(
        np.array_equal(a, b) and b.dtype == np.float32
        for a, b in zip(w, jax_impl.adapter("vit").get_weights(m), strict=True)
    )
    out = jax_impl.adapter("vit").forward_layers(m, x)
    assert out["block1"].dtype.name == "bfloat16" and out["logits"].dtype == np.float32
    # one run's roundings to bfloat16 against exact arithmetic: within the workload's bound on two runs' loss,
    # LAMBDA u sqrt(2 R), relative to the scale
    assert rel(out["probs"], oracle.forward(w, x)["probs"]) <= bf16_loss_tolerance(ARCH.depth)


@pytest.mark.parametrize("variant", INFER)
def test_inference_is_the_forward_pass(variant):
    w, (x, _) = random_weights(), images()
    m = model_with(w)
    p = jax_impl.adapter("vit").prepare_inference(m, x, JAX_DEVICES, variant)
    out = p.run()
    assert p.shape(out) == (BATCH, 10) and p.placement(out) == ["cpu:0"] and p.kernel_path is None
    bound = block_bounds(w, x)["probs"]
    assert rel(p.rows(out, range(BATCH)), jax_impl.adapter("vit").forward_layers(m, x)["probs"]) <= 2 * bound
    assert p.cost()[0] >= 0.9 * BATCH * ARCH.forward_flops()
