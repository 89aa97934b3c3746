"""Does `--configs best` time each framework's fastest configuration? Reads results.json files of runs that timed
every lever (`--configs levers` or `all`) and prints, per workload, replica count, framework and number format,
the fastest row against the one `--configs best` would have timed (its out-of-the-box rows, and the first of the
implementation's BEST_VARIANTS offered, under the process-wide setting of that format where that setting ran).

    python benchmarks/best_known.py docs/results/cpu-default-zen5-bf16pool.json ...
"""

from __future__ import annotations

import json
import sys

import jax_impl
import tf_impl

IMPLS = {"tf": tf_impl, "jax": jax_impl}


def _setting(impl, variant: str, row_variant: str) -> str | None:
    """The process-wide setting a row ran under ('ynn+thp'), or None for the default worker's."""
    if row_variant == variant:
        return "default"
    rest = row_variant[len(variant) + 1 :] if row_variant.startswith(variant + "+") else None
    return rest if rest in impl.TUNED_CONFIG_FORMATS else None


def best_rows(impl, rows: list[dict]) -> list[dict]:
    """The rows of one group (workload, replicas, framework, format) that --configs best times."""
    dtype = rows[0]["dtype"]
    plain = {v for v in (r["variant"] for r in rows) if v not in impl.TUNED_VARIANTS}
    settings = [c for c, f in impl.TUNED_CONFIG_FORMATS.items() if dtype in f]
    offered = {r["variant"] for r in rows}
    for v in impl.BEST_VARIANTS:
        under = [f"{v}+{c}" for c in settings if f"{v}+{c}" in offered]
        if under or v in offered:
            chosen = set(under) or {v}
            return [r for r in rows if r["variant"] in plain | chosen]
    return [r for r in rows if r["variant"] in plain]


def main(paths: list[str]) -> None:
    for path in paths:
        doc = json.load(open(path))
        groups: dict[tuple, list[dict]] = {}
        for r in doc["rows"]:
            if r.get("median_s"):
                groups.setdefault((r["workload"], r["replicas"], r["framework"], r["dtype"]), []).append(r)
        print(path)
        for (wl, n, fw, dtype), rows in groups.items():
            fastest = min(rows, key=lambda r: r["median_s"])
            kept = min(best_rows(IMPLS[fw], rows), key=lambda r: r["median_s"])
            off = kept["median_s"] / fastest["median_s"]
            print(
                f"  {wl:9s} x{n} {fw:3s} {dtype:8s} fastest {fastest['variant']:30s} {fastest['median_s']:.3f} s"
                f"   best's {kept['variant']:30s} {kept['median_s']:.3f} s  ({off:.3f}x)"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
