"""The CNN's worker side: its timed cases (a training epoch per call, inference) and its untimed calls (set-up,
shared initial weights, parity arrays)."""

from __future__ import annotations

from functools import cache

import numpy as np

from parity.api.variants import Variant, out_of_the_box
from parity.api.weights import load_npz, save_npz
from parity.workloads.base import Invalid, RowKind, Timed, output_verifier
from parity.workloads.cnn import oracle as cnn_oracle
from parity.workloads.cnn.data import Dataset, batch_offsets, batches
from parity.workloads.cnn.spec import CnnSpec, cnn_forward_flops
from parity.workloads.ops import _saving


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
    variant: Variant,
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
    model = _cnn_model(impl, s, weights)
    trainer = impl.make_trainer(model, devices, variant.name, s.learning_rate, s.adam_epsilon, s.seed)
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
        "program": epochs.trainer.program_text,
    }
    return Timed(epochs.run, epochs.verify, info, epochs.finish)


class _Epochs:
    """A training row's calls: one epoch each (run), its checks and figures (verify), the test figures at the
    end (finish), and the framework's FLOP count of an epoch (cost)."""

    def __init__(self, impl, devices, device: str, variant: Variant, s: CnnSpec, ds: Dataset, trainer, validate: str):
        self.impl, self.devices, self.device, self.variant = impl, devices, device, variant
        self.s, self.ds, self.trainer, self.validate = s, ds, trainer, validate
        self.offsets = batch_offsets(s.seed, s.epochs * s.steps_per_epoch, len(ds.x_train), s.global_batch)
        self.epoch = 0
        self.history: list[dict] = []  # one entry per epoch, first (compiling) epoch included, as Keras's History

    def run(self):
        # a call beyond the schedule (--profile's, after the row's result) takes the schedule's batches again
        k, e = self.s.steps_per_epoch, self.epoch % self.s.epochs
        self.epoch += 1
        return self.trainer.steps(*batches(self.ds, self.offsets[e * k : (e + 1) * k], self.s.global_batch))

    def verify(self, out) -> dict:
        want = self.variant.dtype
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
    impl, devices, kind: RowKind, spec: CnnSpec, variant: Variant, device: str, precision: str, save, data, weights, **_
):
    """Inference on one global batch of test images, checked against the float64 forward pass."""
    ds = _dataset(data)
    x = ds.x_test[: spec.global_batch].astype(np.float32)
    idx = [0, len(x) - 1]
    ref = cnn_oracle.cnn_forward(load_npz(weights), x[idx])["probs"]
    p = impl.prepare_inference(_cnn_model(impl, spec, weights), x, devices, variant.name)
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
        "program": p.program,
    }
    return Timed(p.run, verify, info)


# Untimed requests by name (parity.workloads.cnn.WORKLOAD.calls): fn(impl, devices, request) -> answer.


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
    every = impl.variants("cnn_train", len(devices))
    variants = [
        v.name
        for v in (every if req.get("tuned", True) else out_of_the_box(every))
        if req.get("bf16", False) or v.dtype == "float32"
    ]  # bfloat16 where the rows run it
    records = {v.name: v for v in every}
    for variant in variants:
        t = impl.make_trainer(
            _cnn_model(impl, s, w, dropout=False), devices, variant, s.learning_rate, s.adam_epsilon, s.seed
        )
        out[f"traj/{variant}/loss"] = np.asarray(t.steps(x, y))[:, 0]
        # steps per host dispatch, and how finely the per-step loss is known (fit under steps_per_execution: once
        # per execution, as that execution's mean)
        out[f"traj/{variant}/dispatch"] = np.array(getattr(t, "steps_per_dispatch", 1))
        out[f"traj/{variant}/loss_every"] = np.array(getattr(t, "loss_every", 1))
        out[f"traj/{variant}/dtype"] = np.array(records[variant].dtype)
        out[f"traj/{variant}/float32"] = np.array(records[variant].float32 or "")  # a mixed variant's counterpart
        out[f"traj/{variant}/batchnorm"] = np.array(t.batchnorm)  # over each replica's share, or the global batch
        for i, a in enumerate(impl.get_weights(t.model())):
            out[f"traj/{variant}/w{i:03d}"] = a
    np.savez(req["out"], **out)
    return {"variants": variants}
