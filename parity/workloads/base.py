"""What every workload is made of: its record (Workload, RowKind), what a worker builds and times for a row
(Timed) and the check of an operation's output against float64, and the parent side a trained workload adds
(Suite). The engine reads these; a workload imports nothing of the engine's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from parity.common.float64 import errors

PRECISIONS = ("default", "highest")
DEVICES = ("cpu", "gpu", "tpu")


class Invalid(Exception):
    """The timed computation's output was not what was asked for."""


Verifier = Callable[[Any], dict]  # an output -> its figures; raises Invalid


@dataclass
class Timed:
    """What a workload's case builds in a worker for one row: the call to time (its output not yet synchronised), its
    verification, the row's figures (FLOPs, bytes, `cost`: the compiler's count after the first call, `program`: the
    compiled text for a profile), and an untimed closing step (a trained model's evaluation). The worker times it."""

    run: Callable[[], Any]
    verify: Verifier
    info: dict
    finish: Callable[[], dict] = dict
    # compiles, without running it, what the first call will run (True), or says there is nothing to (False)
    ahead: Callable[[], bool] | None = None


def output_verifier(
    shape: Callable[[Any], tuple[int, ...]],
    rows: Callable[[Any, list[int]], np.ndarray],
    placement: Callable[[Any], list[str]],
    expected_shape: tuple[int, ...],
    indices: list[int],
    reference: np.ndarray,
    tol: float,
    device: str,
    replicas: int,
) -> Verifier:
    """Checks an output's shape, where it was computed, and its values on `indices` vs `reference`."""

    def verify(out) -> dict[str, float]:
        if out is None:
            raise Invalid("the computation returned nothing")
        try:
            got_shape = tuple(shape(out))
        except Exception as e:  # a stand-in returning the wrong kind of object
            raise Invalid(f"output has no readable shape ({type(e).__name__}: {e})") from None
        if got_shape != tuple(expected_shape):
            raise Invalid(f"output shape {got_shape}, expected {tuple(expected_shape)}")
        where = placement(out)
        if len(where) != replicas or any(not w.startswith(device + ":") for w in where):
            raise Invalid(f"computed on {where}, expected {replicas} {device} device(s)")
        errs = errors(rows(out, indices), reference)
        if not errs["max_rel_err"] <= tol:
            raise Invalid(f"max_rel_err {errs['max_rel_err']:.3g} vs the float64 oracle exceeds {tol:g}")
        return errs

    return verify


class Suite(Protocol):
    """Hooks, in the order a run calls them. `workers` and `hello` are the round's (workerproc.Worker, its
    first words) by key; `key` names the round (its replica count)."""

    def prepare(self, cfg: Any, spec: Any, save_dir: Path) -> tuple[Any, list[str]]:
        """Once, before any worker: the state, and notes for the table."""

    def warm(self, cfg: Any, workers: dict, state: Any) -> None:
        """Each round, before anything is timed: one-off set-up in the workers."""

    def case_args(
        self, spec: Any, seed_offset: int, workers: dict, save_dir: Path, state: Any
    ) -> tuple[Any, dict, str]:
        """Per seed: its spec, the extra fields of its 'prepare' requests, and a tag for its keys."""

    def row_extra(self, kind: RowKind, res: Any, spec: Any) -> dict:
        """A row's own figures (parity.record.rows.Row fields) from the worker's parity.common.protocol.Result."""

    def parity_collect(
        self,
        cfg: Any,
        spec: Any,
        workers: dict,
        hello: dict,
        save_dir: Path,
        state: Any,
        first: bool,
        log,
        key: int,
        timed: dict | None = None,
    ) -> None:
        """After a round's rows: the workers' parity arrays (untimed). timed: the round's timed code variants by row
        kind and framework; a preset that checks those only (Preset.parity) asks for them alone."""

    def parity_judge(self, cfg: Any, spec: Any, save_dir: Path, state: Any, first: bool, log, key: int) -> list[dict]:
        """When a round's workers are gone: its parity checks."""

    def summary(self, cfg: Any, rows: list[dict], state: Any) -> tuple[list[dict], list[str]]:
        """After every round: closing checks over the rows (as results.json holds them), and notes."""


@dataclass(frozen=True)
class RowKind:
    """One kind of timed row: what a worker builds and times, and how the parent reads the result.

    name: the rows' 'kind' field (the implementations' variants of it: their variants(name, replicas)). case:
    what a worker builds and times for a row, (impl, devices, kind, spec, variant, device, precision, save, **extra)
    -> Timed. prepare: for an operation, the implementation's function that places its inputs. tolerance:
    (device, precision, dtype) -> the oracle tolerance of the row's output, None when the workload's
    checks judge its numbers instead. epochs: one call is a training epoch (the first epoch apart,
    then epochs - 1 timed ones) rather than a calibrated number of calls. seeded: run once per --seeds.
    ceiling: its rows measure the device's ceiling (the matmul): a CPU's bfloat16 peak counts their fastest calls.
    """

    name: str
    case: Callable[..., Timed]
    tolerance: Callable[[str, str, str], float | None]
    prepare: Callable[[Any], Callable] | None = None
    epochs: bool = False
    seeded: bool = False
    ceiling: bool = False


@dataclass(frozen=True)
class Workload:
    """A workload: its specs (full size, the CPU's default, --quick), its row kinds, the spec fields the command line
    may override (--batch, --epochs, --steps-per-epoch), a trained workload's parent side (`suite`: data, shared
    initial weights, parity checks) and the untimed calls that side asks a worker for by name (`calls`: name ->
    fn(impl, devices, request) -> answer), the schedule `--schedule notebook` gives it (`notebook`), and its place among
    the others (`rank`)."""

    name: str
    full: Any
    cpu: Any
    quick: Any
    kinds: tuple[RowKind, ...]
    options: tuple[str, ...] = ()
    suite: Suite | None = None
    layers: tuple[str, ...] = ()  # a model's layer names in order, for --profile's per-layer table (none: one op)
    calls: Mapping[str, Callable[[Any, Any, dict], dict]] = field(default_factory=dict)
    notebook: Mapping[str, int] = field(default_factory=dict)  # the spec fields `--schedule notebook` sets (none: none)
    rank: int = 0  # where a run takes it, and its rows are listed, among the workloads (lower first; ties by name)
    accelerator: Any = None  # a GPU's or TPU's default where it is not the full size (none: the full size)
    # the call among `calls` that measures a CPU's bfloat16 peak on one device, the engine's to ask a worker for
    # (the matmul's): request {"n": the square product's side} -> {"flops": FLOP/s or None, "why": when None}
    peak_call: str | None = None

    def spec(self, quick: bool, device: str, overrides: dict | None = None, notebook: bool = False):
        """This run's spec: --quick, else the device's default schedule; then, under `notebook`, the notebook's
        schedule as the workload declares it; then the command line's overrides."""
        base = self.quick if quick else (self.cpu if device == "cpu" else self.accelerator or self.full)
        fields = {**(self.notebook if notebook else {}), **(overrides or {})}
        return replace(base, **{k: v for k, v in fields.items() if k in self.options})

    def size_note(self, spec) -> list[str]:
        """An operation's run at the CPU's or an accelerator's size, not its full one, said with both sizes' FLOPs (a
        trained workload's parent side says its own: ModelSuite.prepare); none at the full size or --quick's."""
        if self.suite is not None:  # a trained workload: its schedule, where an accelerator's default shortens it
            return self._schedule_note(spec)
        if spec in (self.full, self.quick):
            return []
        size, full = spec.flops() / 1e9, self.full.flops() / 1e9
        where = "accelerator" if spec == self.accelerator else "CPU"
        return [
            f"{self.name}: {where} size, {size:.1f} GFLOP a call (full size: {full:.1f} GFLOP; python -m parity.report "
            "sets a call beside the full size's, scaled by the FLOPs, marked est.)"
        ]

    def _schedule_note(self, spec) -> list[str]:
        if self.accelerator is None or spec != self.accelerator:
            return []
        f = self.full
        return [
            f"{self.name}: accelerator schedule, {spec.epochs} epochs x {spec.steps_per_epoch} steps at global batch "
            f"{spec.global_batch} (the notebook's: {f.epochs} x {f.steps_per_epoch} at {f.global_batch}; --preset "
            "notebook restores it)"
        ]


def notebook_schedule(spec) -> dict[str, int]:
    """A trained workload's `notebook` fields: the tensorflow/tpu notebook's schedule, as `spec` (its full size) has
    it: 10 epochs of 100 steps at a global batch of 1024."""
    return {"global_batch": spec.global_batch, "epochs": spec.epochs, "steps_per_epoch": spec.steps_per_epoch}


# An accelerator's default schedule for a trained workload: the full size and global batch, 6 epochs (the first,
# compiling, apart; 5 timed: parity.judging.stats.MIN_CALLS) of 20 steps. The notebook's 10 x 100 steps at every
# timed variant and both formats was most of a TPU default run; `--preset notebook` restores it, and the accuracy
# check, which holds from the notebook's 1,000 steps on, says it was not judged.
ACCELERATOR_EPOCHS, ACCELERATOR_STEPS = 6, 20


def accelerator_schedule(spec):
    """A trained workload's accelerator spec: `spec` (its full size) on ACCELERATOR_EPOCHS x ACCELERATOR_STEPS."""
    return replace(spec, epochs=ACCELERATOR_EPOCHS, steps_per_epoch=ACCELERATOR_STEPS)


def judged_by_checks(device: str, precision: str, dtype: str) -> None:
    """No oracle tolerance: a training row is checked for finite losses and placement, its numbers by the checks."""
    return None
