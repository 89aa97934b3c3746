"""The test MLP's parent side (its WORKLOAD.suite, parity.workloads.base.Suite): the data (the trained workloads'),
shared initial weights, row figures and parity rounds. What every trained workload shares is
parity.workloads.trained's: the data's sources, a parity round's batches and requests, the trajectory pairing and
the accuracy check."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mlp_workload import checks
from mlp_workload.spec import MLP_QUICK, MlpSpec
from mlp_workload.tolerances import mlp_tolerances
from parity.api.weights import load_npz
from parity.common.protocol import Call
from parity.workloads.trained import data, log_checks, parity_variants, row_figures, sources
from parity.workloads.trained.checks import accuracy
from parity.workloads.trained.rounds import ParityRound, ask_all, round_batch
from parity.workloads.trained.trajectories import trajectories

# Test accuracy is judged from the quick schedule on: a test workload, whose proof runs its accuracy check too.
MIN_ACCURACY_STEPS = MLP_QUICK.epochs * MLP_QUICK.steps_per_epoch


@dataclass
class MlpState:
    """What the MLP's parent side keeps between rounds."""

    data: str  # the dataset every worker reads (.npz)
    weights: str  # the first seed's shared initial weights (.npz)
    validate: str  # 'epoch', 'end' or 'none'
    parity: dict[int, ParityRound] = field(default_factory=dict)  # by replica count
    traj_skipped: str | None = None


def prepare(cfg, spec: MlpSpec, save_dir: Path) -> tuple[MlpState, list[str]]:
    """The run's data (--data: the trained workloads' sources), saved for every worker; the notes."""
    ds, note = sources.load(cfg.data, cfg.data_dir, spec.train_size, spec.test_size, cfg.timeout_s, cfg.progress)
    ds.save(save_dir / "mlp-data.npz")
    steps = spec.epochs * spec.steps_per_epoch
    validate = cfg.validate if cfg.validate != "auto" else ("epoch" if steps >= MIN_ACCURACY_STEPS else "none")
    weights = save_dir / f"mlp-w0-h{spec.hidden}-s{spec.seed}.npz"  # the first seed's: case_args writes it
    return MlpState(str(save_dir / "mlp-data.npz"), str(weights), validate), [f"mlp: {note}, {spec.hidden} hidden"]


def warm(cfg, workers: dict, state: MlpState) -> None:
    """Every worker's one-off model set-up, at once and untimed."""
    for w in workers.values():
        w.send(Call("mlp", "warm"))
    for w in workers.values():
        w.answer()


def case_args(spec, seed_offset: int, workers: dict, save_dir: Path, state: MlpState) -> tuple[object, dict, str]:
    """The spec for this seed, the case's extra request fields, and a tag for its keys. Every framework starts from
    the same weights: the first worker's framework initialises them, once a seed and width."""
    spec = dataclasses.replace(spec, seed=spec.seed + seed_offset)
    weights = save_dir / f"mlp-w0-h{spec.hidden}-s{spec.seed}.npz"
    if not weights.exists():
        req = {"hidden": spec.hidden, "seed": spec.seed, "out": str(weights)}
        next(iter(workers.values())).ask(Call("mlp", "init_weights", req))
    return spec, {"data": state.data, "weights": str(weights), "validate": state.validate}, f"-s{spec.seed}"


def row_extra(kind, res, spec: MlpSpec) -> dict:
    """A row's own figures (parity.workloads.trained.row_figures); no notebook to extrapolate to."""
    return row_figures(kind, res, spec)


def parity_collect(
    cfg, spec, workers: dict, hello: dict, save_dir: Path, state: MlpState, first: bool, log, key: int, timed=None
) -> None:
    """The parity arrays of this round's out-of-the-box workers: one batch's gradients and a trajectory per
    variant; with `first`, also each block's output on test images from the shared initial weights."""
    own = {k: w for k, w in workers.items() if w.setting == "default"}
    if not own:
        return
    rnd = state.parity.setdefault(key, ParityRound())
    rnd.counts.update({w.framework: hello[k]["replicas"] for k, w in own.items()})
    ds = data.Dataset.load(Path(state.data))
    if rnd.b is None:
        round_batch(cfg, spec, rnd, ds, save_dir, log, key, "mlp", dropout=False)
    fws = {w.framework: w for w in own.values() if not rnd.b % rnd.counts[w.framework]}
    keys = {w.framework: k for k, w in own.items()}
    extra = {fw: {"bf16": hello[keys[fw]]["native_bf16"], **parity_variants(cfg, timed, "mlp_train", fw)} for fw in fws}
    common = {"spec": spec.to_dict(), "weights": state.weights}
    name = f"mlp-parity-{{fw}}-r{rnd.n}.npz"
    rnd.files.update(ask_all(fws, save_dir, name, extra, "mlp", **common, tuned=cfg.tuned, batches=rnd.batches))
    if first and fws:
        x = save_dir / "mlp-fwd_x.npy"
        np.save(x, ds.x_test[:16].astype(np.float32))
        rnd.fwd.update(ask_all(fws, save_dir, "mlp-fwd-{fw}.npz", {}, "mlp", **common, forward=str(x)))


def parity_judge(cfg, spec, save_dir: Path, state: MlpState, first: bool, log, key: int) -> list[dict]:
    """Trajectories at this replica count; the forward pass, loss and gradients against float64 once (first)."""
    rnd = state.parity.pop(key, None)
    if not rnd or not rnd.files:
        return []
    saved = {fw: dict(np.load(f)) for fw, f in rnd.files.items()}
    with np.load(rnd.batches) as f:
        x, y = f["x"], f["y"]
    rows, table = [], spec.weights
    if first:
        w = load_npz(state.weights, table)
        fwd = {fw: dict(np.load(f)) for fw, f in rnd.fwd.items()}
        rows += checks.forward(fwd, w, np.load(save_dir / "mlp-fwd_x.npy"), cfg.device, cfg.precision)
        rows += checks.grads(saved, w, x[0], y[0], cfg.device, cfg.precision)
    tols = mlp_tolerances(cfg.device, cfg.precision)
    traj, skipped = trajectories(saved, {fw: rnd.counts[fw] for fw in saved}, tols, rnd.n, tols, table, "mlp")
    rows += traj
    state.traj_skipped = skipped or state.traj_skipped
    for r in rows:
        r["replicas"] = r.get("replicas") or rnd.n
        r["check"] = f"mlp {r['check']}"
    log_checks(cfg, log, "mlp", rnd.n, rows)
    return rows


def summary(cfg, rows: list[dict], state: MlpState) -> tuple[list[dict], list[str]]:
    """After every replica count: the accuracy check over the MLP's training rows, and the notes gathered."""
    band = mlp_tolerances(cfg.device, cfg.precision)["accuracy_band"]
    trained = [r for r in rows if r["kind"] == "mlp_train" and r["verified"]]
    out = accuracy(trained, band, MIN_ACCURACY_STEPS) if trained else []
    for r in out:
        r["check"] = f"mlp {r['check']}"
    return out, [state.traj_skipped] if state.traj_skipped else []
