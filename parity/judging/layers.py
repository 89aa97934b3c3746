"""Per-layer attribution: each framework's profiled ops mapped onto the model's own layer names and a pass.

The implementations trace one call with their own profiler and return its ops as (scope, seconds): the scope is
the op's framework name, which holds the layer it came from (Keras names its ops after its layers; the JAX
implementation runs each layer in a `jax.named_scope` of Keras's layer name, which lands in the HLO metadata).
Here those scopes become (layer, pass): the layer is the innermost scope token that names one of the model's
layers, the pass is 'backward' for gradient ops ('transpose(' in JAX's names, 'gradient' or 'Backprop' in
TensorFlow's), 'optimizer' for the update, else 'forward'; what names no layer is ('other', its pass).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from functools import cache

PASSES = ("forward", "backward", "optimizer", "other")

_TOKEN = re.compile(r"[A-Za-z][A-Za-z_]*\d*")
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


def attribute(
    ops: list[tuple[str, float]], per: int, median_s: float | None, layers: Sequence[str]
) -> tuple[list[dict], float | None]:
    """The row's `layers` ({layer, pass, seconds, share}: seconds per step or call, share of the attributed
    time) from the profiled call's ops, `per` steps (or calls) in it, onto the model's `layers` (in order); and
    `profile_coverage`, the attributed time per call over the row's measured median (None without one)."""
    total: dict[tuple[str, str], float] = defaultdict(float)
    for scope, seconds in ops:
        total[classify(scope, layers)] += seconds
    whole = sum(total.values())
    order = {name: i for i, name in enumerate((*layers, "optimizer", "other"))}
    rows = [
        {"layer": layer, "pass": p, "seconds": s / per, "share": s / whole if whole else 0.0}
        for (layer, p), s in sorted(total.items(), key=lambda kv: (order.get(kv[0][0], 99), PASSES.index(kv[0][1])))
    ]
    # ops that overlap in time (TensorFlow's inter-op threads) can make this exceed 1
    return rows, (whole / median_s if median_s else None)


def side_by_side(rows: dict[str, dict], layers: Sequence[str] = ()) -> list[tuple[str, str, tuple[float | None, ...]]]:
    """(layer, pass, seconds) for every layer and pass any of `rows` (framework -> its profiled row) holds, in the
    model's order (`layers`), the seconds one per framework in `rows`' order (None where its profile has none)."""
    per = [{(r["layer"], r["pass"]): r["seconds"] for r in row.get("layers") or []} for row in rows.values()]
    keys = list(dict.fromkeys(k for p in per for k in p))
    order = {name: i for i, name in enumerate((*layers, "optimizer", "other"))}
    keys.sort(key=lambda k: (order.get(k[0], 99), PASSES.index(k[1])))
    return [(layer, p, tuple(s.get((layer, p)) for s in per)) for layer, p in keys]


def loses_most(
    lines: list[tuple[str, str, tuple[float | None, ...]]], fws: list[str]
) -> dict[str, tuple[str, str, float]]:
    """Per framework (`fws`, in the order of the lines' seconds), the layer and pass where it spends the most time
    beyond the fastest of the others there: {fw: (layer, pass, s)}, the reference (the first) last; a framework
    that is nowhere slower is left out."""
    out = {}
    for i in [*range(1, len(fws)), 0]:
        gaps = [
            (s[i] - min(o), layer, p)
            for layer, p, s in lines
            if s[i] is not None and (o := [x for k, x in enumerate(s) if k != i and x is not None])
        ]
        if gaps and max(gaps)[0] > 0:
            gap, layer, p = max(gaps)
            out[fws[i]] = (layer, p, gap)
    return out


def one_op(name: str, ops: list[tuple[str, float]], median_s: float) -> tuple[list[dict], float]:
    """An operation's row (the conv, the matmul): every profiled op is its one op, forward."""
    total = sum(s for _, s in ops)
    return [{"layer": name, "pass": "forward", "seconds": total, "share": 1.0}], total / median_s
