"""The example of a workload from outside the harness, examples/parity-gru (a GRU classifier in Flax NNX, PyTorch and
Keras on both backends): installed as pip would install it (its package on the path, its distribution's metadata
with the entry point its pyproject.toml declares), found through that entry point, and run end to end by
`python -m parity.run --quick --workload gru` through the shared Trained adapter and trained-model machinery, every
row verified and every check judged against its float64 oracle. About 35 s on 2 cores (zen4), most of it the four
frameworks' workers starting and the parity round."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from parity_cli import run_parity

from parity.common import frameworks

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "parity-gru"
PAGE = ROOT / "docs" / "your-workload-full.md"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """The environment of a process that has the example installed: its package importable and its distribution's
    metadata (name, version, the entry points of its pyproject.toml) where importlib.metadata looks."""
    site = tmp_path_factory.mktemp("site")
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    groups = project["entry-points"]
    (info / "entry_points.txt").write_text(
        "".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for g, eps in groups.items())
    )
    path = os.pathsep.join(p for p in (str(site), str(EXAMPLE), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def test_the_oracle_is_the_gradient_of_its_loss():
    """The example's float64 backward pass through time against central differences of its own loss."""
    sys.path.insert(0, str(EXAMPLE))
    try:
        from parity_gru import oracle
        from parity_gru.spec import GruArchitecture
    finally:
        sys.path.remove(str(EXAMPLE))
    rng = np.random.default_rng(0)
    w = [rng.normal(0, 0.3, s.shape) for s in GruArchitecture(3).weights]
    x, y = rng.integers(0, 256, (4, 28, 28, 1)).astype(np.float64), rng.integers(0, 10, 4)
    _, grads = oracle.loss_and_grads(w, x, y)
    for i, g in enumerate(grads):
        for idx in (np.unravel_index(0, g.shape), np.unravel_index(g.size - 1, g.shape)):
            up, down = [a.copy() for a in w], [a.copy() for a in w]
            up[i][idx] += 1e-6
            down[i][idx] -= 1e-6
            numeric = (oracle.loss_and_grads(up, x, y)[0] - oracle.loss_and_grads(down, x, y)[0]) / 2e-6
            assert abs(numeric - g[idx]) <= 1e-7 * max(1.0, abs(g[idx])), (i, idx)


def test_the_page_quotes_the_example_as_it_is():
    """docs/your-workload-full.md's python and toml blocks are the example's own lines, and its tree names its files."""
    text = PAGE.read_text()
    sources = "\n".join(
        f.read_text() for f in [EXAMPLE / "pyproject.toml", *sorted(EXAMPLE.rglob("parity_gru/**/*.py"))]
    )
    blocks = re.findall(r"```(?:python|toml)\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 5 and all(b in sources for b in blocks)
    tree = re.search(r"```\nexamples/parity-gru/\n(.*?)```", text, flags=re.S)[1]
    named = set(re.findall(r"^\s*(\S+\.(?:py|toml))\s", tree, flags=re.M))
    assert named == {p.name for p in EXAMPLE.glob("parity_gru/*.py")} | {"pyproject.toml"}


def test_the_installed_example_is_listed_with_its_origin(installed):
    p = run_parity("--list-workloads", env=installed)
    assert p.returncode == 0, p.stderr
    listed = re.search(r"```\n(  gru .*?)```", PAGE.read_text(), flags=re.S)[1]
    assert listed in p.stdout  # the page's lines, as the command prints them
    line = next(x for x in p.stdout.splitlines() if x.strip().startswith("gru "))
    assert "parity_gru (entry point gru of parity-gru 0.1.0); row kinds: gru_train, gru_infer" in line
    assert "adapters: TensorFlow, JAX, Keras 3 (JAX), PyTorch" in p.stdout and "left out" not in p.stdout


def test_the_example_runs_end_to_end_every_row_verified(installed, tmp_path):
    out = tmp_path / "out"
    args = ["--quick", "--workload", "gru", "--replicas", "1", "--data", "synthetic", "--configs", "default"]
    p = run_parity(*args, "--reps", "2", "--budget", "0", "--out", str(out), "--quiet", env=installed)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    rows, checks = doc["rows"], doc["checks"]
    assert {(r["kind"], r["framework"]) for r in rows} == {
        (k, fw) for k in ("gru_train", "gru_infer") for fw in frameworks.KEYS
    }
    assert all(r["verified"] for r in rows), [r["invalid_reason"] for r in rows]
    assert all(0 < r["max_rel_err"] <= r["tolerance"] for r in rows if r["kind"] == "gru_infer")
    assert {r["oracle"] for r in rows if r["kind"] == "gru_infer"} == {"NumPy float64"}  # its own oracle.py
    judged = [c for c in checks if c["passed"] is not None]
    assert all(c["passed"] for c in judged), [c["check"] for c in judged if not c["passed"]]
    names = {c["check"] for c in judged}
    blocks = {"gru forward gru", "gru forward logits", "gru forward probs"}
    assert blocks | {"gru loss (one batch)", "gru gradients through time (every parameter)"} <= names
    # each framework's 3-step trajectory against the reference's (TF's fit): its losses and its parameters
    assert sum(c["check"].startswith("gru trajectory") for c in judged) == 2 * (len(frameworks.KEYS) - 1)
    assert "gru" in p.stdout and "gru_train" in p.stdout  # the first screen's table
    # the read-only tools read its rows like any other's, the plug-in installed
    for tool in (["parity.report", str(out / "results.json")], ["parity.compare", *[str(out / "results.json")] * 2]):
        q = subprocess.run([sys.executable, "-m", *tool], capture_output=True, text=True, env=installed, timeout=120)
        assert q.returncode == 0 and "gru_infer" in q.stdout, q.stderr


def test_the_example_judged_by_jax_in_float64_runs_end_to_end(tmp_path):
    """The example's variant with no NumPy oracle (parity_gru.jax_float64: its record's float64 is JAX's run of its
    own model with x64), named on the command line, PyTorch alone judged against it: every row verified, every
    check passed, each naming its oracle, and the run's notes saying which judged. About 15 s on 2 cores (zen4)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(EXAMPLE), os.environ.get("PYTHONPATH")) if p)}
    out = tmp_path / "out"
    args = ["--quick", "--workload", "parity_gru.jax_float64", "--framework", "torch", "--replicas", "1"]
    args += ["--data", "synthetic", "--configs", "default", "--reps", "2", "--budget", "0"]
    p = run_parity(*args, "--out", str(out), "--quiet", env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    assert all(r["verified"] for r in doc["rows"]) and {r["framework"] for r in doc["rows"]} == {"torch"}
    infer = next(r for r in doc["rows"] if r["kind"] == "gru_infer")
    assert infer["oracle"] == "JAX float64 (x64)" and 0 < infer["max_rel_err"] <= infer["tolerance"]
    judged = [c for c in doc["checks"] if c["passed"] is not None]
    assert all(c["passed"] for c in judged), [c["check"] for c in judged if not c["passed"]]
    assert {c["check"]: c["oracle"] for c in judged if "oracle" in c} == {
        f"gru {name}": "JAX float64 (x64)"
        for name in ("forward gru", "forward logits", "forward probs", "loss (one batch)",
                     "gradients through time (every parameter)")
    }  # fmt: skip
    assert "gru: judged against JAX float64 (x64), the workload's float64 oracle" in "\n".join(doc["env"]["notes"])
