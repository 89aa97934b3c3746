"""What the trained workloads (the CNN, the row LSTM, the ViT) share. Here, the worker side: the dataset each worker
reads once, a training row's epochs (Epochs: one per timed call, its checks and figures), and the parity arrays a
framework saves for the parent's checks (parity_arrays: forward blocks, one batch's loss and gradients, short
dropout-free trajectories); each workload's cases build its model and call these. Beside it, the parent side:
the data (data.py, sources.py), a parity round's batches and requests (rounds.py), the trajectory pairing
(trajectories.py) and the checks every trained model gets (checks.py: trajectory, accuracy). A model without
dropout or BatchNorm (the row LSTM, the ViT) declares a TrainedModel (model.py) and takes its cases, suite and checks
against float64 from model_cases.py, model_suite.py and model_checks.py."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial
from typing import Any, Protocol, runtime_checkable

import numpy as np

from parity.api import Counted
from parity.api.variants import Variant, out_of_the_box
from parity.common.protocol import PROGRAMMING_ERRORS
from parity.common.threads import side_by_side
from parity.workloads.base import Invalid
from parity.workloads.trained import kept
from parity.workloads.trained.data import Dataset, Epoch, batch_offsets, batches


@cache
def dataset(path: str) -> Dataset:
    """The run's dataset (.npz), read once a worker."""
    return Dataset.load(path)


@runtime_checkable
class Prefetching(Protocol):
    """A trainer that can take its epoch batch by batch (data.Epoch), each put on its devices `prefetch` steps ahead of
    the step that takes it while the steps before it run (jax_impl.train.Trainer.steps_from). `prefetch` 0: its
    variant takes the epoch's arrays, sliced on the host before the first step, as the notebook fed them."""

    prefetch: int

    def steps_from(self, epoch: Epoch) -> np.ndarray: ...


class Epochs:
    """A training row's calls: one epoch each (run), its checks and figures (verify), the test figures at the
    end (finish), and the framework's FLOP count of an epoch (cost)."""

    def __init__(
        self, impl, devices, device: str, variant: Variant, s, ds: Dataset, trainer, validate: str, keep_as=None
    ):
        self.impl, self.devices, self.device, self.variant = impl, devices, device, variant
        self.s, self.ds, self.trainer, self.validate = s, ds, trainer, validate
        self.keep_as = keep_as  # the trainer's key (kept.key) for the parity round to take, once finished
        self.offsets = batch_offsets(s.seed, s.epochs * s.steps_per_epoch, len(ds.x_train), s.global_batch)
        self.epoch = 0
        self.history: list[dict] = []  # one entry per epoch, first (compiling) epoch included, as Keras's History

    def run(self):
        # a call beyond the schedule (--profile's, after the row's result) takes the schedule's batches again
        k, e = self.s.steps_per_epoch, self.epoch % self.s.epochs
        self.epoch += 1
        offsets = self.offsets[e * k : (e + 1) * k]
        if isinstance(self.trainer, Prefetching) and self.trainer.prefetch:  # each batch sliced as it is put ahead
            return self.trainer.steps_from(Epoch(self.ds, offsets, self.s.global_batch))
        return self.trainer.steps(*batches(self.ds, offsets, self.s.global_batch))

    def ahead(self) -> bool:
        """The first epoch's program compiled, not run (the trainer's `ahead`: False where it has nothing to)."""
        k = self.s.steps_per_epoch
        return self.trainer.ahead(*batches(self.ds, self.offsets[:k], self.s.global_batch))

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
        if self.keep_as is not None:
            kept.keep(self.keep_as, self.trainer)
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

    def cost(self) -> Counted:
        """An epoch's FLOPs by the framework's count of a step, and its compiled program where the count brings it."""
        step = self.trainer.step_cost()
        return (step if isinstance(step, Counted) else Counted(*step)).times(self.s.steps_per_epoch)


def parity_variants(cfg, timed: dict | None, kind: str, fw: str) -> dict:
    """A parity request's 'variants' field for framework `fw`: the code variants of row kind `kind` the round timed,
    where the preset checks those only (Config.parity_variants 'timed'); else none (every variant offered). One
    owner at a time (--exclusive): its tuned owners' too, known before they start (parity.engine.schedule)."""
    if cfg.parity_variants != "timed" or timed is None:
        return {}
    return {"variants": sorted(timed.get(kind, {}).get(fw, ()))}


def parity_arrays(impl, adapter, devices, req: dict, model: Callable[[str], Any], spec, tag: Any = None) -> dict:
    """Forward blocks, one batch's loss and gradients (unless req['grads'] is false: rounds after the first), and a
    short dropout-free trajectory per variant of the adapter's training row kind, to the .npz file req['out'], each
    program compiled as the implementation compiles its checks (check_compiler). model(weights path) builds the
    framework's model (dropout off) from the shared weights; spec: the run's spec (learning rate, Adam's epsilon,
    seed); tag: the model's part of its trainers' keys (kept.key): a trajectory takes the trainer a timed row of the
    same key left (kept.take), rewound."""
    compiler, _ = impl.check_compiler(devices)
    try:
        with compiler:
            return _parity_arrays(impl, adapter, devices, req, model, spec, tag)
    finally:
        kept.drop(adapter.TRAIN)  # the rows' trainers the round did not take


def _parity_arrays(impl, adapter, devices, req: dict, model: Callable[[str], Any], spec, tag) -> dict:
    s, w, out, kind = spec, req["weights"], {}, adapter.TRAIN
    if req.get("forward"):
        x = np.load(req["forward"])
        for name, v in adapter.forward_layers(model(w), x).items():
            out[f"forward/{name}"] = v
        np.savez(req["out"], **out)
        return {}
    with np.load(req["batches"]) as f:
        x, y = f["x"], f["y"]
    every = impl.variants(kind, len(devices))
    asked = req.get("variants")  # the timed ones only (parity_variants), else every one offered
    variants = [
        v.name
        for v in (every if req.get("tuned", True) else out_of_the_box(every))
        if (req.get("bf16", False) or v.dtype == "float32") and (asked is None or v.name in asked)
    ]  # bfloat16 where the rows run it
    records = {v.name: v for v in every}

    def trainer(variant: str):
        ready = kept.take(kept.key(kind, variant, devices, tag, w, s, x.shape[1]))  # a timed row's, rewound
        return ready or adapter.make_trainer(model(w), devices, variant, s.learning_rate, s.adam_epsilon, s.seed)

    grads = req.get("grads", True)  # one batch on one device: judged in the run's first round only
    if req.get("ahead"):  # an accelerator's host: each program compiled beside the others (Config.ahead)
        compiler = partial(_within, lambda: impl.check_compiler(devices)[0])  # each thread's own (check_compiler)
        g, trainers = _side_by_side(adapter, model(w), x, y, {v: trainer(v) for v in variants}, compiler, grads)
    else:
        g, trainers = adapter.loss_and_grads(model(w), x[0], y[0]) if grads else None, {}
    if g is not None:
        out["loss"] = np.array(g.loss)
        for i, a in enumerate(g.grads):
            out[f"grad/{i:03d}"] = a
        for i, a in enumerate(g.routing):  # how this framework's max pooling broke the batch's ties (the CNN's)
            out[f"routing/{i}"] = a
    for variant in variants:
        t = trainers[variant] if variant in trainers else trainer(variant)
        out[f"traj/{variant}/loss"] = np.asarray(t.steps(x, y))[:, 0]
        # steps per host dispatch, and how finely the per-step loss is known (fit under steps_per_execution: once
        # per execution, as that execution's mean)
        out[f"traj/{variant}/dispatch"] = np.array(getattr(t, "steps_per_dispatch", 1))
        out[f"traj/{variant}/loss_every"] = np.array(getattr(t, "loss_every", 1))
        out[f"traj/{variant}/dtype"] = np.array(records[variant].dtype)
        out[f"traj/{variant}/float32"] = np.array(records[variant].float32 or "")  # a mixed variant's counterpart
        out[f"traj/{variant}/batchnorm"] = np.array(t.batchnorm)  # over each replica's share, the global batch, none
        for i, a in enumerate(adapter.get_weights(t.model())):
            out[f"traj/{variant}/w{i:03d}"] = a
    np.savez(req["out"], **out)
    return {"variants": variants}


def _within(context: Callable[[], Any], job: Callable[[], Any]) -> Any:
    """job() inside a fresh context of `context`'s making (a thread's own compiler setting)."""
    with context():
        return job()


def _side_by_side(adapter, m, x, y, trainers: dict, compiler: Callable = lambda job: job(), grads=True) -> tuple:
    """One batch's loss and gradients of model `m` (where `grads`), with each trainer's first program (its
    trajectory's) compiled beside it on threads (parity.common.threads), each job run by `compiler` (in the thread's
    own check compiler); returns (the gradients or None, the trainers). A trainer whose framework refuses to compile
    ahead compiles at its first steps() call, as without; a failing gradient is raised."""
    got: dict = {"g": None}

    def gradients() -> bool:
        try:
            got["g"] = adapter.loss_and_grads(m, x[0], y[0])
        except BaseException as e:  # raised below, in the worker's thread
            got["raised"] = e
        return False

    jobs = {**({"": gradients} if grads else {}), **{v: partial(t.ahead, x, y) for v, t in trainers.items()}}
    side_by_side({k: partial(compiler, job) for k, job in jobs.items()}, PROGRAMMING_ERRORS)
    if "raised" in got:
        raise got["raised"]
    return got["g"], trainers


def row_figures(kind, res, spec, notebook=None) -> dict:
    """A trained workload's row figures from its worker's Result (the parent side): images per second, the data it
    ran on, the recurrent kernel where one ran, and for training the first epoch (kept apart from the timed epochs),
    the test figures and, given the notebook's spec (`notebook`: its schedule and size), 5 of its epochs estimated
    from the row's step time."""
    med, extra = res.median_s, res.extra
    out = {
        "images_per_s": extra["images"] / med if med else None,
        "data": extra.get("data"),
        "kernel_path": extra.get("kernel_path"),
        "spec": spec.to_dict(),
        "seed": spec.seed,
    }
    if kind.epochs:
        out.update(
            time_unit="epoch",
            first_epoch_s=res.compile_s,
            test_loss=extra.get("test_loss"),
            test_accuracy=extra.get("test_accuracy"),
            history=extra.get("history"),
        )
        if med and notebook is not None:  # 5 epochs of the notebook's steps at its global batch
            per_step = med / spec.steps_per_epoch * (notebook.global_batch / spec.global_batch)
            out["est_5_notebook_epochs_s"] = (res.compile_s - med) + 5 * notebook.steps_per_epoch * per_step
    return out


def log_checks(cfg, log, workload: str, n: int, rows: list[dict]) -> None:
    """A round's parity checks on the progress lines: every failure in full, the passes as a count per family
    ('forward', 'loss', 'gradients', 'trajectory'); with --verbose each pass in full too."""
    families: dict[str, int] = {}
    for r in rows:
        if r["passed"] is True and not cfg.verbose:
            family = r["check"].removeprefix(f"{workload} ").split(" ")[0]
            families[family] = families.get(family, 0) + 1
            continue
        said = {True: "PASS", False: "FAIL", None: "NOT JUDGED"}[r["passed"]]
        figs = ", ".join(f"{k} {v:.2e}" for k, v in r["figures"].items())
        detail = f"; {r['detail']}" if r.get("detail") else ""
        log(cfg, f"  {said} {r['check']}: {figs} (tolerance {r['tolerance']:.2g}){detail}")
    if families:
        said = ", ".join(f"{k} {v}" for k, v in families.items())
        log(cfg, f"  {workload} x{n}: {sum(families.values())} checks passed ({said}; each in results.md)")
