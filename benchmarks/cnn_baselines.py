"""CNN train throughput: this project's trainers against what a user would write instead.

    python benchmarks/cnn_baselines.py --batch 256 1024 --steps 4 --reps 3

Four single-device contenders, same architecture, same synthetic batches, float32 on the CPU:
  keras-default   plain Keras Sequential (library defaults), model.fit on NumPy arrays
  tf_impl         tf_impl.adapter("cnn").make_trainer(..., "fit")
  nnx-jit-loop    a plain Flax NNX loop: nnx.Optimizer + @nnx.jit train step
  jax_impl        jax_impl.adapter("cnn").make_trainer(..., "jit") (pure jitted step over split state)
Each timed call runs `--steps` training steps, synchronised and checked (finite loss); the first
call (compilation) is reported apart. TensorFlow and JAX only (not Keras on JAX), both in this one process (CPU only).
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import jax_impl  # noqa: E402
import tf_impl  # noqa: E402
from parity.engine.timing import measure  # noqa: E402
from parity.workloads.base import Invalid  # noqa: E402
from parity.workloads.trained import data  # noqa: E402


def finite(out) -> dict[str, float]:
    loss = float(np.asarray(out).reshape(-1)[0])
    if not np.isfinite(loss):
        raise Invalid(f"loss {loss}")
    return {}


def keras_default(x, y, b):
    import keras

    L = keras.layers
    layers = [keras.Input((28, 28, 1))]
    for c in (64, 128, 256):
        layers += [
            L.BatchNormalization(),
            L.Conv2D(c, 5, padding="same", activation="elu"),
            L.MaxPooling2D(2),
            L.Dropout(0.25),
        ]
    layers += [L.Flatten(), L.Dense(256), L.Activation("elu"), L.Dropout(0.5), L.Dense(10), L.Activation("softmax")]
    m = keras.Sequential(layers)
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    xs, ys = x.reshape(-1, 28, 28, 1), y.reshape(-1)

    def run():
        return m.fit(xs, ys, batch_size=b, epochs=1, shuffle=False, verbose=0).history["loss"]

    return run


def nnx_jit_loop(x, y, b):
    import jax
    import optax
    from flax import nnx

    model = jax_impl.adapter("cnn").build(0)
    opt = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)

    @nnx.jit
    def step(model, opt, x, y, key):
        def loss_fn(model):
            logits = model.logits(x, train=True, key=key)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        opt.update(model, grads)
        return loss

    key = jax.random.key(0)

    def run():
        pairs = enumerate(zip(x, y, strict=True))
        losses = [step(model, opt, xb, yb, jax.random.fold_in(key, i)) for i, (xb, yb) in pairs]
        return jax.block_until_ready(losses[-1])

    return run


def ours(mod, variant, devices):
    def make(x, y, b):
        t = mod.adapter("cnn").make_trainer(mod.adapter("cnn").build(0), devices[:1], variant)
        return lambda: t.steps(x, y)

    return make


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--steps", type=int, default=4, help="training steps per timed call")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args()
    jd, td = jax_impl.setup_devices("cpu", 1), tf_impl.setup_devices("cpu", 1)
    ds = data.synthetic(20000, 100)
    contenders = {
        "keras-default": keras_default,
        "tf_impl fit": ours(tf_impl, "fit", td),
        "nnx-jit-loop": nnx_jit_loop,
        "jax_impl jit": ours(jax_impl, "jit", jd),
    }
    results = []
    for b in args.batch:
        x, y = data.batches(ds, data.batch_offsets(0, args.steps, len(ds.x_train), b), b)
        for name, make in contenders.items():
            m = measure(make(x, y, b), np.asarray, finite, warmup=0, reps=args.reps)  # np.asarray: sync
            s = m.stats()
            ips = args.steps * b / s["median_s"] if m.verified else None
            results.append(
                {
                    "contender": name,
                    "global_batch": b,
                    "steps": args.steps,
                    "first_call_s": m.compile_s,
                    **s,
                    "images_per_s": ips,
                    "verified": m.verified,
                }
            )
            print(
                f"batch {b:5d}  {name:14s}  {ips:8.1f} img/s  (median {s['median_s']:.3f} s for {args.steps} steps,"
                f" IQR {s['iqr_s']:.3f} s, first call {m.compile_s:.2f} s)",
                flush=True,
            )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
