"""Where a run's wall time went: the time per phase of a `python -m parity.run` log (its stderr, each line stamped
[HH:MM:SS]). Each interval between two stamped lines goes to the phase of the first: starting workers and measuring
the peaks, each row kind's compilation (or first epoch), its timed calls, its profiling, each workload's parity
checks. A check's verdict line ends the phase it closes; what is left is 'other'.

    python -m parity.run --device cpu 2> run-log.txt
    python benchmarks/run_phases.py run-log.txt
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

_STAMP = re.compile(r"\[(\d\d):(\d\d):(\d\d)\] (.*)")
_PHASES = (  # (pattern on the line's text, the phase it opens; \1: the row kind or workload)
    (re.compile(r"(starting|measuring) "), "starting workers, measuring peaks"),
    (re.compile(r"(\w+) parity"), r"\1 parity checks"),
    (re.compile(r"(\w+): (compiling|first epoch)"), r"\1 compiling, first epoch"),
    (re.compile(r"(\w+) (round|epoch|rep) "), r"\1 timed calls"),
    (re.compile(r"(\w+): profiling"), r"\1 profiling"),
)
_CONTINUES = re.compile(r"\s+(first call|INVALID|not profiled)")  # a line that belongs to the phase before it


def phases(lines: list[str]) -> dict[str, int]:
    """Seconds per phase, in the order each first appears."""
    out: dict[str, int] = defaultdict(int)
    stamped = [
        (int(h) * 3600 + int(m) * 60 + int(s), text)
        for h, m, s, text in (_STAMP.match(ln).groups() for ln in lines if _STAMP.match(ln))
    ]
    phase = "other"
    for (t0, text), (t1, _) in zip(stamped, stamped[1:], strict=False):
        if not _CONTINUES.match(text):
            phase = next((m.expand(name) for pat, name in _PHASES if (m := pat.match(text))), "other")
        out[phase] += (t1 - t0) % 86400  # a run across midnight
    return dict(out)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    found = phases(Path(argv[0]).read_text().splitlines())
    for name, s in sorted(found.items(), key=lambda kv: -kv[1]):
        print(f"{s // 60:3d} min {s % 60:2d} s  {name}")
    total = sum(found.values())
    print(f"{total // 60:3d} min {total % 60:2d} s  from the first stamped line to the last")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
