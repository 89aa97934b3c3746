"""Per-layer attribution: each framework's profiled ops mapped onto the model's own layer names and a pass, in
wall time and in CPU time.

The implementations trace one call with their own profiler and return its ops as (scope, seconds, start_s,
thread): the scope is the op's framework name, which holds the layer it came from (Keras names its ops after its
layers; the JAX implementation runs each layer in a `jax.named_scope` of Keras's layer name, which lands in the HLO
metadata). Here those scopes become (layer, pass): the layer is the innermost scope token that names one of the
model's layers, the pass is 'backward' for gradient ops ('transpose(' in JAX's names, 'gradient' or 'Backprop' in
TensorFlow's), 'optimizer' for the update, else 'forward'; what names no layer is ('other', its pass).

Two figures per layer and pass. CPU time ('seconds'): the ops' durations summed over every thread, so an op run
piecewise on several threads, or two ops at once on two, count each thread's part; they can add up to more than the
call took. Wall time ('wall_s', where the ops carry their start and thread; wall_split): each instant of the call
divided equally among the threads running an op at that instant, so the layers add up to the time any op ran.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from functools import cache

PASSES = ("forward", "backward", "optimizer", "other", "idle")

# a name token: letters, then digits that end it ('conv1', 'bn1' of 'bn1_input'); not a word's start that only looks
# like one ('conv2' of PyTorch's 'aten::conv2d')
_TOKEN = re.compile(r"[A-Za-z][A-Za-z_]*\d*(?![A-Za-z0-9])")
_LOSS = re.compile(r"loss|crossentropy|softmax_cross_entropy", re.I)
_OPTIMIZER = re.compile(r"(^|/)(optimizer|adam)(_\d+)?(/|$)", re.I)
_BACKWARD = re.compile(r"transpose\(|gradient|backprop|grad(ients)?/", re.I)


@cache
def _layer(layers: tuple[str, ...]) -> re.Pattern:
    """A scope token that names one of `layers` (Keras numbers a repeated name: 'conv1_1')."""
    names = "|".join(re.escape(n) for n in layers if n != "loss") or "(?!)"
    return re.compile(rf"({names})(?:_\d+)?$")


def classify(scope: str, layers: Sequence[str] = ()) -> tuple[str, str]:
    """(layer, pass) of one profiled op from its framework name; `layers`: the model's layer names (its workload's
    Workload.layers)."""
    if _OPTIMIZER.search(scope):
        return "optimizer", "optimizer"
    layer, named = None, _layer(tuple(layers))
    for tok in _TOKEN.findall(scope):
        m = named.match(tok)
        if m:
            layer = m.group(1)  # the innermost scope wins
    if layer is None and _LOSS.search(scope):
        layer = "loss"
    backward = bool(_BACKWARD.search(scope))
    if layer is None:
        return "other", "backward" if backward else "other"
    return layer, "backward" if backward else "forward"


Op = tuple  # (scope, seconds) or (scope, seconds, start_s, thread): one profiled op, as trace_ops returns it


def timed(ops: Sequence[Op]) -> bool:
    """Whether every op carries its start and thread (a wall-time split is possible); older traces' ops are
    (scope, seconds) only."""
    return bool(ops) and all(len(op) >= 4 for op in ops)


def wall_split(ops: Sequence[Op]) -> list[float]:
    """Each op's share of the wall time, in the order of `ops` ((scope, seconds, start_s, thread) each).

    On one thread, the op started last among those running holds the thread (an op nested inside another, as a
    profiler's child event, pre-empts its parent; ops that merely overlap hand over at the later start). Across
    threads, each elementary interval between those segments' ends is divided equally among the threads busy in it:
    an op run piecewise on two threads gets half of each instant from each. The shares add up to the union of the
    ops' intervals, the time any op ran; an instant when nothing ran is nobody's."""
    by_thread: dict[str, list[int]] = defaultdict(list)
    for i, op in enumerate(ops):
        by_thread[op[3]].append(i)
    segments: list[tuple[int, float, float]] = []  # (op, start, end), disjoint on each thread
    for idx in by_thread.values():
        idx.sort(key=lambda i: (ops[i][2], -ops[i][1]))
        stack: list[int] = []  # the ops running on this thread, innermost last
        at = float("-inf")
        for i in idx:
            begin = ops[i][2]
            while stack and (e := ops[stack[-1]][2] + ops[stack[-1]][1]) <= begin:
                if e > at:
                    segments.append((stack[-1], at, e))
                    at = e
                stack.pop()
            if stack and begin > at:
                segments.append((stack[-1], at, begin))
            stack.append(i)
            at = max(at, begin)
        while stack:
            if (e := ops[stack[-1]][2] + ops[stack[-1]][1]) > at:
                segments.append((stack[-1], at, e))
                at = e
            stack.pop()
    busy: dict[float, int] = defaultdict(int)  # the change in busy threads at each segment end
    for _, a, b in segments:
        busy[a] += 1
        busy[b] -= 1
    points = sorted(busy)
    # share(t): the wall time one busy thread is due up to t (the integral of 1 / busy threads)
    share, n, acc = {}, 0, 0.0
    for t0, t1 in zip(points, points[1:] + points[-1:], strict=True):
        share[t0] = acc
        n += busy[t0]
        if n:
            acc += (t1 - t0) / n
    out = [0.0] * len(ops)
    for i, a, b in segments:
        out[i] += share[b] - share[a]
    return out


def overhead_out(median_s: float | None, call_s: float | None) -> float:
    """What the profiled call's figures are multiplied by to stand for an unprofiled call: the row's median over
    the profiled call's own time (`call_s`, the profiler's overhead in it), the overhead taken out of every line in
    proportion to its time; 1 where either is unknown (older files: the figures are the profiled call's)."""
    return median_s / call_s if median_s and call_s else 1.0


def attribute(
    ops: Sequence[Op], per: int, median_s: float | None, layers: Sequence[str], call_s: float | None = None
) -> tuple[list[dict], float | None]:
    """The row's `layers` from the profiled call's ops, `per` steps (or calls) in it, onto the model's `layers` (in
    order): {layer, pass, seconds (CPU time per step or call: durations summed over threads), share (of that
    CPU time), wall_s (wall time per step or call: wall_split; only where every op carries its start and
    thread)}, with ('other', 'idle') the wall time between the first op and the last when no op ran, each figure
    scaled to the row's median (overhead_out); and `profile_coverage`, the ops' CPU time over the profiled call's
    own time `call_s` (without it, over the row's median; None without either; coverage() gives the wall
    figure's too)."""
    cpu: dict[tuple[str, str], float] = defaultdict(float)
    wall: dict[tuple[str, str], float] = defaultdict(float)
    keys = [classify(op[0], layers) for op in ops]
    for key, op in zip(keys, ops, strict=True):
        cpu[key] += op[1]
    if timed(ops):
        for key, w in zip(keys, wall_split(ops), strict=True):
            wall[key] += w
        # the instants between the call's first op and its last when none ran (the host's own work): a line of
        # its own, so that the wall times add up to the traced call
        span = max(op[2] + op[1] for op in ops) - min(op[2] for op in ops)
        if (idle := span - sum(wall.values())) > 0:
            cpu["other", "idle"], wall["other", "idle"] = 0.0, idle
    whole, scale = sum(cpu.values()), overhead_out(median_s, call_s) / per
    order = {name: i for i, name in enumerate((*layers, "optimizer", "other"))}
    rows = [
        {
            "layer": layer,
            "pass": p,
            "seconds": s * scale,
            "share": s / whole if whole else 0.0,
            **({"wall_s": wall[layer, p] * scale} if wall else {}),
        }
        for (layer, p), s in sorted(cpu.items(), key=lambda kv: (order.get(kv[0][0], 99), PASSES.index(kv[0][1])))
    ]
    return rows, (whole / (call_s or median_s) if call_s or median_s else None)


def coverage(row: dict) -> tuple[float | None, float | None]:
    """A profiled row's (wall, CPU) coverage: the traced ops' wall time, and their CPU time, over the profiled call's
    own time (older files: over the row's median, the profiler's overhead in it). The wall figure is None where
    the layers have none (ops without their start and thread: older files); the CPU figure is the row's
    profile_coverage, the wall one follows from it by the layers' two sums."""
    cpu, lines = row.get("profile_coverage"), row.get("layers") or []
    if cpu is None or not lines or any("wall_s" not in r for r in lines):
        return None, cpu
    total = sum(r["seconds"] for r in lines)
    return (cpu * sum(r["wall_s"] for r in lines) / total if total else None), cpu


def side_by_side(
    rows: dict[str, dict], layers: Sequence[str] = (), figure: str = "seconds"
) -> list[tuple[str, str, tuple[float | None, ...]]]:
    """(layer, pass, seconds) for every layer and pass any of `rows` (framework -> its profiled row) holds, in the
    model's order (`layers`), the seconds one per framework in `rows`' order (None where its profile has none);
    `figure`: which, 'seconds' (CPU time) or 'wall_s' (wall time)."""
    per = [{(r["layer"], r["pass"]): r.get(figure) for r in row.get("layers") or []} for row in rows.values()]
    keys = list(dict.fromkeys(k for p in per for k in p))
    order = {name: i for i, name in enumerate((*layers, "optimizer", "other"))}
    keys.sort(key=lambda k: (order.get(k[0], 99), PASSES.index(k[1])))
    return [(layer, p, tuple(s.get((layer, p)) for s in per)) for layer, p in keys]


BLIND = 0.5  # a profile that holds less of its call than this divides nothing and loses nowhere (its lines: untraced)


def loses_most(
    lines: list[tuple[str, str, tuple[float | None, ...]]], fws: list[str], blind: Sequence[str] = ()
) -> dict[str, tuple[str, str, float]]:
    """Per framework (`fws`, in the order of the lines' seconds), the layer and pass where it spends the most time
    beyond the fastest of the others there: {fw: (layer, pass, s)}, the reference (the first) last; a framework
    that is nowhere slower is left out. ('other', 'idle') is never named: it is time in which no traced op ran (work
    on threads the profiler does not see, or waiting), not a place in the model (idle_share says how much).
    `blind`: frameworks whose profile misses time (a low coverage): named nowhere, no gap measured against them."""
    out = {}
    lines = [(ly, p, tuple(None if fw in blind else x for fw, x in zip(fws, s, strict=True))) for ly, p, s in lines]
    for i in [*range(1, len(fws)), 0]:
        gaps = [
            (s[i] - min(o), layer, p)
            for layer, p, s in lines
            if (layer, p) != ("other", "idle")
            and s[i] is not None
            and (o := [x for k, x in enumerate(s) if k != i and x is not None])
        ]
        if gaps and max(gaps)[0] > 0:
            gap, layer, p = max(gaps)
            out[fws[i]] = (layer, p, gap)
    return out


def overhead(row: dict) -> float | None:
    """The profiled call's time over the row's median: what the profiler added (None: older files)."""
    call, med = row.get("profile_call_s"), row.get("median_s")
    return call / med if call and med else None


def idle_share(lines: list[tuple[str, str, tuple[float | None, ...]]], i: int) -> float:
    """The share of framework i's lines (wall seconds) in which no traced op ran: ('other', 'idle')."""
    total = sum(s[i] or 0.0 for _, _, s in lines)
    idle = sum(s[i] or 0.0 for layer, p, s in lines if (layer, p) == ("other", "idle"))
    return idle / total if total else 0.0


def one_op(name: str, ops: Sequence[Op], median_s: float, call_s: float | None = None) -> tuple[list[dict], float]:
    """An operation's row (the conv, the matmul): every profiled op is its one op, forward; its CPU time, and its
    wall time where the ops carry their start and thread, scaled to the row's median (see attribute)."""
    total, scale = sum(op[1] for op in ops), overhead_out(median_s, call_s)
    wall = {"wall_s": sum(wall_split(ops)) * scale} if timed(ops) else {}
    return [{"layer": name, "pass": "forward", "seconds": total * scale, "share": 1.0, **wall}], total / (
        call_s or median_s
    )
