"""One framework on one device set, in its own process, driven by the parent over JSON lines.

`python -m parity.worker --framework jax --device cpu --replicas 8 --precision default`
answers on its original stdout (the framework's own chatter goes to stderr):

    start-up      -> {"status": "ready" | "missing" | "unavailable", ...}
    {"cmd": "variants", "workload": W}                      -> {"variants": [...]}
    {"cmd": "prepare", "id": K, "workload": W, "variant": V, "spec": {...}, "save": PATH|null}
                                                            -> {"compile_s": s|null, "invalid": ...}
    {"cmd": "warm" | "rep", "id": K}                        -> {"time": s|null, "invalid": ...}
    {"cmd": "result", "id": K}                              -> {"stats": ..., "errors": ..., ...}
    {"cmd": "quit"}
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import traceback
from functools import cache

import numpy as np

from parity import oracle
from parity.api import DeviceUnavailable
from parity.timing import Timer, output_verifier
from parity.workloads import ConvSpec, tolerance

IMPLS = {"jax": "jax_impl", "tf": "tf_impl"}
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


@cache
def _conv_inputs(spec: ConvSpec):
    images, kernels = spec.inputs()
    idx = spec.oracle_indices()
    return images, kernels, idx, oracle.conv2d(images[idx], kernels, spec.stride, spec.padding)


def conv_case(impl, devices, spec: dict, variant: str, device: str, precision: str, save: str | None):
    """The conv op as a Timer plus the figures a row needs."""
    s = ConvSpec(**spec)
    images, kernels, idx, ref = _conv_inputs(s)
    p = impl.prepare_conv(variant, images, kernels, devices, s.stride, s.padding)

    def rows(out, indices):
        got = p.rows(out, indices)
        if save:
            np.save(save, got)
        return got

    verify = output_verifier(
        p.shape, rows, p.placement, s.output_shape, idx, ref, tolerance(device, precision), device, len(devices)
    )
    return Timer(p.run, impl.block, verify), {"flops": s.flops(), "min_bytes": s.min_bytes()}


CASES = {"conv": (conv_case, "conv_variants")}


def serve(args, out) -> None:
    def say(msg: dict) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()

    try:
        impl = importlib.import_module(IMPLS[args.framework])
    except ImportError as e:
        say({"status": "missing", "error": f"{args.framework} is not installed ({e})"})
        return
    try:
        devices = impl.setup_devices(args.device, args.replicas)
    except DeviceUnavailable as e:
        say({"status": "unavailable", "error": str(e)})
        return
    impl.set_precision(args.precision)
    say(
        {
            "status": "ready",
            "replicas": len(devices),
            "device_kind": impl.device_kind(),
            "devices": impl.list_devices(),
            "versions": versions(args.framework),
        }
    )
    timers: dict[str, tuple[Timer, dict]] = {}
    for line in sys.stdin:
        req = json.loads(line)
        cmd = req["cmd"]
        try:
            if cmd == "quit":
                return
            if cmd == "variants":
                say({"variants": list(getattr(impl, CASES[req["workload"]][1])(len(devices)))})
            elif cmd == "prepare":
                build = CASES[req["workload"]][0]
                timer, info = build(
                    impl, devices, req["spec"], req["variant"], args.device, args.precision, req.get("save")
                )
                timers[req["id"]] = (timer, info)
                say({"compile_s": timer.first(), "invalid": timer.m.invalid})
            elif cmd in ("warm", "rep"):
                timer = timers[req["id"]][0]
                say({"time": getattr(timer, cmd)(), "invalid": timer.m.invalid})
            elif cmd == "result":
                timer, info = timers.pop(req["id"])
                m = timer.m
                say({**info, **m.stats(), **m.errors, "compile_s": m.compile_s, "invalid": m.invalid})
            else:
                say({"error": f"unknown command {cmd!r}"})
        except Exception as e:
            say({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--framework", choices=sorted(IMPLS), required=True)
    ap.add_argument("--device", choices=("cpu", "gpu", "tpu"), required=True)
    ap.add_argument("--replicas", type=int, default=1, help="0: every core of the device")
    ap.add_argument("--precision", choices=("default", "highest"), default="default")
    args = ap.parse_args(argv)
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # keep the frameworks' prints off the answer channel
    print(f"worker {args.framework} {args.device} x{args.replicas} on {platform.node()}", file=sys.stderr)
    serve(args, out)


if __name__ == "__main__":
    main()
