"""One framework on one device set, in its own process, driven by the parent over JSON lines.

`python -m parity.worker --framework jax --device cpu --replicas 8 --precision default`
answers on its original stdout (the framework's own chatter goes to stderr):

    start-up      -> {"status": "ready" | "missing" | "unavailable", ...}
    {"cmd": "variants", "workload": W}                      -> {"variants": [...], "dtypes": {V: D}}
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
from parity.api import DeviceUnavailable, load_npz, save_npz
from parity.cluster import Cluster
from parity.data import Dataset, batch_offsets, batches
from parity.report import ENV_FLAGS
from parity.timing import Invalid, Timer, output_verifier
from parity.workloads import CnnSpec, ConvSpec, cnn_forward_flops, cnn_tolerances, tolerance

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


def _saving(rows, save: str | None):
    """rows(), also saving what it read, for the parent's framework-vs-framework comparison."""

    def read(out, indices):
        got = rows(out, indices)
        if save:
            np.save(save, got)
        return got

    return read


@cache
def _conv_inputs(spec: ConvSpec):
    images, kernels = spec.inputs()
    idx = spec.oracle_indices()
    return images, kernels, idx, oracle.conv2d(images[idx], kernels, spec.stride, spec.padding)


def conv_case(impl, devices, spec: dict, variant: str, device: str, precision: str, save: str | None, **_):
    """The conv op as a Timer plus the figures a row needs."""
    s = ConvSpec(**spec)
    dtype = variant_dtype(impl, variant)
    images, kernels, idx, ref = _conv_inputs(s)
    p = impl.prepare_conv(variant, images, kernels, devices, s.stride, s.padding)
    verify = output_verifier(
        p.shape,
        _saving(p.rows, save),
        p.placement,
        s.output_shape,
        idx,
        ref,
        tolerance(device, precision, dtype),
        device,
        impl.process_info(devices)["local_replicas"],  # where this process's share ran
    )
    info = {"flops": s.flops(), "flops_unpadded": s.flops_unpadded(), "flops_formula": ConvSpec.flops.__doc__,
            "min_bytes": s.min_bytes(2 if dtype == "bfloat16" else None), "cost": p.cost}  # fmt: skip
    return Timer(p.run, impl.block, verify), info, dict


@cache
def _dataset(path: str) -> Dataset:
    return Dataset.load(path)


def _cnn_model(impl, s: CnnSpec, weights: str, dropout: bool = True):
    model = impl.build_cnn(s.seed, dropout=dropout)
    impl.set_weights(model, load_npz(weights))  # both frameworks start from the same weights
    return model


def cnn_train_case(impl, devices, spec: dict, variant: str, device: str, precision: str, save, data, weights):
    """One epoch per timed call (steps_per_epoch global batches in the notebook's order).

    Slicing the epoch's batches out of the uint8 arrays, as the notebook's generator did, is part of
    the timed epoch (milliseconds against seconds of training here).
    """
    s = CnnSpec(**spec)
    ds = _dataset(data)
    k, b = s.steps_per_epoch, s.global_batch
    offsets = batch_offsets(s.seed, s.epochs * k, len(ds.x_train), b)
    trainer = impl.make_trainer(_cnn_model(impl, s, weights), devices, variant, s.learning_rate, s.adam_epsilon, s.seed)
    epoch = [0]

    def run():
        e = epoch[0]
        epoch[0] += 1
        return trainer.steps(*batches(ds, offsets[e * k : (e + 1) * k], b))

    def verify(out):
        steps = np.asarray(out, np.float64)
        bad = np.flatnonzero(~np.isfinite(steps[:, 0]))
        if bad.size:
            step = (epoch[0] - 1) * k + int(bad[0]) + 1
            raise Invalid(f"loss is {steps[bad[0], 0]} at step {step}: training diverged, stopped")
        where = impl.trainer_placement(trainer)  # this process's replicas
        local = impl.process_info(devices)["local_replicas"]
        if len(where) != local or any(not w.startswith(device + ":") for w in where):
            raise Invalid(f"trained on {where}, expected {local} {device} device(s) in this process")
        return {"loss": float(steps[-1, 0]), "accuracy": float(steps[-1, 1])}

    def finish():
        ev = trainer.evaluate(ds.x_test, ds.y_test)
        return {"test_loss": ev["loss"], "test_accuracy": ev["accuracy"], "epochs_run": epoch[0]}

    def cost():
        flops, source = trainer.step_cost()
        return (flops * k if flops else None), source

    info = {"flops": s.step_flops() * k, "flops_unpadded": s.step_flops(padded=False) * k,
            "flops_formula": CnnSpec.step_flops.__doc__,
            "min_bytes": s.step_min_bytes() * k, "images": k * b, "data": ds.source, "cost": cost}  # fmt: skip
    return Timer(run, impl.block, verify), info, finish


def cnn_infer_case(impl, devices, spec: dict, variant: str, device: str, precision: str, save, data, weights):
    """Inference on one global batch of test images, checked against the float64 forward pass."""
    s = CnnSpec(**spec)
    ds = _dataset(data)
    x = ds.x_test[: s.global_batch].astype(np.float32)
    w = load_npz(weights)
    idx = [0, len(x) - 1]
    ref = oracle.cnn_forward(w, x[idx])["probs"]
    p = impl.prepare_inference(_cnn_model(impl, s, weights), x, devices)
    verify = output_verifier(p.shape, _saving(p.rows, save), p.placement, (len(x), 10), idx, ref,
                             cnn_tolerances(device, precision)["forward"], device, len(devices))  # fmt: skip
    info = {"flops": cnn_forward_flops() * len(x), "flops_unpadded": cnn_forward_flops(padded=False) * len(x),
            "flops_formula": cnn_forward_flops.__doc__,
            "min_bytes": s.infer_min_bytes(len(x)), "images": len(x), "data": ds.source, "cost": p.cost}  # fmt: skip
    return Timer(p.run, impl.block, verify), info, dict


def variant_dtype(impl, variant: str) -> str:
    """The number format of a variant's inputs and outputs, as its implementation declares it."""
    return "bfloat16" if variant in impl.BFLOAT16_VARIANTS else "float32"


def _offered(impl, variants, tuned: bool) -> list[str]:
    """The variants a run asks for: all of them, or (tuned=False) the framework out of the box only.

    Where the framework offers no out-of-the-box way (TF's multi-worker CNN: only 'loop'), the others stand in.
    """
    return [v for v in variants if tuned or v not in impl.TUNED_VARIANTS] or list(variants)


def cnn_parity(impl, devices, req: dict) -> dict:
    """Forward blocks, one batch's loss and gradients, and a short dropout-free trajectory, to .npz."""
    s = CnnSpec(**req["spec"])
    w = req["weights"]
    out = {}
    if req.get("forward"):
        x = np.load(req["forward"])
        for name, v in impl.forward_layers(_cnn_model(impl, s, w, dropout=False), x).items():
            out[f"forward/{name}"] = v
        np.savez(req["out"], **out)
        return {}
    with np.load(req["batches"]) as f:
        x, y = f["x"], f["y"]
    g = impl.loss_and_grads(_cnn_model(impl, s, w, dropout=False), x[0], y[0])
    out["loss"] = np.array(g.loss)
    for i, a in enumerate(g.grads):
        out[f"grad/{i:03d}"] = a
    for i, a in enumerate(g.routing):  # how this framework's max pooling broke the batch's ties
        out[f"routing/{i}"] = a
    variants = _offered(impl, impl.cnn_variants(len(devices)), req.get("tuned", True))
    for variant in variants:
        t = impl.make_trainer(_cnn_model(impl, s, w, dropout=False), devices, variant, s.learning_rate,
                              s.adam_epsilon, s.seed)  # fmt: skip
        out[f"traj/{variant}/loss"] = np.asarray(t.steps(x, y))[:, 0]
        for i, a in enumerate(impl.get_weights(t.model())):
            out[f"traj/{variant}/w{i:03d}"] = a
    np.savez(req["out"], **out)
    return {"variants": variants}


CASES = {
    "conv": (conv_case, "conv_variants"),
    "cnn": (cnn_train_case, "cnn_variants"),
    "cnn_infer": (cnn_infer_case, "infer_variants"),
}


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
        cluster = Cluster.from_json(args.cluster) if args.cluster else None
        devices = impl.setup_devices(args.device, 0 if cluster else args.replicas, cluster)
    except DeviceUnavailable as e:
        say({"status": "unavailable", "error": str(e)})
        return
    impl.set_precision(args.precision)
    say(
        {
            "status": "ready",
            "replicas": len(devices),
            **impl.process_info(devices),
            "device_kind": impl.device_kind(),
            "devices": impl.list_devices(),
            "versions": versions(args.framework),
            # what this process really ran with (the harness and setup_devices add settings of their own)
            "env_flags": {k: os.environ[k] for k in ENV_FLAGS if k in os.environ},
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
                every = getattr(impl, CASES[req["workload"]][1])(len(devices))
                offered = _offered(impl, every, req.get("tuned", True))
                say({"variants": offered, "dtypes": {v: variant_dtype(impl, v) for v in offered}})
            elif cmd == "prepare":
                build = CASES[req["workload"]][0]
                extra = {k: req[k] for k in ("data", "weights") if k in req}
                timer, info, finish = build(
                    impl, devices, req["spec"], req["variant"], args.device, args.precision, req.get("save"), **extra
                )
                timers[req["id"]] = (timer, info, finish)
                compile_s = timer.first()
                cost = info.pop("cost")
                # after the first call: the compiler's own FLOP count, to cross-check the formula
                info["compiler_flops"], info["compiler_flops_source"] = cost() if compile_s is not None else (None, "")
                say({"compile_s": compile_s, "invalid": timer.m.invalid})
            elif cmd in ("warm", "rep"):
                timer = timers[req["id"]][0]
                say({"time": getattr(timer, cmd)(), "invalid": timer.m.invalid, "last": timer.m.last})
            elif cmd == "result":
                timer, info, finish = timers.pop(req["id"])
                m = timer.m
                done = finish() if m.invalid is None and req.get("evaluate", True) else {}
                say({**info, **m.stats(), **m.errors, **done, "compile_s": m.compile_s, "invalid": m.invalid})
            elif cmd == "warm_cnn":  # a framework's first model build runs its one-off set-up (seconds)
                impl.build_cnn(0)
                say({})
            elif cmd == "init_weights":
                save_npz(impl.get_weights(impl.build_cnn(req["seed"])), req["out"])
                say({})
            elif cmd == "cnn_parity":
                say(cnn_parity(impl, devices, req))
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
    ap.add_argument("--cluster", help="JSON of parity.cluster.Cluster: join a multi-process run (--replicas ignored)")
    args = ap.parse_args(argv)
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # keep the frameworks' prints off the answer channel
    print(f"worker {args.framework} {args.device} x{args.replicas} on {platform.node()}", file=sys.stderr)
    serve(args, out)


if __name__ == "__main__":
    main()
