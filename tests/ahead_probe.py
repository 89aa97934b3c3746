"""Run by tests/test_ahead_trainers.py in a process of its own (Keras 3 must load on JAX): a tiny trainer of each
JAX-based implementation compiles its step ahead, then trains; prints one JSON line a trainer: the programs XLA
compiled in ahead() and in the steps after it (JAX's backend_compile events, by function name), and the losses."""

import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"

import importlib  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

seen: list[tuple[str, float]] = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, secs, **kw: seen.append((kw.get("fun_name", "?"), secs)) if "backend_compile" in event else None
)
impl_name, workload, variant, skip = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "skip"
impl = importlib.import_module(impl_name)
ad = impl.adapter(workload)
model = ad.build(*{"lstm": (8, 0), "cnn": (0,)}[workload])
t = ad.make_trainer(model, jax.devices()[:1], variant, 1e-3, 1e-7, 0)
rng = np.random.default_rng(0)
seen.clear()  # the model's initialisers: not the step
x = rng.standard_normal((2, 4, 28, 28, 1)).astype(np.float32)
y = rng.integers(0, 10, (2, 4)).astype(np.int32)
compiled = None if skip else t.ahead(x, y)
ahead = [name for name, _ in seen]
seen.clear()
losses = t.steps(x, y)[:, 0].tolist()
print(json.dumps({"compiled": compiled, "ahead": ahead, "after": [name for name, _ in seen], "losses": losses}))
