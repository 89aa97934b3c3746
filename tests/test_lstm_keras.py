"""The row LSTM in Keras 3 (keras_models.lstm): on TensorFlow (tf_impl) in this process, on JAX (keras_jax_impl) in a
process of its own (tests/keras_jax_lstm_probe.py). Weights in Keras's order and loadable across both; every block
against Keras's equations written here in float64 NumPy (and the oracle), a check that fails when the gate order or
the carry order is swapped; every training variant, mixed precision, inference and the kernel path each reports."""

from pathlib import Path

import keras
import numpy as np
import pytest
from adapter_checks import trained_variants
from frameworks_setup import TF_DEVICES
from probes import run_probe

import tf_impl
from keras_models import lstm
from parity.api.lstm import PIXEL_SCALE, LstmArchitecture
from parity.common.float64 import errors
from parity.common.tolerances import BF16_UNIT_ROUNDOFF, F32_UNIT_ROUNDOFF, tolerance
from parity.workloads.lstm import oracle
from parity.workloads.lstm.tolerances import lstm_forward_tolerance, lstm_grad_tolerances, lstm_loss_tolerance

UNITS, BATCH, STEPS = 6, 8, 2
REPLICAS = 2  # the several-replica trainers: the same code as on 8 devices, in a quarter of the time
TOL = tolerance("cpu", "highest")  # float32 against float64 on a CPU (parity.common.tolerances' ceiling)
PROBE = Path(__file__).with_name("keras_jax_lstm_probe.py")
GENERIC_TF, GENERIC_JAX = lstm.GENERIC_LOOP["tensorflow"], lstm.GENERIC_LOOP["jax"]
# each layer's compute dtype under mixed precision: bfloat16 but for the pixels' scaling and the softmax
MIXED = dict(rows="float32", scale="float32", lstm1="bfloat16", lstm2="bfloat16", dense="bfloat16", probs="float32")


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def keras_equations(weights: list[np.ndarray], x: np.ndarray, carry_swapped: bool = False) -> dict[str, np.ndarray]:
    """Keras's LSTM in float64: z = x_t K + h R + b, gates i, f, c, o in that column order, c = f c + i g, h = o tanh c
    (carry_swapped: the next step takes h where c belongs and c where h belongs, as a reader of Flax's (c, h) carry
    who takes Keras's [h, c] for it would)."""
    seq = np.asarray(x, np.float64).reshape(len(x), 28, 28) * PIXEL_SCALE
    w = [np.asarray(a, np.float64) for a in weights]
    out = {}
    for name, (k, r, b) in (("lstm1", w[0:3]), ("lstm2", w[3:6])):
        u = r.shape[0]
        h = c = np.zeros((len(x), u))
        hs = []
        for t in range(seq.shape[1]):
            z = seq[:, t] @ k + h @ r + b
            i, f, g, o = (z[:, j * u : (j + 1) * u] for j in range(4))
            c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
            h = sigmoid(o) * np.tanh(c)
            if carry_swapped:
                h, c = c, h
            hs.append(h)
        seq = np.stack(hs, 1)
        out[name] = seq
    out["lstm2"] = out["lstm2"][:, -1]
    out["logits"] = out["lstm2"] @ w[6] + w[7]
    e = np.exp(out["logits"] - out["logits"].max(-1, keepdims=True))
    out["probs"] = e / e.sum(-1, keepdims=True)
    return out


def gates_swapped(weights: list[np.ndarray]) -> list[np.ndarray]:
    """The weights with the i and f column blocks of every kernel, recurrent kernel and bias exchanged."""
    out = []
    for a in weights[:6]:
        u = a.shape[-1] // 4
        out.append(np.concatenate([a[..., u : 2 * u], a[..., :u], a[..., 2 * u :]], -1))
    return out + list(weights[6:])


def worst(got: dict, ref: dict) -> float:
    return max(errors(got[k], ref[k])["max_rel_err"] for k in ref)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(4)
    x = (rng.random((BATCH, 28, 28, 1)) * 255).astype(np.float32)
    bx = (rng.random((STEPS, BATCH, 28, 28, 1)) * 255).astype(np.float32)
    return x, rng.integers(0, 10, BATCH), bx, rng.integers(0, 10, (STEPS, BATCH))


@pytest.fixture(scope="module")
def model():
    return tf_impl.adapter("lstm").build(UNITS, 3)


@pytest.fixture(scope="module")
def trained(model, data):
    """Every lstm_train variant's two steps from the model's weights: (per-step losses, trainer) by name."""
    _, _, bx, by = data

    def copy():
        m = tf_impl.adapter("lstm").build(UNITS)
        tf_impl.adapter("lstm").set_weights(m, tf_impl.adapter("lstm").get_weights(model))
        return m

    return trained_variants(tf_impl, "lstm", REPLICAS, TF_DEVICES, copy, bx, by)


def test_weights_are_keras_order_and_round_trip(model, tmp_path):
    table = LstmArchitecture(UNITS).weights
    assert [w.shape for w in tf_impl.adapter("lstm").get_weights(model)] == [w.shape for w in table]
    assert [(v.path.split("/")[1], v.name) for v in model.weights] == [(w.layer, w.field) for w in table]
    other = tf_impl.adapter("lstm").get_weights(tf_impl.adapter("lstm").build(UNITS, 5))
    tf_impl.adapter("lstm").set_weights(model, other)
    tf_impl.adapter("lstm").save_weights(model, tmp_path / "w.npz")
    back = tf_impl.adapter("lstm").build(UNITS)
    tf_impl.adapter("lstm").load_weights(back, tmp_path / "w.npz")
    assert all(np.array_equal(a, b) for a, b in zip(tf_impl.adapter("lstm").get_weights(back), other, strict=True))
    n = LstmArchitecture(UNITS).params()
    assert tf_impl.adapter("lstm").count_params(model) == {"total": n, "trainable": n, "non_trainable": 0}
    with pytest.raises(ValueError, match=r"weight 0 \(lstm1.kernel\): shape \(28, 32\), expected \(28, 24\)"):
        tf_impl.adapter("lstm").set_weights(
            model, tf_impl.adapter("lstm").get_weights(tf_impl.adapter("lstm").build(UNITS + 2))
        )  # another width's list
    with pytest.raises(ValueError, match="expected 8 weight arrays"):
        tf_impl.adapter("lstm").set_weights(
            model, tf_impl.adapter("cnn").get_weights(tf_impl.adapter("cnn").build(0))
        )  # the CNN's
    tf_impl.adapter("lstm").set_weights(
        model, tf_impl.adapter("lstm").get_weights(tf_impl.adapter("lstm").build(UNITS, 3))
    )


def test_the_initialisers_are_keras_own_set_explicitly(model):
    """Forget bias 1 and the others 0 (unit_forget_bias), orthogonal recurrent kernels (rows orthonormal), Glorot
    uniform kernels within their limit, one seed for the whole model."""
    w = tf_impl.adapter("lstm").get_weights(model)
    u = UNITS
    for k, r, b in (w[0:3], w[3:6]):
        assert np.array_equal(b, np.r_[np.zeros(u), np.ones(u), np.zeros(2 * u)])
        np.testing.assert_allclose(r @ r.T, np.eye(u), atol=1e-5)
        assert np.max(np.abs(k)) <= np.sqrt(6 / (k.shape[0] + k.shape[1]))
    again, other = tf_impl.adapter("lstm").build(UNITS, 3), tf_impl.adapter("lstm").build(UNITS, 4)
    assert all(np.array_equal(a, b) for a, b in zip(tf_impl.adapter("lstm").get_weights(again), w, strict=True))
    assert not np.array_equal(tf_impl.adapter("lstm").get_weights(other)[0], w[0])
    cell = model.get_layer("lstm1").cell
    assert (cell.activation, cell.recurrent_activation) == (keras.activations.tanh, keras.activations.sigmoid)


def test_every_block_follows_keras_equations_in_float64(model, data):
    x, y, _, _ = data
    w = tf_impl.adapter("lstm").get_weights(model)
    got = tf_impl.adapter("lstm").forward_layers(model, x)
    assert worst(got, keras_equations(w, x)) < TOL
    assert worst(got, oracle.lstm_forward(w, x)) < lstm_forward_tolerance(w, x, "cpu", "highest")
    g = tf_impl.adapter("lstm").loss_and_grads(model, x, y)
    loss, grads = oracle.lstm_loss_and_grads(w, x, y)
    assert g.routing == [] and [a.shape for a in g.grads] == [a.shape for a in w]
    assert abs(g.loss - loss) / loss < lstm_loss_tolerance(w, x, y, "cpu", "highest")
    tols = lstm_grad_tolerances(w, x, y, "cpu", "highest")
    assert all(errors(a, b)["max_rel_err"] < t for a, b, t in zip(g.grads, grads, tols, strict=True))


def test_a_swapped_gate_or_carry_order_fails_the_check(model, data):
    """The check above passes only for Keras's order: i and f exchanged, or h and c, miss by far more than TOL."""
    x = data[0]
    w, got = tf_impl.adapter("lstm").get_weights(model), tf_impl.adapter("lstm").forward_layers(model, x)
    assert worst(got, keras_equations(gates_swapped(w), x)) > 100 * TOL
    assert worst(got, keras_equations(w, x, carry_swapped=True)) > 100 * TOL


def test_every_training_variant_trains_with_finite_losses(trained, model):
    names = {v.name for n in (1, 8) for v in tf_impl.variants("lstm_train", n)}
    assert names == {"fit", "fit+unroll", "fit+xla", "fit+bf16", "strategy", "loop", "loop+xla"} == set(trained)
    start = tf_impl.adapter("lstm").get_weights(model)[0]
    for name, (losses, t) in trained.items():
        assert losses.shape == (STEPS,) and np.all(np.isfinite(losses)), name
        assert not np.array_equal(tf_impl.adapter("lstm").get_weights(t.model())[0], start), name
        assert t.batchnorm == "none", name
        assert t.kernel_path == ("unrolled" if "unroll" in name else GENERIC_TF), name
    assert trained["strategy"][1].placement() == [f"cpu:{i}" for i in range(REPLICAS)]


def test_trainers_evaluate_and_count_what_they_can(trained, data):
    """evaluate by fit's and the custom loop's ways; TF's profiler counts the unrolled step (at least its forward
    pass's products), and not the looped one, whose graph holds one step of the loop's body."""
    x, y, _, _ = data
    for name in ("fit", "loop"):
        r = trained[name][1].evaluate(x, y)
        assert np.isfinite(r["loss"]) and 0 <= r["accuracy"] <= 1, name
    flops, counter = trained["fit+unroll"][1].step_cost()
    assert flops >= BATCH * LstmArchitecture(UNITS).forward_flops(), counter
    flops, counter = trained["fit"][1].step_cost()
    assert flops is None and GENERIC_TF in counter


def test_unrolled_and_looped_give_the_same_first_step_loss(trained, model, data):
    """One program, two loops: the first step's loss (before any update) the same to float32 rounding. Under XLA
    (other kernels, other fusions): each within the derived bound of the float64 loss, so the two within twice it
    (over replicas, the bound of each replica's share of the batch; their mean rounds once more)."""
    first = trained["fit"][0][0]
    for name in ("fit+unroll", "strategy", "loop"):
        assert abs(trained[name][0][0] - first) <= 1e-6 * first, name
    w, (_, _, bx, by) = tf_impl.adapter("lstm").get_weights(model), data
    one = lstm_loss_tolerance(w, bx[0], by[0], "cpu", "highest")
    share = BATCH // REPLICAS
    shares = [slice(r * share, (r + 1) * share) for r in range(REPLICAS)]
    each = max(lstm_loss_tolerance(w, bx[0][s], by[0][s], "cpu", "highest") for s in shares)
    for name, bound in (("fit+xla", 2 * one), ("loop+xla", one + each + F32_UNIT_ROUNDOFF)):
        assert abs(trained[name][0][0] - first) <= bound * first, (name, bound)


def test_mixed_precision_computes_in_bfloat16(trained, model, data):
    """The LSTM, dense layers in bfloat16, the pixel scaling and softmax in float32: its probabilities off the
    float32 model's by bfloat16's rounding, not float32's."""
    assert trained["fit+bf16"][1].compute_dtype == "bfloat16" and trained["fit"][1].compute_dtype == "float32"
    mixed = tf_impl.adapter("lstm").mixed_precision(model)
    tf_impl.adapter("lstm").set_weights(mixed, tf_impl.adapter("lstm").get_weights(model))
    assert {layer.name: layer.compute_dtype for layer in mixed.layers} == MIXED
    assert all(v.dtype == "float32" for v in mixed.weights)
    x = data[0]
    err = errors(
        tf_impl.adapter("lstm").forward_layers(mixed, x)["probs"],
        tf_impl.adapter("lstm").forward_layers(model, x)["probs"],
    )["max_rel_err"]
    assert 100 * TOL < err < 20 * BF16_UNIT_ROUNDOFF


@pytest.mark.parametrize(
    "variant, path, executor",
    [("predict", GENERIC_TF, True), ("predict+unroll", "unrolled", True), ("predict+xla", GENERIC_TF, False)],
)
def test_inference_gives_forward_layers_probabilities(model, data, variant, path, executor):
    x = data[0]
    w = tf_impl.adapter("lstm").get_weights(model)
    p = tf_impl.adapter("lstm").prepare_inference(model, x, TF_DEVICES[:1], variant)
    probs = p.run().numpy()
    # every variant against float64, within the bound derived for these weights and images, whatever its kernels
    bound = lstm_forward_tolerance(w, x, "cpu", "highest")
    assert errors(probs, oracle.lstm_forward(w, x)["probs"])["max_rel_err"] < bound
    if executor:  # the executor's kernels, as forward_layers runs them: the same numbers to TOL
        assert errors(probs, tf_impl.adapter("lstm").forward_layers(model, x)["probs"])["max_rel_err"] < TOL
    assert p.kernel_path == path
    flops, counter = p.cost()  # TF's profiler counts a tf.while_loop's body once: no count rather than 1/28 of one
    assert (flops is None) == (path == GENERIC_TF) and counter.startswith("TF profiler"), counter
    with pytest.raises(ValueError, match="unknown TF lstm_infer variant 'jit'"):
        tf_impl.adapter("lstm").prepare_inference(model, x, TF_DEVICES[:1], "jit")


def test_the_kernel_path_is_keras_own_decision(model, monkeypatch):
    """On a GPU Keras's LSTM runs cuDNN's kernel where its conditions hold and the op runs, else its loop, silently:
    kernel_path asks the same function. Here a GPU is pretended: cuDNN where the op runs, the loop where it fails
    (Keras's fallback), and never for the unrolled copy (unroll=True is against cuDNN's conditions)."""
    import importlib

    import tensorflow as tf

    rnn = importlib.import_module("keras.src.backend.tensorflow.rnn")  # the module (its package exports a function)

    monkeypatch.setattr(rnn, "_is_gpu_available", lambda: True)
    monkeypatch.setattr(rnn, "_cudnn_lstm", lambda *a, **k: None)
    assert tf_impl.models.kernel_path(lstm, model, TF_DEVICES[0]) == "cuDNN"
    assert tf_impl.models.kernel_path(lstm, lstm.unrolled(model), TF_DEVICES[0]) == "unrolled"

    def fails(*a, **k):
        raise tf.errors.NotFoundError(None, None, "no CudnnRNNV3 kernel here")

    monkeypatch.setattr(rnn, "_cudnn_lstm", fails)
    assert tf_impl.models.kernel_path(lstm, model, TF_DEVICES[0]) == GENERIC_TF


def test_the_cnn_trainer_runs_no_recurrent_kernel():
    t = tf_impl.adapter("cnn").make_trainer(tf_impl.adapter("cnn").build(0), TF_DEVICES[:1], "fit")
    assert t.kernel_path is None and t.batchnorm == "replica"
    with pytest.raises(ValueError, match="unknown TF lstm_train variant 'fit\\+spe'"):
        tf_impl.adapter("lstm").make_trainer(tf_impl.adapter("lstm").build(UNITS), TF_DEVICES[:1], "fit+spe")


# Keras on JAX, in its own process


@pytest.fixture(scope="module")
def probe(model, data, trained, tmp_path_factory):
    """The probe's findings and arrays, from TF's weights and the batches above."""
    d = tmp_path_factory.mktemp("kj-lstm")
    x, y, bx, by = data
    tf_impl.adapter("lstm").save_weights(model, d / "w.npz")
    np.save(d / "x.npy", x), np.save(d / "y.npy", y), np.savez(d / "batches.npz", x=bx, y=by)
    req = {"units": UNITS, "weights": str(d / "w.npz"), "x": str(d / "x.npy"), "y": str(d / "y.npy")}
    return run_probe(PROBE, d, req)


def test_keras_on_jax_takes_tf_weights_and_gives_the_same_blocks(probe, model, data):
    found, arrays = probe
    x, y, _, _ = data
    assert found["backend"] == "jax" and found["devices"] == 8
    assert np.array_equal(arrays["w0"], tf_impl.adapter("lstm").get_weights(model)[0])
    got = {k.split("/")[1]: v for k, v in arrays.items() if k.startswith("forward/")}
    assert worst(got, keras_equations(tf_impl.adapter("lstm").get_weights(model), x)) < TOL
    assert worst(got, tf_impl.adapter("lstm").forward_layers(model, x)) < 2 * TOL  # each within TOL of float64
    w = tf_impl.adapter("lstm").get_weights(model)
    loss, grads = oracle.lstm_loss_and_grads(w, x, y)
    assert found["routing"] == 0 and abs(found["loss"] - loss) / loss < lstm_loss_tolerance(w, x, y, "cpu", "highest")
    tols = lstm_grad_tolerances(w, x, y, "cpu", "highest")
    for i, (g, t) in enumerate(zip(grads, tols, strict=True)):
        assert errors(arrays[f"grad/{i}"], g)["max_rel_err"] < t, i
    assert "weight 0 (lstm1.kernel): shape (28, 32)" in found["wrong_width"]


def test_keras_on_jax_trains_every_variant(probe, trained):
    found, arrays = probe
    assert found["variants"]["lstm_trainx1"] == ["fit", "fit+unroll", "fit+bf16"]
    assert found["variants"]["lstm_trainx8"] == ["data_parallel"]
    assert found["variants"]["lstm_inferx1"] == ["predict", "predict+unroll"]
    first = arrays["train/fit/loss"][0]
    for name in ("fit", "fit+unroll", "fit+bf16", "data_parallel"):
        losses, f = arrays[f"train/{name}/loss"], found[name]
        assert losses.shape == (STEPS,) and np.all(np.isfinite(losses)), name
        assert not np.array_equal(arrays[f"train/{name}/w0"], arrays["w0"]), name
        assert f["batchnorm"] == "none" and f["kernel_path"] == ("unrolled" if "unroll" in name else GENERIC_JAX)
        assert f["compute_dtype"] == ("bfloat16" if "bf16" in name else "float32"), name
    assert found["fit"]["scopes"] == ["lstm1", "lstm2", "dense"]  # what --profile attributes the step's ops to
    for name in ("fit+unroll", "data_parallel"):  # the same first-step loss, and TF's
        assert abs(arrays[f"train/{name}/loss"][0] - first) <= 1e-6 * first, name
    assert abs(trained["fit"][0][0] - first) <= 1e-6 * first
    assert found["data_parallel"]["placement"] == [f"cpu:{i}" for i in range(8)]


def test_keras_on_jax_infers_and_computes_mixed_precision_in_bfloat16(probe):
    found, arrays = probe
    probs = arrays["forward/probs"]
    for v, path in (("predict", GENERIC_JAX), ("predict+unroll", "unrolled")):
        assert errors(arrays[f"infer/{v}"], probs)["max_rel_err"] < TOL and found[f"infer/{v}"]["kernel_path"] == path
        flops, counter = found[f"infer/{v}"]["cost"]  # XLA's cost analysis counts a scan's body once
        assert (flops is None) == (path == GENERIC_JAX) and counter.startswith("XLA cost analysis"), counter
    assert found["mixed/dtypes"] == MIXED
    assert 100 * TOL < errors(arrays["mixed/probs"], probs)["max_rel_err"] < 20 * BF16_UNIT_ROUNDOFF
