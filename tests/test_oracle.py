"""The float64 oracle against a direct loop, and the workload declarations."""

import numpy as np
import pytest

from parity.api import check_divisible
from parity.api.cnn import CNN_CONVS, CNN_DENSE
from parity.common import float64 as oracle
from parity.common.frameworks import short
from parity.common.padding import conv_out_size, same_pads
from parity.workloads.cnn import checks
from parity.workloads.cnn import oracle as cnn_oracle
from parity.workloads.cnn.tolerances import cnn_grad_tolerance, cnn_loss_tolerance
from parity.workloads.conv import CONV_FULL, CONV_QUICK
from parity.workloads.trained.rounds import PARITY_BATCH


def loop_conv(x, w, stride, padding):
    kh, kw, _, cout = w.shape
    n, h, wd, _ = x.shape
    ho, wo = conv_out_size(h, kh, stride, padding), conv_out_size(wd, kw, stride, padding)
    (pt, _), (pl, _) = (same_pads(h, kh, stride), same_pads(wd, kw, stride)) if padding == "SAME" else ((0, 0), (0, 0))
    out = np.zeros((n, ho, wo, cout))
    for i in range(ho):
        for j in range(wo):
            for a in range(kh):
                for b in range(kw):
                    y, z = i * stride + a - pt, j * stride + b - pl
                    if 0 <= y < h and 0 <= z < wd:
                        out[:, i, j, :] += x[:, y, z, :].astype(np.float64) @ w[a, b].astype(np.float64)
    return out


@pytest.mark.parametrize("shape", [(2, 7, 9, 3), (1, 8, 8, 2), (3, 5, 6, 1), (2, 6, 7, 17)])  # both of its methods
@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_oracle_matches_direct_loop(shape, stride, padding):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((3, 2, shape[-1], 4))
    np.testing.assert_allclose(
        oracle.conv2d(x, w, stride, padding), loop_conv(x, w, stride, padding), rtol=1e-12, atol=1e-12
    )


def test_article_shapes_and_flops():
    assert CONV_FULL.output_shape == (128, 128, 128, 256)
    assert CONV_FULL.flops() == 2 * 128 * 128 * 128 * 256 * 5 * 5 * 3 == 80_530_636_800
    assert same_pads(256, 5, 2) == (1, 2)  # TF puts the extra pad row at the bottom
    assert CONV_FULL.min_bytes() == 4 * (128 * 256 * 256 * 3 + 5 * 5 * 3 * 256 + 128 * 128 * 128 * 256)
    assert CONV_QUICK.batch % 8 == 0 and CONV_QUICK.kernel_shape[:3] == CONV_FULL.kernel_shape[:3]


def test_inputs_are_deterministic():
    a, b = CONV_QUICK.inputs(), CONV_QUICK.inputs()
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert a[0].dtype == np.float32 and a[0].shape == CONV_QUICK.image_shape


def test_non_dividing_batch_is_an_error():
    assert check_divisible(128, 8) == 16
    with pytest.raises(ValueError, match="does not divide by 3 replicas"):
        check_divisible(128, 3)


def test_compare_flags_non_finite_and_shape():
    assert oracle.errors(np.array([np.nan]), np.array([1.0]))["max_rel_err"] == float("inf")
    with pytest.raises(ValueError, match="shape"):
        oracle.errors(np.zeros(2), np.zeros(3))


def test_cnn_oracle_blocks_have_the_notebook_shapes():
    rng = np.random.default_rng(0)
    shapes = [(1,)] * 4 + [(5, 5, 1, 64), (64,)] + [(64,)] * 4 + [(5, 5, 64, 128), (128,)] + [(128,)] * 4
    shapes += [(5, 5, 128, 256), (256,), (2304, 256), (256,), (256, 10), (10,)]
    w = [rng.standard_normal(s) * 0.05 for s in shapes]
    for i in (2, 8, 14):  # positive moving variances, unit gammas
        w[i + 1] = np.abs(w[i + 1]) + 1.0
    out = cnn_oracle.cnn_forward(w, rng.uniform(0, 255, (2, 28, 28, 1)))
    assert {k: v.shape for k, v in out.items()} == {
        "block1": (2, 14, 14, 64),
        "block2": (2, 7, 7, 128),
        "block3": (2, 3, 3, 256),
        "dense1": (2, 256),
        "logits": (2, 10),
        "probs": (2, 10),
    }
    np.testing.assert_allclose(out["probs"].sum(-1), 1.0)


def random_cnn_weights(seed: int = 0) -> list[np.ndarray]:
    """22 arrays in Keras's order with the notebook's shapes: a generic point, not a trained model."""
    rng = np.random.default_rng(seed)
    w = []
    for _, cin, cout in CNN_CONVS:
        lim = np.sqrt(6 / (25 * (cin + cout)))
        w += [
            rng.uniform(0.5, 1.5, cin),
            rng.normal(0, 0.1, cin),
            np.zeros(cin),
            np.ones(cin),
            rng.uniform(-lim, lim, (5, 5, cin, cout)),
            rng.normal(0, 0.1, cout),
        ]
    for a, b in zip(CNN_DENSE[:-1], CNN_DENSE[1:], strict=True):
        lim = np.sqrt(6 / (a + b))
        w += [rng.uniform(-lim, lim, (a, b)), rng.normal(0, 0.1, b)]
    return w


TRAINABLE = [i for i in range(22) if i >= 18 or i % 6 not in (2, 3)]  # Keras order, moving statistics left out


def _other_routing(a: np.ndarray, seed: int) -> np.ndarray:
    """A valid routing that is not the argmax: one random position of every window."""
    win = cnn_oracle._windows(a)
    pick = np.random.default_rng(seed).integers(0, 4, win.shape[:-1])
    onehot = (np.arange(4) == pick[..., None]).astype(np.float64)
    return cnn_oracle._unwindows(onehot, a.shape)


@pytest.mark.parametrize("routing", ["argmax", "arbitrary"])
def test_cnn_gradients_match_central_differences(routing):
    # For a fixed routing the loss is smooth, so central differences along a random direction in each
    # parameter must agree with the hand-written backward pass to float64 accuracy.
    w = random_cnn_weights()
    rng = np.random.default_rng(1)
    x, y = rng.uniform(0, 255, (2, 28, 28, 1)), np.array([3, 7])
    _, _, info = cnn_oracle.cnn_loss_and_grads(w, x, y)
    r = info["routing"] if routing == "argmax" else [_other_routing(a, k) for k, a in enumerate(info["pool_inputs"])]
    loss, grads, _ = cnn_oracle.cnn_loss_and_grads(w, x, y, r)
    assert [g.shape for g in grads] == [w[i].shape for i in TRAINABLE] and cnn_oracle.cnn_loss(w, x, y, r) == loss
    for g, i in zip(grads, TRAINABLE, strict=True):
        d = rng.standard_normal(w[i].shape)
        # a step of 1e-6 of the parameter's scale, and of 1e-6 at least: a smaller one (a parameter near 0, as a
        # single BatchNorm beta) lets the loss's float64 rounding, about 1e-16 / h, reach the bound below
        h = 1e-6 * max(np.linalg.norm(w[i]), 1.0) / np.linalg.norm(d)
        plus, minus = list(w), list(w)
        plus[i], minus[i] = w[i] + h * d, w[i] - h * d
        fd = (cnn_oracle.cnn_loss(plus, x, y, r) - cnn_oracle.cnn_loss(minus, x, y, r)) / (2 * h)
        assert abs(fd - np.sum(g * d)) <= 1e-6 * np.linalg.norm(g) * np.linalg.norm(d), i


def test_pool_routing_and_window_stats():
    a = np.zeros((1, 4, 5, 1))  # 2 x 2 windows; the odd last column is outside every window
    a[0, :2, :2, 0] = [[1.0, 3.0], [3.0, 2.0]]  # an exact tie: the first (row-major) takes it
    a[0, :2, 2:4, 0] = [[5.0, np.nextafter(np.float32(5), np.float32(9))], [0.0, 0.0]]  # one float32 ulp apart
    a[0, 2:, :2, 0] = [[0.0, 1.0], [2.0, 9.0]]
    r = cnn_oracle.pool_routing(a)
    assert r.sum() == 4 and r[0, 0, 1, 0] == 1 and r[0, 0, 3, 0] == 1 and r[0, :, 4].sum() == 0
    other = r.copy()
    other[0, 0, 1, 0], other[0, 1, 0, 0] = 0, 1  # the tie broken the other way
    stats = cnn_oracle.pool_window_stats(a, {"jax": r, "tf": other})
    # windows: the exact tie, the 1-ulp near-tie, and the flat all-zero window are near-ties
    assert stats == {"windows": 4, "near_ties": 3, "routed_differently_jax_tf": 1}


# The gradient check's verdicts, on saved arrays made here: a test of the harness's logic that holds on
# any CPU, whatever its kernels. Each "framework" is the oracle itself rounded to float32, with a routing.
def _saved(exact: tuple, routing, planted: dict[str, float] | None = None) -> dict:
    """`exact`: the float64 (loss, gradients) under `routing` (the fixture `exact`'s)."""
    loss, grads = exact
    out = {"loss": np.float32(loss), **{f"routing/{k}": r.astype(np.float32) for k, r in enumerate(routing)}}
    for i, (name, g) in enumerate(zip(checks.GRAD_NAMES, grads, strict=True)):
        g = g.astype(np.float32)
        if name in (planted or {}):
            g = g.copy()
            g.flat[0] += planted[name] * np.abs(g).max()
        out[f"grad/{i:03d}"] = g
    return out


@pytest.fixture(scope="module")
def batch_with_a_tie():
    w = random_cnn_weights()
    rng = np.random.default_rng(2)
    x, y = rng.uniform(0, 255, (4, 28, 28, 1)), np.array([0, 3, 7, 9])
    _, _, info = cnn_oracle.cnn_loss_and_grads(w, x, y)
    routing = info["routing"]
    flipped = [r.copy() for r in routing]  # one pool1 window's gradient sent to another position
    win = cnn_oracle._windows(flipped[0])
    k = int(np.argmax(win[0, 3, 4, 5]))
    win[0, 3, 4, 5, k], win[0, 3, 4, 5, (k + 1) % 4] = 0.0, 1.0
    flipped[0] = cnn_oracle._unwindows(win, flipped[0].shape)
    return w, x, y, routing, flipped


@pytest.fixture(scope="module")
def exact(batch_with_a_tie) -> dict[str, tuple]:
    """The float64 loss and gradients of the batch under each routing ('routing', 'flipped'), computed once."""
    w, x, y, routing, flipped = batch_with_a_tie
    return {k: cnn_oracle.cnn_loss_and_grads(w, x, y, r)[:2] for k, r in (("routing", routing), ("flipped", flipped))}


GRADS = "gradients (every parameter)"


def _check(w, x, y, saved):
    tol = cnn_grad_tolerance(len(y))
    return {r["check"]: r for r in checks.grads(saved, w, x, y, tol, cnn_loss_tolerance(len(y)))}


def test_agreement_passes(batch_with_a_tie, exact):
    w, x, y, routing, _ = batch_with_a_tie
    g = _check(w, x, y, {"jax": _saved(exact["routing"], routing), "tf": _saved(exact["routing"], routing)})[GRADS]
    assert g["passed"] and set(g["figures"]) == {"jax_vs_f64", "tf_vs_f64", "tf_vs_jax"}
    assert g["figures"]["tf_vs_jax"] == 0.0 and g["max_rel_err"] < 1e-6
    assert set(g["per_parameter"]) == set(checks.GRAD_NAMES)
    assert [p["routed_differently_jax_tf"] for p in g["pooling"]] == [0, 0, 0]


def test_a_tie_broken_differently_is_explained_not_failed(batch_with_a_tie, exact):
    w, x, y, routing, flipped = batch_with_a_tie
    g = _check(w, x, y, {"jax": _saved(exact["routing"], routing), "tf": _saved(exact["flipped"], flipped)})[GRADS]
    assert g["figures"]["tf_vs_jax"] > g["tolerance"]  # the raw comparison alone would fail
    assert g["passed"], g["detail"]
    assert [p["routed_differently_jax_tf"] for p in g["pooling"]] == [1, 0, 0]
    assert "route 1 of" in g["detail"] and "pool1: 1" in g["detail"]


@pytest.mark.parametrize("culprit", ["tf", "jax"])
def test_a_planted_error_names_the_framework_and_parameter(batch_with_a_tie, exact, culprit):
    w, x, y, routing, flipped = batch_with_a_tie
    tol = cnn_grad_tolerance(len(y))
    routings = {"jax": ("routing", routing), "tf": ("flipped", flipped)}  # a tie broken differently too
    saved = {fw: _saved(exact[k], r) for fw, (k, r) in routings.items()}
    k, r = routings[culprit]
    saved[culprit] = _saved(exact[k], r, {"conv2.kernel": 5 * tol})
    g = _check(w, x, y, saved)[GRADS]
    assert not g["passed"]
    other = "jax" if culprit == "tf" else "tf"
    assert g["figures"][f"{culprit}_vs_f64"] > tol >= g["figures"][f"{other}_vs_f64"]
    assert g["detail"].startswith(f"{short(culprit)} is off float64") and "conv2.kernel" in g["detail"]
    assert short(other) not in g["detail"]


def test_one_framework_is_judged_alone(batch_with_a_tie, exact):
    w, x, y, routing, _ = batch_with_a_tie
    rows = _check(w, x, y, {"jax": _saved(exact["routing"], routing, {"dense1.bias": 1e-2})})
    assert set(rows[GRADS]["figures"]) == {"jax_vs_f64"}
    assert not rows[GRADS]["passed"] and rows["loss (one batch)"]["passed"]


def test_gradient_tolerance_grows_with_the_reductions():
    assert cnn_grad_tolerance(4) < cnn_grad_tolerance(64) < cnn_grad_tolerance(1024)
    assert 1e-4 < cnn_grad_tolerance(PARITY_BATCH) < 1e-3  # the batch the harness checks gradients on
    assert cnn_loss_tolerance(PARITY_BATCH) < cnn_grad_tolerance(PARITY_BATCH)
    assert cnn_grad_tolerance(64, "tpu", "default") == 5e-2  # bfloat16 passes: the reduced table
