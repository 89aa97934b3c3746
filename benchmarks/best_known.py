"""Does `--configs best` time each framework's fastest configuration? Reads results.json files of runs that timed
every lever (`--configs levers` or `all`) and prints, per workload, replica count, framework and number format,
the fastest row against the fastest of those `--configs best` would have timed (the harness's own rule,
parity.engine.selection, over the implementation's declared tables).

    python benchmarks/best_known.py docs/results/zen5/cpu-levers.json ...
"""

from __future__ import annotations

import json
import sys

import jax_impl
import tf_impl
from parity.engine import selection

IMPLS = {"tf": tf_impl, "jax": jax_impl}


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
    records = [v for v in impl.VARIANTS if v.kind == rows[0]["workload"] and v.name in names]
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


def main(paths: list[str]) -> None:
    for path in paths:
        doc = json.load(open(path))
        groups: dict[tuple, list[dict]] = {}
        for r in doc["rows"]:
            if r.get("median_s"):
                groups.setdefault((r["workload"], r["replicas"], r["framework"]), []).append(r)
        print(path)
        for (wl, n, fw), rows in groups.items():
            kept = best_rows(IMPLS[fw], rows)
            for dtype in dict.fromkeys(r["dtype"] for r in rows):
                fastest = min((r for r in rows if r["dtype"] == dtype), key=lambda r: r["median_s"])
                ours = min((r for r in kept if r["dtype"] == dtype), key=lambda r: r["median_s"])
                off = ours["median_s"] / fastest["median_s"]
                print(
                    f"  {wl:9s} x{n} {fw:3s} {dtype:8s} fastest {fastest['variant']:30s} {fastest['median_s']:.3f} s"
                    f"   best's {ours['variant']:30s} {ours['median_s']:.3f} s  ({off:.3f}x)"
                )


if __name__ == "__main__":
    main(sys.argv[1:])
