"""How close each multi-process comparison of tests/test_multiprocess.py comes to its derived bound.

    PYTHONPATH=tests python benchmarks/multiprocess_bounds.py [--json OUT]

Runs the tests' cases (JAX 2 processes x 4 devices against 1 x 8, TF 2 workers against MirroredStrategy
over 2 devices, the conv and one CNN step) and prints, per comparison, the largest |difference| over its
bound (<= 1 passes) with the array that reaches it, and the same for the faults the tests plant. Set
ONEDNN_MAX_CPU_ISA / XLA_FLAGS=--xla_cpu_max_isa=... to imitate another CPU class.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ["JAX_NUM_CPU_DEVICES"] = "8"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np  # noqa: E402
import test_multiprocess as tm  # noqa: E402  (its conftest-free helpers)
from frameworks_setup import JAX_DEVICES, TF_DEVICES  # noqa: E402
from multiproc_case import case, first_step_bounds, first_step_excess  # noqa: E402

import jax_impl  # noqa: E402
import tf_impl  # noqa: E402
from parity.common import float64 as oracle  # noqa: E402
from parity.common.tolerances import rounding_bound  # noqa: E402
from parity.workloads import WORKLOADS  # noqa: E402


def conv_excess(got: np.ndarray, ref: np.ndarray) -> float:
    spec = WORKLOADS["conv"].quick
    images, kernels = spec.inputs()
    bound = (
        2
        * rounding_bound([spec.kh * spec.kw * spec.cin])
        * oracle.conv2d(np.abs(images), np.abs(kernels), spec.stride, spec.padding)
    )
    return float(np.max(np.abs(np.asarray(got, np.float64) - ref) / bound))


def worst(excess: dict) -> dict:
    k = max(excess, key=excess.get)
    return {"worst": k, "excess": excess[k]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    out: dict = {"flags": {k: os.environ.get(k) for k in ("ONEDNN_MAX_CPU_ISA", "XLA_FLAGS")}}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        got = tm.launched_case(tmp, "jax", "conv", "pmap,shard_map", 2, 4)
        for v in ("pmap", "shard_map"):
            ref = case(jax_impl, JAX_DEVICES, "conv", v)
            out[f"jax {v} conv 2x4 vs 1x8"] = conv_excess(got[f"{v}/out"], ref[f"{v}/out"])
        got = tm.launched_case(tmp, "tf", "conv", "strategy", 2, 1)
        out["tf strategy conv 2 workers vs 1 process"] = conv_excess(
            got["strategy/out"], case(tf_impl, TF_DEVICES[:2], "conv", "strategy")["strategy/out"]
        )
        ref = {}
        for v in ("pmap", "shard_map"):
            ref.update(case(jax_impl, JAX_DEVICES, "cnn", v))
        bounds = first_step_bounds([ref[f"pmap/w0_{i:03d}"] for i in range(22)], 8)
        for p, g in enumerate(tm.launched_cnn(tmp, "jax", "pmap,shard_map", 2, 4)):
            for v in ("pmap", "shard_map"):
                out[f"jax {v} cnn step, process {p} of 2x4 vs 1x8"] = worst(first_step_excess(g, ref, v, v, bounds))
        bad = case(jax_impl, JAX_DEVICES[:4], "cnn", "shard_map", rows=slice(0, 8))
        out["fault: missed all-reduce"] = worst(first_step_excess(bad, ref, "shard_map", "shard_map", bounds))
        bad = case(jax_impl, JAX_DEVICES, "cnn", "shard_map", learning_rate=0.5)
        out["fault: gradient halved"] = worst(first_step_excess(bad, ref, "shard_map", "shard_map", bounds))
        procs = tm.launched_cnn(tmp, "tf", "loop", 2, 1)
        for v in ("loop", "strategy"):
            r = case(tf_impl, TF_DEVICES[:2], "cnn", v)
            b = first_step_bounds([r[f"{v}/w0_{i:03d}"] for i in range(22)], 2)
            for p, g in enumerate(procs):
                out[f"tf loop cnn step, process {p} of 2 workers vs {v}"] = worst(first_step_excess(g, r, "loop", v, b))
    for k, v in out.items():
        print(f"{k}: {v}")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
