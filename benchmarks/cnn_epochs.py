"""CNN training epochs of named variants, standalone (no harness): the CPU default schedule's shape (a global
batch of 256, 2 steps an epoch) on synthetic images, each variant in turn in this one process; the first epoch
(compilation) and the median of the next ones. One framework a process: --framework tf, jax or keras-jax, whose
make_trainer variants the names are.

    python benchmarks/cnn_epochs.py --framework jax jit+bf16 jit+bf16+pool
    XLA_FLAGS=--xla_cpu_experimental_onednn_custom_call=true GLIBC_TUNABLES=glibc.malloc.hugetlb=1 \\
        python benchmarks/cnn_epochs.py --framework jax jit+bf16 jit+bf16+pool jit+bf16 jit+bf16+pool
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from parity.common import frameworks
from parity.common.frameworks import JAX, KEYS
from parity.workloads.trained import data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--framework", choices=KEYS, default=JAX, help="whose trainers (default: jax)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=2, help="steps an epoch")
    ap.add_argument("--epochs", type=int, default=8, help="the first (compiling) one included")
    ap.add_argument("variants", nargs="+", help="the framework's training variants ('jit+pool', 'fit', ...)")
    args = ap.parse_args()
    impl = frameworks.load(args.framework)
    devices = impl.setup_devices("cpu", 1)
    ds = data.synthetic(4096, 64, seed=3)
    out = []
    for v in args.variants:
        trainer = impl.adapter("cnn").make_trainer(impl.adapter("cnn").build(0), devices, v)
        times = []
        for e in range(args.epochs):
            x, y = data.batches(ds, data.batch_offsets(e, args.steps, len(ds.x_train), args.batch), args.batch)
            t0 = time.perf_counter()
            trainer.steps(x, y)  # returns the per-step metrics as NumPy: waits for the last step
            times.append(time.perf_counter() - t0)
        out.append({"variant": v, "first_s": times[0], "median_s": float(np.median(times[1:])), "epochs_s": times})
        print(f"{v}: first {times[0]:.3f} s, median of {len(times) - 1} {out[-1]['median_s']:.4f} s", flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
