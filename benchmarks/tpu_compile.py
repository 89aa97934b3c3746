"""Where the CNN's training step spends its compile time on an accelerator: the step cut into parts (plain JAX, the
same layers as parity.api.cnn.CNN_ARCHITECTURE), each part compiled (not run) and timed; then the harness's own
JAX step under the compiler's effort levels, compiled and run (a level that shortens the compile must not slow the
step). Writes one JSON line per measurement to --out (and prints it).

    python benchmarks/tpu_compile.py --out compile.jsonl [--batch 1024] [--parts parts,levels]

Not a test and not the harness: one compile each, no interval (docs/tpu.md names the file it wrote).
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from benchmarks import tpu_levers  # noqa: E402  (its emit: one JSON line a measurement, to --out)
from benchmarks.tpu_levers import emit  # noqa: E402
from parity.api.cnn import CNN_ARCHITECTURE  # noqa: E402


# ---- the CNN in plain JAX: batch norm (batch statistics), conv 5x5 SAME, ELU, max pool 2, then dense ------------
def params(cin: int, seed: int = 0) -> dict:
    """The CNN's arrays, its first conv taking `cin` channels (1: the model; more: the input padded with zeros)."""
    rng = np.random.default_rng(seed)
    p = {}
    for i, b in enumerate(CNN_ARCHITECTURE.convs):
        c = cin if i == 0 else b.channels
        p[f"g{i}"], p[f"beta{i}"] = np.ones(c, np.float32), np.zeros(c, np.float32)
        p[f"w{i}"] = (rng.standard_normal((b.kernel, b.kernel, c, b.filters)) * 0.05).astype(np.float32)
        p[f"b{i}"] = np.zeros(b.filters, np.float32)
    d, o = CNN_ARCHITECTURE.dense[0], CNN_ARCHITECTURE.output
    p["wd"] = (rng.standard_normal((d.units_in, d.units)) * 0.02).astype(np.float32)
    p["bd"] = np.zeros(d.units, np.float32)
    p["wo"] = (rng.standard_normal((o.units_in, o.units)) * 0.05).astype(np.float32)
    p["bo"] = np.zeros(o.units, np.float32)
    return jax.tree.map(jnp.asarray, p)


def conv(h, w, b):
    return lax.conv_general_dilated(h, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) + b


def norm(h, g, beta):
    mean = h.mean((0, 1, 2))
    var = ((h - mean) ** 2).mean((0, 1, 2))
    return (h - mean) * lax.rsqrt(var + CNN_ARCHITECTURE.bn_epsilon) * g + beta


def pool(h):
    return lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def forward(p, x, bn=True, pooled=True):
    h = x
    for i in range(len(CNN_ARCHITECTURE.convs)):
        h = norm(h, p[f"g{i}"], p[f"beta{i}"]) if bn else h
        h = jax.nn.elu(conv(h, p[f"w{i}"], p[f"b{i}"]))
        n = h.shape[1] // 2 * 2  # the pool's VALID output size (7 -> 3)
        h = pool(h) if pooled else h[:, :n:2, :n:2, :]
    h = jax.nn.elu(h.reshape(h.shape[0], -1) @ p["wd"] + p["bd"])
    return h @ p["wo"] + p["bo"]


def loss(p, x, y, **kw):
    logits = forward(p, x, **kw)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))


def one_conv(i: int, with_input_grad: bool):
    """The loss of conv block i alone (conv, bias, ELU), its gradient for the kernel (and the input)."""

    def f(w, b, h):
        return jnp.sum(jax.nn.elu(conv(h, w, b)) ** 2)

    return jax.value_and_grad(f, argnums=(0, 1, 2) if with_input_grad else (0, 1))


def compiled(label: str, fn, *args, batch: int) -> None:
    try:
        t0 = time.perf_counter()
        low = jax.jit(fn).lower(*args)
        lower_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        low.compile()
        emit(
            part="piece",
            case=label,
            batch=batch,
            lower_s=round(lower_s, 3),
            compile_s=round(time.perf_counter() - t0, 2),
        )
    except Exception as e:  # a piece the chip refuses: said, the others go on
        emit(part="piece", case=label, batch=batch, error=f"{type(e).__name__}: {str(e)[:300]}")


def pieces(batch: int) -> None:
    x = jnp.zeros((batch, 28, 28, 1), jnp.float32)
    y = jnp.zeros((batch,), jnp.int32)
    p = params(1)
    grad = jax.value_and_grad(loss)
    compiled("step gradient (all)", grad, p, x, y, batch=batch)
    compiled("forward only", partial(loss), p, x, y, batch=batch)
    compiled("gradient, no batch norm", jax.value_and_grad(partial(loss, bn=False)), p, x, y, batch=batch)
    compiled("gradient, strided slice for pool", jax.value_and_grad(partial(loss, pooled=False)), p, x, y, batch=batch)
    for cin in (8, 128):
        xp = jnp.zeros((batch, 28, 28, cin), jnp.float32)
        compiled(f"gradient, input padded to {cin} channels", grad, params(cin), xp, y, batch=batch)
    sizes = [28, 14, 7]
    for i, b in enumerate(CNN_ARCHITECTURE.convs):
        h = jnp.zeros((batch, sizes[i], sizes[i], b.channels), jnp.float32)
        compiled(f"conv{i + 1} alone", one_conv(i, i > 0), p[f"w{i}"], p[f"b{i}"], h, batch=batch)
    h = jnp.zeros((batch, 28, 28, 64), jnp.float32)
    compiled("pool1 alone", jax.value_and_grad(lambda h: jnp.sum(pool(h) ** 2)), h, batch=batch)


def levels(batch: int, steps: int) -> None:
    """The harness's JAX step (jit), compiled and run under each compiler effort level JAX offers."""
    import jax_impl

    rng = np.random.default_rng(0)
    x = rng.standard_normal((steps, batch, 28, 28, 1)).astype(np.float32)
    y = rng.integers(0, 10, (steps, batch)).astype(np.int32)
    ad = jax_impl.adapter("cnn")
    for opt, mem in (("UNKNOWN", "O2"), ("O0", "O2"), ("O1", "O2"), ("UNKNOWN", "O0")):
        try:
            jax.config.update("jax_optimization_level", opt)
            jax.config.update("jax_memory_fitting_level", mem)
            t = ad.make_trainer(ad.build(0), jax.devices()[:1], "jit", 1e-3, 1e-7, 0)
            t0 = time.perf_counter()
            t.steps(x[:1], y[:1])
            first_s = time.perf_counter() - t0
            t.steps(x, y)
            t0 = time.perf_counter()
            m = t.steps(x, y)
            step_ms = (time.perf_counter() - t0) / steps * 1e3
            emit(
                part="level",
                optimization=opt,
                memory_fitting=mem,
                batch=batch,
                first_call_s=round(first_s, 2),
                step_ms=round(step_ms, 3),
                loss=float(m[-1, 0]),
            )
        except Exception as e:
            emit(part="level", optimization=opt, memory_fitting=mem, error=f"{type(e).__name__}: {str(e)[:300]}")
    jax.config.update("jax_optimization_level", "UNKNOWN")
    jax.config.update("jax_memory_fitting_level", "O2")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--parts", default="pieces,levels")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    tpu_levers.OUT = a.out
    emit(part="devices", devices=[str(d) for d in jax.devices()], jax=jax.__version__)
    parts = a.parts.split(",")
    if "pieces" in parts:
        pieces(a.batch)
    if "levels" in parts:
        levels(a.batch, a.steps)


if __name__ == "__main__":
    main()
