"""One bfloat16 convolution's training step (conv2's shape: 256 x 14 x 14 x 64 in, 5 x 5 x 64 x 128 SAME, stride 1,
a float32 normalisation after it, as BatchNorm's) with the gradient for its input as JAX writes it ('jax') or as a
forward convolution with the flipped kernel ('flipped', a custom VJP): in the CNN's bfloat16 step XLA:CPU computes
JAX's own input gradient on float32 operands, off AMX (docs/results/layers/README.md, "The AMX class"). Prints one
JSON line: the compiled step's oneDNN convolutions (their output types), the median step time, and the input gradient's
relative L2 error against the float32 step's.

    XLA_FLAGS=... GLIBC_TUNABLES=... python benchmarks/conv_dgrad.py --form flipped >> OUT.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--form", choices=("jax", "flipped"), required=True)
    p.add_argument("--calls", type=int, default=10)
    args = p.parse_args()

    import jax
    import jax.numpy as jnp

    from jax_impl.conv_grads import conv
    from jax_impl.conv_grads import conv_flipped_grad as flipped

    def loss(f, dtype):
        def value(x, w):
            y = f(x.astype(dtype), w.astype(dtype)).astype(jnp.float32)
            y = (y - y.mean(axis=(0, 1, 2))) / (y.std(axis=(0, 1, 2)) + 1e-3)
            return jnp.sum(jnp.tanh(y))

        return value

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((256, 14, 14, 64), np.float32))
    w = jnp.asarray(rng.standard_normal((5, 5, 64, 128), np.float32) * 0.05)
    step = jax.jit(jax.grad(loss(conv if args.form == "jax" else flipped, jnp.bfloat16), argnums=(0, 1)))
    text = step.lower(x, w).compile().as_text()
    convs = [
        ln.split("=", 1)[1].split("custom-call(")[0].strip().split("{")[0].lstrip("(")
        for ln in text.splitlines()
        if 'onednn$convolution"' in ln and "custom-call(" in ln
    ]
    dx, _ = step(x, w)
    times = []
    for _ in range(args.calls):
        t0 = time.perf_counter()
        jax.block_until_ready(step(x, w))
        times.append(time.perf_counter() - t0)
    ref, _ = jax.jit(jax.grad(loss(conv, jnp.float32), argnums=(0, 1)))(x, w)
    err = float(jnp.linalg.norm(dx - ref) / jnp.linalg.norm(ref))
    env = {k: os.environ[k] for k in ("XLA_FLAGS", "GLIBC_TUNABLES") if k in os.environ}
    row = {"form": args.form, "env": env, "onednn_convolutions": convs, "median_ms": round(np.median(times) * 1e3, 1)}
    print(json.dumps({**row, "dx_rel_err_vs_float32": err, "raw_s": [round(t, 4) for t in times]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
