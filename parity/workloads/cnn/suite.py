"""The parent side of a trained workload (the CNN): its data, shared initial weights, row figures and parity.

This module is the CNN's parity.workloads.base.Suite (its WORKLOAD.suite, parity/workloads/cnn/__init__.py); the
engine knows nothing else about training. Worker-side counterparts are in parity.workloads.cnn.cases.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from parity.api.cnn import CNN_WEIGHTS
from parity.api.weights import load_npz, save_npz
from parity.common.messages import warn
from parity.common.protocol import Call
from parity.workloads.cnn import checks
from parity.workloads.cnn import oracle as cnn_oracle
from parity.workloads.cnn.oracle import cnn_forward
from parity.workloads.cnn.spec import CNN_FULL
from parity.workloads.cnn.tolerances import cnn_grad_tolerance, cnn_loss_tolerance, cnn_tolerances
from parity.workloads.trained import log_checks, parity_variants, row_figures, sources
from parity.workloads.trained.rounds import ParityRound, ask_all, open_round
from parity.workloads.trained.trajectories import global_batchnorm, trajectories, variants


@dataclass
class CnnState:
    """What the CNN's parent side keeps between rounds."""

    data: str  # the dataset every worker reads (.npz)
    weights: str  # the first seed's shared initial weights (.npz)
    validate: str  # 'epoch', 'end' or 'none'
    warning: list[str]  # the synthetic-data warning, said once when training is about to start
    parity: dict[int, ParityRound] = field(default_factory=dict)  # by replica count
    traj_skipped: str | None = None  # why a trajectory between two frameworks was not compared
    # the one-device round's batch size and saved arrays, by framework: what a trainer whose BatchNorm takes the
    # global batch's statistics (Keras's DataParallel) computes over several replicas
    one_device: tuple[int, dict] | None = None


def prepare(cfg, spec, save_dir: Path) -> tuple[CnnState, list[str]]:
    """Load (or make) the data once for every worker; returns the run's state and its notes."""
    ds, note = sources.load(cfg.data, cfg.data_dir, spec.train_size, spec.test_size, cfg.timeout_s, cfg.progress)
    ds.save(save_dir / "data.npz")
    said = []
    if ds.source == "synthetic" and cfg.data == "auto":  # said when training is about to start (warm)
        said = [
            "SYNTHETIC DATA: Fashion-MNIST was not found on disk "
            f"(looked for IDX files{' in ' + cfg.data_dir if cfg.data_dir else ''} and TFDS's "
            f"fashion_mnist in {sources.tfds_root(cfg.data_dir)}).",
            "The CNN trains on a learnable stand-in of the same shapes: its speed is the real one, its "
            "accuracy is not Fashion-MNIST's.",
            "To train on the real data (a network, about 30 MB, once):",
            "  " + shlex.join(with_data_download(cfg.command)),
        ]
    notes = [f"cnn: {note}"]
    if cfg.device == "cpu" and not cfg.quick and spec.epochs < CNN_FULL.epochs:
        notes.append(
            f"cnn: CPU schedule shortened to {spec.epochs} epochs x {spec.steps_per_epoch} steps at global "
            f"batch {spec.global_batch} (notebook: {CNN_FULL.epochs} x {CNN_FULL.steps_per_epoch} at "
            f"{CNN_FULL.global_batch}); --epochs/--steps-per-epoch/--batch restore it"
        )
    validate = validation(cfg, spec)
    steps = spec.epochs * spec.steps_per_epoch
    notes.append(
        {
            "epoch": f"cnn: validation on the {len(ds.x_test):,} test images after every epoch, outside the "
            "timed interval (as Keras's fit(validation_data=...)); per-epoch history in results.json",
            "end": f"cnn: evaluated on the {len(ds.x_test):,} test images once, after the last epoch",
            "none": f"cnn: not evaluated ({steps} steps < {checks.MIN_ACCURACY_STEPS}: test accuracy would not "
            "have settled); --validate epoch evaluates after every epoch"
            if cfg.validate == "auto"
            else "cnn: not evaluated (--validate none)",
        }[validate]
    )
    state = CnnState(str(save_dir / "data.npz"), str(save_dir / f"w0-s{spec.seed}.npz"), validate, said)
    return state, notes


def with_data_download(command) -> list[str]:
    """`command` with its --data option replaced by --data download."""
    out, skip = [], False
    for a in command:
        if skip:
            skip = False
        elif a == "--data":
            skip = True
        elif not a.startswith("--data="):
            out.append(a)
    return [*out, "--data", "download"]


def warm(cfg, workers: dict, state: CnnState) -> None:
    """Every worker's one-off model set-up, at once and untimed; the synthetic-data warning, once, now that
    the workers are up and training is about to start."""
    if state.warning:
        warn(cfg, state.warning)
        state.warning = []
    for w in workers.values():
        w.send(Call("cnn", "warm"))
    for w in workers.values():
        w.answer()


def case_args(spec, seed_offset: int, workers: dict, save_dir: Path, state: CnnState) -> tuple[object, dict, str]:
    """The spec for this seed, the case's extra request fields, and a tag for its keys. Both frameworks
    start from the same weights: the first worker's framework initialises them, Keras-style, once a seed."""
    spec = dataclasses.replace(spec, seed=spec.seed + seed_offset)
    weights = save_dir / f"w0-s{spec.seed}.npz"
    if not weights.exists():
        next(iter(workers.values())).ask(Call("cnn", "init_weights", {"seed": spec.seed, "out": str(weights)}))
    return spec, {"data": state.data, "weights": str(weights), "validate": state.validate}, f"-s{spec.seed}"


def validation(cfg, spec) -> str:
    """--validate for this schedule: 'auto' is every epoch where the schedule is long enough for accuracy to be
    judged (the notebook's, an accelerator's default), else none (evaluation compiles: seconds per row)."""
    if cfg.validate != "auto":
        return cfg.validate
    return "epoch" if spec.epochs * spec.steps_per_epoch >= checks.MIN_ACCURACY_STEPS else "none"


def row_extra(kind, res, spec) -> dict:
    """A CNN row's own figures (parity.workloads.trained.row_figures), with the article's 5-epoch estimate."""
    return row_figures(kind, res, spec, CNN_FULL)


def parity_collect(
    cfg, spec, workers: dict, hello: dict, save_dir: Path, state: CnnState, first: bool, log, key: int, timed=None
) -> None:
    """The parity arrays of this round's out-of-the-box workers that are running: all frameworks at once, or,
    on a device with one owner at a time, each in its turn (parity_judge judges them when all have answered).

    One batch's gradients and a dropout-free trajectory per variant; with `first`, also each block's inference
    output from the trained weights of the first framework's first trajectory."""
    opened = open_round(cfg, spec, workers, hello, state, save_dir, key, log, "cnn", True, first)
    if opened is None:
        return
    own, rnd, ds = opened
    fws = {}
    for w in own.values():
        if rnd.b % rnd.counts[w.framework]:  # a later owner on another replica count than the first
            state.traj_skipped = (
                f"cnn: {w.framework} on {rnd.counts[w.framework]} replicas does not divide "
                f"the parity batch of {rnd.b}: not compared"
            )
            continue
        fws[w.framework] = w
    keys = {w.framework: k for k, w in own.items()}
    bf16 = {fw: hello[keys[fw]]["native_bf16"] for fw in fws}  # each worker's own answer, under its settings
    rnd.files.update(
        ask_all(
            fws,
            save_dir,
            f"parity-{{fw}}-r{rnd.n}.npz",
            {fw: {"bf16": b, **parity_variants(cfg, timed, "cnn_train", fw)} for fw, b in bf16.items()},
            "cnn",
            spec=spec.to_dict(),
            weights=state.weights,
            tuned=cfg.tuned,
            batches=rnd.batches,
            ahead=cfg.ahead,  # its programs compiled side by side (an accelerator's host)
            grads=first,  # judged once (parity_judge): the same batch on one device at every replica count
        )
    )
    if first and fws:
        _collect_forward(spec, rnd, fws, ds, save_dir)
        if rnd.refs.ahead:
            _begin_references(rnd, fws, state, save_dir)


def _begin_references(rnd: ParityRound, fws: dict, state: CnnState, save_dir: Path) -> None:
    """The float64 references parity_judge takes (each framework's gradients under its own max-pool routing, the
    forward blocks), begun in the background from the very arrays it reads (parity.common.references)."""
    with np.load(rnd.batches) as f:
        x, y = f["x"][0], f["y"][0]
    w = [np.asarray(a) for a in load_npz(state.weights, CNN_WEIGHTS)]
    for fw in fws:
        with np.load(rnd.files[fw]) as saved:
            routing = [saved[f"routing/{k}"] for k in range(len(checks.POOLS))]
        rnd.refs.start(cnn_oracle.cnn_loss_and_grads, w, x, y, routing)
    rnd.refs.start(cnn_forward, load_npz(save_dir / "w_fwd.npz", CNN_WEIGHTS), np.load(save_dir / "fwd_x.npy"))


def _collect_forward(spec, rnd: ParityRound, fws: dict, ds, save_dir: Path) -> None:
    """Each framework's inference blocks on 16 test images, from trained weights (the first framework's first
    trajectory's)."""
    w_fwd = save_dir / "w_fwd.npz"
    if not w_fwd.exists():
        with np.load(rnd.files[next(iter(fws))]) as src:
            saved = dict(src)
        v = variants(saved)[0]
        save_npz([saved[f"traj/{v}/w{i:03d}"] for i in range(len(checks.WEIGHT_NAMES))], w_fwd)
        np.save(save_dir / "fwd_x.npy", ds.x_test[:16].astype(np.float32))
    x = str(save_dir / "fwd_x.npy")
    rnd.fwd.update(
        ask_all(fws, save_dir, "fwd-{fw}.npz", {}, "cnn", spec=spec.to_dict(), weights=str(w_fwd), forward=x)
    )


def parity_judge(cfg, spec, save_dir: Path, state: CnnState, first: bool, log, key: int) -> list[dict]:
    """Trajectory parity at this replica count, the forward pass and gradients once (first=True), all from
    the arrays parity_collect saved."""
    rnd = state.parity.pop(key, None)
    if not rnd or not rnd.files:
        return []
    n, b = rnd.n, rnd.b
    saved = {fw: dict(np.load(f)) for fw, f in rnd.files.items()}
    with np.load(rnd.batches) as f:
        x, y = f["x"], f["y"]
    tols = cnn_tolerances(cfg.device, cfg.precision)
    rows = []
    if first:  # one batch on one device: the same at every replica count; judged against float64
        rows += checks.grads(
            saved,
            load_npz(state.weights, CNN_WEIGHTS),
            x[0],
            y[0],
            cnn_grad_tolerance(b, cfg.device, cfg.precision),
            cnn_loss_tolerance(b, cfg.device, cfg.precision),
            references=rnd.refs,
        )
    bf16_tols = cnn_tolerances(cfg.device, cfg.precision, "bfloat16")
    traj, skipped = trajectories(saved, {fw: rnd.counts[fw] for fw in saved}, tols, n, bf16_tols, CNN_WEIGHTS, "cnn")
    rows += traj
    state.traj_skipped = skipped or state.traj_skipped
    if n == 1:
        state.one_device = (b, saved)
    elif state.one_device and state.one_device[0] == b:  # the same batches: parity_batches at every replica count
        rows += global_batchnorm(saved, state.one_device[1], tols, bf16_tols, n, CNN_WEIGHTS)
    if first and rnd.fwd:
        fwd = {fw: dict(np.load(f)) for fw, f in rnd.fwd.items()}
        xf = np.load(save_dir / "fwd_x.npy")
        w = load_npz(save_dir / "w_fwd.npz", CNN_WEIGHTS)
        rows = checks.forward(fwd, rnd.refs.get(cnn_forward, w, xf), tols["forward"]) + rows
    for r in rows:
        r.setdefault("replicas", n)
    log_checks(cfg, log, "cnn", n, rows)
    return rows


def summary(cfg, rows: list[dict], state: CnnState) -> tuple[list[dict], list[str]]:
    """After every replica count: the accuracy check over the training rows, and the notes gathered."""
    band = cnn_tolerances(cfg.device, cfg.precision)["accuracy_band"]
    training = [r for r in rows if r["kind"] == "cnn_train" and r["verified"]]
    return checks.accuracy(training, band), [state.traj_skipped] if state.traj_skipped else []
