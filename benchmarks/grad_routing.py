"""Where TF's and JAX's CNN gradients part: per parameter, each framework against float64 with its own
max-pool routing and with float64's, the frameworks against each other, and the pooling windows' ties.

    python benchmarks/grad_routing.py                      # synthetic images, as the harness's --quick
    python benchmarks/grad_routing.py --images zero-bg     # Fashion-MNIST-like: exact zero background
    python benchmarks/grad_routing.py --images dither      # + uniform 0..1 noise: no flat regions
    ONEDNN_MAX_CPU_ISA=AVX2 XLA_FLAGS=--xla_cpu_max_isa=AVX2 python benchmarks/grad_routing.py   # imitate AVX2

One batch of 64 images, adapter('cnn').build(seed=0) weights, dropout off: the harness's gradient check, unrolled
(parity.workloads.trained.rounds.PARITY_BATCH).
Prints a table and one JSON line. A numerics probe, not a speed measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import platform

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jax_impl  # noqa: E402
import tf_impl  # noqa: E402
from parity.common import float64 as oracle  # noqa: E402
from parity.workloads.cnn import checks
from parity.workloads.cnn import oracle as cnn_oracle
from parity.workloads.trained import data


def images(kind: str, batch: int) -> tuple[np.ndarray, np.ndarray]:
    ds = data.synthetic(2048, 512)
    x, y = data.batches(ds, data.batch_offsets(1, 1, len(ds.x_train), batch), batch)
    x, y = x[0].astype(np.float32), y[0]
    if kind == "dither":
        x = x + np.random.default_rng(0).uniform(0, 1, x.shape).astype(np.float32)
    elif kind == "zero-bg":  # Fashion-MNIST's background is exactly 0 around the garment
        x = np.where(x < 40, 0, x).astype(np.float32)
    return x, y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", choices=("synthetic", "zero-bg", "dither"), default="synthetic")
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    jax.config.update("jax_default_matmul_precision", "highest")
    x, y = images(args.images, args.batch)
    w = tf_impl.adapter("cnn").get_weights(tf_impl.adapter("cnn").build(0))
    got = {}
    for fw, mod in (("tf", tf_impl), ("jax", jax_impl)):
        m = mod.adapter("cnn").build(0, dropout=False)
        mod.adapter("cnn").set_weights(m, w)
        got[fw] = mod.adapter("cnn").loss_and_grads(m, x, y)
    _, g64, f64 = cnn_oracle.cnn_loss_and_grads(w, x, y)
    own = {fw: cnn_oracle.cnn_loss_and_grads(w, x, y, g.routing)[1] for fw, g in got.items()}
    pools = [
        cnn_oracle.pool_window_stats(a, {fw: g.routing[k] for fw, g in got.items()} | {"f64": f64["routing"][k]})
        for k, a in enumerate(f64["pool_inputs"])
    ]

    def err(a, b):
        return oracle.errors(a, b)["max_rel_err"]

    per = {}
    for i, name in enumerate(checks.GRAD_NAMES):
        per[name] = {f"{fw}_vs_f64_own": err(g.grads[i], own[fw][i]) for fw, g in got.items()}
        per[name] |= {f"{fw}_vs_f64_argmax": err(g.grads[i], g64[i]) for fw, g in got.items()}
        per[name]["tf_vs_jax"] = err(got["tf"].grads[i], got["jax"].grads[i])
    cols = list(per[checks.GRAD_NAMES[0]])
    print(f"{'parameter':16s} " + " ".join(f"{c:>18s}" for c in cols))
    for name, figs in per.items():
        print(f"{name:16s} " + " ".join(f"{figs[c]:18.1e}" for c in cols))
    for k, p in enumerate(pools):
        print(f"pool{k + 1}: {p}")
    flags = {k: os.environ[k] for k in ("ONEDNN_MAX_CPU_ISA", "TF_ENABLE_ONEDNN_OPTS", "XLA_FLAGS") if k in os.environ}
    print(
        json.dumps(
            {
                "images": args.images,
                "batch": args.batch,
                "host": platform.processor() or platform.machine(),
                "flags": flags,
                "per_parameter": per,
                "pools": pools,
            }
        )
    )


if __name__ == "__main__":
    main()
