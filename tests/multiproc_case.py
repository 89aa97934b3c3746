"""One process of a test run: a workload through an implementation's public surface, its output saved.

Run under `python -m parity.launch --module multiproc_case` (PYTHONPATH=tests) for P processes, or
alone with --replicas N (tests/test_multiprocess.py calls case() in its own session instead).
Process 0 writes --out (.npz), for each of the comma-separated --variants: conv: every output row;
cnn: the per-step losses of a dropout-free trajectory and the final weights.
"""

from __future__ import annotations

import argparse
import importlib
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from parity import cluster as cl  # noqa: E402
from parity.timing import Timer  # noqa: E402
from parity.workloads import WORKLOADS  # noqa: E402

STEPS, BATCH = 3, 16


SLOW_S = 0.3  # how much longer process 1's calls take in the 'timing' case


def case(impl, devices, workload: str, variant: str) -> dict[str, np.ndarray]:
    """The outputs one variant gives, keyed 'variant/...'. 'timing': the conv timed by parity's Timer with
    process 1 made slower on purpose; the times every process recorded."""
    v, result = variant, {}
    if workload == "timing":
        spec = WORKLOADS["conv"].quick
        p = impl.prepare_conv(v, *spec.inputs(), devices, spec.stride, spec.padding)
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
        p = impl.prepare_conv(v, images, kernels, devices, spec.stride, spec.padding)
        out = p.run()
        impl.block(out)
        result[f"{v}/out"] = p.rows(out, list(range(spec.batch)))
        result[f"{v}/shape"] = np.array(p.shape(out))
        return result
    rng = np.random.default_rng(7)
    x = rng.integers(0, 256, (STEPS, BATCH, 28, 28, 1)).astype(np.uint8)
    y = rng.integers(0, 10, (STEPS, BATCH)).astype(np.int32)
    t = impl.make_trainer(impl.build_cnn(3, dropout=False), devices, v, 1e-3, 1e-7, 0)
    result[f"{v}/loss"] = np.asarray(t.steps(x, y))[:, 0]
    for i, w in enumerate(impl.get_weights(t.model())):
        result[f"{v}/w{i:03d}"] = w
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", choices=("jax", "tf"), required=True)
    ap.add_argument("--workload", choices=("conv", "cnn", "timing"), required=True)
    ap.add_argument("--replicas", type=int, default=0)
    ap.add_argument("--variants", required=True, help="comma-separated")
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=60.0)
    a = ap.parse_args()
    cluster = cl.from_settings(None, None, None, None, timeout_s=a.timeout)
    impl = importlib.import_module(f"{a.framework}_impl")
    devices = impl.setup_devices("cpu", 0 if cluster else a.replicas, cluster)
    impl.set_precision("highest")
    me = impl.process_info(devices)["process_id"]
    result = {"replicas": np.array(len(devices)), "processes": np.array(impl.process_info(devices)["num_processes"])}
    for v in a.variants.split(","):
        result.update(case(impl, devices, a.workload, v))
    if me == 0:
        np.savez(a.out, **result)


if __name__ == "__main__":
    main()
