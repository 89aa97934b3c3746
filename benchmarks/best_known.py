"""Does `--configs best` time each framework's fastest configuration? Reads results.json files of runs that timed
every lever (`--configs levers` or `all`) and prints, per workload, replica count, framework and number format,
the fastest row against the fastest of those `--configs best` would have timed (parity.engine.assemble's rule: the
framework out of the box, and the implementation's best-known variant, parity.workloads.ops.best_known, under each
process-wide setting of that format that ran and best would start, parity.engine.workerproc.best_configs, else in the
default worker).

    python benchmarks/best_known.py docs/results/cpu-default-zen5-bf16pool.json ...
"""

from __future__ import annotations

import json
import sys

import jax_impl
import tf_impl
from parity.engine.workerproc import best_configs
from parity.workloads import ops as cases

IMPLS = {"tf": tf_impl, "jax": jax_impl}


def _split(impl, shown: str) -> tuple[str, str]:
    """A row's variant as shown ('jit+pool+ynn+thp') -> (the implementation's variant, its setting or 'default')."""
    for c in sorted(impl.TUNED_CONFIG_FORMATS, key=len, reverse=True):
        if shown.endswith("+" + c):
            return shown[: -len(c) - 1], c
    return shown, "default"


def best_rows(impl, rows: list[dict]) -> list[dict]:
    """The rows of one workload, replica count and framework (every format) that --configs best times."""
    split = {r["variant"]: _split(impl, r["variant"]) for r in rows}
    variants = list(dict.fromkeys(v for v, _ in split.values()))
    plain, best = set(cases.offered(impl, variants, False)), cases.best_known(impl, variants)
    kept = []
    for r in rows:
        v, setting = split[r["variant"]]
        settings = {c for c, f in impl.TUNED_CONFIG_FORMATS.items() if r["dtype"] in f}
        ran = {s for _, s in split.values() if s in settings}  # this format's settings, in workers of their own
        ran &= best_configs(dict.fromkeys(ran), impl.TUNED_CONFIG_FORMATS, impl.BEST_CONFIGS)  # best's among them
        if (setting == "default" and v in plain) or (
            best.get(r["dtype"]) == v and (setting in ran if ran else setting == "default")
        ):
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
