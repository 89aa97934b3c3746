"""One process of a test run: a workload through an implementation's public surface, its output saved.

Run under `python -m parity.launch --module multiproc_case` (PYTHONPATH=tests) for P processes, or
alone with --replicas N for the one-process reference. Process 0 writes --out (.npz):
conv: every output row; cnn: the per-step losses of a dropout-free trajectory and the final weights.
"""

from __future__ import annotations

import argparse
import importlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from parity import cluster as cl  # noqa: E402
from parity.api import save_npz  # noqa: E402
from parity.workloads import SPECS  # noqa: E402

STEPS, BATCH = 3, 16


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", choices=("jax", "tf"), required=True)
    ap.add_argument("--workload", choices=("conv", "cnn"), required=True)
    ap.add_argument("--replicas", type=int, default=0)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=60.0)
    a = ap.parse_args()
    cluster = cl.from_settings(None, None, None, None, timeout_s=a.timeout)
    impl = importlib.import_module(f"{a.framework}_impl")
    devices = impl.setup_devices("cpu", 0 if cluster else a.replicas, cluster)
    impl.set_precision("highest")
    me = impl.process_info(devices)["process_id"]
    if a.workload == "conv":
        spec = SPECS["conv"][1]
        images, kernels = spec.inputs()
        p = impl.prepare_conv(a.variant, images, kernels, devices, spec.stride, spec.padding)
        out = p.run()
        impl.block(out)
        result = {"out": p.rows(out, list(range(spec.batch))), "shape": np.array(p.shape(out)),
                  "replicas": np.array(len(devices))}  # fmt: skip
    else:
        rng = np.random.default_rng(7)
        x = rng.integers(0, 256, (STEPS, BATCH, 28, 28, 1)).astype(np.uint8)
        y = rng.integers(0, 10, (STEPS, BATCH)).astype(np.int32)
        model = impl.build_cnn(3, dropout=False)
        t = impl.make_trainer(model, devices, a.variant, 1e-3, 1e-7, 0)
        losses = np.asarray(t.steps(x, y))[:, 0]
        weights = impl.get_weights(t.model())
        result = {"loss": losses, "replicas": np.array(len(devices))}
        if me == 0:
            save_npz(weights, a.out + ".weights.npz")
    if me == 0:
        np.savez(a.out, **result)


if __name__ == "__main__":
    main()
