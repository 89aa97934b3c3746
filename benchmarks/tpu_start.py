"""Where a worker's start goes on an accelerator: each stage of what parity.engine.worker does before its first row,
timed in a fresh process (the interpreter and the harness's imports, the framework's import, opening the device,
its first words, each workload's one-off model build), one framework after another. With --hold, whether a second
process can import a framework while the first holds the device (what starting the next worker early would need).
One JSON line per measurement to --out (and printed).

    python benchmarks/tpu_start.py --device tpu --out start.jsonl [--hold]

Not a test and not the harness: one start each, no interval.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(framework: str, device: str) -> None:
    """Run in the child: each stage's end, in seconds since the parent spawned it, on stdout."""
    t0 = float(os.environ["START_T0"])

    def stamp(stage: str, **more) -> None:
        print(json.dumps({"framework": framework, "stage": stage, "at_s": round(time.time() - t0, 3), **more}))
        sys.stdout.flush()

    sys.path.insert(0, str(ROOT))
    from parity.common import frameworks
    from parity.engine import memory, worker
    from parity.workloads import WORKLOADS

    stamp("interpreter and the harness's imports")
    impl = frameworks.load(framework)
    stamp("the framework's import")
    devices = impl.setup_devices(device, 1, None)
    stamp("opening the device", devices=[str(d) for d in devices])
    impl.set_precision("default")
    args = argparse.Namespace(framework=framework, device=device, precision="default")
    args.memory = memory.source_for(impl, devices, device)
    worker.hello(impl, devices, args)
    stamp("its first words (hello)")
    for wl in ("cnn", "lstm", "vit"):
        WORKLOADS[wl].calls["warm"](impl, devices, {})
        stamp(f"{wl}: its one-off model build (warm)")


def holder(device: str) -> None:
    """Run in the child: open the device with JAX, say so, and keep it for 40 s."""
    import jax

    print(json.dumps({"held": [str(d) for d in jax.devices(device)]}))
    sys.stdout.flush()
    time.sleep(40)


def importer(framework: str) -> None:
    """Run in the child, while another holds the device: import the framework's implementation, nothing more."""
    t0 = time.time()
    sys.path.insert(0, str(ROOT))
    from parity.common import frameworks

    frameworks.load(framework)
    print(json.dumps({"framework": framework, "imported_beside_a_holder_s": round(time.time() - t0, 3)}))


def spawn(*argv: str) -> subprocess.Popen:
    env = {**os.environ, "START_T0": repr(time.time()), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, __file__, *argv], stdout=subprocess.PIPE, text=True, env=env)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="tpu")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--frameworks", default="jax,keras-jax")
    ap.add_argument("--hold", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--holder", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--importer", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.device)
    if a.holder:
        return holder(a.device)
    if a.importer:
        return importer(a.importer)
    if a.out is None:
        ap.error("--out is required")
    with a.out.open("a") as out:

        def emit(line: str) -> None:
            print(line.strip())
            out.write(line.strip() + "\n")
            out.flush()

        for fw in a.frameworks.split(","):
            p = spawn("--child", fw, "--device", a.device)
            for line in p.stdout:
                emit(line)
            emit(json.dumps({"framework": fw, "exit": p.wait()}))
        if a.hold:
            h = spawn("--holder", "--device", a.device)
            emit(h.stdout.readline())
            for fw in a.frameworks.split(","):
                p = spawn("--importer", fw)
                try:
                    got, _ = p.communicate(timeout=35)
                    emit(got or json.dumps({"framework": fw, "importer_exit": p.returncode}))
                except subprocess.TimeoutExpired:
                    p.kill()
                    emit(json.dumps({"framework": fw, "importer": "still importing after 35 s"}))
            h.kill()


if __name__ == "__main__":
    main()
