"""What a synchronised call costs beyond its kernels: the full-size matmul and conv in plain JAX, timed as the harness
times them (each call waited for) and back to back (`--calls` calls dispatched, then one wait), on the default
device. On a GPU the difference per call is the host's dispatch and synchronisation, which the harness's per-call
figure includes and a user's pipelined loop would hide (docs/gpu.md).

    python benchmarks/dispatch_overhead.py --json docs/results/h200/dispatch.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import numpy as np
from jax import lax

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for benchmarks.helpers

from benchmarks.helpers.timing import write_json  # noqa: E402


def cases():
    rng = np.random.default_rng(0)
    a, b = (jax.device_put(rng.standard_normal((4096, 4096), dtype=np.float32)) for _ in range(2))
    x = jax.device_put(rng.standard_normal((128, 256, 256, 3), dtype=np.float32))
    k = jax.device_put(rng.standard_normal((5, 5, 3, 256), dtype=np.float32))

    def conv(x, k):
        return lax.conv_general_dilated(x, k, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    return {"matmul": (lambda a, b: a @ b, a, b), "conv": (conv, x, k)}


def timed(f, x, y, calls: int) -> dict:
    for _ in range(3):
        jax.block_until_ready(f(x, y))
    each = []
    for _ in range(calls):
        t0 = time.perf_counter()
        jax.block_until_ready(f(x, y))
        each.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    outs = [f(x, y) for _ in range(calls)]
    jax.block_until_ready(outs[-1])
    piped = (time.perf_counter() - t0) / calls
    del outs
    return {"synchronised_median_s": float(np.median(each)), "back_to_back_mean_s": piped, "calls": calls}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    out = {"device": str(jax.devices()[0].device_kind), "jax": jax.__version__}
    for name, (f, x, y) in cases().items():
        for precision in ("default", "highest"):
            with jax.default_matmul_precision(precision):
                out[f"{name} {precision}"] = r = timed(jax.jit(f), x, y, args.calls)
            print(name, precision, {k: round(v * 1e3, 3) if k.endswith("_s") else v for k, v in r.items()}, "(ms)")
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
