"""JAX's levers on one accelerator chip, each measured alone: the trained workloads' variants (first call and
steady step), the conv in several layouts and output formats, the matrix product at several sizes and several
products a dispatch. Writes one JSON line per measurement to --out (and prints it).

    python benchmarks/tpu_levers.py --out levers.jsonl [--parts cnn,lstm,vit,conv,matmul] [--steps 50]

Not a test and not the harness: each figure is the mean of timed steps after one untimed call, synchronised on the
output, with no interval. The harness's `--configs levers` times the same variants with its statistics; this is
the quick look that chose what the harness times on a TPU (docs/tpu.md names the file it wrote).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

OUT: Path | None = None


def emit(**rec) -> None:
    line = json.dumps(rec)
    print(line, flush=True)
    if OUT is not None:
        with OUT.open("a") as f:
            f.write(line + "\n")


def timed(fn, reps: int) -> float:
    """Mean seconds of `reps` calls of fn() (each blocked), after one untimed call."""
    jax.block_until_ready(fn())
    t0 = time.perf_counter()
    for _ in range(reps):
        out = fn()
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / reps


# ---- trained workloads -------------------------------------------------------------------------------------------
MODELS = {  # workload -> (build args, one example's shape)
    "cnn": ((0,), (28, 28, 1)),
    "lstm": ((512, 0), (28, 28, 1)),
    "vit": ((192, 6, 3, 768, 0), (28, 28, 1)),
}


def trained(name: str, steps: int, batch: int, only: list[str] | None) -> None:
    import jax_impl
    from jax_impl.catalog import variants

    ad = jax_impl.adapter(name)
    args, shape = MODELS[name]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((steps, batch, *shape)).astype(np.float32)
    y = rng.integers(0, 10, (steps, batch)).astype(np.int32)
    for v in variants(f"{name}_train", 1):
        if only and v.name not in only:
            continue
        try:
            t0 = time.perf_counter()
            model = ad.build(*args)
            build_s = time.perf_counter() - t0
            t = ad.make_trainer(model, jax.devices()[:1], v.name, 1e-3, 1e-7, 0)
            t0 = time.perf_counter()
            first = (
                t.steps(x[:1], y[:1]) if not t.scan else t.steps(x[: t.steps_per_dispatch], y[: t.steps_per_dispatch])
            )
            first_s = time.perf_counter() - t0
            t.steps(x, y)  # the remainder's program too, and a warm pass
            t0 = time.perf_counter()
            m = t.steps(x, y)
            step_s = (time.perf_counter() - t0) / steps
            emit(
                part=name,
                variant=v.name,
                dtype=v.dtype,
                build_s=round(build_s, 3),
                first_call_s=round(first_s, 3),
                step_ms=step_s * 1e3,
                batch=batch,
                loss=float(m[-1, 0]),
                finite=bool(np.isfinite(first).all()),
            )
        except Exception as e:  # a lever the chip refuses: said, the others go on
            emit(part=name, variant=v.name, error=f"{type(e).__name__}: {str(e)[:200]}")


def compile_causes(batch: int) -> None:
    """The CNN's training step compiled (not run) under each suspect's change, one at a time: where its compile
    time goes."""
    import jax_impl

    ad = jax_impl.adapter("cnn")
    x = jnp.zeros((batch, 28, 28, 1), jnp.float32)
    y = jnp.zeros((batch,), jnp.int32)

    def one(label, dropout=True, prng=None, host_build=False):
        old = jax.config.jax_default_prng_impl
        try:
            if prng:
                jax.config.update("jax_default_prng_impl", prng)
            t0 = time.perf_counter()
            if host_build:
                with jax.default_device(jax.devices("cpu")[0]):
                    model = ad.build(0, dropout=dropout)
            else:
                model = ad.build(0, dropout=dropout)
            build_s = time.perf_counter() - t0
            t = ad.make_trainer(model, jax.devices()[:1], "jit", 1e-3, 1e-7, 0)
            t0 = time.perf_counter()
            t._step.lower(t.state, x, y, 0).compile()
            emit(part="compile", case=label, build_s=round(build_s, 3), compile_s=round(time.perf_counter() - t0, 2))
        except Exception as e:
            emit(part="compile", case=label, error=f"{type(e).__name__}: {str(e)[:300]}")
        finally:
            jax.config.update("jax_default_prng_impl", old)

    one("host-build", host_build=True)
    one("as-is")
    one("no-dropout", dropout=False)
    one("rbg", prng="rbg")
    one("unsafe_rbg", prng="unsafe_rbg")


# ---- the conv ------------------------------------------------------------------------------------------------------
def conv(reps: int, hlo_dir: Path | None, n: int = 128, only_auto: bool = False) -> None:
    rng = np.random.default_rng(0)
    h, w, cin, cout, k = 256, 256, 3, 256, 5
    x = rng.standard_normal((n, h, w, cin)).astype(np.float32)
    ker = (rng.standard_normal((k, k, cin, cout)) / np.sqrt(k * k * cin)).astype(np.float32)
    ref = np.einsum(
        "hwi,hwio->o", np.pad(x[0].astype(np.float64), ((1, 2), (1, 2), (0, 0)))[0:5, 0:5], ker
    )  # out[0,0,0]
    out_bytes = n * (h // 2) * (w // 2) * cout

    def lever(label, fn, xin, kin, out_item, **jit_kwargs):
        try:
            xd, kd = jax.device_put(xin), jax.device_put(kin)
            f = jax.jit(fn, **jit_kwargs)
            t0 = time.perf_counter()
            comp = f.lower(xd, kd).compile()
            compile_s = time.perf_counter() - t0
            o = comp(xd, kd)
            o00 = np.asarray(o[0, 0, 0, :] if o.shape[-1] == cout else o[0, :, 0, 0], np.float64)
            err = float(np.max(np.abs(o00 - ref)) / np.max(np.abs(ref)))
            s = timed(lambda: comp(xd, kd), reps)
            floor = out_bytes * out_item / 819e9
            emit(
                part="conv",
                lever=label,
                ms=s * 1e3,
                floor_ms=floor * 1e3,
                x_floor=s / floor,
                compile_s=compile_s,
                err_00=err,
            )
            if hlo_dir is not None:
                (hlo_dir / f"conv-{label}.hlo.txt").write_text(comp.as_text())
        except Exception as e:
            emit(part="conv", lever=label, error=f"{type(e).__name__}: {str(e)[:300]}")

    dn = ("NHWC", "HWIO", "NHWC")
    cv = lambda a, b, dn=dn, pref=None: jax.lax.conv_general_dilated(  # noqa: E731
        a, b, (2, 2), "SAME", dimension_numbers=dn, preferred_element_type=pref
    )
    lever("nhwc-f32", cv, x, ker, 4)
    lever("nhwc-bf16", cv, x.astype(jnp.bfloat16), ker.astype(jnp.bfloat16), 2)
    lever("nhwc-f32in-bf16out", lambda a, b: cv(a, b).astype(jnp.bfloat16), x, ker, 2)
    from jax.experimental.layout import Format, Layout

    lever("auto-out-f32", cv, x, ker, 4, out_shardings=Format(Layout.AUTO))
    lever("auto-out-bf16", cv, x.astype(jnp.bfloat16), ker.astype(jnp.bfloat16), 2, out_shardings=Format(Layout.AUTO))
    if only_auto:
        return
    xc = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    lever("nchw-in-f32", lambda a, b: cv(a, b, ("NCHW", "HWIO", "NHWC")), xc, ker, 4)
    lever(
        "nchw-in-bf16",
        lambda a, b: cv(a, b, ("NCHW", "HWIO", "NHWC")),
        xc.astype(jnp.bfloat16),
        ker.astype(jnp.bfloat16),
        2,
    )
    lever("nchw-in-nchw-out-f32", lambda a, b: cv(a, b, ("NCHW", "HWIO", "NCHW")), xc, ker, 4)
    # the compiler's own choice of the input's layout (jax's Format with Layout.AUTO), the input placed in it
    try:
        from jax.experimental.layout import Format, Layout

        f = jax.jit(cv, in_shardings=(Format(Layout.AUTO), None))
        comp = f.lower(jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(ker.shape, ker.dtype)).compile()
        xd = jax.device_put(x, comp.input_formats[0][0])
        kd = jax.device_put(ker)
        s = timed(lambda: comp(xd, kd), reps)
        o00 = np.asarray(comp(xd, kd)[0, 0, 0, :], np.float64)
        emit(
            part="conv",
            lever="auto-layout-f32",
            ms=s * 1e3,
            floor_ms=out_bytes * 4 / 819e9 * 1e3,
            x_floor=s / (out_bytes * 4 / 819e9),
            err_00=float(np.max(np.abs(o00 - ref)) / np.max(np.abs(ref))),
            layout=str(comp.input_formats[0][0]),
        )
    except Exception as e:
        emit(part="conv", lever="auto-layout-f32", error=f"{type(e).__name__}: {str(e)[:300]}")


SIZES = (4096, 8192, 16384)


# ---- the matrix product ------------------------------------------------------------------------------------------
def matmul(reps: int) -> None:
    rng = np.random.default_rng(0)
    for n in SIZES:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        for dt in ("float32", "bfloat16"):
            ad, bd = jax.device_put(a.astype(dt)), jax.device_put(b.astype(dt))
            f = jax.jit(jnp.matmul)
            s = timed(lambda f=f, ad=ad, bd=bd: f(ad, bd), reps)
            emit(
                part="matmul",
                n=n,
                dtype=dt,
                ms=s * 1e3,
                tflops=2 * n**3 / s / 1e12,
                pct_bf16_peak=2 * n**3 / s / 197e12 * 100,
            )
            del ad, bd


def main() -> None:
    global OUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--parts", default="matmul,conv,cnn,lstm,vit")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--variants", default="", help="comma-separated variant names (default: every one)")
    ap.add_argument("--hlo", type=Path, default=None, help="folder for the conv's compiled HLO text")
    ap.add_argument("--conv-batch", type=int, default=128)
    ap.add_argument("--log-compiles", action="store_true")
    a = ap.parse_args()
    OUT = a.out
    if a.log_compiles:
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
        jax.config.update("jax_log_compiles", True)
    emit(part="device", kind=jax.devices()[0].device_kind, count=jax.device_count(), jax=jax.__version__)
    only = [v for v in a.variants.split(",") if v] or None
    for p in a.parts.split(","):
        t0 = time.perf_counter()
        if p in MODELS:
            trained(p, a.steps, a.batch, only)
        elif p == "compile":
            compile_causes(a.batch)
        elif p == "conv-auto":
            conv(20, a.hlo, a.conv_batch, only_auto=True)
        elif p == "conv":
            conv(20, a.hlo, a.conv_batch)
        elif p == "matmul":
            matmul(20)
        emit(part=p, wall_s=round(time.perf_counter() - t0, 1))


if __name__ == "__main__":
    main()
