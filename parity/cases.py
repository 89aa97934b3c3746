"""What a worker prepares and times, per row kind: the registry (parity/workloads.py) names these functions.

A case builder returns (Timer, info, finish): the timed callable with its verifier, the figures a row needs
(FLOPs, bytes, the compiler's count as `cost`), and an untimed closing step (a trained model's evaluation).
The other functions here are untimed requests a workload's parent side sends by name (`WORKER_CALLS`).
"""

from __future__ import annotations

import time
from functools import cache

import numpy as np

from parity import oracle
from parity.api.weights import load_npz, save_npz
from parity.data import Dataset, batch_offsets, batches
from parity.timing import Invalid, Timer, output_verifier
from parity.tolerances import BF16_TOLERANCE
from parity.workloads import CnnSpec, MatmulSpec, RowKind, cnn_forward_flops


def variant_dtype(impl, variant: str) -> str:
    """The number format of a variant's inputs and outputs, as its implementation declares it."""
    return "bfloat16" if variant in impl.BFLOAT16_VARIANTS else "float32"


def offered(impl, variants, tuned: bool) -> list[str]:
    """The variants a run asks for: all of them, or (tuned=False) the framework out of the box only.

    Where the framework offers no out-of-the-box way (TF's multi-worker CNN: only 'loop' and 'loop+spe'), its
    first variant stands in.
    """
    return [v for v in variants if tuned or v not in impl.TUNED_VARIANTS] or list(variants[:1])


def _saving(rows, save: str | None):
    """rows(), also saving what it read, for the parent's framework-vs-framework comparison."""

    def read(out, indices):
        got = rows(out, indices)
        if save:
            np.save(save, got)
        return got

    return read


@cache
def _op_inputs(spec):
    inputs = spec.inputs()
    idx = spec.oracle_indices()
    return inputs, idx, spec.oracle(inputs, idx)


def op_case(impl, devices, kind: RowKind, spec, variant: str, device: str, precision: str, save: str | None, **_):
    """One operation (the conv, the matmul) as a Timer: the implementation's prepare function on the spec's
    inputs, every call's output checked on the spec's oracle rows."""
    dtype = variant_dtype(impl, variant)
    inputs, idx, ref = _op_inputs(spec)
    p = kind.prepare(impl)(variant, *inputs, devices, **spec.op_args())
    verify = output_verifier(
        p.shape,
        _saving(p.rows, save),
        p.placement,
        spec.output_shape,
        idx,
        ref,
        kind.tolerance(device, precision, dtype),
        device,
        impl.process_info(devices)["local_replicas"],
    )
    info = {
        "flops": spec.flops(),
        "flops_unpadded": spec.flops_unpadded(),
        "flops_formula": type(spec).flops.__doc__,
        "min_bytes": spec.min_bytes(2 if dtype == "bfloat16" else None),
        "cost": p.cost,
    }
    return Timer(p.run, impl.block, verify, impl.slowest), info, dict


@cache
def _dataset(path: str) -> Dataset:
    return Dataset.load(path)


def _cnn_model(impl, s: CnnSpec, weights: str, dropout: bool = True):
    model = impl.build_cnn(s.seed, dropout=dropout)
    impl.set_weights(model, load_npz(weights))  # both frameworks start from the same weights
    return model


def cnn_train_case(
    impl,
    devices,
    kind: RowKind,
    spec: CnnSpec,
    variant: str,
    device: str,
    precision: str,
    save,
    data,
    weights,
    validate: str = "none",
):
    """One epoch per timed call (steps_per_epoch global batches in the notebook's order).

    Slicing the epoch's batches out of the uint8 arrays, as the notebook's generator did, is part of
    the timed epoch (milliseconds against seconds of training). validate: 'epoch' evaluates on the test
    set after every epoch, as Keras's fit(validation_data=...) does, 'end' once after the last, 'none' never;
    always outside the timed interval (the Timer times the call and its synchronisation, then verifies).
    """
    s, ds = spec, _dataset(data)
    trainer = impl.make_trainer(_cnn_model(impl, s, weights), devices, variant, s.learning_rate, s.adam_epsilon, s.seed)
    epochs = _Epochs(impl, devices, device, variant, s, ds, trainer, validate)
    k = s.steps_per_epoch
    info = {
        "flops": s.step_flops() * k,
        "flops_unpadded": s.step_flops(padded=False) * k,
        "flops_formula": CnnSpec.step_flops.__doc__,
        "min_bytes": s.step_min_bytes() * k,
        "images": k * s.global_batch,
        "data": ds.source,
        "cost": epochs.cost,
    }
    return Timer(epochs.run, impl.block, epochs.verify, impl.slowest), info, epochs.finish


class _Epochs:
    """A training row's calls: one epoch each (run), its checks and figures (verify), the test figures at the
    end (finish), and the framework's FLOP count of an epoch (cost)."""

    def __init__(self, impl, devices, device: str, variant: str, s: CnnSpec, ds: Dataset, trainer, validate: str):
        self.impl, self.devices, self.device, self.variant = impl, devices, device, variant
        self.s, self.ds, self.trainer, self.validate = s, ds, trainer, validate
        self.offsets = batch_offsets(s.seed, s.epochs * s.steps_per_epoch, len(ds.x_train), s.global_batch)
        self.epoch = 0
        self.history: list[dict] = []  # one entry per epoch, first (compiling) epoch included, as Keras's History

    def run(self):
        k, e = self.s.steps_per_epoch, self.epoch
        self.epoch += 1
        return self.trainer.steps(*batches(self.ds, self.offsets[e * k : (e + 1) * k], self.s.global_batch))

    def verify(self, out) -> dict:
        want = variant_dtype(self.impl, self.variant)
        if self.trainer.compute_dtype != want:  # the model as built, not the variant's name
            raise Invalid(f"the model computes in {self.trainer.compute_dtype}, not {want}")
        steps = np.asarray(out, np.float64)
        bad = np.flatnonzero(~np.isfinite(steps[:, 0]))
        if bad.size:
            step = (self.epoch - 1) * self.s.steps_per_epoch + int(bad[0]) + 1
            raise Invalid(f"loss is {steps[bad[0], 0]} at step {step}: training diverged, stopped")
        where = self.trainer.placement()  # this process's replicas
        local = self.impl.process_info(self.devices)["local_replicas"]
        if len(where) != local or any(not w.startswith(self.device + ":") for w in where):
            raise Invalid(f"trained on {where}, expected {local} {self.device} device(s) in this process")
        figures = {"loss": float(steps[-1, 0]), "accuracy": float(steps[-1, 1])}
        if self.validate == "epoch":
            ev = self.trainer.evaluate(self.ds.x_test, self.ds.y_test)
            self.history.append(
                {
                    "epoch": self.epoch,
                    "loss": float(steps[:, 0].mean()),  # the epoch's mean, as Keras's
                    "accuracy": float(steps[:, 1].mean()),
                    "val_loss": ev["loss"],
                    "val_accuracy": ev["accuracy"],
                }
            )
            figures.update(val_loss=ev["loss"], val_accuracy=ev["accuracy"])
        return figures

    def finish(self) -> dict:
        if self.validate == "epoch" and self.history:
            last = self.history[-1]
            return {
                "test_loss": last["val_loss"],
                "test_accuracy": last["val_accuracy"],
                "history": self.history,
                "epochs_run": self.epoch,
            }
        if self.validate == "end":
            ev = self.trainer.evaluate(self.ds.x_test, self.ds.y_test)
            return {"test_loss": ev["loss"], "test_accuracy": ev["accuracy"], "epochs_run": self.epoch}
        return {"epochs_run": self.epoch}

    def cost(self):
        flops, source = self.trainer.step_cost()
        return (flops * self.s.steps_per_epoch if flops else None), source


def cnn_infer_case(
    impl, devices, kind: RowKind, spec: CnnSpec, variant: str, device: str, precision: str, save, data, weights, **_
):
    """Inference on one global batch of test images, checked against the float64 forward pass."""
    ds = _dataset(data)
    x = ds.x_test[: spec.global_batch].astype(np.float32)
    idx = [0, len(x) - 1]
    ref = oracle.cnn_forward(load_npz(weights), x[idx])["probs"]
    p = impl.prepare_inference(_cnn_model(impl, spec, weights), x, devices)
    verify = output_verifier(
        p.shape,
        _saving(p.rows, save),
        p.placement,
        (len(x), 10),
        idx,
        ref,
        kind.tolerance(device, precision, "float32"),
        device,
        len(devices),
    )
    info = {
        "flops": cnn_forward_flops() * len(x),
        "flops_unpadded": cnn_forward_flops(padded=False) * len(x),
        "flops_formula": cnn_forward_flops.__doc__,
        "min_bytes": spec.infer_min_bytes(len(x)),
        "images": len(x),
        "data": ds.source,
        "cost": p.cost,
    }
    return Timer(p.run, impl.block, verify, impl.slowest), info, dict


# Untimed requests by name: {"cmd": "call", "fn": NAME, ...} runs NAME(impl, devices, request).


def bf16_matmul_peak(impl, devices, req: dict) -> dict:
    """FLOP/s of this framework's bfloat16 n x n matrix product on one device, the best of `reps` calls, each
    checked against float64 (the CPU's measured bfloat16 peak, as NumPy's matmul measures the float32 one)."""
    variants = [v for v in impl.matmul_variants(1) if v in impl.BFLOAT16_VARIANTS]
    if not variants:
        return {"flops": None}
    spec = MatmulSpec(m=req["n"], k=req["n"], n=req["n"])
    inputs, idx, ref = _op_inputs(spec)
    p = impl.prepare_matmul(variants[0], *inputs, devices[:1], **spec.op_args())
    best = float("inf")
    for _ in range(req.get("reps", 3) + 1):  # the first call compiles
        t0 = time.perf_counter()
        out = p.run()
        impl.block(out)
        best = min(best, time.perf_counter() - t0)
        err = np.max(np.abs(p.rows(out, idx).astype(np.float64) - ref)) / np.max(np.abs(ref))
        if not err <= BF16_TOLERANCE:
            return {"flops": None, "why": f"its bfloat16 matrix product is {err:.1e} off float64: not used"}
    return {"flops": spec.flops() / best, "variant": variants[0]}


def cnn_warm(impl, devices, req: dict) -> dict:
    """A framework's first model build runs its one-off set-up (seconds): done before anything is timed."""
    impl.build_cnn(0)
    return {}


def cnn_init_weights(impl, devices, req: dict) -> dict:
    """This framework's freshly initialised weights for a seed, to a .npz both frameworks then start from."""
    save_npz(impl.get_weights(impl.build_cnn(req["seed"])), req["out"])
    return {}


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
    variants = [
        v
        for v in offered(impl, impl.cnn_variants(len(devices)), req.get("tuned", True))
        if req.get("bf16", False) or variant_dtype(impl, v) == "float32"
    ]  # bfloat16 where the rows run it
    for variant in variants:
        t = impl.make_trainer(
            _cnn_model(impl, s, w, dropout=False), devices, variant, s.learning_rate, s.adam_epsilon, s.seed
        )
        out[f"traj/{variant}/loss"] = np.asarray(t.steps(x, y))[:, 0]
        # steps per host dispatch, and how finely the per-step loss is known (fit under steps_per_execution: once
        # per execution, as that execution's mean)
        out[f"traj/{variant}/dispatch"] = np.array(getattr(t, "steps_per_dispatch", 1))
        out[f"traj/{variant}/loss_every"] = np.array(getattr(t, "loss_every", 1))
        out[f"traj/{variant}/dtype"] = np.array(variant_dtype(impl, variant))
        for i, a in enumerate(impl.get_weights(t.model())):
            out[f"traj/{variant}/w{i:03d}"] = a
    np.savez(req["out"], **out)
    return {"variants": variants}


# The registries the worker answers from: row kinds' timed cases (workloads.RowKind.case), and untimed calls.
CASES = {"op": op_case, "cnn_train": cnn_train_case, "cnn_infer": cnn_infer_case}
WORKER_CALLS = {f.__name__: f for f in (cnn_warm, cnn_init_weights, cnn_parity, bf16_matmul_peak)}
