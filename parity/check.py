"""The harness from Python, for a notebook or a test: `parity.check.numerics('mypkg')` judges a
workload's frameworks against its float64 oracle in this process, in seconds (every forward block, one batch's loss,
every gradient: the checks a run makes, with the same bounds); `parity.check.run('mypkg', '--framework',
'jax,torch')` runs the whole harness (`python -m parity.run`, rows timed, trajectories, accuracy) and reads its
results file. Each returns a Verdict, true when every check passed and every row is verified, with the failures as
lines a person reads ("PyTorch leaves float64 at block dw1 (1.07 against a bound of 5.4e-05)"):

    from parity import check
    verdict = check.numerics("parity_dwsep", ("jax", "torch"))
    assert verdict, verdict.failures
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from parity.common import frameworks
from parity.workloads import WORKLOADS, add, plugins
from parity.workloads.trained import model_checks
from parity.workloads.trained.light import MODELS, ORACLES

LIGHT = ORACLES  # the frameworks with a light workload's generic adapter: JAX and PyTorch


@dataclass
class Verdict:
    """checks: every check's record (as results.json holds them); rows: every timed row's (run only); failures: one
    line for each failed check, invalid row or framework that could not take part; leaves: by framework, the first
    forward block where it leaves float64; screen: the run's printed tables."""

    checks: list[dict]
    rows: list[dict] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    leaves: dict[str, str] = field(default_factory=dict)
    screen: str = ""  # run only: the first screen the run printed (the speed table, the verdict)

    def __bool__(self) -> bool:
        return not self.failures

    @classmethod
    def of(cls, checks: list[dict], rows: Sequence[dict] = (), failures: Sequence[str] = ()) -> Verdict:
        """The verdict of these checks and rows, beside the failures already known (a framework that failed)."""
        said = list(failures)
        for c in checks:
            if c.get("passed") is False:
                said.append(f"{c['check']}: {c.get('detail') or 'failed'}")
        said += [
            f"{r['kind']} {r['framework']} {r['variant']}: {r.get('invalid_reason')}" for r in rows if not r["verified"]
        ]
        leaves = {fw: c["check"].rsplit(" ", 1)[-1] for c in checks for fw in c.get("leaves", ())}
        return cls(checks, list(rows), said, leaves)


def _workload(name_or_module: str) -> str:
    """A workload's name: one already known, else the module that declares it, loaded (as --workload does)."""
    if name_or_module in WORKLOADS:
        return name_or_module
    try:
        return add(name_or_module)
    except plugins.PluginError as e:
        raise ValueError(str(e)) from None


def numerics(workload: str, fws: Sequence[str] = LIGHT, batch: int = 16, seed: int = 0) -> Verdict:
    """A light workload's (parity.api.light) frameworks against its float64 run, in this process: the first
    framework's initial weights with every bias drawn at random (a bias at zero would hide a missing or misplaced
    one), `batch` random images and labels; each forward block and one batch's loss and gradients judged with the
    bounds a run derives. A framework whose adapter raises is a failure naming it, and the others are judged."""
    name = _workload(workload)
    if name not in MODELS:
        raise ValueError(f"{name}: not a light workload (parity.api.light); `run` judges any workload")
    m, rng = MODELS[name], np.random.default_rng(seed)
    x = rng.integers(0, 256, (batch, 28, 28, 1)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    adapters = {fw: frameworks.load(fw).adapter(name) for fw in fws}
    w0 = adapters[fws[0]].get_weights(adapters[fws[0]].build(seed))
    w0 = [w if w.ndim > 1 else rng.normal(0, 0.1, w.shape).astype(np.float32) for w in w0]
    saved, failed = {}, []
    for fw, a in adapters.items():
        try:
            model = a.build_with(w0)
            g = a.loss_and_grads(model, x, y)
            saved[fw] = {f"forward/{k}": v for k, v in a.forward_layers(model, x).items()}
            saved[fw] |= {"loss": g.loss} | {f"grad/{i:03d}": v for i, v in enumerate(g.grads)}
        except Exception as e:  # the model's code: said with its framework, the others judged
            failed.append(f"{frameworks.label(fw)}: {type(e).__name__}: {e}")
    if not saved:
        return Verdict.of([], failures=failed)
    m.float64.terms(w0, x, y)  # every float64 figure the checks and bounds read, in one run
    checks = model_checks.forward(m, saved, w0, x, "cpu", "default")
    checks += model_checks.grads(m, saved, w0, x, y, "cpu", "default")
    return Verdict.of(checks, failures=failed)


def run(workloads: str | Sequence[str], *flags: str, out: Path | None = None, python: str = sys.executable) -> Verdict:
    """`python -m parity.run --workload <workloads> <flags>` into `out` (a fresh folder when None), its results file
    read back: every check and row. Raises RuntimeError with the run's last line where it wrote no results."""
    out = Path(out or tempfile.mkdtemp(prefix="parity-check-"))
    named = [workloads] if isinstance(workloads, str) else list(workloads)
    cmd = [python, "-m", "parity.run", "--workload", *named, "--out", str(out), "--quiet", *flags]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if not (out / "results.json").exists():
        raise RuntimeError((p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1])
    doc = json.loads((out / "results.json").read_text())
    verdict = Verdict.of(doc["checks"], doc["rows"])
    verdict.screen = p.stdout
    return verdict
