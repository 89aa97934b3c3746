"""What a JAX profile holds, plane by plane: how many events, how many name an HLO op (as
`jax_impl.profile.event_op` reads one: the stat 'hlo_op', a GPU kernel's launch annotation 'hlo_op=...', an event of a
TPU's line 'XLA Ops'), the stat keys seen, and a few sample events; then how many ops `jax_impl.trace_ops` maps from
each trace's folder. For checking `jax_impl.trace_ops` on a backend the CI machine lacks (the GPU's, the TPU's).

    python benchmarks/trace_planes.py OUT/profiles
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path


def describe(pb: Path, samples: int = 4) -> list[str]:
    from jax.profiler import ProfileData

    from jax_impl.profile import event_op

    out = [f"== {pb.parents[3].name if len(pb.parents) > 3 else pb}"]
    for plane in ProfileData.from_file(str(pb)).planes:
        keys, n, with_op, shown = Counter(), 0, 0, []
        for line in plane.lines:
            for ev in line.events:
                stats = dict(ev.stats)
                n += 1
                keys.update(stats.keys())
                if op := event_op(line.name, ev.name, stats):
                    with_op += 1
                    if len(shown) < samples:
                        shown.append(f"    {line.name!r}: {ev.name[:60]!r} -> {op} ({ev.duration_ns / 1e3:.1f} us)")
        out.append(f"  plane {plane.name!r}: {n} events, {with_op} with an HLO op; stats {dict(keys.most_common(12))}")
        out += shown
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("profiles", type=Path, help="a folder of JAX traces (a run's OUT/profiles)")
    args = p.parse_args()
    import jax_impl

    found = sorted(args.profiles.rglob("*.xplane.pb"))
    for pb in found:
        print("\n".join(describe(pb)))
    for folder in sorted({pb.parent for pb in found}):
        print(f"{folder}: jax_impl.trace_ops maps {len(jax_impl.trace_ops(str(folder)))} ops")
    return 0


if __name__ == "__main__":
    sys.exit(main())
