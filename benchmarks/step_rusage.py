"""Where one CNN training step's time goes by the process's own accounting: wall time, user and system CPU time and
minor page faults (getrusage) per step, the median of --steps steps after two warm-up calls. A step whose time is
the kernel's (fresh pages faulted in and zeroed) shows in system time and faults; one spent in the frameworks' own
code, in user time. One framework a process (--framework tf, jax or keras-jax). The environment is the caller's
(a JAX setting's XLA_FLAGS and GLIBC_TUNABLES, as jax_impl.SETTINGS gives them), so each case is one fresh process:

    python benchmarks/step_rusage.py --framework tf --variant fit+bf16 >> OUT.jsonl
    XLA_FLAGS=... GLIBC_TUNABLES=... python benchmarks/step_rusage.py --framework jax --variant jit+pool >> OUT.jsonl

(the commands behind the shipped figures: docs/results/layers/README.md)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from parity.common import frameworks
from parity.common.frameworks import KEYS  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", choices=KEYS, required=True, help="whose trainer")
    p.add_argument("--variant", required=True, help="the trainer's variant (make_trainer's)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=8, help="timed steps, one a call")
    args = p.parse_args()
    impl = frameworks.load(args.framework)
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 255, (1, args.batch, 28, 28, 1)).astype(np.float32)
    y = rng.integers(0, 10, (1, args.batch)).astype(np.int32)
    trainer = impl.adapter("cnn").make_trainer(impl.adapter("cnn").build(0), impl.setup_devices("cpu", 1), args.variant)
    for _ in range(2):  # compiling, then the first run of the compiled step
        trainer.steps(x, y)
    raw = []
    for _ in range(args.steps):
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        trainer.steps(x, y)  # returns the step's loss on the host: the step has ended
        t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        raw.append([t1 - t0, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime, r1.ru_minflt - r0.ru_minflt])
    med = np.median(np.array(raw), axis=0)
    env = {k: os.environ[k] for k in ("XLA_FLAGS", "GLIBC_TUNABLES", "OMP_NUM_THREADS") if k in os.environ}
    print(
        json.dumps(
            {
                "framework": args.framework,
                "variant": args.variant,
                "env": env,
                "batch": args.batch,
                "steps": args.steps,
                "wall_ms": round(med[0] * 1e3, 1),
                "user_ms": round(med[1] * 1e3, 1),
                "sys_ms": round(med[2] * 1e3, 1),
                "minor_faults": int(med[3]),
                "raw": [[round(v, 4) for v in r] for r in raw],  # wall s, user s, system s, minor faults
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
