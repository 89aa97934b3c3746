"""The CNN's trajectory checks at one replica count: which trainers of which frameworks are compared (every pair in
the same number format, each mixed-precision trainer against its float32 counterpart, a global-BatchNorm trainer
against the one-device ones), from the arrays each framework saved (parity.workloads.cnn.cases.cnn_parity)."""

from __future__ import annotations

from parity.common.frameworks import label, pairs, short
from parity.workloads.cnn import checks


def variants(saved: dict) -> list[str]:
    return [k.split("/")[1] for k in saved if k.startswith("traj/") and k.endswith("/loss")]


def trajectories(
    saved: dict, counts: dict, tols: dict, n: int, bf16_tols: dict, table: tuple = checks.CNN_WEIGHTS, name: str = "cnn"
) -> tuple[list[dict], str | None]:
    """Every pair of trainers of two frameworks (each pair of frameworks in table order) in the same number format
    and with the same BatchNorm statistics over the same dropout-free steps, and each mixed-precision ('+bf16')
    trainer against its own framework's float32 one (bfloat16's tolerances); and what was not compared, why.
    table: the model's weights in Keras's order (the CNN's unless given); name: the workload, for the notes."""
    same = [
        row
        for fw in saved
        for v in variants(saved[fw])
        if _dtype(saved[fw], v) == "bfloat16"
        for row in checks.trajectory(
            saved[fw], saved[fw], v, _float32(saved[fw], v), bf16_tols, n, (fw, fw), "bf16_vs_f32", table
        )
    ]
    cross, skipped = [], []
    why = (
        " (BatchNorm statistics: per replica)" if name == "cnn" else " (trajectories are compared at one replica count)"
    )
    for a, b in pairs(saved):
        if counts[a] != counts[b]:  # BatchNorm statistics are per replica: a different split is another model
            skipped.append(
                f"{name}: no {short(a)}-vs-{short(b)} trajectory check: {label(a)} trained on {counts[a]} "
                f"replicas, {label(b)} on {counts[b]}{why}"
            )
            continue
        both = [(va, vb) for va, vb in _pairs(saved[a], saved[b]) if n == 1 or _same_batchnorm(saved, a, va, b, vb)]
        for va, vb in both:
            t = bf16_tols if _dtype(saved[a], va) == "bfloat16" else tols
            cross += checks.trajectory(saved[a], saved[b], va, vb, t, n, (a, b), None, table)
        if len(both) < len(_pairs(saved[a], saved[b])):
            skipped.append(
                f"{name}: {short(a)}'s and {short(b)}'s trainers with BatchNorm statistics per replica and over the "
                f"global batch are not compared with each other at {n} replicas (each global one is, with the "
                "one-device trainers)"
            )
    return cross + same, "; ".join(skipped) or None


def _same_batchnorm(saved: dict, a: str, va: str, b: str, vb: str) -> bool:
    return _batchnorm(saved[a], va) == _batchnorm(saved[b], vb)


def _batchnorm(saved: dict, v: str) -> str:
    return str(saved.get(f"traj/{v}/batchnorm", "replica"))


def global_batchnorm(saved: dict, one: dict, tols: dict, bf16_tols: dict, n: int) -> list[dict]:
    """Each trainer whose BatchNorm takes the global batch's statistics over `n` replicas (Keras's DataParallel:
    one SPMD program), which no per-replica trainer computes, against what it does compute: every other framework's
    first one-device variant in its number format, over the same batches (`one`: the one-device round's arrays)."""
    rows = []
    for fw in saved:
        for v in variants(saved[fw]):
            if _batchnorm(saved[fw], v) != "global":
                continue
            for other in (o for o in one if o != fw):
                same = [u for u in variants(one[other]) if _dtype(one[other], u) == _dtype(saved[fw], v)]
                if same:
                    t = bf16_tols if _dtype(saved[fw], v) == "bfloat16" else tols
                    names = (f"{other} x1", f"{fw} x{n}")
                    rows += checks.trajectory(one[other], saved[fw], same[0], v, t, n, names, f"{other}_vs_{fw}")
    return rows


def _dtype(saved: dict, v: str) -> str:
    return str(saved.get(f"traj/{v}/dtype", "float32"))


def _float32(saved: dict, mixed: str) -> str:
    """What a mixed-precision variant is compared with: its declared float32 counterpart (Variant.float32:
    'shard_map' for 'shard_map+bf16', 'jit+pool' for 'jit+bf16+pool'), else the framework's first float32 one."""
    f32 = [v for v in variants(saved) if _dtype(saved, v) == "float32"]
    same = str(saved.get(f"traj/{mixed}/float32", ""))
    return same if same in f32 else f32[0]


def _pairs(a: dict, b: dict) -> list[tuple[str, str]]:
    """Every pair of single-step variants of two frameworks' saved arrays in the same number format; a multi-step
    one (several steps per dispatch) against the other framework's first, out-of-the-box variant only, so the
    checks grow by one pair per multi-step variant."""

    def multi(saved, v):
        return int(saved.get(f"traj/{v}/dispatch", 1)) > 1

    av, bv = variants(a), variants(b)
    single = [(x, y) for x in av for y in bv if not multi(a, x) and not multi(b, y) and _dtype(a, x) == _dtype(b, y)]
    return single + [(x, bv[0]) for x in av if multi(a, x)] + [(av[0], y) for y in bv if multi(b, y)]
