"""The row LSTM in Flax NNX: Keras's weights and equations (checked against NumPy written here, in float64; these
tests PyTorch's too, BOTH), every training variant, mixed precision and inference; tiny widths."""

import numpy as np
import pytest
from adapter_checks import check_float32_counterparts, check_weights_round_trip
from frameworks_setup import JAX_DEVICES

import jax_impl
import torch_impl
from parity.api.lstm import GATES, LstmArchitecture
from parity.api.variants import MANY, ONE
from parity.workloads.lstm import oracle
from parity.workloads.lstm.tolerances import lstm_block_tolerances, lstm_bounds

UNITS, BATCH = 6, 8
# Keras's equations, which each hand-written implementation takes alike (PyTorch's own tests: test_lstm_torch.py)
BOTH = pytest.mark.parametrize("mod", [jax_impl, torch_impl], ids=["jax", "torch"])
# float32 rounding (about 6e-8 an operation, sqrt(36) terms a reduction) carried through 2 x 28 steps of a
# recurrence whose Jacobian is near 1 at these weights: a few 1e-6 at most, relative to the block's max |value|
TOL = 2e-5


def images(n=BATCH, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 28, 28, 1)).astype(np.float32), rng.integers(0, 10, n)


def random_weights(units=UNITS, seed=1):
    """Weights of every array drawn alike, the biases included, so that every gate's columns matter."""
    rng = np.random.default_rng(seed)
    return [(rng.normal(0, 0.4, w.shape)).astype(np.float32) for w in LstmArchitecture(units).weights]


# ---- Keras's LSTM equations in float64, written out here (independent of the oracle module) ----


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _layer(seq, kernel, recurrent, bias):
    """One Keras LSTM layer: z = x_t W + h_{t-1} U + b, gates in i, f, c, o column order; the h and c sequences."""
    u = recurrent.shape[0]
    h, c, hs, cs = np.zeros((len(seq), u)), np.zeros((len(seq), u)), [], []
    for t in range(seq.shape[1]):
        z = seq[:, t] @ kernel + h @ recurrent + bias
        i, f, g, o = (z[:, k * u : (k + 1) * u] for k in range(4))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        hs.append(h)
        cs.append(c)
    return np.stack(hs, 1), np.stack(cs, 1)


def reference(weights, x):
    k1, r1, b1, k2, r2, b2, kd, bd = (np.asarray(w, np.float64) for w in weights)
    seq = np.asarray(x, np.float64).reshape(len(x), 28, 28) / 255.0
    h1, c1 = _layer(seq, k1, r1, b1)
    h2, _ = _layer(h1, k2, r2, b2)
    logits = h2[:, -1] @ kd + bd
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return {"lstm1": h1, "lstm1_c": c1, "lstm2": h2[:, -1], "logits": logits, "probs": e / e.sum(-1, keepdims=True)}


def ref_loss(weights, x, y):
    logits = reference(weights, x)["logits"]
    top = logits.max(-1)
    return float(np.mean(top + np.log(np.exp(logits - top[:, None]).sum(-1)) - logits[np.arange(len(y)), y]))


def rel(got, ref):
    return float(np.max(np.abs(np.asarray(got, np.float64) - ref)) / np.max(np.abs(ref)))


def model_with(weights, units=UNITS, mod=jax_impl):
    m = mod.adapter("lstm").build(units)
    mod.adapter("lstm").set_weights(m, weights)
    return m


# ---- weights ----


@BOTH
def test_weights_round_trip_in_keras_order(mod, tmp_path):
    w, adapter = random_weights(), mod.adapter("lstm")
    other = adapter.build(UNITS, seed=5)
    check_weights_round_trip(
        adapter, model_with(w, mod=mod), w, other, tmp_path / "w.npz", LstmArchitecture(UNITS).weights
    )


@BOTH
def test_a_weight_list_for_another_width_is_refused(mod):
    m = mod.adapter("lstm").build(UNITS)
    with pytest.raises(ValueError, match="lstm1.kernel"):
        mod.adapter("lstm").set_weights(m, random_weights(UNITS + 2))
    with pytest.raises(ValueError, match="expected 8 weight arrays"):
        mod.adapter("lstm").set_weights(m, random_weights()[:-1])


def test_parameters_are_counted_as_keras_does():
    n = LstmArchitecture(UNITS).params()
    assert jax_impl.adapter("lstm").count_params(jax_impl.adapter("lstm").build(UNITS)) == {
        "total": n,
        "trainable": n,
        "non_trainable": 0,
    }


@BOTH
def test_kerass_initialisers(mod):
    k1, r1, b1, k2, r2, b2, kd, bd = mod.adapter("lstm").get_weights(mod.adapter("lstm").build(UNITS, seed=3))
    u, f = UNITS, GATES.index("f")
    for b in (b1, b2):  # unit_forget_bias: the forget gate's quarter at 1, the rest 0
        expected = np.zeros(4 * u, np.float32)
        expected[f * u : (f + 1) * u] = 1.0
        assert np.array_equal(b, expected)
    for r in (r1, r2):  # orthogonal (U, 4U): orthonormal rows
        np.testing.assert_allclose(r @ r.T, np.eye(u), atol=1e-5)
    for k in (k1, k2, kd):  # glorot_uniform: within sqrt(6 / (fan_in + fan_out))
        assert np.abs(k).max() <= np.sqrt(6 / sum(k.shape)) and np.abs(k).max() > 0.5 * np.sqrt(6 / sum(k.shape))
    assert not bd.any()


# ---- the forward pass: Keras's equations, gate order and carry order ----


@BOTH
def test_forward_blocks_are_kerass_equations(mod):
    w, (x, _) = random_weights(), images()
    got, ref = mod.adapter("lstm").forward_layers(model_with(w, mod=mod), x), reference(w, x)
    tols = lstm_block_tolerances(w, x, "cpu", "highest")  # each block's bound, derived on these inputs
    assert list(got) == ["lstm1", "lstm2", "logits", "probs"]
    for k, a in got.items():
        assert a.shape == ref[k].shape and a.dtype == np.float32, k
        assert rel(a, ref[k]) <= tols[k], (k, rel(a, ref[k]), tols[k])


@BOTH
def test_swapped_gate_columns_change_the_output_far_beyond_the_tolerance(mod):
    # the same weights with the i and f column blocks exchanged: a model that read Keras's columns in another gate
    # order would compute this
    w, (x, _) = random_weights(), images()
    u, swapped = UNITS, []
    for t, a in zip(LstmArchitecture(UNITS).weights, w, strict=True):
        if t.layer.startswith("lstm"):
            a = np.concatenate([a[..., u : 2 * u], a[..., :u], a[..., 2 * u :]], axis=-1)
        swapped.append(a)
    ref = reference(w, x)
    got = mod.adapter("lstm").forward_layers(model_with(swapped, mod=mod), x)
    assert rel(got["lstm1"], ref["lstm1"]) > 1000 * TOL
    assert rel(got["logits"], ref["logits"]) > 1000 * TOL


def test_the_second_layer_receives_h_not_c():
    # Flax carries (c, h), Keras returns [h, c]: lstm1's sequence is every step's h, and lstm2 takes that sequence
    w, (x, _) = random_weights(), images()
    got, ref = jax_impl.adapter("lstm").forward_layers(model_with(w), x), reference(w, x)
    assert rel(got["lstm1"], ref["lstm1"]) < TOL
    assert rel(got["lstm1"], ref["lstm1_c"]) > 1000 * TOL
    k2, r2, b2 = (np.asarray(a, np.float64) for a in w[3:6])
    from_c = _layer(ref["lstm1_c"], k2, r2, b2)[0][:, -1]
    assert rel(got["lstm2"], ref["lstm2"]) < TOL and rel(got["lstm2"], from_c) > 1000 * TOL


@BOTH
def test_forward_matches_the_oracle_module(mod):
    w, (x, _) = random_weights(), images()
    got, ref = mod.adapter("lstm").forward_layers(model_with(w, mod=mod), x), oracle.lstm_forward(w, x)
    tols = lstm_block_tolerances(w, x, "cpu", "highest")
    assert all(rel(got[k], ref[k]) <= tols[k] for k in ref)


# ---- gradients ----


@BOTH
def test_gradients_match_finite_differences_of_the_float64_equations(mod):
    w, (x, y) = random_weights(), images()
    g = mod.adapter("lstm").loss_and_grads(model_with(w, mod=mod), x, y)
    assert g.routing == [] and len(g.grads) == 8
    assert abs(g.loss - ref_loss(w, x, y)) < TOL * abs(g.loss)
    rng, eps = np.random.default_rng(0), 1e-6
    for i, (a, got) in enumerate(zip(w, g.grads, strict=True)):
        assert got.shape == a.shape and got.dtype == np.float32
        for j in rng.choice(a.size, 3, replace=False):  # three entries of each array, central differences
            up, down = [np.asarray(v, np.float64) for v in w], [np.asarray(v, np.float64) for v in w]
            up[i].flat[j] += eps
            down[i].flat[j] -= eps
            fd = (ref_loss(up, x, y) - ref_loss(down, x, y)) / (2 * eps)
            assert abs(got.flat[j] - fd) < 1e-4 * np.abs(got).max(), (i, j, got.flat[j], fd)


@BOTH
def test_gradients_match_the_oracle_module(mod):
    w, (x, y) = random_weights(), images()
    m = model_with(w, mod=mod)
    g = mod.adapter("lstm").loss_and_grads(m, x, y)
    assert all(
        np.array_equal(a, b) for a, b in zip(w, mod.adapter("lstm").get_weights(m), strict=True)
    )  # the model left unchanged
    loss, ref = oracle.lstm_loss_and_grads(w, x, y)
    bounds = lstm_bounds(w, x, y, "cpu", "highest")  # derived on these inputs: the loss's and each gradient's
    assert abs(g.loss - loss) <= bounds["loss"] * loss
    for a, b, bound in zip(g.grads, ref, bounds["grads"], strict=True):
        assert np.max(np.abs(a - b)) <= bound * np.max(np.abs(b))


# ---- training: every variant ----


def _train(variant, devices, w, steps=2):
    x, y = images(2 * BATCH, seed=4)
    t = jax_impl.adapter("lstm").make_trainer(model_with(w), devices, variant)
    out = t.steps(x.reshape(steps, BATCH, 28, 28, 1), y.reshape(steps, BATCH))
    return t, out


@pytest.mark.parametrize("replicas", [1, len(JAX_DEVICES)])
def test_every_variant_trains_and_unrolling_keeps_the_losses(replicas):
    w, losses = random_weights(), {}
    variants = jax_impl.variants("lstm_train", replicas)
    assert variants and all(v.span == (ONE if replicas == 1 else MANY) for v in variants)
    for v in variants:
        t, out = _train(v.name, JAX_DEVICES[:replicas], w)
        assert out.shape == (2, 2) and np.all(np.isfinite(out)), v.name
        assert t.compute_dtype == v.dtype and t.batchnorm == "none", v.name
        assert t.kernel_path == jax_impl.lstm.kernel_path(v.options.unroll), v.name
        assert t.placement() == [f"cpu:{i}" for i in range(replicas)]
        trained = jax_impl.adapter("lstm").get_weights(t.model())
        assert not all(np.array_equal(a, b) for a, b in zip(w, trained, strict=True)), v.name
        losses[v.name] = out[:, 0]
    for v in variants:  # unrolled: the same steps as its scanned counterpart, to float32 rounding
        scanned = next(s for s in variants if s.dtype == v.dtype and s.options.unroll == 1)
        np.testing.assert_allclose(losses[v.name], losses[scanned.name], rtol=1e-5, err_msg=v.name)


def test_data_parallel_steps_are_the_one_device_steps():
    w = random_weights()
    one, many = _train("jit", JAX_DEVICES[:1], w)[1], _train("shard_map", JAX_DEVICES, w)[1]
    np.testing.assert_allclose(many[:, 0], one[:, 0], rtol=1e-5)


def test_the_step_carries_keras_layer_names_and_counts_flops_only_when_unrolled():
    t, _ = _train("jit+unroll", JAX_DEVICES[:1], random_weights())
    hlo = t.program_text()  # each op's name holds its layer's scope, forward and backward (parity.judging.layers)
    assert all(f"jvp({n})/" in hlo and f"transpose(jvp({n}))/" in hlo for n in ("lstm1", "lstm2", "dense", "loss"))
    assert "jvp(scale)/" in hlo and "/optimizer/" in hlo
    # the unroll reaches the compiled program: no loop left, and XLA counts every step's products (forward and
    # backward: 3 x the formula's forward, as the spec counts a training step)
    assert " while(" not in hlo
    per_image = LstmArchitecture(UNITS).forward_flops()
    assert t.step_cost()[0] >= 0.9 * 3 * BATCH * per_image
    assert t.evaluate(*images())["loss"] > 0
    t, _ = _train("jit", JAX_DEVICES[:1], random_weights())
    assert " while(" in t.program_text()  # out of the box: the scan stays a loop
    assert t.step_cost()[0] is None


def test_a_cnn_trainer_has_no_recurrent_kernel():
    t = jax_impl.adapter("cnn").make_trainer(jax_impl.adapter("cnn").build(0), JAX_DEVICES[:1], "jit")
    assert t.kernel_path is None and t.batchnorm == "replica"


def test_lstm_variants_are_their_own_row_kinds():
    with pytest.raises(ValueError, match="lstm_train"):
        jax_impl.adapter("lstm").make_trainer(jax_impl.adapter("lstm").build(UNITS), JAX_DEVICES, "pmap")
    with pytest.raises(ValueError, match="lstm_infer"):
        jax_impl.adapter("lstm").prepare_inference(
            jax_impl.adapter("lstm").build(UNITS), images()[0], JAX_DEVICES, "predict+dots"
        )
    check_float32_counterparts(jax_impl, "lstm_train")  # each bfloat16 variant's float32 counterpart: the same program


# ---- mixed precision and inference ----


def test_mixed_precision_computes_in_bfloat16_on_float32_parameters():
    w, (x, _) = random_weights(), images()
    m = jax_impl.adapter("lstm").mixed_precision(model_with(w))
    assert all(
        np.array_equal(a, b) and b.dtype == np.float32
        for a, b in zip(w, jax_impl.adapter("lstm").get_weights(m), strict=True)
    )
    out = jax_impl.adapter("lstm").forward_layers(m, x)
    assert out["lstm1"].dtype.name == "bfloat16" and out["logits"].dtype == np.float32
    assert rel(out["probs"], reference(w, x)["probs"]) < 0.05  # bfloat16's 8 bits through 56 steps


@pytest.mark.parametrize("variant, path", [("predict", "lax.scan"), ("predict+unroll", "unrolled")])
def test_inference_is_the_forward_pass(variant, path):
    w, (x, _) = random_weights(), images()
    m = model_with(w)
    p = jax_impl.adapter("lstm").prepare_inference(m, x, JAX_DEVICES, variant)
    assert p.kernel_path == path and m.unroll == 1  # the variant's unroll on a copy
    out = p.run()
    assert p.shape(out) == (BATCH, 10) and p.placement(out) == ["cpu:0"]
    np.testing.assert_allclose(
        p.rows(out, range(BATCH)), jax_impl.adapter("lstm").forward_layers(m, x)["probs"], atol=1e-6
    )
    assert (p.cost()[0] is None) == (path != "unrolled")


def test_kernel_path_strings():
    kp = jax_impl.lstm.kernel_path
    assert (kp(1), kp(4), kp(True)) == ("lax.scan", "lax.scan, unroll 4", "unrolled")
