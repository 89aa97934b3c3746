"""What the implementations' trace readers share: the time an operation XLA:CPU runs asynchronously keeps after
its event (JAX's jit, TensorFlow's jit_compile; both run XLA:CPU's thunk executor, which traces such an op as an
event that ends when it is handed over and its completion as an event of its own, 'end: <op>', the two linked by a
flow id)."""

from __future__ import annotations

import bisect


def in_flight(ops: list[tuple], flows: dict[int, int], ends: dict[int, int]) -> list[tuple]:
    """What the asynchronous ones among `ops` ((scope, duration, start, thread), in one unit) ran after their
    event: the instants before their completion (`ends`, by the flow id `flows` gives each op) when no op's event ran,
    each piece on a thread of its own (its event's thread and flow id). A completion is recorded when a thread gets
    to it, which may be after other ops it ran meanwhile: those instants stay theirs."""
    spans, gaps = sorted((start, start + duration) for _, duration, start, _ in ops), []
    reach = spans[0][1] if spans else 0
    for begin, end in spans[1:]:
        if begin > reach:
            gaps.append((reach, begin))
        reach = max(reach, end)
    gap_ends, out = [b for _, b in gaps], []
    for i, flow in flows.items():
        scope, duration, start, thread = ops[i]
        lo, hi = start + duration, ends.get(flow, 0)
        k = bisect.bisect_right(gap_ends, lo)
        while k < len(gaps) and gaps[k][0] < hi:
            a, b = max(gaps[k][0], lo), min(gaps[k][1], hi)
            out.append((scope, b - a, a, f"{thread} in flight {flow}"))
            k += 1
    return out
