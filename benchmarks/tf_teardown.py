"""Idle epochs of Keras's `fit` under MirroredStrategy: one line of JSON per epoch of TensorFlow's `strategy` CNN
trainer on N logical CPUs (quick CNN batches), with its wall time and this process's CPU time. An epoch whose wall
time is far above its CPU time waited: the per-device input pipelines' iterators, when destroyed, wait for their
tf.data autotuning threads' next wake-up (docs/tuning.md, `loop`). --patch turns those pipelines' autotuning off
(a scratch patch of TensorFlow's private multi_device_iterator_ops._create_device_dataset, never the harness's):
what the epochs read without the wait. Each case is one fresh process:

    python benchmarks/tf_teardown.py --epochs 16 >> OUT.jsonl
    python benchmarks/tf_teardown.py --epochs 16 --patch >> OUT.jsonl

(the figures said in docs/results/xeon-amx/README.md, `--quick`)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replicas", type=int, default=8)
    p.add_argument("--epochs", type=int, default=16)
    p.add_argument("--batch", type=int, default=64, help="global batch; 2 steps an epoch")
    p.add_argument("--patch", action="store_true", help="the per-device pipelines' autotuning off")
    a = p.parse_args()
    import tensorflow as tf

    import tf_impl as impl
    from parity.workloads.cnn.spec import CnnSpec

    if a.patch:
        from tensorflow.python.data.ops import multi_device_iterator_ops as mdi

        made = mdi._create_device_dataset

        def untuned(*args, **kwargs):
            opts = tf.data.Options()
            opts.autotune.enabled = False
            return made(*args, **kwargs).with_options(opts)

        mdi._create_device_dataset = untuned
    devices = impl.setup_devices("cpu", a.replicas)
    s = CnnSpec()
    rng = np.random.default_rng(0)
    x = rng.random((2, a.batch, 28, 28, 1), np.float32)
    y = rng.integers(0, 10, (2, a.batch)).astype(np.int32)
    t = impl.adapter("cnn").make_trainer(
        impl.adapter("cnn").build(0), devices, "strategy", s.learning_rate, s.adam_epsilon, s.seed
    )
    for e in range(a.epochs):
        c0, t0 = time.process_time(), time.perf_counter()
        np.asarray(t.steps(x, y))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        line = {"epoch": e + 1, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "patch": a.patch}
        print(json.dumps({**line, "replicas": a.replicas, "batch": a.batch}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
