"""What XLA:CPU's `--xla_cpu_experimental_ynn_fusion_type` and oneDNN's custom calls do to JAX's CNN training step
(jax_impl's `jit` and `jit+pool`, one device, batch 256) and the full-size conv (plain JAX): each case in a fresh
process (XLA_FLAGS is read once), the compiled programs searched for YNNPACK fusions and oneDNN convolutions, and the
median of timed calls. The cases: out of the box, each of jax_impl's process-wide settings (jax_impl.SETTINGS, its
whole environment), and a few YNNPACK lists no setting uses (a list without '+'/'-' replaces XLA's default list;
with '+' it adds to it). JAX only.

    python benchmarks/ynn_fusion_types.py [NAME ...]   (substrings of the cases' names; default: all)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

YNN, ONEDNN = "--xla_cpu_experimental_ynn_fusion_type", "--xla_cpu_experimental_onednn_custom_call=true"
# YNNPACK lists and oneDNN's custom calls that no setting uses, for comparison (their XLA_FLAGS)
ALTERNATIVES = {
    "dot,eltwise,reduce (replacing XLA's default list)": f"{YNN}=dot,eltwise,reduce",
    "+dot,+eltwise,+reduce (added to XLA's default list)": f"{YNN}=+dot,+eltwise,+reduce",
    "oneDNN's custom calls, YNNPACK's list emptied": f"{ONEDNN} {YNN}=",
    "oneDNN's custom calls and dot,eltwise,reduce": f"{ONEDNN} {YNN}=dot,eltwise,reduce",
}


def cases() -> dict[str, dict[str, str]]:
    """Each case's name -> the environment it adds."""
    import jax_impl

    settings = {f"setting {s.name}": dict(s.env) for s in jax_impl.SETTINGS}
    return {"out of the box": {}, **settings, **{k: {"XLA_FLAGS": v} for k, v in ALTERNATIVES.items()}}


def child() -> dict:
    """In this process: two steps of each trainer, timed 5 times, and the conv, timed 5 times."""
    import time

    import jax
    import numpy as np
    from jax import lax

    import jax_impl
    from parity.workloads.conv import CONV_FULL

    def counts(text: str) -> dict[str, int]:
        onednn = text.count('custom_call_target="__onednn$convolution"')
        return {"ynn_fusions": text.count("__ynn_fusion"), "onednn_convs": onednn}

    rng = np.random.default_rng(0)
    devices = jax_impl.setup_devices("cpu", 1)
    out = {}
    for variant in ("jit", "jit+pool"):
        t = jax_impl.adapter("cnn").make_trainer(jax_impl.adapter("cnn").build(0), devices, variant)
        x = rng.standard_normal((2, 256, 28, 28, 1)).astype(np.float32)
        y = rng.integers(0, 10, (2, 256)).astype(np.int32)
        t.steps(x, y)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            t.steps(x, y)
            times.append(time.perf_counter() - t0)
        loss = float(np.asarray(t.steps(x, y))[-1, 0])
        out[variant] = {"epoch_s": float(np.median(times)), **counts(t.program_text()), "loss": loss}
    s = CONV_FULL
    x, k = (jax.device_put(a) for a in s.inputs())
    dn = ("NHWC", "HWIO", "NHWC")
    f = jax.jit(lambda x, k: lax.conv_general_dilated(x, k, (s.stride,) * 2, s.padding, dimension_numbers=dn))
    f(x, k).block_until_ready()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        f(x, k).block_until_ready()
        times.append(time.perf_counter() - t0)
    out["conv"] = {"call_s": float(np.median(times)), **counts(f.lower(x, k).compile().as_text())}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("only", nargs="*", metavar="NAME", help="substrings of the cases' names to run (default: all)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child()))
        return 0
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name, env in cases().items():
        if args.only and not any(o in name for o in args.only):
            continue
        run = {**os.environ, "PYTHONPATH": root, "XLA_FLAGS": "", **env}  # out of the box: no XLA_FLAGS
        done = subprocess.run([sys.executable, __file__, "--child"], env=run, capture_output=True, text=True)
        if done.returncode:
            print(name, "failed:", (done.stderr.strip().splitlines() or ["(no output)"])[-1])
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"{name}: CNN 2 steps jit {r['jit']['epoch_s']:.3f} s ({r['jit']['ynn_fusions']} YNNPACK fusions, "
            f"{r['jit']['onednn_convs']} oneDNN convolutions), jit+pool {r['jit+pool']['epoch_s']:.3f} s "
            f"(loss {r['jit+pool']['loss']:.6f}); conv {r['conv']['call_s']:.3f} s "
            f"({r['conv']['ynn_fusions']} YNNPACK fusions, {r['conv']['onednn_convs']} oneDNN)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
