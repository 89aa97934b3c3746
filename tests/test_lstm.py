"""The row LSTM's declaration, spec and checks, without any framework: its weight table in Keras's order, the FLOP
formula, the weight check's errors, and the parent-side checks on hand-made saved arrays (the float64 oracle's own
figures pass, a planted gate error and a swapped gate order fail)."""

import numpy as np
import pytest

from parity.api.lstm import GATES, LstmArchitecture, check_lstm_weights, units_of
from parity.workloads import WORKLOADS, row_kind
from parity.workloads.lstm import MODEL, oracle
from parity.workloads.lstm.spec import LSTM_CPU, LSTM_FULL, LSTM_QUICK
from parity.workloads.trained import model_checks

U = 6


def _weights(units=U, seed=0):
    rng = np.random.default_rng(seed)
    return [(0.3 * rng.standard_normal(w.shape)).astype(np.float32) for w in LstmArchitecture(units).weights]


def _batch(n=5, seed=1):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 28, 28, 1)).astype(np.float32), rng.integers(0, 10, n).astype(np.int32)


def test_weight_table_is_keras_order():
    a = LstmArchitecture(4)
    assert [w.name for w in a.weights] == [
        "lstm1.kernel", "lstm1.recurrent_kernel", "lstm1.bias",
        "lstm2.kernel", "lstm2.recurrent_kernel", "lstm2.bias",
        "dense.kernel", "dense.bias",
    ]  # fmt: skip
    assert [w.shape for w in a.weights][:3] == [(28, 16), (4, 16), (16,)]
    assert GATES == ("i", "f", "c", "o")
    assert a.params() == 28 * 16 + 4 * 16 + 16 + 4 * 16 + 4 * 16 + 16 + 4 * 10 + 10


def test_flops_formula():
    """2 * 4U * (inputs + U) per LSTM layer per step, 28 steps, plus the dense layer; training 3x forward."""
    u = 512
    per_image = 28 * (2 * 4 * u * (28 + u) + 2 * 4 * u * (u + u)) + 2 * u * 10
    assert LSTM_FULL.architecture.forward_flops() == per_image
    assert LSTM_FULL.step_flops() == 3 * 1024 * per_image
    assert LSTM_CPU.units < LSTM_FULL.units and LSTM_QUICK.units < LSTM_CPU.units


def test_weight_check_names_the_problem():
    w = _weights()
    check_lstm_weights(w, U)
    assert units_of(w) == U
    with pytest.raises(ValueError, match="expected 8 weight arrays"):
        check_lstm_weights(w[:-1], U)
    with pytest.raises(ValueError, match=r"lstm1\.kernel.*expected \(28, 28\)"):
        check_lstm_weights(w, U + 1)
    bad = list(w)
    bad[4] = bad[4].astype(np.float64)
    with pytest.raises(ValueError, match="dtype"):
        check_lstm_weights(bad, U)
    bad[4] = np.full_like(w[4], np.nan)
    with pytest.raises(ValueError, match="not finite"):
        check_lstm_weights(bad, U)


def test_registered_with_its_row_kinds():
    wl, kind = row_kind("lstm_train")
    assert wl is WORKLOADS["lstm"] and kind.epochs and kind.seeded
    assert row_kind("lstm_infer")[1].tolerance("cpu", "highest", "float32") > 0
    assert {"warm", "init_weights", "parity"} <= set(wl.calls)
    assert "lstm1" in wl.layers and "loss" in wl.layers


def _saved(weights, x, y, fw_grads=None):
    """A framework's saved arrays, as the float64 oracle computes them rounded to float32."""
    loss, grads = oracle.lstm_loss_and_grads(weights, x, y)
    out = {"loss": np.array(np.float32(loss))}
    for i, g in enumerate(fw_grads or grads):
        out[f"grad/{i:03d}"] = np.asarray(g, np.float32)
    for k, v in oracle.lstm_forward(weights, x).items():
        out[f"forward/{k}"] = v.astype(np.float32)
    return out


def _planted(weights, scale=1.001, layer=4, gate=1):
    """`weights` with one gate's columns of one array scaled (default: lstm2.recurrent_kernel's forget gate)."""
    w = [a.copy() for a in weights]
    u = units_of(w)
    w[layer][..., gate * u : (gate + 1) * u] *= np.float32(scale)
    return w


def test_checks_pass_float32_rounded_oracle_and_fail_a_planted_gate_error():
    w, (x, y) = _weights(), _batch()
    good = _saved(w, x, y)
    rows = model_checks.forward(MODEL, {"jax": good, "tf": good}, w, x, "cpu", "highest")
    rows += model_checks.grads(MODEL, {"jax": good, "tf": good}, w, x, y, "cpu", "highest")
    assert all(r["passed"] for r in rows), [(r["check"], r["figures"], r["tolerance"]) for r in rows]
    bad = _saved(_planted(w), x, y)
    rows = model_checks.forward(MODEL, {"jax": bad, "tf": good}, w, x, "cpu", "highest")
    rows += model_checks.grads(MODEL, {"jax": bad, "tf": good}, w, x, y, "cpu", "highest")
    assert not all(r["passed"] for r in rows)
    assert all(r["figures"]["tf_vs_f64"] <= r["tolerance"] for r in rows)  # the failure is the planted side's


def test_checks_fail_a_swapped_gate_order():
    """A framework that reads Keras's i, f, c, o columns as i, c, f, o (or f, i, ...) computes another model."""
    w, (x, y) = _weights(), _batch()
    u = U
    swapped = [a.copy() for a in w]
    for k in (0, 1, 2, 3, 4, 5):  # every LSTM array: swap the f and c column blocks
        f, c = swapped[k][..., u : 2 * u].copy(), swapped[k][..., 2 * u : 3 * u].copy()
        swapped[k][..., u : 2 * u], swapped[k][..., 2 * u : 3 * u] = c, f
    rows = model_checks.forward(MODEL, {"jax": _saved(swapped, x, y)}, w, x, "cpu", "highest")
    assert not any(r["passed"] for r in rows)
