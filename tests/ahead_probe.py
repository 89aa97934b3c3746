"""Run by tests/test_ahead_trainers.py in a process of its own (Keras 3 must load on JAX): two tiny trainers of one
JAX-based implementation from the same model, one compiling its step ahead, the other not, each then training on the
same batches; prints one JSON line: the programs XLA compiled (JAX's backend_compile events, by function name) in
ahead() and in each one's steps after it, and each one's losses. A 'predict' variant: two inference programs instead,
each one's first call and its output (under "losses")."""

import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"

import importlib  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

seen: list[str] = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, secs, **kw: seen.append(kw.get("fun_name", "?")) if "backend_compile" in event else None
)
impl_name, workload, variant = sys.argv[1:4]
ad = importlib.import_module(impl_name).adapter(workload)
model = ad.build(*{"lstm": (8, 0), "cnn": (0,)}[workload])
rng = np.random.default_rng(0)
x = rng.standard_normal((2, 4, 28, 28, 1)).astype(np.float32)
y = rng.integers(0, 10, (2, 4)).astype(np.int32)
out = {}
if variant.startswith("predict"):  # an inference program (parity.api.Prepared.ahead): its first call after ahead()
    for name in ("ahead", "cold"):
        p = ad.prepare_inference(model, x[0], jax.devices()[:1], variant)
        seen.clear()
        out[name] = {"compiled": p.ahead() if name == "ahead" else None, "in_ahead": list(seen)}
        seen.clear()
        out[name]["losses"] = np.asarray(p.run()).ravel().tolist()  # its output, compared to the bit
        out[name]["steps"] = list(seen)
    print(json.dumps(out))
    sys.exit(0)
ahead = ad.make_trainer(model, jax.devices()[:1], variant, 1e-3, 1e-7, 0)
# a trainer of the same configuration runs the first's jitted step (jax_impl.train's shared programs): the cold one is
# built with none kept, so that it compiles its own
getattr(importlib.import_module(f"{impl_name}.train"), "_STEPS", {}).clear()
cold = ad.make_trainer(model, jax.devices()[:1], variant, 1e-3, 1e-7, 0)
for name, t in (("ahead", ahead), ("cold", cold)):
    seen.clear()  # the models' initialisers: not the step
    out[name] = {"compiled": t.ahead(x, y) if name == "ahead" else None, "in_ahead": list(seen)}
    seen.clear()
    out[name]["losses"] = t.steps(x, y)[:, 0].tolist()
    out[name]["steps"] = list(seen)
print(json.dumps(out))
