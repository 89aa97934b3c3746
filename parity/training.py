"""The parent side of a trained workload (the CNN): its data, shared initial weights, row figures and parity.

The harness calls these hooks for a workload whose registry entry names this module as its `suite`;
it knows nothing else about training. Worker-side counterparts are in parity.cases.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
from pathlib import Path

import numpy as np

from parity import checks, data
from parity.api import load_npz, save_npz
from parity.harness import warn
from parity.oracle import cnn_forward
from parity.workloads import CNN_FULL, cnn_grad_tolerance, cnn_loss_tolerance, cnn_tolerances


def prepare(cfg, spec, save_dir: Path) -> tuple[dict, list[str]]:
    """Load (or make) the data once for every worker; returns the run's context and its notes."""
    ds, note = data.load(cfg.data, cfg.data_dir, spec.train_size, spec.test_size, cfg.timeout_s, cfg.progress)
    ds.save(save_dir / "data.npz")
    if ds.source == "synthetic" and cfg.data == "auto":
        warn(cfg, ["SYNTHETIC DATA: Fashion-MNIST was not found on disk "
                   f"(looked for IDX files{' in ' + cfg.data_dir if cfg.data_dir else ''} and TFDS's "
                   f"fashion_mnist in {data.tfds_root(cfg.data_dir)}).",
                   "The CNN trains on a learnable stand-in of the same shapes: its speed is the real one, its "
                   "accuracy is not Fashion-MNIST's.",
                   "To train on the real data (a network, about 30 MB, once):",
                   "  " + shlex.join(with_data_download(cfg.command))])  # fmt: skip
    notes = [f"cnn: {note}"]
    if cfg.device == "cpu" and not cfg.quick and spec.epochs < CNN_FULL.epochs:
        notes.append(f"cnn: CPU schedule shortened to {spec.epochs} epochs x {spec.steps_per_epoch} steps at global "
                     f"batch {spec.global_batch} (notebook: {CNN_FULL.epochs} x {CNN_FULL.steps_per_epoch} at "
                     f"{CNN_FULL.global_batch}); --epochs/--steps-per-epoch/--batch restore it")  # fmt: skip
    validate = validation(cfg, spec)
    steps = spec.epochs * spec.steps_per_epoch
    notes.append({"epoch": f"cnn: validation on the {len(ds.x_test):,} test images after every epoch, outside the "
                           "timed interval (as Keras's fit(validation_data=...)); per-epoch history in results.json",
                  "end": f"cnn: evaluated on the {len(ds.x_test):,} test images once, after the last epoch",
                  "none": f"cnn: not evaluated ({steps} steps < {checks.MIN_ACCURACY_STEPS}: test accuracy would not "
                          "have settled); --validate epoch evaluates after every epoch"
                          if cfg.validate == "auto" else "cnn: not evaluated (--validate none)"}[validate])  # fmt: skip
    ctx = {"data": str(save_dir / "data.npz"), "weights": str(save_dir / f"w0-s{spec.seed}.npz"), "validate": validate}
    return ctx, notes


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


def warm(workers: dict) -> None:
    """Every worker's one-off model set-up, at once and untimed."""
    for w in workers.values():
        w.send(cmd="call", fn="cnn_warm")
    for w in workers.values():
        w.answer()


def case_args(spec, seed_offset: int, workers: dict, save_dir: Path, ctx: dict) -> tuple[object, dict, str]:
    """The spec for this seed, the case's extra request fields, and a tag for its keys. Both frameworks
    start from the same weights: the first worker's framework initialises them, Keras-style, once a seed."""
    spec = dataclasses.replace(spec, seed=spec.seed + seed_offset)
    weights = save_dir / f"w0-s{spec.seed}.npz"
    if not weights.exists():
        next(iter(workers.values())).ask(cmd="call", fn="cnn_init_weights", seed=spec.seed, out=str(weights))
    return spec, {"data": ctx["data"], "weights": str(weights), "validate": ctx["validate"]}, f"-s{spec.seed}"


def validation(cfg, spec) -> str:
    """--validate for this schedule: 'auto' is every epoch where the schedule is long enough for accuracy to be
    judged (the notebook's, an accelerator's default), else none (evaluation compiles: seconds per row)."""
    if cfg.validate != "auto":
        return cfg.validate
    return "epoch" if spec.epochs * spec.steps_per_epoch >= checks.MIN_ACCURACY_STEPS else "none"


def row_extra(kind, res: dict, spec) -> dict:
    """A CNN row's own figures: images per second, the data it ran on, and for training the first epoch
    (kept apart from the timed epochs), the test figures and the article's 5-epoch estimate."""
    med = res.get("median_s")
    out = {"images_per_s": res["images"] / med if med else None, "data": res["data"], "spec": spec.to_dict(),
           "seed": spec.seed}  # fmt: skip
    if kind.epochs:
        out.update(time_unit="epoch", first_epoch_s=res.get("compile_s"), test_loss=res.get("test_loss"),
                   test_accuracy=res.get("test_accuracy"), history=res.get("history"))  # fmt: skip
        if med:  # the article's figure: 5 epochs of 100 steps at global batch 1024
            per_step = med / spec.steps_per_epoch * (CNN_FULL.global_batch / spec.global_batch)
            out["est_5_notebook_epochs_s"] = (res["compile_s"] - med) + 5 * CNN_FULL.steps_per_epoch * per_step
    return out


def parity_round(cfg, spec, workers: dict, hello: dict, save_dir: Path, ctx: dict, first: bool, log) -> list[dict]:
    """Trajectory parity at this replica count; the forward pass and gradients once (first=True)."""
    counts = {w.framework: hello[k]["replicas"] for k, w in workers.items() if w.config == "default"}
    n = max(counts.values())
    workers = {w.framework: w for w in workers.values() if w.config == "default"}  # parity: out of the box
    ds = data.Dataset.load(Path(ctx["data"]))
    b = max(2 * n, min(spec.global_batch, 64))
    b += -b % math.lcm(*counts.values())  # every framework's replicas get the same share
    x, y = data.batches(ds, data.batch_offsets(spec.seed + 1, cfg.parity_steps, len(ds.x_train), b), b)
    np.savez(save_dir / "parity_batches.npz", x=x, y=y)
    log(cfg, f"cnn parity x{n}: gradients and a {cfg.parity_steps}-step trajectory (dropout off, batch {b})")
    saved = _ask_all(workers, save_dir, f"parity-{{fw}}-r{n}.npz", spec=spec.to_dict(), weights=ctx["weights"],
                     tuned=cfg.tuned, batches=str(save_dir / "parity_batches.npz"))  # fmt: skip
    tols = cnn_tolerances(cfg.device, cfg.precision)
    rows = []
    if first:  # one batch on one device: the same at every replica count; judged against float64
        rows += checks.grads(saved, load_npz(ctx["weights"]), x[0], y[0],
                             cnn_grad_tolerance(b, cfg.device, cfg.precision),
                             cnn_loss_tolerance(b, cfg.device, cfg.precision))  # fmt: skip
    rows += _trajectories(saved, counts, tols, n, ctx)
    if first:
        rows = _forward(spec, saved, workers, ds, save_dir, tols["forward"]) + rows
    for r in rows:
        r.setdefault("replicas", n)
        log(cfg, f"  {'PASS' if r['passed'] else 'FAIL'} {r['check']}: "
                 + ", ".join(f"{k} {v:.2e}" for k, v in r["figures"].items())
                 + f" (tolerance {r['tolerance']:.2g})" + (f"; {r['detail']}" if r.get("detail") else ""))  # fmt: skip
    return rows


def _ask_all(workers: dict, save_dir: Path, name: str, **req) -> dict[str, dict]:
    """One cnn_parity request to every framework at once (untimed); each answers with a .npz file."""
    for fw, w in workers.items():
        w.send(cmd="call", fn="cnn_parity", out=str(save_dir / name.format(fw=fw)), **req)
    saved = {}
    for fw, w in workers.items():
        w.answer()
        saved[fw] = dict(np.load(save_dir / name.format(fw=fw)))
    return saved


def _variants(saved: dict) -> list[str]:
    return [k.split("/")[1] for k in saved if k.startswith("traj/") and k.endswith("/loss")]


def _trajectories(saved: dict, counts: dict, tols: dict, n: int, ctx: dict) -> list[dict]:
    """Every pair of TF and JAX trainers over the same dropout-free steps."""
    if len(saved) < 2:
        return []
    if counts["tf"] != counts["jax"]:  # BatchNorm statistics are per replica: a different split is another model
        ctx["traj_skipped"] = (f"cnn: no TF-vs-JAX trajectory check: TensorFlow trained on {counts['tf']} "
                               f"replicas, JAX on {counts['jax']} (BatchNorm statistics: per replica)")
        return []
    return [row for tv in _variants(saved["tf"]) for jv in _variants(saved["jax"])
            for row in checks.trajectory(saved["tf"], saved["jax"], tv, jv, tols, n)]  # fmt: skip


def _forward(spec, saved: dict, workers: dict, ds, save_dir: Path, tol: float) -> list[dict]:
    """Each block's inference output, from the trained weights of the first trajectory, against float64."""
    src = saved.get("tf") or saved["jax"]
    v = _variants(src)[0]
    save_npz([src[f"traj/{v}/w{i:03d}"] for i in range(len(checks.WEIGHT_NAMES))], save_dir / "w_fwd.npz")
    xf = ds.x_test[:16].astype(np.float32)
    np.save(save_dir / "fwd_x.npy", xf)
    fwd = _ask_all(workers, save_dir, "fwd-{fw}.npz", spec=spec.to_dict(), weights=str(save_dir / "w_fwd.npz"),
                   forward=str(save_dir / "fwd_x.npy"))  # fmt: skip
    return checks.forward(fwd, cnn_forward(load_npz(save_dir / "w_fwd.npz"), xf), tol)


def summary(cfg, rows: list[dict], ctx: dict) -> tuple[list[dict], list[str]]:
    """After every replica count: the accuracy check over the training rows, and the notes gathered."""
    band = cnn_tolerances(cfg.device, cfg.precision)["accuracy_band"]
    trained = [r for r in rows if r["workload"] == "cnn_train" and r["verified"]]
    return checks.accuracy(trained, band), [ctx["traj_skipped"]] if "traj_skipped" in ctx else []
