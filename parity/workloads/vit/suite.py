"""The ViT's parent side (its WORKLOAD.suite): the data (Fashion-MNIST, as the CNN's), shared initial weights,
row figures and parity rounds. What every trained workload shares is parity.workloads.trained's: the data's
sources, a parity round's batches and requests, the trajectory pairing and the accuracy check."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from parity.api.weights import load_npz, save_npz
from parity.common.protocol import Call
from parity.workloads.trained import data, log_checks, parity_variants, row_figures, sources
from parity.workloads.trained.checks import accuracy
from parity.workloads.trained.rounds import ParityRound, ask_all, round_batch
from parity.workloads.trained.trajectories import trajectories, variants
from parity.workloads.vit import checks
from parity.workloads.vit.spec import VIT_FULL, VitSpec
from parity.workloads.vit.tolerances import vit_tolerances

# Test accuracy is judged after the CNN notebook's schedule (10 epochs of 100 steps), the length the accuracy band was
# set for; a shorter run's accuracies are reported, not judged (the ViT has no moving statistics to settle, but
# after a few dozen steps its accuracy still swings with the batch order).
MIN_ACCURACY_STEPS = VIT_FULL.epochs * VIT_FULL.steps_per_epoch


def _size(spec: VitSpec) -> str:
    return f"width {spec.dim}, {spec.depth} blocks of {spec.heads} heads, MLP {spec.mlp}"


def _weights_path(save_dir: Path, spec: VitSpec) -> Path:
    """The shared initial weights of this seed and size."""
    return save_dir / f"vit-w0-d{spec.dim}x{spec.depth}h{spec.heads}m{spec.mlp}-s{spec.seed}.npz"


@dataclass
class VitState:
    """What the ViT's parent side keeps between rounds."""

    data: str  # the dataset every worker reads (.npz)
    weights: str  # the first seed's shared initial weights (.npz)
    validate: str  # 'epoch', 'end' or 'none'
    parity: dict[int, ParityRound] = field(default_factory=dict)  # by replica count
    traj_skipped: str | None = None


def prepare(cfg, spec: VitSpec, save_dir: Path) -> tuple[VitState, list[str]]:
    """Load (or make) the data once for every worker (the CNN's sources: its synthetic-data warning covers every
    trained workload); returns the run's state and its notes."""
    ds, note = sources.load(cfg.data, cfg.data_dir, spec.train_size, spec.test_size, cfg.timeout_s, cfg.progress)
    ds.save(save_dir / "vit-data.npz")
    a = spec.architecture
    notes = [f"vit: {note}; each image cut into {a.tokens} patches of {a.patch}x{a.patch} pixels, {_size(spec)}"]
    if cfg.device == "cpu" and not cfg.quick and spec.architecture != VIT_FULL.architecture:
        notes.append(
            f"vit: CPU size {_size(spec)} at global batch {spec.global_batch}, {spec.epochs} epochs x "
            f"{spec.steps_per_epoch} steps (full size: {_size(VIT_FULL)} at {VIT_FULL.global_batch}, ViT-Tiny's "
            "width at half its depth)"
        )
    validate = validation(cfg, spec)
    notes.append(
        {
            "epoch": f"vit: validation on the {len(ds.x_test):,} test images after every epoch, outside the timed "
            "interval",
            "end": f"vit: evaluated on the {len(ds.x_test):,} test images once, after the last epoch",
            "none": f"vit: not evaluated ({spec.epochs * spec.steps_per_epoch} steps < {MIN_ACCURACY_STEPS})"
            if cfg.validate == "auto"
            else "vit: not evaluated (--validate none)",
        }[validate]
    )
    weights = _weights_path(save_dir, spec)  # the first seed's: case_args writes it
    return VitState(str(save_dir / "vit-data.npz"), str(weights), validate), notes


def validation(cfg, spec: VitSpec) -> str:
    """--validate for this schedule: 'auto' is every epoch from the full schedule's length on, else none."""
    if cfg.validate != "auto":
        return cfg.validate
    return "epoch" if spec.epochs * spec.steps_per_epoch >= MIN_ACCURACY_STEPS else "none"


def warm(cfg, workers: dict, state: VitState) -> None:
    """Every worker's one-off model set-up, at once and untimed."""
    for w in workers.values():
        w.send(Call("vit", "warm"))
    for w in workers.values():
        w.answer()


def case_args(spec, seed_offset: int, workers: dict, save_dir: Path, state: VitState) -> tuple[object, dict, str]:
    """The spec for this seed, the case's extra request fields, and a tag for its keys. Every framework starts from
    the same weights: the first worker's framework initialises them, with its own initialisers, once a seed and
    size."""
    spec = dataclasses.replace(spec, seed=spec.seed + seed_offset)
    weights = _weights_path(save_dir, spec)
    if not weights.exists():
        req = {"dim": spec.dim, "depth": spec.depth, "heads": spec.heads, "mlp": spec.mlp, "seed": spec.seed}
        req["out"] = str(weights)
        next(iter(workers.values())).ask(Call("vit", "init_weights", req))
    return spec, {"data": state.data, "weights": str(weights), "validate": state.validate}, f"-s{spec.seed}"


def row_extra(kind, res, spec: VitSpec) -> dict:
    """A row's own figures (parity.workloads.trained.row_figures); no notebook's epochs estimated (the article's
    notebooks have no vision transformer to set them beside)."""
    return row_figures(kind, res, spec)


def parity_collect(
    cfg, spec, workers: dict, hello: dict, save_dir: Path, state: VitState, first: bool, log, key: int, timed=None
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
        round_batch(cfg, spec, rnd, ds, save_dir, log, key, "vit", dropout=False)
    fws = {w.framework: w for w in own.values() if not rnd.b % rnd.counts[w.framework]}
    keys = {w.framework: k for k, w in own.items()}
    rnd.files.update(
        ask_all(
            fws,
            save_dir,
            f"vit-parity-{{fw}}-r{rnd.n}.npz",
            {
                fw: {"bf16": hello[keys[fw]]["native_bf16"], **parity_variants(cfg, timed, "vit_train", fw)}
                for fw in fws
            },
            "vit",
            spec=spec.to_dict(),
            weights=state.weights,
            tuned=cfg.tuned,
            batches=rnd.batches,
        )
    )
    w_fwd = save_dir / "vit-w_fwd.npz"
    if first and fws and not w_fwd.exists():  # trained weights: the first trajectory of the first framework with one
        trained = (dict(np.load(rnd.files[fw])) for fw in fws)
        saved = next((t for t in trained if variants(t)), None)
        if saved is None:  # no framework offers a trainer here (a multi-process run): the initial weights
            save_npz(load_npz(state.weights, spec.architecture.weights), w_fwd)
        else:
            v = variants(saved)[0]
            save_npz([saved[f"traj/{v}/w{i:03d}"] for i in range(len(spec.architecture.weights))], w_fwd)
        np.save(save_dir / "vit-fwd_x.npy", ds.x_test[:16].astype(np.float32))
    if first and fws:
        rnd.fwd.update(
            ask_all(
                fws, save_dir, "vit-fwd-{fw}.npz", {}, "vit", spec=spec.to_dict(), weights=str(w_fwd),
                forward=str(save_dir / "vit-fwd_x.npy"),
            )
        )  # fmt: skip


def parity_judge(cfg, spec, save_dir: Path, state: VitState, first: bool, log, key: int) -> list[dict]:
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
    tols, bf16 = (vit_tolerances(cfg.device, cfg.precision, d, spec.depth) for d in ("float32", "bfloat16"))
    traj, skipped = trajectories(saved, {fw: rnd.counts[fw] for fw in saved}, tols, rnd.n, bf16, table, "vit")
    rows += traj
    state.traj_skipped = skipped or state.traj_skipped
    if first and rnd.fwd:
        fwd = {fw: dict(np.load(f)) for fw, f in rnd.fwd.items()}
        xf = np.load(save_dir / "vit-fwd_x.npy")
        w = load_npz(save_dir / "vit-w_fwd.npz", table)
        rows = checks.forward(fwd, w, xf, cfg.device, cfg.precision) + rows
    for r in rows:
        r.setdefault("replicas", rnd.n)
        r["check"] = f"vit {r['check']}"
    log_checks(cfg, log, "vit", rnd.n, rows)
    return rows


def summary(cfg, rows: list[dict], state: VitState) -> tuple[list[dict], list[str]]:
    """After every replica count: the accuracy check over the ViT's training rows, and the notes gathered."""
    band = vit_tolerances(cfg.device, cfg.precision)["accuracy_band"]
    trained = [r for r in rows if r["workload"] == "vit_train" and r["verified"]]
    out = accuracy(trained, band, MIN_ACCURACY_STEPS) if trained else []
    for r in out:
        r["check"] = f"vit {r['check']}"
    return out, [state.traj_skipped] if state.traj_skipped else []
