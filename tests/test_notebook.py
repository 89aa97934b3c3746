"""The Colab notebook cannot rot: executed here on the CPU with nbclient, its install cell skipped (the test runs
this checkout), a narrow --quick run of every framework (the matmul at one replica); it must end without an error,
show the summary and the charts, and leave the results files and both charts."""

import os
from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "parity_colab.ipynb"


def _text(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_the_notebook_runs_a_quick_run_and_shows_the_summary_and_charts(tmp_path, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setenv("PARITY_NOTEBOOK_INSTALL", "0")
    monkeypatch.setenv("PARITY_NOTEBOOK_FLAGS", "--workload matmul --replicas 1 --reps 2 --budget 0")
    monkeypatch.setenv("PARITY_NOTEBOOK_OUT", str(out))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    ).execute()
    said = _text(nb)
    assert "device: cpu" in said and "--device cpu" in said and "--quick --workload matmul --replicas 1" in said
    assert "parity.run exited 0: every row verified, every check passed" in said
    summary = said[said.rindex("kind    replicas  format") :]  # the notebook's own summary, after the run's
    assert "TF fastest" in summary and "JAX fastest" in summary and "JAX/TF" in summary and "PASS" in summary
    assert {"results.json", "results.md", "results.png", "results_ratios.png"} <= set(os.listdir(out))
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= 2  # the throughput chart and the summary's ratios
