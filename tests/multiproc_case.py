"""One process of a test run: a workload through an implementation's public surface, its output saved.

Run under `python -m parity.launch --module multiproc_case` (PYTHONPATH=tests) for P processes, or
alone with --replicas N (tests/test_multiprocess.py calls case() in its own session instead).
Process 0 writes --out (.npz), process p > 0 --out with '.pP' before the suffix, for each of the
comma-separated --variants: conv: every output row; cnn: one dropout-free training step's loss, and the
weights before and after it.

first_step_bounds() says, element by element, how far two correct data-parallel runs of that step may be
apart when only their summation orders differ (the all-reduce's, and each kernel's): a bound derived from
the float64 oracle and the rounding model of parity/common/tolerances.py, the same on every CPU.
"""

from __future__ import annotations

import argparse
import importlib
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from parity.api.cnn import CNN_WEIGHTS  # noqa: E402
from parity.common.tolerances import F32_UNIT_ROUNDOFF
from parity.engine import cluster as cl  # noqa: E402
from parity.engine.timing import Timer  # noqa: E402
from parity.workloads import WORKLOADS  # noqa: E402
from parity.workloads.cnn import checks
from parity.workloads.cnn import oracle as cnn_oracle
from parity.workloads.cnn.tolerances import cnn_grad_tolerance, cnn_loss_tolerance

BATCH = 16
# Keras's Adam with epsilon 1: one step moves a weight by lr * g / (|g| + eps / sqrt(1 - b2)), linear in the
# gradient while |g| << 31.6, so a gradient scaled by the wrong replica or process count shows in the weights.
# (At Keras's 1e-7 the first step is lr * sign(g): blind to the scale, and a near-zero g may flip sign.)
LEARNING_RATE, ADAM_EPSILON, ADAM_B2, BN_MOMENTUM = 1.0, 1.0, 0.999, checks.BN_MOMENTUM


SLOW_S = 0.3  # how much longer process 1's calls take in the 'timing' case


def case(
    impl, devices, workload: str, variant: str, rows: slice = slice(None), learning_rate: float = LEARNING_RATE
) -> dict[str, np.ndarray]:
    """The outputs one variant gives, keyed 'variant/...'. 'timing': the conv timed by parity's Timer with
    process 1 made slower on purpose; the times every process recorded. 'cnn' trains on the batch's `rows` at
    `learning_rate` (the tests change them to show what a faulty step would give)."""
    v, result = variant, {}
    if workload == "timing":
        spec = WORKLOADS["conv"].quick
        p = impl.adapter("conv").prepare(v, *spec.inputs(), devices, spec.stride, spec.padding)
        me = impl.process_info(devices)["process_id"]

        def run():
            time.sleep(SLOW_S if me == 1 else 0.0)
            return p.run()

        t = Timer(run, impl.block, lambda out: {}, impl.slowest)
        t.first()
        for _ in range(3):
            t.rep()
        result[f"{v}/times"] = np.array(t.m.times)
        return result
    if workload == "conv":
        spec = WORKLOADS["conv"].quick
        images, kernels = spec.inputs()
        p = impl.adapter("conv").prepare(v, images, kernels, devices, spec.stride, spec.padding)
        out = p.run()
        impl.block(out)
        result[f"{v}/out"] = p.rows(out, list(range(spec.batch)))
        result[f"{v}/shape"] = np.array(p.shape(out))
        return result
    x, y = cnn_batch()
    model = impl.adapter("cnn").build(3, dropout=False)
    for i, w in enumerate(impl.adapter("cnn").get_weights(model)):
        result[f"{v}/w0_{i:03d}"] = w
    t = impl.adapter("cnn").make_trainer(model, devices, v, learning_rate, ADAM_EPSILON, 0)
    result[f"{v}/loss"] = np.asarray(t.steps(x[:, rows], y[:, rows]))[:, 0]
    for i, w in enumerate(impl.adapter("cnn").get_weights(t.model())):
        result[f"{v}/w{i:03d}"] = w
    return result


def cnn_batch() -> tuple[np.ndarray, np.ndarray]:
    """The one global batch of the 'cnn' case, as (1, BATCH, ...) steps."""
    rng = np.random.default_rng(7)
    return (
        rng.integers(0, 256, (1, BATCH, 28, 28, 1)).astype(np.uint8),
        rng.integers(0, 10, (1, BATCH)).astype(np.int32),
    )


# Roundings in one run's own elementwise arithmetic, each at most u of its result: Adam's update (its two
# moments, square root, epsilon, division, step size and subtraction: 10) and the moving statistics'
# (two products and a sum: 3).
ADAM_ROUNDINGS, MOVING_ROUNDINGS = 10, 3


def first_step_bounds(w0: list[np.ndarray], replicas: int) -> dict[str, np.ndarray | float]:
    """How far two correct runs of the 'cnn' case's step, on `replicas` replicas from weights `w0`, may be apart.

    Each replica differentiates its own contiguous share of the batch; the step averages the replicas'
    gradients, losses and batch statistics (an all-reduce, in an order each run chooses), then updates.
    From the float64 oracle, per replica r: the gradient g_r, its scale s_r (checks.grad_scale: where its sums
    cancel) and its batch statistics. A run's averaged gradient is within E of the exact mean g:
        E = cnn_grad_tolerance(per-replica batch) * max_r s_r  +  (R - 1) u mean_r |g_r|,
    each replica's rounding (the gradient check's model) plus the all-reduce's (R - 1 additions, each within u
    of the partial sum: the worst case, whatever the order). Adam's first step is d(g) = -lr g / (|g| + e'),
    e' = eps / sqrt(1 - b2), whose slope is at most lr e' / (|g| - E + e')^2 on [g - E, g + E]; two runs'
    updates are then within 2 E times that, plus each run's own roundings (ADAM_ROUNDINGS u of |w|, |d|).
    The loss and the moving statistics likewise: the forward path's model (cnn_loss_tolerance) per replica
    plus the all-reduce, the statistics through (1 - momentum). Elementwise arrays, keyed as the case's.
    """
    x, y = cnn_batch()
    b = BATCH // replicas
    parts = [
        cnn_oracle.cnn_loss_and_grads(w0, x[0, r * b : (r + 1) * b], y[0, r * b : (r + 1) * b]) for r in range(replicas)
    ]
    u, tol_g, tol_f = F32_UNIT_ROUNDOFF, cnn_grad_tolerance(b), cnn_loss_tolerance(b)
    spread = (replicas - 1) * u
    losses = np.array([p[0] for p in parts])
    out: dict[str, np.ndarray | float] = {"loss": 2 * (tol_f + spread) * float(np.mean(np.abs(losses)))}
    e2 = ADAM_EPSILON / np.sqrt(1 - ADAM_B2)
    trainable = [i for i, w in enumerate(CNN_WEIGHTS) if w.trainable]
    for k, i in enumerate(trainable):
        g_r = np.stack([p[1][k] for p in parts])
        e = tol_g * max(checks.grad_scale(b, p[1][k], p[2]["terms"][k]) for p in parts) + spread * np.abs(g_r).mean(0)
        g = g_r.mean(0)
        step = LEARNING_RATE * g / (np.abs(g) + e2)
        slope = LEARNING_RATE * e2 / (np.maximum(np.abs(g) - e, 0) + e2) ** 2
        own = ADAM_ROUNDINGS * u * (np.abs(w0[i]) + np.abs(step))
        out[f"w{i:03d}"] = 2 * e * slope + 2 * own
    for block in range(3):
        stats = [p[2]["batch_stats"][block] for p in parts]
        for field, key in (("moving_mean", "mean"), ("moving_variance", "variance")):
            i = next(j for j, w in enumerate(CNN_WEIGHTS) if w.name == f"bn{block + 1}.{field}")
            s_r = np.stack([st[key] for st in stats])
            # the mean's error scales with the inputs' magnitude; the (two-pass) variance's with var + mean|h|^2
            scale = np.stack(
                [st["abs_mean"] if key == "mean" else st["variance"] + st["abs_mean"] ** 2 for st in stats]
            ).max(0)
            e = tol_f * scale + spread * np.abs(s_r).mean(0)
            moving = BN_MOMENTUM * w0[i] + (1 - BN_MOMENTUM) * s_r.mean(0)
            out[f"w{i:03d}"] = 2 * (1 - BN_MOMENTUM) * e + 2 * MOVING_ROUNDINGS * u * (np.abs(moving) + np.abs(w0[i]))
    return out


def first_step_excess(got: dict, ref: dict, vg: str, vr: str, bounds: dict) -> dict[str, float]:
    """Per compared array of variant `vg` in `got` against `vr` in `ref` (the same step from the same weights,
    so the weights after it differ by what the updates differ by): the largest |difference| over its bound,
    elementwise; every value <= 1 is agreement."""
    if not all(np.array_equal(got[f"{vg}/w0_{i:03d}"], ref[f"{vr}/w0_{i:03d}"]) for i in range(len(CNN_WEIGHTS))):
        raise AssertionError("the two runs did not start from the same weights")
    out = {"loss": float(np.max(np.abs(got[f"{vg}/loss"] - ref[f"{vr}/loss"])) / bounds["loss"])}
    for i in range(len(CNN_WEIGHTS)):
        d = np.abs(np.asarray(got[f"{vg}/w{i:03d}"], np.float64) - ref[f"{vr}/w{i:03d}"])
        out[f"w{i:03d}"] = float(np.max(d / bounds[f"w{i:03d}"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", choices=("jax", "tf"), required=True)
    ap.add_argument("--workload", choices=("conv", "cnn", "timing"), required=True)
    ap.add_argument("--replicas", type=int, default=0)
    ap.add_argument("--variants", required=True, help="comma-separated")
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=60.0)
    a = ap.parse_args()
    cluster = cl.from_flags_or_env(None, None, None, None, timeout_s=a.timeout)
    impl = importlib.import_module(f"{a.framework}_impl")
    devices = impl.setup_devices("cpu", 0 if cluster else a.replicas, cluster)
    impl.set_precision("highest")
    me = impl.process_info(devices)["process_id"]
    result = {"replicas": np.array(len(devices)), "processes": np.array(impl.process_info(devices)["num_processes"])}
    for v in a.variants.split(","):
        result.update(case(impl, devices, a.workload, v))
    np.savez(process_file(a.out, me), **result)


def process_file(out: str, process_id: int) -> str:
    """Where process `process_id` saves its arrays: --out itself for process 0."""
    if process_id == 0:
        return out
    stem, dot, suffix = out.rpartition(".")
    return f"{stem}.p{process_id}.{suffix}" if dot else f"{out}.p{process_id}"


if __name__ == "__main__":
    main()
