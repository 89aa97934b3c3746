"""A trained workload's trajectory checks at one replica count: each trainer is judged once, against one reference (a
float32 trainer against the reference trainer, the first framework's first float32 one; a mixed-precision trainer
against its own framework's float32 one), and a global-BatchNorm trainer against the one-device ones; from the arrays
each framework saved (parity.workloads.trained.parity_arrays).

Why one reference is enough: a trajectory tolerance is set for any two trainers that take the same steps in the
same number format (bfloat16's derived for two runs that round differently; float32's a margin over measurement:
each workload's tolerances module). Every trainer is held to it against the reference, so two that are not compared
directly differ by at most twice it (the triangle inequality through the reference), and a trainer that drifts
fails against the reference. The pairs judged before this rule that it leaves out were all between two
non-reference trainers; the ones it adds are the reference framework's own other trainers, which the runs in
docs/results/ put well inside the margin (xeon-avx512's full run: TF's `fit` against `fit+xla` 9.3e-05, `strategy`
against `loop` 6.7e-07, of a 5e-03 loss tolerance)."""

from __future__ import annotations

from parity.common.frameworks import label, ordered, short
from parity.workloads.trained import checks


def variants(saved: dict) -> list[str]:
    return [k.split("/")[1] for k in saved if k.startswith("traj/") and k.endswith("/loss")]


def reference(saved: dict) -> tuple[str, str] | None:
    """The float32 reference trainer, (framework, variant): the first framework's (in the table's order) first
    float32 trainer whose BatchNorm statistics are not the global batch's (per replica, or a model with none: the
    LSTM); None where no framework has one."""
    for fw in ordered(saved):
        own = [v for v in variants(saved[fw]) if _dtype(saved[fw], v) == "float32" and not _global(saved[fw], v)]
        if own:
            return fw, own[0]
    return None


def _global(saved: dict, v: str) -> bool:
    return _batchnorm(saved, v) == "global"


def trajectories(
    saved: dict, counts: dict, tols: dict, n: int, bf16_tols: dict, table: tuple, name: str
) -> tuple[list[dict], str | None]:
    """Each trainer once: every float32 trainer with per-replica BatchNorm statistics (any framework, the
    reference's own framework's other trainers too) against the reference (`reference`), and each mixed-precision
    ('+bf16') trainer against its own framework's float32 one (bfloat16's tolerances); and what was not compared,
    why. table: the model's weights in Keras's order; name: the workload, for the notes."""
    mixed = [
        row
        for fw in ordered(saved)
        for v in variants(saved[fw])
        if _dtype(saved[fw], v) == "bfloat16"
        for row in checks.trajectory(
            saved[fw], saved[fw], v, _float32(saved[fw], v), bf16_tols, n, (fw, fw), "bf16_vs_f32", table
        )
    ]
    ref = reference(saved)
    if ref is None:
        return mixed, None
    rf, rv = ref
    cross, skipped, global_left = [], [], []
    batchnorm = any(not w.trainable for w in table)  # moving statistics: a model with BatchNorm
    why = " (BatchNorm statistics: per replica)" if batchnorm else " (trajectories are compared at one replica count)"
    for fw in ordered(saved):
        f32 = [v for v in variants(saved[fw]) if _dtype(saved[fw], v) == "float32" and (fw, v) != ref]
        if not f32:
            continue
        if counts[fw] != counts[rf]:  # BatchNorm statistics are per replica: a different split is another model
            skipped.append(
                f"{name}: no {short(rf)}-vs-{short(fw)} trajectory check: {label(rf)} trained on {counts[rf]} "
                f"replicas, {label(fw)} on {counts[fw]}{why}"
            )
            continue
        for v in f32:
            if n > 1 and _batchnorm(saved[fw], v) == "global":  # one device: the global batch is the replica's
                global_left.append(f"{short(fw)} {v}")
                continue
            cross += checks.trajectory(saved[rf], saved[fw], rv, v, tols, n, (rf, fw), None, table)
    if global_left:
        skipped.append(
            f"{name}: trainers with BatchNorm statistics over the global batch ({', '.join(global_left)}) are not "
            f"compared with the per-replica reference at {n} replicas (each is, with the one-device trainers)"
        )
    return cross + mixed, "; ".join(skipped) or None


def _batchnorm(saved: dict, v: str) -> str:
    return str(saved.get(f"traj/{v}/batchnorm", "replica"))


def global_batchnorm(saved: dict, one: dict, tols: dict, bf16_tols: dict, n: int, table: tuple) -> list[dict]:
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
                    rows += checks.trajectory(one[other], saved[fw], same[0], v, t, n, names, f"{other}_vs_{fw}", table)
    return rows


def _dtype(saved: dict, v: str) -> str:
    return str(saved.get(f"traj/{v}/dtype", "float32"))


def _float32(saved: dict, mixed: str) -> str:
    """What a mixed-precision variant is compared with: its declared float32 counterpart (Variant.float32:
    'shard_map' for 'shard_map+bf16', 'jit+pool' for 'jit+bf16+pool'), else the framework's first float32 one."""
    f32 = [v for v in variants(saved) if _dtype(saved, v) == "float32"]
    same = str(saved.get(f"traj/{mixed}/float32", ""))
    return same if same in f32 else f32[0]
