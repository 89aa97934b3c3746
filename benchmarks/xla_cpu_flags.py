"""Which XLA:CPU options speed up JAX here: the full conv op and the CNN train step under each XLA_FLAGS.

    python benchmarks/xla_cpu_flags.py [--flags "--xla_cpu_use_onednn=true" ...] [--bf16] > flags.jsonl

--bf16 adds, in the same process: the conv on bfloat16 images and kernels, the conv as patches plus a dot
(conv_general_dilated_patches, then one matrix product) in float32 and bfloat16, and the mixed-precision
train step (jit+bf16).

Each flag set runs in a fresh process, one after another (XLA reads XLA_FLAGS once, at start-up):
the full-size conv (first call, then the best of 3 synchronised calls, row 127 checked against
the float64 oracle) and jax_impl's CNN train step (jit, one device, batch 256, best of 2 x 3 steps).
Single runs on a noisy 2-core machine: a screen, not a measurement; parity.run measures the winner.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CANDIDATES = (
    "",
    "--xla_cpu_use_onednn=true",
    "--xla_cpu_experimental_onednn_custom_call=true",
    "--xla_cpu_use_onednn=true --xla_cpu_experimental_onednn_custom_call=true",
    "--xla_cpu_use_xnnpack=true",
    "--xla_cpu_experimental_xnn_graph_fusion_mode=XNN_GRAPH_FUSION_MODE_GREEDY",
    "--xla_cpu_experimental_xnn_fusion_type=dot,eltwise",
    "--xla_cpu_experimental_ynn_fusion_type=individual_convolution",
    "--xla_cpu_experimental_ynn_fusion_type=individual_convolution,individual_dot",
    "--xla_cpu_experimental_ynn_fusion_type=dot,eltwise,reduce",
    "--xla_cpu_experimental_ynn_fusion_type=dot,eltwise,reduce,individual_convolution",
    "--xla_cpu_enable_fast_math=true",
)


def child() -> dict:
    import jax
    import numpy as np

    import jax_impl
    from parity.common.float64 import conv2d, errors
    from parity.workloads.conv import CONV_FULL

    out = {"flags": os.environ.get("XLA_FLAGS", "")}
    x, w = CONV_FULL.inputs()
    xd, wd = jax.device_put(x), jax.device_put(w)
    t0 = time.perf_counter()
    jax_impl.adapter("conv").conv_op(xd, wd).block_until_ready()
    out["conv_first_s"] = time.perf_counter() - t0
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        r = jax_impl.adapter("conv").conv_op(xd, wd).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    out["conv_s"], out["conv_gflops"] = best, CONV_FULL.flops() / best / 1e9
    out["conv_max_rel_err"] = errors(np.asarray(r[-1:]), conv2d(x[-1:], w, 2, "SAME"))["max_rel_err"]
    del r
    devs = jax_impl.setup_devices("cpu", 1)
    tr = jax_impl.adapter("cnn").make_trainer(jax_impl.adapter("cnn").build(0), devs, "jit", 1e-3, 1e-7, 0)
    rng = np.random.default_rng(0)
    xb = rng.integers(0, 255, (3, 256, 28, 28, 1)).astype(np.float32)
    yb = rng.integers(0, 10, (3, 256)).astype(np.int32)
    jax.block_until_ready(tr.steps(xb[:1], yb[:1]))
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        losses = jax.block_until_ready(tr.steps(xb, yb))
        best = min(best, time.perf_counter() - t0)
    out["cnn_images_per_s"] = 3 * 256 / best
    out["cnn_last_loss"] = float(np.asarray(losses)[-1, 0])
    if os.environ.get("PARITY_BF16_SCREEN"):
        out.update(_bf16_screen(x, w, xb, yb, devs))
    return out


def _patches_conv(x, w):
    """The conv as im2col plus one dot: every 5x5x3 patch of each output position, times the HWIO kernel."""
    import jax

    kh, kw, cin, cout = w.shape
    p = jax.lax.conv_general_dilated_patches(x, (kh, kw), (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    # patches' features come channel-major (cin, kh, kw): reorder the kernel to match
    return p @ w.transpose(2, 0, 1, 3).reshape(cin * kh * kw, cout).astype(p.dtype)


def _bf16_screen(x, w, xb, yb, devs) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jax_impl
    from parity.common.float64 import conv2d, errors

    out = {}
    ref = conv2d(x[-1:], w, 2, "SAME")
    for name, dtype, fn in (
        ("conv_bf16", jnp.bfloat16, jax_impl.adapter("conv").conv_op),
        ("conv_patches", jnp.float32, _patches_conv),
        ("conv_patches_bf16", jnp.bfloat16, _patches_conv),
    ):
        f = jax.jit(fn)
        xd, wd = jax.device_put(jnp.asarray(x, dtype)), jax.device_put(jnp.asarray(w, dtype))
        f(xd, wd).block_until_ready()
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            r = f(xd, wd).block_until_ready()
            best = min(best, time.perf_counter() - t0)
        out[f"{name}_s"] = best
        out[f"{name}_max_rel_err"] = errors(np.asarray(r[-1:].astype(jnp.float32)), ref)["max_rel_err"]
        del r
    tr = jax_impl.adapter("cnn").make_trainer(jax_impl.adapter("cnn").build(0), devs, "jit+bf16", 1e-3, 1e-7, 0)
    jax.block_until_ready(tr.steps(xb[:1], yb[:1]))
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        jax.block_until_ready(tr.steps(xb, yb))
        best = min(best, time.perf_counter() - t0)
    out["cnn_bf16_images_per_s"] = 3 * 256 / best
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flags", nargs="+", default=CANDIDATES, help="XLA_FLAGS values to try (default: the list)")
    ap.add_argument("--bf16", action="store_true", help="also bfloat16, and the conv as patches plus a dot")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child()))
        return
    for flags in args.flags:
        env = dict(os.environ, XLA_FLAGS=flags, TF_CPP_MIN_LOG_LEVEL="2", PARITY_BF16_SCREEN="1" if args.bf16 else "")
        p = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True)
        last = (p.stdout.strip().splitlines() or [""])[-1]
        print(last if p.returncode == 0 else json.dumps({"flags": flags, "error": p.stderr.strip()[-300:]}), flush=True)


if __name__ == "__main__":
    main()
