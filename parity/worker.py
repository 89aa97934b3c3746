"""One framework on one device set, in its own process, driven by the parent over JSON lines.

`python -m parity.worker --framework jax --device cpu --replicas 8 --precision default`
answers on its original stdout (the framework's own chatter goes to stderr):

    start-up      -> {"status": "ready" | "missing" | "unavailable", ...}
    {"cmd": "variants", "workload": W}                      -> {"variants": [...], "dtypes": {V: D}, "tuned": [...]}
    {"cmd": "prepare", "id": K, "workload": W, "variant": V, "spec": {...}, "save": PATH|null, ...}
                                                            -> {"compile_s": s|null, "invalid": ...}
    {"cmd": "warm" | "rep", "id": K}                        -> {"time": s|null, "invalid": ..., "last": {...}}
    {"cmd": "result", "id": K}                              -> {"median_s": ..., "flops": ..., ...}
    {"cmd": "call", "fn": NAME, ...}                        -> what parity.cases.NAME answers (untimed)
    {"cmd": "quit"}

W is a row kind of the registry (parity/workloads.py); this module knows no workload by name.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import traceback

from parity import cases
from parity.api import DeviceUnavailable
from parity.cluster import Cluster
from parity.environment import ENV_FLAGS
from parity.timing import Timer
from parity.workloads import row_kind

IMPLS = {"jax": "jax_impl", "tf": "tf_impl"}
# Exceptions that mean this code is wrong, not the input or the machine: the run ends with exit 3 and the
# traceback. A framework's own runtime errors (a peer gone, a device refusing) stay one line and exit 2.
PROGRAMMING_ERRORS = (LookupError, TypeError, AttributeError, NameError, ArithmeticError, AssertionError)
DIST = {"jax": ("jax", "jaxlib", "flax", "optax"), "tf": ("tensorflow", "tensorflow-cpu", "keras")}


def versions(framework: str) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in DIST[framework]:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def serve(args, out) -> None:
    """Say hello (or why not), then answer the parent's requests until 'quit' or the end of stdin."""

    def say(msg: dict) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()

    try:
        impl = importlib.import_module(IMPLS[args.framework])
    except ImportError as e:
        say({"status": "missing", "error": f"{args.framework} is not installed ({e})"})
        return
    try:
        cluster = Cluster.from_json(args.cluster) if args.cluster else None
        devices = impl.setup_devices(args.device, 0 if cluster else args.replicas, cluster)
    except DeviceUnavailable as e:
        say({"status": "unavailable", "error": str(e)})
        return
    impl.set_precision(args.precision)
    say({"status": "ready", "tuned_configs": impl.tuned_configs(args.device), "replicas": len(devices),
         **impl.process_info(devices), "device_kind": impl.device_kind(), "devices": impl.list_devices(),
         "versions": versions(args.framework),
         # what this process really ran with (the harness and setup_devices add settings of their own)
         "env_flags": {k: os.environ[k] for k in ENV_FLAGS if k in os.environ}})  # fmt: skip
    timers: dict[str, tuple[Timer, dict, object]] = {}
    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "quit":
            return
        try:
            say(_answer(impl, devices, args, timers, req))
        except Exception as e:
            say({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(),
                 "bug": isinstance(e, PROGRAMMING_ERRORS)})  # fmt: skip


def _answer(impl, devices, args, timers: dict, req: dict) -> dict:
    """One request's answer (the module docstring lists them)."""
    cmd = req["cmd"]
    if cmd == "variants":
        every = getattr(impl, row_kind(req["workload"])[1].variants)(len(devices))
        chosen = cases.offered(impl, every, req.get("tuned", True))
        return {"variants": chosen, "dtypes": {v: cases.variant_dtype(impl, v) for v in chosen},
                "tuned": [v for v in chosen if v in impl.TUNED_VARIANTS]}  # fmt: skip
    if cmd == "prepare":
        wl, kind = row_kind(req["workload"])
        extra = {k: req[k] for k in ("data", "weights", "validate") if k in req}
        timer, info, finish = getattr(cases, kind.case)(impl, devices, kind, type(wl.full)(**req["spec"]),
                                                        req["variant"], args.device, args.precision,
                                                        req.get("save"), **extra)  # fmt: skip
        timers[req["id"]] = (timer, info, finish)
        compile_s = timer.first()
        cost = info.pop("cost")
        # after the first call: the compiler's own FLOP count, to cross-check the formula
        info["compiler_flops"], info["compiler_flops_source"] = cost() if compile_s is not None else (None, "")
        return {"compile_s": compile_s, "invalid": timer.m.invalid}
    if cmd in ("warm", "rep"):
        timer = timers[req["id"]][0]
        return {"time": getattr(timer, cmd)(), "invalid": timer.m.invalid, "last": timer.m.last}
    if cmd == "result":
        timer, info, finish = timers.pop(req["id"])
        m = timer.m
        done = finish() if m.invalid is None else {}
        return {**info, **m.stats(), **m.errors, **done, "compile_s": m.compile_s, "invalid": m.invalid}
    if cmd == "call":  # an untimed request a workload's parent side makes by name
        return cases.WORKER_CALLS[req["fn"]](impl, devices, req)
    return {"error": f"unknown command {cmd!r}"}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--framework", choices=sorted(IMPLS), required=True)
    ap.add_argument("--device", choices=("cpu", "gpu", "tpu"), required=True)
    ap.add_argument("--replicas", type=int, default=1, help="0: every core of the device")
    ap.add_argument("--precision", choices=("default", "highest"), default="default")
    ap.add_argument("--cluster", help="JSON of parity.cluster.Cluster: join a multi-process run (--replicas ignored)")
    args = ap.parse_args(argv)
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # keep the frameworks' prints off the answer channel
    print(f"worker {args.framework} {args.device} x{args.replicas} on {platform.node()}", file=sys.stderr)
    serve(args, out)


if __name__ == "__main__":
    main()
