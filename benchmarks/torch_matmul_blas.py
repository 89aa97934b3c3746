"""PyTorch's float32 matmul on this CPU outside the harness: `torch.mm` at the CPU default's size (2048 cubed), each
setting in a fresh process (oneMKL reads its variables once, at load), beside NumPy's product in the same process;
and the product compiled by Inductor's `max-autotune` (its C++ GEMM template beside ATen's mm, the faster kept).
Which BLAS the wheel calls (torch.__config__) and what oneMKL says it is (MKL_VERBOSE's first line). Each record: the
median of `--calls` calls after 3 warm-up calls, in milliseconds.

    python benchmarks/torch_matmul_blas.py --out docs/results/zen5/torch-matmul-blas.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)  # the child imports benchmarks.helpers from here

# Each setting: the variables its process starts with. MKL_ENABLE_INSTRUCTIONS is oneMKL's documented cap on the
# instruction set; MKL_DEBUG_CPU_TYPE=5, an undocumented variable older MKLs read on AMD CPUs, is ignored by oneMKL
# 2020.1 and later (timed to show that it changes nothing).
# "compiled" is the product through torch.compile's max-autotune, at the default variables.
SETTINGS = {
    "default": ({}, "mm"),
    "MKL_ENABLE_INSTRUCTIONS=AVX512": ({"MKL_ENABLE_INSTRUCTIONS": "AVX512"}, "mm"),
    "MKL_DEBUG_CPU_TYPE=5": ({"MKL_DEBUG_CPU_TYPE": "5"}, "mm"),
    "compiled": ({}, "max-autotune"),
}

CHILD = r"""
import json, re, sys
import numpy as np
import torch
n, calls, how = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, sys.argv[4])  # the repository root
from benchmarks.helpers.timing import call_times
rng = np.random.default_rng(0)
a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
ta, tb = torch.from_numpy(a), torch.from_numpy(b)
def median_ms(f):
    return 1e3 * float(np.median(call_times(f, calls, warmup=3)))
mm = torch.mm
if how == "max-autotune":
    import torch._inductor.config as inductor
    inductor.max_autotune_gemm_backends = "CPP,ATEN"
    mm = torch.compile(torch.mm, mode="max-autotune-no-cudagraphs")
config = torch.__config__.show()
blas = re.search(r"BLAS_INFO=(\w+)", config)
print(json.dumps({
    "torch_mm_ms": median_ms(lambda: mm(ta, tb)),
    "numpy_ms": median_ms(lambda: a @ b),
    "torch": torch.__version__,
    "torch_threads": torch.get_num_threads(),
    "blas": blas[1] if blas else None,
}))
"""


def _mkl_says(env: dict) -> str | None:
    """oneMKL's own first line about itself (MKL_VERBOSE=1, one small product), or None where it prints none."""
    code = "import torch; torch.mm(torch.ones(8, 8), torch.ones(8, 8))"
    p = subprocess.run([sys.executable, "-c", code], env={**env, "MKL_VERBOSE": "1"}, capture_output=True, text=True)
    return next((ln.strip() for ln in p.stdout.splitlines() if ln.startswith("MKL_VERBOSE oneMKL")), None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2048, help="the product's size, n x n by n x n (default: 2048)")
    ap.add_argument("--calls", type=int, default=20, help="timed calls per setting (default: 20)")
    ap.add_argument("--out", required=True, help="a JSON-lines file: one record per setting")
    args = ap.parse_args(argv)
    with open("/proc/cpuinfo") as f:
        model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "unknown")
    records = []
    for name, (extra, how) in SETTINGS.items():
        env = {**os.environ, **extra}
        p = subprocess.run(
            [sys.executable, "-c", CHILD, str(args.n), str(args.calls), how, ROOT],
            env=env,
            capture_output=True,
            text=True,
        )
        if p.returncode != 0:
            print(f"error: the {name} process failed: {p.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return 1
        rec = {"setting": name, "n": args.n, "calls": args.calls, "cpu": model, **json.loads(p.stdout)}
        rec["mkl"] = _mkl_says(env)
        records.append(rec)
        print(json.dumps(rec), flush=True)
    with open(args.out, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
