"""The row LSTM's parent side (its WORKLOAD.suite): the data (Fashion-MNIST, as the CNN's), shared initial weights,
row figures and parity rounds. What every trained workload shares is parity.workloads.trained's: the data's
sources, a parity round's batches and requests, the trajectory pairing and the accuracy check."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from parity.api.weights import load_npz, save_npz
from parity.common.protocol import Call
from parity.workloads.lstm import checks
from parity.workloads.lstm.spec import LSTM_FULL, LstmSpec
from parity.workloads.lstm.tolerances import lstm_tolerances
from parity.workloads.trained import data, log_checks, parity_variants, row_figures, sources
from parity.workloads.trained.checks import accuracy
from parity.workloads.trained.rounds import ParityRound, ask_all, round_batch
from parity.workloads.trained.trajectories import trajectories, variants

# Test accuracy is judged after the notebook's schedule (10 epochs of 100 steps), the length the accuracy band was
# set for; a shorter run's accuracies are reported, not judged (the row LSTM has no moving statistics to settle, but
# after a few dozen steps its accuracy still swings with the batch order).
MIN_ACCURACY_STEPS = LSTM_FULL.epochs * LSTM_FULL.steps_per_epoch


@dataclass
class LstmState:
    """What the LSTM's parent side keeps between rounds."""

    data: str  # the dataset every worker reads (.npz)
    weights: str  # the first seed's shared initial weights (.npz)
    validate: str  # 'epoch', 'end' or 'none'
    parity: dict[int, ParityRound] = field(default_factory=dict)  # by replica count
    traj_skipped: str | None = None


def prepare(cfg, spec: LstmSpec, save_dir: Path) -> tuple[LstmState, list[str]]:
    """Load (or make) the data once for every worker (the CNN's sources: its synthetic-data warning covers both);
    returns the run's state and its notes."""
    ds, note = sources.load(cfg.data, cfg.data_dir, spec.train_size, spec.test_size, cfg.timeout_s, cfg.progress)
    ds.save(save_dir / "lstm-data.npz")
    notes = [f"lstm: {note}; each image read row by row (28 steps of 28 pixels), {spec.units} units a layer"]
    if cfg.device == "cpu" and not cfg.quick and spec.units < LSTM_FULL.units:
        notes.append(
            f"lstm: CPU size {spec.units} units at global batch {spec.global_batch}, {spec.epochs} epochs x "
            f"{spec.steps_per_epoch} steps (full size: {LSTM_FULL.units} units at {LSTM_FULL.global_batch}, the "
            "Shakespeare notebook's width and batch)"
        )
    validate = validation(cfg, spec)
    notes.append(
        {
            "epoch": f"lstm: validation on the {len(ds.x_test):,} test images after every epoch, outside the timed "
            "interval",
            "end": f"lstm: evaluated on the {len(ds.x_test):,} test images once, after the last epoch",
            "none": f"lstm: not evaluated ({spec.epochs * spec.steps_per_epoch} steps < {MIN_ACCURACY_STEPS})"
            if cfg.validate == "auto"
            else "lstm: not evaluated (--validate none)",
        }[validate]
    )
    weights = save_dir / f"lstm-w0-u{spec.units}-s{spec.seed}.npz"  # the first seed's: case_args writes it
    return LstmState(str(save_dir / "lstm-data.npz"), str(weights), validate), notes


def validation(cfg, spec: LstmSpec) -> str:
    """--validate for this schedule: 'auto' is every epoch from the notebook's length on, else none."""
    if cfg.validate != "auto":
        return cfg.validate
    return "epoch" if spec.epochs * spec.steps_per_epoch >= MIN_ACCURACY_STEPS else "none"


def warm(cfg, workers: dict, state: LstmState) -> None:
    """Every worker's one-off model set-up, at once and untimed."""
    for w in workers.values():
        w.send(Call("lstm", "warm"))
    for w in workers.values():
        w.answer()


def case_args(spec, seed_offset: int, workers: dict, save_dir: Path, state: LstmState) -> tuple[object, dict, str]:
    """The spec for this seed, the case's extra request fields, and a tag for its keys. Every framework starts from
    the same weights: the first worker's framework initialises them, Keras-style, once a seed and width."""
    spec = dataclasses.replace(spec, seed=spec.seed + seed_offset)
    weights = save_dir / f"lstm-w0-u{spec.units}-s{spec.seed}.npz"
    if not weights.exists():
        req = {"units": spec.units, "seed": spec.seed, "out": str(weights)}
        next(iter(workers.values())).ask(Call("lstm", "init_weights", req))
    return spec, {"data": state.data, "weights": str(weights), "validate": state.validate}, f"-s{spec.seed}"


def row_extra(kind, res, spec: LstmSpec) -> dict:
    """A row's own figures (parity.workloads.trained.row_figures); 5 notebook epochs only at the notebook's width."""
    return row_figures(kind, res, spec, LSTM_FULL if spec.units == LSTM_FULL.units else None)


def parity_collect(
    cfg, spec, workers: dict, hello: dict, save_dir: Path, state: LstmState, first: bool, log, key: int, timed=None
) -> None:
    """The parity arrays of this round's out-of-the-box workers: one batch's gradients and a trajectory per
    variant; with `first`, also each block's inference output from the first framework's trained weights."""
    own = {k: w for k, w in workers.items() if w.setting == "default"}  # parity: out of the box
    if not own:
        return
    rnd = state.parity.setdefault(key, ParityRound())
    rnd.counts.update({w.framework: hello[k]["replicas"] for k, w in own.items()})
    ds = data.Dataset.load(Path(state.data))
    if rnd.b is None:
        round_batch(cfg, spec, rnd, ds, save_dir, log, key, "lstm", dropout=False)
    fws = {w.framework: w for w in own.values() if not rnd.b % rnd.counts[w.framework]}
    keys = {w.framework: k for k, w in own.items()}
    rnd.files.update(
        ask_all(
            fws,
            save_dir,
            f"lstm-parity-{{fw}}-r{rnd.n}.npz",
            {
                fw: {"bf16": hello[keys[fw]]["native_bf16"], **parity_variants(cfg, timed, "lstm_train", fw)}
                for fw in fws
            },
            "lstm",
            spec=spec.to_dict(),
            weights=state.weights,
            tuned=cfg.tuned,
            batches=rnd.batches,
        )
    )
    w_fwd = save_dir / "lstm-w_fwd.npz"
    if first and fws and not w_fwd.exists():  # trained weights: the first trajectory of the first framework with one
        trained = (dict(np.load(rnd.files[fw])) for fw in fws)
        saved = next((t for t in trained if variants(t)), None)
        if saved is None:  # no framework offers a trainer here (a multi-process run): the initial weights
            save_npz(load_npz(state.weights, spec.architecture.weights), w_fwd)
        else:
            v = variants(saved)[0]
            save_npz([saved[f"traj/{v}/w{i:03d}"] for i in range(len(spec.architecture.weights))], w_fwd)
        np.save(save_dir / "lstm-fwd_x.npy", ds.x_test[:16].astype(np.float32))
    if first and fws:
        rnd.fwd.update(
            ask_all(
                fws, save_dir, "lstm-fwd-{fw}.npz", {}, "lstm", spec=spec.to_dict(), weights=str(w_fwd),
                forward=str(save_dir / "lstm-fwd_x.npy"),
            )
        )  # fmt: skip


def parity_judge(cfg, spec, save_dir: Path, state: LstmState, first: bool, log, key: int) -> list[dict]:
    """Trajectories at this replica count; the forward pass, loss and gradients against float64 once (first)."""
    rnd = state.parity.pop(key, None)
    if not rnd or not rnd.files:
        return []
    saved = {fw: dict(np.load(f)) for fw, f in rnd.files.items()}
    with np.load(rnd.batches) as f:
        x, y = f["x"], f["y"]
    rows, table = [], spec.architecture.weights
    if first:
        rows += checks.grads(saved, load_npz(state.weights, table), x[0], y[0], cfg.device, cfg.precision)
    tols, bf16 = (lstm_tolerances(cfg.device, cfg.precision, d) for d in ("float32", "bfloat16"))
    traj, skipped = trajectories(saved, {fw: rnd.counts[fw] for fw in saved}, tols, rnd.n, bf16, table, "lstm")
    rows += traj
    state.traj_skipped = skipped or state.traj_skipped
    if first and rnd.fwd:
        fwd = {fw: dict(np.load(f)) for fw, f in rnd.fwd.items()}
        xf = np.load(save_dir / "lstm-fwd_x.npy")
        w = load_npz(save_dir / "lstm-w_fwd.npz", table)
        rows = checks.forward(fwd, w, xf, cfg.device, cfg.precision) + rows
    for r in rows:
        r.setdefault("replicas", rnd.n)
        r["check"] = f"lstm {r['check']}"
    log_checks(cfg, log, "lstm", rnd.n, rows)
    return rows


def summary(cfg, rows: list[dict], state: LstmState) -> tuple[list[dict], list[str]]:
    """After every replica count: the accuracy check over the LSTM's training rows, and the notes gathered."""
    band = lstm_tolerances(cfg.device, cfg.precision)["accuracy_band"]
    trained = [r for r in rows if r["workload"] == "lstm_train" and r["verified"]]
    out = accuracy(trained, band, MIN_ACCURACY_STEPS) if trained else []
    for r in out:
        r["check"] = f"lstm {r['check']}"
    return out, [state.traj_skipped] if state.traj_skipped else []
