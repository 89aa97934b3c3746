"""A trained workload's parity rounds, parent side: one replica count's arrays as the frameworks answer, the batches
they all train on, and the one request every framework is sent at once."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from parity.common.messages import HarnessError, WorkerBug
from parity.common.protocol import Call
from parity.common.references import References
from parity.workloads.trained import data

# The parity batch: the gradients and every trajectory are taken on global batches of this many images (fewer where
# the run's own batch is smaller, more where the replicas need 2 each). The gradient bounds are derived at it
# (cnn_grad_tolerance(PARITY_BATCH) ...); the float32 trajectory thresholds are margins over runs at it, and do not
# hold at 32: there PyTorch's `eager+cl` drifted 6.43e-03 from its `eager` in loss, over the 5e-03 margin
# (docs/results/zen4/cpu-levers-pytorch-thp.json), so it stays 64 though its steps are most of a round's work.
PARITY_BATCH = 64


@dataclass
class ParityRound:
    """One replica count's parity arrays, as the frameworks answer: their replica counts, the round's batch
    (size b, fixed when the first framework asks; n: the most replicas), each framework's saved files, and the
    float64 references its checks take (begun as their inputs arrive where the run computes them ahead)."""

    counts: dict[str, int] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # framework -> its gradients and trajectories (.npz)
    fwd: dict[str, str] = field(default_factory=dict)  # framework -> its forward blocks (.npz), the first round
    b: int | None = None
    n: int | None = None
    batches: str | None = None
    refs: References = field(default_factory=lambda: References(False))


def round_batch(cfg, spec, rnd: ParityRound, ds, save_dir: Path, key: int, workload: str) -> None:
    """The round's parity batches: a size every framework's replicas split evenly, saved for all to read."""
    n = max(rnd.counts.values())
    b = max(2 * n, min(spec.global_batch, PARITY_BATCH))
    b += -b % math.lcm(*rnd.counts.values())  # every framework's replicas get the same share
    x, y = data.batches(ds, data.batch_offsets(spec.seed + 1, cfg.parity_steps, len(ds.x_train), b), b)
    rnd.b, rnd.n, rnd.batches = b, n, str(save_dir / f"{workload}-parity_batches-r{key}.npz")
    rnd.refs = References(cfg.ahead)  # beside the workers' untimed rounds where they compile ahead
    np.savez(rnd.batches, x=x, y=y)


def open_round(
    cfg, spec, workers: dict, hello: dict, state, save_dir: Path, key: int, log, workload: str, dropout: bool, first
) -> tuple[dict, ParityRound, data.Dataset] | None:
    """The part of replica count `key`'s parity round that this turn's out-of-the-box workers compute: the round
    (`state.parity`'s) with their replica counts, its batch fixed by the frameworks known when the first one asks, its
    progress line said (`first`: the gradients' round). Returns (those workers by key, the round, the data), or None
    where none is out of the box."""
    own = {k: w for k, w in workers.items() if w.setting == "default"}  # parity: out of the box
    if not own:
        return None
    rnd = state.parity.setdefault(key, ParityRound())
    rnd.counts.update({w.framework: hello[k]["replicas"] for k, w in own.items()})
    ds = data.Dataset.load(Path(state.data))
    if rnd.b is None:
        round_batch(cfg, spec, rnd, ds, save_dir, key, workload)
    say_round(cfg, rnd, log, workload, dropout, own.values(), first)
    return own, rnd, ds


def say_round(cfg, rnd: ParityRound, log, workload: str, dropout: bool, who, first: bool = True) -> None:
    """The progress line of a parity round's part that `who` (workers) compute now: one line each part, so that a
    run's phases (benchmarks/run_phases.py) give every owner's round its own time. The gradients are the first
    round's only (judged once)."""
    off = "dropout off, " if dropout else ""  # a model with dropout takes its parity steps without it
    names = ", ".join(w.label for w in who)
    what = f"{'gradients and ' if first else ''}a {cfg.parity_steps}-step trajectory"
    log(cfg, f"{workload} parity x{rnd.n}: {what} ({off}batch {rnd.b}; {names})")


def ask_all(workers: dict, save_dir: Path, name: str, own: dict, workload: str, **req) -> dict[str, str]:
    """One parity request (the workload's 'parity' call) to every framework given at once (untimed), with
    `own[framework]`'s fields added; each answers with a .npz file, whose path is returned by framework."""
    for fw, w in workers.items():
        w.send(Call(workload, "parity", {"out": str(save_dir / name.format(fw=fw)), **req, **own.get(fw, {})}))
    answers(workers.values())
    return {fw: str(save_dir / name.format(fw=fw)) for fw in workers}


def answers(workers) -> None:
    """Each worker's answer to the request just sent to them all, every one read before the first refusal is raised:
    a worker that refused (a workload's adapter that raised) never leaves another's answer unread for the next
    request to take."""
    refused = []
    for w in workers:
        try:
            w.answer()
        except (HarnessError, WorkerBug) as e:
            refused.append(e)
    if refused:
        raise refused[0]
