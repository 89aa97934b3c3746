"""The full-size conv timed outside the harness, as a user's own code would: TensorFlow and JAX (--frameworks), each
in a fresh process, plain framework calls (no parity code), 2 warm-up calls, then `--calls` synchronised calls; and,
with `--results`, the harness's out-of-the-box rows of a results.json beside them (issue "How sure, and the answer
first", item 0). With both frameworks, also both processes alive at once with their calls alternating (as the
harness interleaves them).

    python benchmarks/conv_independent.py --results OUT/results.json --json docs/results/conv-independent.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for benchmarks.helpers

from benchmarks.helpers.timing import write_json  # noqa: E402

CHILD = r"""
import os, sys, time, json
import numpy as np
fw, calls, lockstep = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
rng = np.random.default_rng(0)
x = rng.standard_normal((128, 256, 256, 3), dtype=np.float32)
k = rng.standard_normal((5, 5, 3, 256), dtype=np.float32)
if fw == "jax":
    import jax
    from jax import lax
    f = jax.jit(lambda a, b: lax.conv_general_dilated(a, b, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    a, b = jax.device_put(x), jax.device_put(k)
    def call():
        jax.block_until_ready(f(a, b))
else:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    f = tf.function(lambda a, b: tf.nn.conv2d(a, b, 2, "SAME"))
    a, b = tf.constant(x), tf.constant(k)
    def call():
        out = f(a, b)
        out[0, 0, 0, 0].numpy()  # what tf_impl.block reads: one element, after the call has finished
for _ in range(2):
    call()
times = []
print("ready", flush=True)
for _ in range(calls):
    if lockstep:
        sys.stdin.readline()  # the parent says when: one framework's call at a time
    t0 = time.perf_counter()
    call()
    times.append(time.perf_counter() - t0)
    if lockstep:
        print("done", flush=True)
print(json.dumps(times), flush=True)
"""


def alone(fw: str, calls: int) -> list[float]:
    """`calls` timed calls in a fresh process with nothing else running."""
    p = subprocess.run([sys.executable, "-c", CHILD, fw, str(calls), "0"], capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def alternating(calls: int) -> dict[str, list[float]]:
    """Both processes alive, their calls alternating one at a time (each idle while the other computes)."""
    procs = {
        fw: subprocess.Popen(
            [sys.executable, "-c", CHILD, fw, str(calls), "1"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        )
        for fw in ("tf", "jax")
    }
    for p in procs.values():
        assert p.stdout.readline().strip() == "ready"
    for i in range(calls):
        for fw in ("tf", "jax") if i % 2 == 0 else ("jax", "tf"):
            procs[fw].stdin.write("go\n")
            procs[fw].stdin.flush()
            assert procs[fw].stdout.readline().strip() == "done"
    return {fw: json.loads(p.stdout.readline()) for fw, p in procs.items()}


def harness_rows(path: str) -> dict[str, dict]:
    doc = json.load(open(path))
    return {
        r["framework"]: r
        for r in doc["rows"]
        if r["kind"] == "conv" and r["replicas"] == 1 and r["variant"] in ("jit", "function") and r["verified"]
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--results", help="a results.json whose out-of-the-box conv rows to set beside these")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument(
        "--frameworks",
        nargs="+",
        choices=("tf", "jax"),
        default=["tf", "jax"],
        help="the frameworks to time (one alone: no alternating run; a GPU box without TensorFlow)",
    )
    args = ap.parse_args()
    out = {"cpu": open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": "), "when": time.ctime()}
    out["alone"] = {fw: alone(fw, args.calls) for fw in args.frameworks}
    if len(args.frameworks) == 2:
        out["alternating"] = alternating(args.calls)
    if args.results:
        out["harness"] = {fw: r.get("times_s") or [r["median_s"]] for fw, r in harness_rows(args.results).items()}
    for how, per in out.items():
        if isinstance(per, dict):
            print(
                how
                + ": "
                + "; ".join(f"{fw} median {np.median(t):.3f} s {[round(v, 3) for v in t]}" for fw, t in per.items())
            )
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
