"""What a JAX profile holds, plane by plane: how many events, how many name an HLO op (the stat 'hlo_op', or a GPU
kernel's launch annotation), the stat keys seen, and a few sample events. For checking `jax_impl.trace_ops` on a
backend the CI machine lacks (issue 24: the first GPU traces).

    python benchmarks/trace_planes.py OUT/profiles
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from jax.profiler import ProfileData

from jax_impl.profile import _hlo_op


def describe(pb: Path, samples: int = 4) -> list[str]:
    out = [f"== {pb.parents[3].name if len(pb.parents) > 3 else pb}"]
    for plane in ProfileData.from_file(str(pb)).planes:
        keys, n, with_op, shown = Counter(), 0, 0, []
        for line in plane.lines:
            for ev in line.events:
                stats = dict(ev.stats)
                n += 1
                keys.update(stats.keys())
                if op := _hlo_op(stats):
                    with_op += 1
                    if len(shown) < samples:
                        shown.append(f"    {line.name!r}: {ev.name[:60]!r} -> {op} ({ev.duration_ns / 1e3:.1f} us)")
        out.append(f"  plane {plane.name!r}: {n} events, {with_op} with an HLO op; stats {dict(keys.most_common(12))}")
        out += shown
    return out


def main() -> int:
    for pb in sorted(Path(sys.argv[1]).rglob("*.xplane.pb")):
        print("\n".join(describe(pb)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
