"""The figures the docs quote from `docs/results/xeon-avx512/` are its files': the rows, checks and wall times of
each run (the wall time from the `/usr/bin/time -v` lines its log ends with), and the phases of the default before and
after it timed one device (benchmarks/run_phases.py on the logs). No framework is imported."""

import json
import re
from pathlib import Path

import pytest
from phases import run_phases

ROOT = Path(__file__).resolve().parents[1]
CLASS = ROOT / "docs/results/xeon-avx512"
FORMAT = (ROOT / "docs/results-format.md").read_text()
CLASS_README = (CLASS / "README.md").read_text()


def _wall(log: Path) -> str:
    """'7 min 45 s' from '\tElapsed (wall clock) time (h:mm:ss or m:ss): 7:44.66'."""
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\d+):(\d+\.\d+)", log.read_text())
    s = round(int(m[1]) * 60 + float(m[2]))
    return f"{s // 60} min {s % 60} s"


def _mmss(s: float) -> str:
    s = round(s)
    return f"{s // 60}:{s % 60:02d}"


def _counts(doc: dict) -> tuple[int, int, int]:
    checks = doc["checks"]
    passed = sum(c["passed"] is True for c in checks)
    return sum(r["verified"] for r in doc["rows"]), passed, len(checks) - passed


@pytest.mark.parametrize("name", ["cpu-default", "cpu-full", "cpu-quick", "cpu-every-variant"])
def test_the_class_readme_gives_each_runs_wall_time_and_verdict(name):
    wall = _wall(CLASS / f"{name}-log.txt")
    line = next(ln for ln in CLASS_README.splitlines() if ln.startswith(f"| `{name}."))
    assert wall in line, (wall, line)
    if name == "cpu-every-variant":
        return
    rows, passed, unjudged = _counts(json.loads((CLASS / f"{name}.json").read_text()))
    said = {
        "cpu-default": f"{rows} rows verified, {passed} checks passed, {unjudged} not judged",
        "cpu-full": f"{rows} rows verified, {passed} of {passed + unjudged} checks passed, {unjudged} not judged",
        "cpu-quick": f"{rows} rows verified, {passed} checks passed, {unjudged} not judged",
    }[name]
    assert said in CLASS_README


def test_the_readme_and_help_give_the_class_wall_times():
    readme = (ROOT / "README.md").read_text()
    from parity.engine.config import PRESETS

    for preset, name in (("default", "cpu-default"), ("full", "cpu-full"), ("quick", "cpu-quick")):
        wall = _wall(CLASS / f"{name}-log.txt")
        assert wall in PRESETS[preset].took
        line = next(ln for ln in readme.splitlines() if ln.startswith("| `xeon-avx512`"))
        assert wall in line


def test_the_phases_before_and_after_are_the_logs():
    rp = run_phases()
    full = (CLASS / "cpu-full-log.txt").read_text().splitlines()
    cut = next(i for i, ln in enumerate(full) if "workers on cpu x8" in ln)
    one, eight, both = rp.phases(full[: cut + 1]), rp.phases(full[cut:]), rp.phases(full)
    default = rp.phases((CLASS / "cpu-default-log.txt").read_text().splitlines())
    floors = {
        name: sum(rp.floor(found, json.loads((CLASS / f"{name}.json").read_text())).values())
        for name, found in (("cpu-full", both), ("cpu-default", default))
    }
    row = next(ln for ln in FORMAT.splitlines() if ln.startswith("| `--preset full` (the matrix"))
    cells = [c.strip() for c in row.split("|")[2:-1]]
    parity = f"{_mmss(both['cnn parity checks'])}, {_mmss(both['lstm parity checks'])}"
    assert cells == [
        _mmss(sum(one.values())),
        _mmss(sum(eight.values())),
        _mmss(sum(both.values())),
        parity,
        _mmss(floors["cpu-full"]),
    ]
    row = next(ln for ln in FORMAT.splitlines() if ln.startswith("| 8 simulated devices left out"))
    parity = f"{_mmss(one['cnn parity checks'])}, {_mmss(one['lstm parity checks'])}"
    assert [c.strip() for c in row.split("|")[2:-1]] == [
        _mmss(sum(one.values())),
        "-",
        _mmss(sum(one.values())),
        parity,
        "",
    ]
    every = rp.phases((CLASS / "cpu-every-variant-log.txt").read_text().splitlines())
    floor = sum(rp.floor(every, json.loads((CLASS / "cpu-every-variant.json").read_text())).values())
    row = next(ln for ln in FORMAT.splitlines() if ln.startswith("| and 3 s of calls a row"))
    parity = f"{_mmss(every['cnn parity checks'])}, {_mmss(every['lstm parity checks'])}"
    total = _mmss(sum(every.values()))
    assert [c.strip() for c in row.split("|")[2:-1]] == [total, "-", total, parity, _mmss(floor)]
    row = next(ln for ln in FORMAT.splitlines() if ln.startswith("| and the trajectories of the timed variants only"))
    cells = [c.strip() for c in row.split("|")[2:-1]]
    parity = f"{_mmss(default['cnn parity checks'])}, {_mmss(default['lstm parity checks'])}"
    total = _mmss(sum(default.values()))
    assert cells == [total, "-", total, parity, _mmss(floors["cpu-default"])]
