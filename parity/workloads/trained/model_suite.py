"""A trained model's parent side (the row LSTM's, the ViT's WORKLOAD.suite: ModelSuite of its
parity.workloads.trained.model.TrainedModel): the data (Fashion-MNIST, as the CNN's), shared initial weights, row
figures and parity rounds. What every trained workload shares is parity.workloads.trained's: the data's sources, a
parity round's batches and requests, the trajectory pairing and the accuracy check."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from parity.api.weights import load_npz, save_npz
from parity.common.messages import HarnessError
from parity.common.protocol import Call
from parity.workloads.trained import float64, log_checks, model_checks, parity_variants, row_figures, sources
from parity.workloads.trained.checks import accuracy
from parity.workloads.trained.model import TrainedModel
from parity.workloads.trained.rounds import ParityRound, answers, ask_all, open_round
from parity.workloads.trained.trajectories import trajectories, variants


@dataclass
class ModelState:
    """What a trained model's parent side keeps between rounds."""

    data: str  # the dataset every worker reads (.npz)
    weights: str  # the first seed's shared initial weights (.npz)
    validate: str  # 'epoch', 'end' or 'none'
    parity: dict[int, ParityRound] = field(default_factory=dict)  # by replica count
    traj_skipped: str | None = None


class ModelSuite:
    """The hooks of parity.workloads.base.Suite for one TrainedModel."""

    def __init__(self, m: TrainedModel):
        self.m = m

    def _weights_path(self, save_dir: Path, spec) -> Path:
        """The shared initial weights of this seed and size."""
        return save_dir / f"{self.m.name}-w0-{self.m.weights_tag(spec)}-s{spec.seed}.npz"

    def prepare(self, cfg, spec, save_dir: Path) -> tuple[ModelState, list[str]]:
        """Load (or make) the data once for every worker (the CNN's sources: its synthetic-data warning covers every
        trained workload); returns the run's state and its notes."""
        m, n = self.m, self.m.name
        ds, note = sources.load(cfg.data, cfg.data_dir, spec.train_size, spec.test_size, cfg.timeout_s, cfg.progress)
        ds.save(save_dir / f"{n}-data.npz")
        notes = [f"{n}: {note}; {m.reading(spec)}"]
        if cfg.device == "cpu" and not cfg.quick and spec.architecture != m.full.architecture:
            notes.append(
                f"{n}: CPU size {m.size(spec)} at global batch {spec.global_batch}, {spec.epochs} epochs x "
                f"{spec.steps_per_epoch} steps (full size: {m.size(m.full)} at {m.full.global_batch}, {m.full_why})"
            )
        if m.float64:
            notes.append(f"{n}: judged against {m.oracle}, the workload's float64 oracle (it brings no NumPy one)")
            os.environ[float64.PYTHONS] = json.dumps(cfg.pythons)  # its runs' interpreters, for the workers too
        validate = self.validation(cfg, spec)
        notes.append(
            {
                "epoch": f"{n}: validation on the {len(ds.x_test):,} test images after every epoch, outside the timed "
                "interval",
                "end": f"{n}: evaluated on the {len(ds.x_test):,} test images once, after the last epoch",
                "none": f"{n}: not evaluated ({spec.epochs * spec.steps_per_epoch} steps < {m.min_accuracy_steps})"
                if cfg.validate == "auto"
                else f"{n}: not evaluated (--validate none)",
            }[validate]
        )
        weights = self._weights_path(save_dir, spec)  # the first seed's: case_args writes it
        return ModelState(str(save_dir / f"{n}-data.npz"), str(weights), validate), notes

    def validation(self, cfg, spec) -> str:
        """--validate for this schedule: 'auto' is every epoch from the full schedule's length on, else none."""
        if cfg.validate != "auto":
            return cfg.validate
        return "epoch" if spec.epochs * spec.steps_per_epoch >= self.m.min_accuracy_steps else "none"

    def warm(self, cfg, workers: dict, state: ModelState) -> None:
        """Every worker's one-off model set-up, at once and untimed."""
        for w in workers.values():
            w.send(Call(self.m.name, "warm"))
        answers(workers.values())

    def case_args(
        self, spec, seed_offset: int, workers: dict, save_dir: Path, state: ModelState
    ) -> tuple[object, dict, str]:
        """The spec for this seed, the case's extra request fields, and a tag for its keys. Every framework starts
        from the same weights: the first worker's framework initialises them, with its own initialisers, once a
        seed and size."""
        spec = dataclasses.replace(spec, seed=spec.seed + seed_offset)
        weights = self._weights_path(save_dir, spec)
        if not weights.exists():
            self._init_weights(workers, {**self.m.fields(spec), "seed": spec.seed, "out": str(weights)})
        return spec, {"data": state.data, "weights": str(weights), "validate": state.validate}, f"-s{spec.seed}"

    def _init_weights(self, workers: dict, req: dict) -> None:
        """The first framework that makes them writes the weights: one whose adapter refuses (a plug-in's that
        raised) hands the request to the next. Raises the first refusal where every framework refuses."""
        refused = []
        for w in workers.values():
            try:
                w.ask(Call(self.m.name, "init_weights", req))
                return
            except HarnessError as e:
                refused.append(e)
        raise refused[0]

    def row_extra(self, kind, res, spec) -> dict:
        """A row's own figures (parity.workloads.trained.row_figures); a notebook's epochs estimated only where the
        workload has a notebook (notebook) and only at its full size; an inference row's oracle named (its
        training rows' numbers are judged by the checks, each naming its own)."""
        full = self.m.full if self.m.notebook and spec.architecture == self.m.full.architecture else None
        return row_figures(kind, res, spec, full) | ({} if kind.epochs else {"oracle": self.m.oracle})

    def parity_collect(
        self, cfg, spec, workers: dict, hello: dict, save_dir: Path, state: ModelState, first: bool, log, key: int,
        timed=None,
    ) -> None:  # fmt: skip
        """The parity arrays of this round's out-of-the-box workers: one batch's gradients and a trajectory per
        variant; with `first`, also each block's inference output from the first framework's trained weights."""
        n = self.m.name
        opened = open_round(cfg, spec, workers, hello, state, save_dir, key, log, n, False, first)
        if opened is None:
            return
        own, rnd, ds = opened
        fws = {w.framework: w for w in own.values() if not rnd.b % rnd.counts[w.framework]}
        keys = {w.framework: k for k, w in own.items()}
        own_req = {
            fw: {"bf16": hello[keys[fw]]["native_bf16"], **parity_variants(cfg, timed, f"{n}_train", fw)} for fw in fws
        }
        rnd.files.update(
            ask_all(
                fws, save_dir, f"{n}-parity-{{fw}}-r{rnd.n}.npz", own_req, n, spec=spec.to_dict(),
                weights=state.weights, tuned=cfg.tuned, batches=rnd.batches, ahead=cfg.ahead, grads=first,
            )
        )  # fmt: skip
        if first and fws:
            self._forward_requests(spec, fws, rnd, ds, save_dir, state)
            if rnd.refs.ahead:
                self._begin_references(cfg, spec, rnd, state, save_dir)

    def _begin_references(self, cfg, spec, rnd: ParityRound, state: ModelState, save_dir: Path) -> None:
        """The float64 references parity_judge takes (the gradients', the forward blocks'), begun in the background
        from the very arrays it reads (parity.common.references)."""
        m, table = self.m, spec.architecture.weights
        with np.load(rnd.batches) as f:
            x, y = f["x"][0], f["y"][0]
        w0 = load_npz(state.weights, table)
        rnd.refs.start(m.oracle_loss_and_grads, w0, x, y)
        rnd.refs.start(m.bounds, w0, x, y, cfg.device, cfg.precision)
        w, xf = load_npz(save_dir / f"{m.name}-w_fwd.npz", table), np.load(save_dir / f"{m.name}-fwd_x.npy")
        rnd.refs.start(m.oracle_forward, w, xf)
        rnd.refs.start(m.block_tolerances, w, xf, cfg.device, cfg.precision)

    def _forward_requests(self, spec, fws: dict, rnd: ParityRound, ds, save_dir: Path, state: ModelState) -> None:
        """Each block's inference output from the first framework's trained weights (else the initial ones)."""
        n = self.m.name
        w_fwd = save_dir / f"{n}-w_fwd.npz"
        if not w_fwd.exists():  # trained weights: the first trajectory of the first framework with one
            trajs = (dict(np.load(rnd.files[fw])) for fw in fws)
            saved = next((t for t in trajs if variants(t)), None)
            if saved is None:  # no framework offers a trainer here (a multi-process run): the initial weights
                save_npz(load_npz(state.weights, spec.architecture.weights), w_fwd)
            else:
                v = variants(saved)[0]
                save_npz([saved[f"traj/{v}/w{i:03d}"] for i in range(len(spec.architecture.weights))], w_fwd)
            np.save(save_dir / f"{n}-fwd_x.npy", ds.x_test[:16].astype(np.float32))
        rnd.fwd.update(
            ask_all(
                fws, save_dir, f"{n}-fwd-{{fw}}.npz", {}, n, spec=spec.to_dict(), weights=str(w_fwd),
                forward=str(save_dir / f"{n}-fwd_x.npy"),
            )
        )  # fmt: skip

    def parity_judge(self, cfg, spec, save_dir: Path, state: ModelState, first: bool, log, key: int) -> list[dict]:
        """Trajectories at this replica count; the forward pass, loss and gradients against float64 once (first)."""
        m, n = self.m, self.m.name
        rnd = state.parity.pop(key, None)
        if not rnd or not rnd.files:
            return []
        saved = {fw: dict(np.load(f)) for fw, f in rnd.files.items()}
        with np.load(rnd.batches) as f:
            x, y = f["x"], f["y"]
        rows, table = [], spec.architecture.weights
        if first:
            w0 = load_npz(state.weights, table)
            rows += model_checks.grads(m, saved, w0, x[0], y[0], cfg.device, cfg.precision, rnd.refs)
        tols, bf16 = (m.tolerances(cfg.device, cfg.precision, d, spec) for d in ("float32", "bfloat16"))
        traj, skipped = trajectories(saved, {fw: rnd.counts[fw] for fw in saved}, tols, rnd.n, bf16, table, n)
        rows += traj
        state.traj_skipped = skipped or state.traj_skipped
        if first and rnd.fwd:
            fwd = {fw: dict(np.load(f)) for fw, f in rnd.fwd.items()}
            xf = np.load(save_dir / f"{n}-fwd_x.npy")
            w = load_npz(save_dir / f"{n}-w_fwd.npz", table)
            rows = model_checks.forward(m, fwd, w, xf, cfg.device, cfg.precision, rnd.refs) + rows
        for r in rows:
            r.setdefault("replicas", rnd.n)
            r["check"] = f"{n} {r['check']}"
        log_checks(cfg, log, n, rnd.n, rows)
        return rows

    def summary(self, cfg, rows: list[dict], state: ModelState) -> tuple[list[dict], list[str]]:
        """After every replica count: the accuracy check over the workload's training rows, and the notes gathered."""
        band = self.m.tolerances(cfg.device, cfg.precision)["accuracy_band"]
        training = [r for r in rows if r["kind"] == f"{self.m.name}_train" and r["verified"]]
        out = accuracy(training, band, self.m.min_accuracy_steps) if training else []
        for r in out:
            r["check"] = f"{self.m.name} {r['check']}"
        return out, [state.traj_skipped] if state.traj_skipped else []
