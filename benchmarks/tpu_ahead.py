"""Whether a framework's training steps compile side by side on an accelerator's host: each trained row a default run
times there, its trainer built (timed), then every step compiled ahead (Trainer.ahead) at once on threads; each
compile's own duration (JAX's backend_compile event, in its thread), the wall time of them all, and each first epoch
after it (which must not compile the step again). One JSON line per measurement to --out (and printed).

    python benchmarks/tpu_ahead.py --framework jax --out ahead.jsonl [--batch 1024] [--steps 20] [--serial]

Not a test and not the harness: one compile each, no interval (docs/tpu.md names the file it wrote).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import tpu_levers  # noqa: E402  (its emit: one JSON line a measurement, to --out)
from benchmarks.tpu_levers import MODELS, emit  # noqa: E402

ROWS = {  # the trained rows a default run times on one TPU chip (docs/results/tpu-v5e/default-stopped-log.txt)
    "jax": {"cnn": ["jit", "jit+bf16"], "lstm": ["jit", "jit+unroll", "jit+bf16"], "vit": ["jit", "jit+bf16"]},
    "keras-jax": {"cnn": ["fit", "fit+spe", "fit+bf16"], "lstm": ["fit", "fit+bf16"], "vit": ["fit", "fit+bf16"]},
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", choices=sorted(ROWS), required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--serial", action="store_true", help="one compile at a time (the comparison)")
    a = ap.parse_args()
    tpu_levers.OUT = a.out
    if a.framework == "keras-jax":
        os.environ["KERAS_BACKEND"] = "jax"
    import jax

    own: dict[str, float] = {}  # thread name -> its backend compile seconds
    lock = threading.Lock()

    def listen(event, duration, **_):
        if "backend_compile" in event:
            with lock:
                name = threading.current_thread().name
                own[name] = own.get(name, 0.0) + duration

    jax.monitoring.register_event_duration_secs_listener(listen)
    impl = importlib.import_module("jax_impl" if a.framework == "jax" else "keras_jax_impl")
    rng = np.random.default_rng(0)
    trainers, data = {}, {}
    for wl, variants in ROWS[a.framework].items():
        args, shape = MODELS[wl]
        data[wl] = (
            rng.standard_normal((a.steps, a.batch, *shape)).astype(np.float32),
            rng.integers(0, 10, (a.steps, a.batch)).astype(np.int32),
        )
        for v in variants:
            ad = impl.adapter(wl)
            t0 = time.perf_counter()
            with jax.default_device(jax.devices("cpu")[0]):
                model = ad.build(*args)
            trainers[f"{wl} {v}"] = (ad.make_trainer(model, jax.devices()[:1], v, 1e-3, 1e-7, 0), wl)
            emit(part="build", row=f"{wl} {v}", build_s=round(time.perf_counter() - t0, 2))  # the model and trainer
    emit(part="ahead", framework=a.framework, device=jax.devices()[0].device_kind, rows=len(trainers))

    def one(key: str) -> None:
        threading.current_thread().name = key
        t, wl = trainers[key]
        t0 = time.perf_counter()
        t.ahead(*data[wl])
        emit(part="ahead", row=key, wall_s=round(time.perf_counter() - t0, 2), compile_s=round(own.get(key, 0.0), 2))

    t0 = time.perf_counter()
    if a.serial:
        for key in trainers:
            one(key)
    else:
        with ThreadPoolExecutor(len(trainers)) as ex:
            list(ex.map(one, trainers))
    emit(part="ahead", all_wall_s=round(time.perf_counter() - t0, 2), serial=a.serial, cores=os.cpu_count())
    for key, (t, wl) in trainers.items():
        threading.current_thread().name = "first " + key
        t0 = time.perf_counter()
        m = t.steps(*data[wl])
        emit(
            part="first epoch",
            row=key,
            s=round(time.perf_counter() - t0, 3),
            compile_s=round(own.get("first " + key, 0.0), 3),
            finite=bool(np.isfinite(m).all()),
        )


if __name__ == "__main__":
    main()
