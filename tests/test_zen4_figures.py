"""The figures the docs quote from `docs/results/zen4/`'s two default runs with PyTorch and the ViT are their files':
the wall times (the last line of each log, `/usr/bin/time -f "%e s"`), the phases (benchmarks/run_phases.py on the
logs), the counts, and the rows that differed between the runs beyond their intervals. No framework is imported."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLASS = ROOT / "docs/results/zen4"
FORMAT = " ".join((ROOT / "docs/results-format.md").read_text().split())
CLASS_README = (CLASS / "README.md").read_text()
README = " ".join((ROOT / "README.md").read_text().split())
NOW, BEFORE = "cpu-default-vit", "cpu-default-vit-earlier"


def _phases(name: str) -> dict[str, int]:
    spec = importlib.util.spec_from_file_location("run_phases", ROOT / "benchmarks/run_phases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.phases((CLASS / f"{name}-log.txt").read_text().splitlines())


def _mmss(s: float) -> str:
    s = round(s)
    return f"{s // 60}:{s % 60:02d}"


def _wall(name: str) -> str:
    """'9 min 40 s' from the log's last line, '580.15 s'."""
    s = round(float((CLASS / f"{name}-log.txt").read_text().split()[-2]))
    return f"{s // 60} min {s % 60} s"


def _median_ms(name: str, workload: str, framework: str, variant: str) -> str:
    rows = json.loads((CLASS / f"{name}.json").read_text())["rows"]
    (row,) = [r for r in rows if (r["workload"], r["framework"], r["variant"]) == (workload, framework, variant)]
    return f"{row['median_s'] * 1000:.1f}"


def test_the_default_runs_wall_times_and_counts_are_their_files():
    for name in (NOW, BEFORE):
        doc = json.loads((CLASS / f"{name}.json").read_text())
        verified = sum(r["verified"] for r in doc["rows"])
        passed = sum(c["passed"] is True for c in doc["checks"])
        judged = sum(c["passed"] is not None for c in doc["checks"])
        line = next(ln for ln in CLASS_README.splitlines() if ln.startswith(f"| `{name}.{{json,md}}`"))
        said = f"{verified} of {len(doc['rows'])} rows verified, {passed} checks passed, "
        assert said + f"{len(doc['checks']) - judged} not judged" in line and line.endswith(f"| {_wall(name)} |")
    assert f"(`docs/results/zen4/{NOW}-log.txt`)" in FORMAT and f"with the ViT too {_wall(NOW)}" in FORMAT
    assert f"({_wall(NOW)} on `zen4` with PyTorch and the ViT," in README


def test_results_formats_phases_are_the_logs():
    now = _phases(NOW)
    vit = sum(now[p] for p in ("vit_train compiling, first epoch", "vit parity checks", "vit_train timed calls"))
    vit += now["vit_infer compiling, first epoch"] + now.get("vit_infer timed calls", 0)
    matmul = now["matmul compiling, first epoch"] + now["matmul timed calls"]
    first = {w: _mmss(now[f"{w} compiling, first epoch"]) for w in ("cnn_train", "vit_train", "conv")}
    said = [
        f"the CNN's parity checks {_mmss(now['cnn parity checks'])}, timed epochs "
        f"{_mmss(now['cnn_train timed calls'])} and first epochs {first['cnn_train']}; the conv's first calls (with "
        f"its first round) {first['conv']} and timed calls {_mmss(now['conv timed calls'])}; the ViT's first epochs "
        f"{first['vit_train']} and parity checks {_mmss(now['vit parity checks'])}",
        f"(its phases 3:15 to {_mmss(vit)}:",
        f"(1:04 to {_mmss(matmul)}:",
    ]
    assert [s for s in said if s not in FORMAT] == []


def test_the_rows_that_moved_between_the_runs_are_the_files():
    """The README's and the class README's figures for two rows, unchanged in code, that differed beyond their
    intervals between the two runs."""
    lstm = [_median_ms(n, "lstm_train", "jax", "jit+ynn+onednn+thp") for n in (BEFORE, NOW)]
    xla = [_median_ms(n, "lstm_infer", "tf", "predict+xla") for n in (BEFORE, NOW)]
    assert (
        f"JAX's tuned LSTM epoch {lstm[0]} and {lstm[1]} ms, TF's LSTM inference under XLA {xla[0]} and {xla[1]}"
        in README
    )
    assert f"JAX's tuned LSTM epoch {lstm[0]} ms here and {lstm[1]} ms there" in CLASS_README
    assert f"TF's LSTM inference under XLA {xla[0]} ms and {xla[1]} ms" in CLASS_README
