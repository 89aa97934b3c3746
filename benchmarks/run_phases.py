"""Where a run's wall time went: the time per phase of a `python -m parity.run` log (its stderr, each line stamped
[HH:MM:SS]). Each interval between two stamped lines goes to the phase of the first: starting workers and measuring
the peaks, each row kind's compilation (or first epoch), its timed calls, its profiling, each workload's parity
checks. A check's verdict line ends the phase it closes; what is left is 'other'.

Given the run's results.json too, it also prints the run's floor: what the same run would take if the settling rule
added no call to any row (parity.judging.settling), from the rows' own figures. Each row's first call (compilation,
or first epoch) as measured; each row's least calls at its median (a training row: its schedule's epochs after the
first; an operation: the run's --reps timed calls, with the run's --warmup calls and the untimed call before each
turn of repetitions.OP_CALLS_PER_TURN); the parity checks, the workers' start and the peaks as the log has them (no rule
shortens them). What no row, check or verdict of the run can do without, at this machine's speed.

    python -m parity.run --device cpu --out run 2> run-log.txt
    python benchmarks/run_phases.py run-log.txt [run/results.json]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import defaultdict
from pathlib import Path

from parity.engine.repetitions import OP_CALLS_PER_TURN

AHEAD = "rows built, their programs compiled ahead"  # the phase parity.engine.ahead opens
# parity.engine.ahead.finish's line, said after the wait: its seconds move from the phase before to their own, and
# the line opens no phase
REFERENCES = "float64 references, waited for before the rows"
_WAITED = re.compile(r"waited (\d+\.\d) s for a float64 reference")
_STAMP = re.compile(r"\[(\d\d):(\d\d):(\d\d)\] (.*)")
_PHASES = (  # (pattern on the line's text, the phase it opens; \1: the row kind or workload)
    (re.compile(r"(starting|measuring) "), "starting workers, measuring peaks"),
    (re.compile(r".+: (building \d+ (training )?rows|waiting for its rows' programs)"), AHEAD),
    (re.compile(r"(\w+) parity"), r"\1 parity checks"),
    (re.compile(r"(\w+): (compiling|first epoch)"), r"\1 compiling, first epoch"),
    (re.compile(r"(\w+) (round|epoch|rep) "), r"\1 timed calls"),
    (re.compile(r"(\w+): profiling"), r"\1 profiling"),
)
# a line that belongs to the phase before it
_CONTINUES = re.compile(
    r"\s+(first call|INVALID|not profiled|.+: \d+ (steps|programs) compiled|.+: not compiled ahead)"
)


def phases(lines: list[str]) -> dict[str, int]:
    """Seconds per phase, in the order each first appears."""
    out: dict[str, int] = defaultdict(int)
    stamped = [
        (int(h) * 3600 + int(m) * 60 + int(s), text)
        for h, m, s, text in (_STAMP.match(ln).groups() for ln in lines if _STAMP.match(ln))
    ]
    phase = "other"
    for (t0, text), (t1, _) in zip(stamped, stamped[1:], strict=False):
        if waited := _WAITED.match(text):
            out[phase] -= round(float(waited[1]))
            out[REFERENCES] += round(float(waited[1]))
        if not (_CONTINUES.match(text) or waited):
            phase = next((m.expand(name) for pat, name in _PHASES if (m := pat.match(text))), "other")
        out[phase] += (t1 - t0) % 86400  # a run across midnight
    return dict(out)


def least_calls(doc: dict) -> dict[str, float]:
    """Seconds of the rows' first calls, and of their least calls at their medians (a row's minimum under the
    settling rule, parity.engine.repetitions.rule), in the run `doc` (a results.json)."""
    env, first, least = doc["env"], 0.0, 0.0
    for r in doc["rows"]:
        first += r["compile_s"] or r.get("first_epoch_s") or 0.0  # a training row keeps it as its first epoch
        if not r["median_s"]:
            continue
        if r.get("time_unit") == "epoch":  # its schedule's epochs after the first, one after another
            least += (r["spec"]["epochs"] - 1) * r["median_s"]
        else:  # the warm-up, then turns of an untimed call and up to OP_CALLS_PER_TURN timed ones
            n = env["reps"]
            least += (env["warmup"] + math.ceil(n / OP_CALLS_PER_TURN) + n) * r["median_s"]
    return {"first calls (compilation, first epochs)": first, "least calls, at the rows' medians": least}


def floor(found: dict[str, int], doc: dict) -> dict[str, float]:
    """The run's floor, by part: the rows' first and least calls (least_calls), and the phases no settling rule
    shortens (the parity checks, the workers' start and the peaks, 'other') as the log has them."""
    out = least_calls(doc)
    for name, s in found.items():
        if name.endswith("parity checks") or name in ("starting workers, measuring peaks", "other"):
            out[name] = float(s)
    return out


def _mmss(s: float) -> str:
    s = round(s)
    return f"{s // 60:3d} min {s % 60:2d} s"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log", type=Path, help="the run's stderr, each line stamped [HH:MM:SS]")
    p.add_argument("results", type=Path, nargs="?", help="the run's results.json: also print the run's floor")
    args = p.parse_args(argv)
    found = phases(args.log.read_text().splitlines())
    for name, s in sorted(found.items(), key=lambda kv: -kv[1]):
        print(f"{_mmss(s)}  {name}")
    total = sum(found.values())
    print(f"{_mmss(total)}  from the first stamped line to the last")
    if args.results and AHEAD in found:  # each row's first epoch holds its compile, made beside the others'
        print("\nthe floor: not added up for a run that compiled ahead (its rows' first epochs overlap)")
    elif args.results:
        parts = floor(found, json.loads(args.results.read_text()))
        print("\nthe floor: the same rows and checks with no call beyond each row's least")
        for name, s in parts.items():
            print(f"{_mmss(s)}  {name}")
        print(f"{_mmss(sum(parts.values()))}  the floor ({_mmss(total - sum(parts.values())).strip()} under the run)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
