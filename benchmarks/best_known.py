"""Does `--configs best` time each framework's fastest configuration? Reads results.json files of runs that timed
every lever (`--configs levers` or `all`) and prints, per framework, workload, replica count and number format, the
fastest row against the fastest of those `--configs best` would have timed (the harness's own rule,
parity.engine.selection, over the implementation's declared tables). Every framework the files hold (tf, jax,
keras-jax), each read in a process of its own (Keras's backend is fixed once a process), or the one --framework names.

    python benchmarks/best_known.py docs/results/zen5/cpu-levers.json ...
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from parity.common import frameworks
from parity.common.frameworks import KEYS
from parity.engine import selection


def _split(impl, shown: str) -> tuple[str, str]:
    """A row's variant as shown ('jit+pool+ynn+thp') -> (the implementation's variant, its setting or 'default')."""
    for name in sorted((s.name for s in impl.SETTINGS), key=len, reverse=True):
        if shown.endswith("+" + name):
            return shown[: -len(name) - 1], name
    return shown, "default"


def best_rows(impl, rows: list[dict]) -> list[dict]:
    """The rows of one workload, replica count and framework (every format) that --configs best times."""
    split = {r["variant"]: _split(impl, r["variant"]) for r in rows}
    names = {v for v, _ in split.values()}
    records = [v for v in impl.VARIANTS if v.kind == rows[0]["kind"] and v.name in names]
    settings = {s.name: s for s in impl.SETTINGS}
    started = selection.settings_to_run("best", [settings[s] for _, s in split.values() if s in settings])
    kept = []
    for r in rows:
        v, s = split[r["variant"]]
        setting = settings.get(s)
        if s != "default" and setting not in started:
            continue
        chosen, _ = selection.to_time("best", records, setting, started)
        if v in {c.name for c in chosen}:
            kept.append(r)
    return kept


def report(framework: str, paths: list[str]) -> None:
    """Prints, for each file, the groups of `framework`'s rows: the fastest against best's."""
    impl = frameworks.load(framework)
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        groups: dict[tuple, list[dict]] = {}
        for r in doc["rows"]:
            if r["framework"] == framework and r.get("median_s"):
                groups.setdefault((r["kind"], r["replicas"]), []).append(r)
        print(f"{path} ({framework})")
        for (wl, n), rows in groups.items():
            kept = best_rows(impl, rows)
            for dtype in dict.fromkeys(r["dtype"] for r in rows):
                fastest = min((r for r in rows if r["dtype"] == dtype), key=lambda r: r["median_s"])
                ours = min((r for r in kept if r["dtype"] == dtype), key=lambda r: r["median_s"])
                off = ours["median_s"] / fastest["median_s"]
                print(
                    f"  {wl:9s} x{n} {framework:3s} {dtype:8s} fastest {fastest['variant']:30s}"
                    f" {fastest['median_s']:.3f} s   best's {ours['variant']:30s} {ours['median_s']:.3f} s"
                    f"  ({off:.3f}x)"
                )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+", help="results.json files of --configs levers or all runs")
    p.add_argument("--framework", choices=KEYS, help="this framework only, in this process (default: each in its own)")
    args = p.parse_args(argv)
    if args.framework:
        report(args.framework, args.results)
        return 0
    held = set()
    for path in args.results:
        with open(path) as f:
            held |= {r["framework"] for r in json.load(f)["rows"]}
    for key in (k for k in KEYS if k in held):
        done = subprocess.run([sys.executable, __file__, "--framework", key, *args.results])
        if done.returncode:
            return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
