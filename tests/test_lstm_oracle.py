"""The row LSTM's float64 oracle and its derived float32 bounds, in NumPy alone: the gradients against central
differences, the forward pass against a per-sample loop, a float32 replica of the arithmetic (three summation orders)
within the bounds, and a planted 1e-3 error in one gate's weights outside them, at tiny shapes and at the CPU
default's units (128) at batch 64."""

import numpy as np
import pytest

from parity.api.lstm import GATES, PIXEL_SCALE, LstmArchitecture
from parity.common.float64 import errors
from parity.workloads.lstm import oracle
from parity.workloads.lstm import tolerances as tol
from parity.workloads.trained.data import synthetic

BLOCKS = ("lstm1", "lstm2", "logits", "probs")


def keras_like(units: int, seed: int = 0, scale: float = 1.0) -> list[np.ndarray]:
    """Keras's initial weights in kind: glorot_uniform kernels, orthogonal recurrent kernels, the forget bias at 1;
    `scale` multiplies the kernels (3: saturating gates, as trained weights have)."""
    rng = np.random.default_rng(seed)

    def glorot(a, b):
        lim = np.sqrt(6 / (a + b))
        return rng.uniform(-lim, lim, (a, b)) * scale

    def orthogonal(a, b):
        q, r = np.linalg.qr(rng.normal(size=(b, a)))
        return (q * np.sign(np.diag(r))).T * scale

    bias = np.zeros(4 * units)
    bias[GATES.index("f") * units : (GATES.index("f") + 1) * units] = 1.0
    w = [glorot(28, 4 * units), orthogonal(units, 4 * units), bias]
    w += [glorot(units, 4 * units), orthogonal(units, 4 * units), bias.copy(), glorot(units, 10), np.zeros(10)]
    return [a.astype(np.float32) for a in w]


def batch(b: int, steps: int = 28, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`b` synthetic images (raw pixels), their first `steps` rows, and labels."""
    ds = synthetic(train_size=b, test_size=1, seed=seed)
    return ds.x_train[:, :steps].astype(np.float32), ds.y_train


def planted(w: list[np.ndarray], index: int, gate: str) -> list[np.ndarray]:
    """A copy of `w` with weight `index`'s columns of `gate` scaled by 1.001: a 1e-3 error in one gate's weights."""
    out = [a.copy() for a in w]
    u = w[1].shape[0]
    k = GATES.index(gate)
    out[index][..., k * u : (k + 1) * u] *= np.float32(1.001)
    return out


# ---- the oracle against two other float64 computations


def test_gradients_match_central_differences():
    """Every gradient element of a 3-unit model over 4 steps, against (L(w + h) - L(w - h)) / 2h, h = 1e-5: the
    truncation (h^2 |L'''| / 6) and rounding (u |L| / h) errors are near 1e-11, far inside 1e-8 of max |gradient|."""
    rng = np.random.default_rng(1)
    w = [a.astype(np.float64) * 2 for a in keras_like(3, seed=1)]
    w = [a + rng.normal(0, 0.1, a.shape) for a in w]  # no zero biases: every path's derivative is exercised
    x, y = batch(3, steps=4, seed=1)
    _, grads = oracle.lstm_loss_and_grads(w, x, y)
    h = 1e-5
    for i, g in enumerate(grads):
        fd = np.zeros_like(g)
        for k in np.ndindex(g.shape):
            up, down = [a.copy() for a in w], [a.copy() for a in w]
            up[i][k] += h
            down[i][k] -= h
            fd[k] = (oracle.lstm_loss_and_grads(up, x, y)[0] - oracle.lstm_loss_and_grads(down, x, y)[0]) / (2 * h)
        assert np.max(np.abs(fd - g)) <= 1e-8 * np.max(np.abs(g)), i


def _per_sample(w: list[np.ndarray], image: np.ndarray) -> dict[str, np.ndarray]:
    """Keras's LSTM equations for one image, one step and one gate at a time."""
    w = [np.asarray(a, np.float64) for a in w]
    u = w[1].shape[0]

    def cell(x_t, h, c, kernel, recurrent, bias):
        z = {g: x_t @ kernel[:, k * u : (k + 1) * u] + h @ recurrent[:, k * u : (k + 1) * u] + bias[k * u : (k + 1) * u]
             for k, g in enumerate(GATES)}  # fmt: skip
        sig = {g: 1 / (1 + np.exp(-z[g])) for g in "ifo"}
        c = sig["f"] * c + sig["i"] * np.tanh(z["c"])
        return sig["o"] * np.tanh(c), c

    seq1, h1, c1, h2, c2 = [], np.zeros(u), np.zeros(u), np.zeros(u), np.zeros(u)
    for row in image[..., 0].astype(np.float64) * PIXEL_SCALE:
        h1, c1 = cell(row, h1, c1, *w[0:3])
        h2, c2 = cell(h1, h2, c2, *w[3:6])
        seq1.append(h1)
    logits = h2 @ w[6] + w[7]
    e = np.exp(logits - logits.max())
    return {"lstm1": np.array(seq1), "lstm2": h2, "logits": logits, "probs": e / e.sum()}


def test_forward_matches_a_per_sample_loop():
    w = keras_like(5, seed=2, scale=2.0)
    x, _ = batch(3, seed=2)
    got = oracle.lstm_forward(w, x)
    assert got["lstm1"].shape == (3, 28, 5) and got["lstm2"].shape == (3, 5) and got["probs"].shape == (3, 10)
    for n in range(3):
        want = _per_sample(w, x[n])
        for b in BLOCKS:
            np.testing.assert_allclose(got[b][n], want[b], rtol=1e-12, atol=1e-14)


def test_the_oracle_refuses_weights_of_another_shape():
    w = keras_like(4)
    with pytest.raises(ValueError, match="lstm2.kernel"):
        oracle.lstm_forward([*w[:3], w[3][:, :8], *w[4:]], batch(2)[0])


# ---- a float32 replica of the arithmetic


def _mm(a: np.ndarray, b: np.ndarray, order: str) -> np.ndarray:
    """a @ b in a's dtype: BLAS's order, blocks of 16 summed last to first, or one term at a time, last to first."""
    if order == "blas":
        return a @ b
    k = a.shape[-1]
    if order == "blocked":
        parts = [a[..., s : s + 16] @ b[s : s + 16] for s in range(0, k, 16)]
    else:
        parts = [a[..., j, None] * b[j] for j in range(k)]
    acc = parts[-1]
    for p in reversed(parts[:-1]):
        acc = acc + p
    return acc


def _layer32(x, kernel, recurrent, bias, order):
    b, steps, _ = x.shape
    u = recurrent.shape[0]
    h, c = np.zeros((b, u), x.dtype), np.zeros((b, u), x.dtype)
    keep = {k: [] for k in ("i", "f", "g", "o", "c", "cp", "hp", "h")}
    for t in range(steps):
        z = _mm(x[:, t], kernel, order) + _mm(h, recurrent, order) + bias
        i, f, o = (1 / (1 + np.exp(-z[:, k * u : (k + 1) * u])) for k in (0, 1, 3))
        g = np.tanh(z[:, 2 * u : 3 * u])
        keep["cp"].append(c), keep["hp"].append(h)
        c = f * c + i * g
        h = o * np.tanh(c)
        for k, v in zip("ifgoch", (i, f, g, o, c, h), strict=True):
            keep[k].append(v)
    return {k: np.stack(v, 1) for k, v in keep.items()}


def _layer32_backward(s, x, kernel, recurrent, dh_out, order):
    b, steps, u = dh_out.shape
    dz = np.zeros((b, steps, 4 * u), dh_out.dtype)
    dh_next, dc_next = np.zeros((b, u), dh_out.dtype), np.zeros((b, u), dh_out.dtype)
    for t in reversed(range(steps)):
        i, f, g, o, cp = (s[k][:, t] for k in ("i", "f", "g", "o", "cp"))
        tc = np.tanh(s["c"][:, t])
        dh = dh_out[:, t] + dh_next
        dc = dh * o * (1 - tc * tc) + dc_next
        dz[:, t] = np.concatenate([dc * g * (i * (1 - i)), dc * cp * (f * (1 - f)), dc * i * (1 - g * g),
                                   dh * tc * (o * (1 - o))], axis=1)  # fmt: skip
        dc_next, dh_next = dc * f, _mm(dz[:, t], recurrent.T, order)
    flat = dz.reshape(b * steps, -1)
    ones = np.ones((1, b * steps), dz.dtype)
    grads = [_mm(x.reshape(b * steps, -1).T, flat, order), _mm(s["hp"].reshape(b * steps, -1).T, flat, order)]
    return [*grads, _mm(ones, flat, order)[0]], _mm(dz, kernel.T, order)


def replica(w, x, y, dtype=np.float32, order="blas"):
    """The whole forward pass, loss and backpropagation through time in `dtype` (every product in the given
    summation order): (blocks, loss, the 8 gradients)."""
    w = [np.asarray(a, dtype) for a in w]
    rows = x.reshape(len(x), x.shape[1], -1).astype(dtype) * dtype(PIXEL_SCALE)
    s1 = _layer32(rows, *w[0:3], order)
    s2 = _layer32(s1["h"], *w[3:6], order)
    h2 = s2["h"][:, -1]
    logits = _mm(h2, w[6], order) + w[7]
    top = logits.max(-1, keepdims=True)
    e = np.exp(logits - top)
    total = e.sum(-1, keepdims=True)
    n = np.arange(len(y))
    loss = np.mean(np.log(total[:, 0]) + top[:, 0] - logits[n, y])
    d = e / total
    d[n, y] -= 1
    d /= dtype(len(y))
    dh2 = np.zeros_like(s2["h"])
    dh2[:, -1] = _mm(d, w[6].T, order)
    g2, dx = _layer32_backward(s2, s1["h"], w[3], w[4], dh2, order)
    g1, _ = _layer32_backward(s1, rows, w[0], w[1], dx, order)
    blocks = {"lstm1": s1["h"], "lstm2": h2, "logits": logits, "probs": e / total}
    return blocks, float(loss), [*g1, *g2, _mm(h2.T, d, order), d.sum(0)]


def test_the_replica_in_float64_is_the_oracle():
    w = keras_like(4, seed=3)
    x, y = batch(3, steps=5, seed=3)
    blocks, loss, grads = replica(w, x, y, np.float64)
    ref_loss, ref = oracle.lstm_loss_and_grads(w, x, y)
    want = oracle.lstm_forward(w, x)
    assert all(errors(blocks[b], want[b])["max_rel_err"] < 1e-12 for b in BLOCKS)
    assert abs(loss - ref_loss) < 1e-12 * ref_loss
    assert all(errors(g, r)["max_rel_err"] < 1e-12 for g, r in zip(grads, ref, strict=True))


def bounds(w, x, y) -> dict:
    """The derived float32 bounds on these inputs: "forward", "loss" and "grads"."""
    return tol.lstm_bounds(w, x, y, "cpu", "highest")


def float64(w, x, y) -> tuple[dict, float, list[np.ndarray]]:
    """The oracle's blocks, loss and gradients from one trace."""
    tr = oracle.lstm_trace(w, x)
    bw = oracle.lstm_backward(tr, y)
    blocks = {"lstm1": tr.lstm1.h[:, 1:], "lstm2": tr.lstm2.h[:, -1], "logits": tr.logits, "probs": tr.probs}
    return blocks, bw.loss, bw.grads


def _ratios(ref, bound, got) -> tuple[float, float, float]:
    """Errors of `got` against `ref` (both (blocks, loss, gradients)) as fractions of their derived bounds."""
    return (
        max(errors(got[0][b], ref[0][b])["max_rel_err"] for b in BLOCKS) / bound["forward"],
        abs(got[1] - ref[1]) / ref[1] / bound["loss"],
        max(errors(g, r)["max_rel_err"] / t for g, r, t in zip(got[2], ref[2], bound["grads"], strict=True)),
    )


@pytest.mark.parametrize("order", ["blas", "blocked", "sequential"])
@pytest.mark.parametrize("seed,scale", [(0, 1.0), (1, 3.0)], ids=["initial", "saturating"])
def test_float32_arithmetic_lies_within_the_derived_bounds(order, seed, scale):
    """8 units, 4 images, all 28 steps: the replica's errors are a fraction of each bound, in any summation order
    (measured at most 0.04 of it: the bound is three standard deviations of a model whose sd is relative to |terms|)."""
    w = keras_like(8, seed=seed, scale=scale)
    x, y = batch(4, seed=seed)
    assert max(_ratios(float64(w, x, y), bounds(w, x, y), replica(w, x, y, np.float32, order))) < 1


def _planted_ratio(w, x, y, ref, bound, index: int, gate: str) -> float:
    """How far a 1e-3 error in one gate's weights moves the float64 oracle, as a multiple of the bound it must
    fail: the worst of the forward blocks' and the gradients' figures (the loss's is left out: it must not count
    on a figure where it is not judged)."""
    fwd, _, grads = _ratios(ref, bound, float64(planted(w, index, gate), x, y))
    return max(fwd, grads)


@pytest.mark.parametrize("index,gate", [(0, "i"), (4, "f")], ids=["lstm1.kernel-input", "lstm2.recurrent-forget"])
def test_a_planted_gate_error_fails_at_tiny_shapes(index, gate):
    """4 units, 3 images, 28 steps: the planted error is several times the bound (measured 15x and 17x)."""
    w = keras_like(4)
    x, y = batch(3)
    assert _planted_ratio(w, x, y, float64(w, x, y), bounds(w, x, y), index, gate) > 2


def test_the_cpu_defaults_bounds_catch_a_planted_error():
    """Units 128, batch 64, 28 steps, Keras-like initial weights, synthetic images (seed 0). The derived bounds:
    forward 2.5e-5 (the largest block's: lstm1 9.0e-6, lstm2 1.4e-5, logits 2.5e-5, probs 1.1e-5), loss 1.9e-6,
    gradients 5.8e-6 to 4.1e-5 of max |gradient|; float32 (the replica, BLAS's order) reads 2.6e-7 to 5.4e-7.
    A 1e-3 error in lstm1.kernel's input gate moves lstm1 by 2.4e-4 (9.8x the forward bound); in
    lstm2.recurrent_kernel's forget gate, lstm2 by 5.7e-5 (2.3x) and dense.kernel's gradient by 5.7e-5 (4.7x its
    bound)."""
    w = keras_like(128)
    x, y = batch(64)
    ref, bound = float64(w, x, y), bounds(w, x, y)
    assert bound["forward"] < 1e-4 and max(bound["grads"]) < 1e-4
    assert max(_ratios(ref, bound, replica(w, x, y))) < 1
    assert _planted_ratio(w, x, y, ref, bound, 0, "i") > 2 and _planted_ratio(w, x, y, ref, bound, 4, "f") > 2


def test_reduced_precision_and_bfloat16_tables():
    w, (x, y) = keras_like(4), batch(3, steps=3)
    assert tol.lstm_forward_tolerance(w, x, "gpu", "default") >= tol.LSTM_TOLERANCES_REDUCED["forward"]
    assert min(tol.lstm_grad_tolerances(w, x, y, "tpu", "default")) >= tol.LSTM_TOLERANCES_REDUCED["grads"]
    assert tol.lstm_forward_tolerance(w, x, "gpu", "highest") < 1e-4
    assert tol.lstm_tolerances("cpu", "highest") == tol.LSTM_TOLERANCES
    bf16 = tol.lstm_tolerances("cpu", "highest", "bfloat16")
    # 9 roundings a step, 2.15 steps' worth at f = sigmoid(1), two layers, plus 8: R = 46.7; 3 u sqrt(2 R)
    assert bf16["trajectory_loss"] == pytest.approx(3 * 2**-8 * np.sqrt(2 * (8 + 18 / (1 - 0.7310585786**2))))
    assert bf16["trajectory_params"] == 2 * bf16["trajectory_loss"]
    assert LstmArchitecture(4).forget_bias == 1.0


def test_the_checks_functions_give_lstm_bounds_one_by_one():
    w, (x, y) = keras_like(4, seed=5), batch(3, steps=6, seed=5)
    both = tol.lstm_bounds(w, x, y, "cpu", "default")
    assert tol.lstm_forward_tolerance(w, x, "cpu", "default") == both["forward"]
    assert tol.lstm_loss_tolerance(w, x, y, "cpu", "default") == both["loss"]
    assert tol.lstm_grad_tolerances(w, x, y, "cpu", "default") == both["grads"]
    assert len(both["grads"]) == len(LstmArchitecture(4).weights)
