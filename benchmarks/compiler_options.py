"""XLA:CPU options that JAX sets per computation: do they speed up the CNN's training step here?

    python benchmarks/compiler_options.py [--variant jit+pool] [--ynn] [--rounds 3] > options.jsonl

JAX's own compile options override some of XLA's defaults whatever XLA_FLAGS says: `xla_cpu_enable_fast_min_max`
is off under JAX (a max or min propagates NaN; TF's XLA default is on). Such options reach a computation only
through `jax.jit(..., compiler_options=...)`. This script passes each candidate set to every `jax.jit` that
jax_impl makes (it wraps `jax.jit` for the child process; the harness does not), first checks that the option
took effect where it has a visible one (fast min/max: a max over a NaN), then times jax_impl's training step at
the harness's CPU batch (1024, one device): the median of 5 timed steps after 2 warm-up steps, each candidate in
a fresh process, the candidates interleaved for --rounds rounds (so that a drift of the machine falls on all).
--ynn runs every candidate under the '+ynn' configuration's XLA_FLAGS as well.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CANDIDATES = {
    "default": {},
    "fast_min_max": {"xla_cpu_enable_fast_min_max": True},
    "vector_width_512": {"xla_cpu_prefer_vector_width": 512},
    "both": {"xla_cpu_enable_fast_min_max": True, "xla_cpu_prefer_vector_width": 512},
}


def child(name: str, variant: str) -> dict:
    import functools

    import jax

    options = CANDIDATES[name]
    if options:
        jit = jax.jit

        @functools.wraps(jit)
        def with_options(*args, **kw):
            kw.setdefault("compiler_options", options)
            return jit(*args, **kw)

        jax.jit = with_options
    import jax.numpy as jnp
    import numpy as np

    import jax_impl

    out = {"options": name, "variant": variant, "xla_flags": os.environ.get("XLA_FLAGS", "")}
    nan_max = float(jax.jit(lambda v: v.max())(jnp.asarray([1.0, np.nan, 3.0], jnp.float32)))
    out["max_over_nan"] = "nan" if np.isnan(nan_max) else nan_max
    devs = jax_impl.setup_devices("cpu", 1)
    tr = jax_impl.adapter("cnn").make_trainer(jax_impl.adapter("cnn").build(0), devs, variant, 1e-3, 1e-7, 0)
    rng = np.random.default_rng(0)
    xb = rng.integers(0, 255, (1, 1024, 28, 28, 1)).astype(np.float32)
    yb = rng.integers(0, 10, (1, 1024)).astype(np.int32)
    t0 = time.perf_counter()
    jax.block_until_ready(tr.steps(xb, yb))
    out["first_step_s"] = time.perf_counter() - t0
    jax.block_until_ready(tr.steps(xb, yb))
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        losses = jax.block_until_ready(tr.steps(xb, yb))
        times.append(time.perf_counter() - t0)
    out["step_s"] = statistics.median(times)
    out["times_s"] = times
    out["last_loss"] = float(np.asarray(losses)[-1, 0])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", default="jit+pool", help="jax_impl training variant (default: jit+pool)")
    ap.add_argument("--ynn", action="store_true", help="under the '+ynn' configuration's XLA_FLAGS")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over all candidates (default: 3)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.variant)))
        return
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    if args.ynn:
        import jax_impl

        env.update(next(s for s in jax_impl.SETTINGS if s.name == "ynn").env)
    for r in range(args.rounds):
        for name in CANDIDATES:
            cmd = [sys.executable, __file__, "--child", name, "--variant", args.variant]
            p = subprocess.run(cmd, env=env, capture_output=True, text=True)
            last = (p.stdout.strip().splitlines() or [""])[-1]
            rec = json.loads(last) if p.returncode == 0 else {"options": name, "error": p.stderr.strip()[-300:]}
            print(json.dumps({"round": r, **rec}), flush=True)


if __name__ == "__main__":
    main()
