"""Why a JAX conv row can fall into two modes: one jitted call of the full-size conv (its 2.1 GB output faulted in
afresh each call), timed `--wait` seconds after another process touched and freed as much memory (as another
framework's conv row does between JAX's calls in a run's rounds), or after the same wait with no such process (the
control). Each case is timed in every round, cases in alternating order, after `--settle` idle seconds. Prints a JSON
line per case: wall and system time of each call (getrusage: the kernel's share) and its minor page faults.

    python benchmarks/conv_neighbour.py >> docs/results/CLASS/conv-neighbour.jsonl

(the command behind the shipped figures: docs/statistics.md, "Two modes")
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from parity.workloads.conv import CONV_FULL  # noqa: E402

# another process: touch `n` float32 values (2**29: 2.1 GB, the conv's output) and exit, freeing them
NEIGHBOUR = "import sys, numpy as np; a = np.ones(int(sys.argv[1]), np.float32); print(a.sum())"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--wait", type=float, nargs="+", default=[0.0, 1.5, 3.0], help="seconds from the neighbour's exit")
    p.add_argument("--control", type=float, nargs="*", default=[1.5, 3.0], help="waits timed with no neighbour")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--settle", type=float, default=8.0, help="idle seconds before each case")
    args = p.parse_args()
    import jax

    s = CONV_FULL
    dn = ("NHWC", "HWIO", "NHWC")
    f = jax.jit(lambda x, k: jax.lax.conv_general_dilated(x, k, (s.stride,) * 2, s.padding, dimension_numbers=dn))
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.standard_normal((s.batch, s.height, s.width, s.cin)).astype(np.float32))
    k = jax.device_put(rng.standard_normal((s.kh, s.kw, s.cin, s.cout)).astype(np.float32))
    out_values = f(x, k).size
    for _ in range(2):  # compiling, then the first run of the compiled call
        f(x, k).block_until_ready()
    cases = [(w, True) for w in args.wait] + [(w, False) for w in args.control]
    raw: dict[tuple[float, bool], list] = {c: [] for c in cases}
    for r in range(args.rounds):
        for wait, neighbour in cases if r % 2 == 0 else cases[::-1]:
            time.sleep(args.settle)
            if neighbour:
                subprocess.run([sys.executable, "-c", NEIGHBOUR, str(out_values)], check=True, capture_output=True)
            time.sleep(wait)
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            f(x, k).block_until_ready()  # the output is freed at once, as a row's is after its check
            t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
            raw[(wait, neighbour)].append(
                [round(t1 - t0, 4), round(r1.ru_stime - r0.ru_stime, 3), r1.ru_minflt - r0.ru_minflt]
            )
    for (wait, neighbour), calls in raw.items():
        wall = [c[0] for c in calls]
        line = {"neighbour": neighbour, "wait_s": wait, "settle_s": args.settle, "median_s": float(np.median(wall))}
        print(json.dumps({**line, "calls [wall_s, sys_s, minor_faults]": calls}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
