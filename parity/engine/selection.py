"""What `--configs` runs: which process-wide settings get a worker of their own, and which variants each worker
times. One pure function of each over the implementations' declared tables (parity.api.variants), nothing else.

* `default`: each framework out of the box only (no setting; its untuned variants).
* `best`: each framework out of the box and its best-known configuration for each row kind, replica count and number
  format: the variant of lowest `rank`, in the worker of the setting of lowest rank that acts on that format
  (in the default worker where no setting does, or where that setting declares it slows the row kind: `slows`).
* `levers`: each tuned variant on its own, and each setting with the variants of the number formats it acts on,
  less the several-steps-per-dispatch variants (which change how steps reach the device, not the kernels) but for
  the best-known one under the setting `best` runs it with: every row `best` times is in it too.
* `all`: every setting with every variant.
A setting from the command line (`--config NAME=ENV`) declares no formats (`formats` None): it runs every variant.
"""

from __future__ import annotations

from collections.abc import Sequence

from parity.api.variants import Setting, Variant, out_of_the_box

CONFIGS = ("default", "best", "levers", "all")
# why a variant was left out of a worker, for the table's notes
BY_FORMAT, BY_DISPATCH = "format", "dispatch"


def _rank(x: Variant | Setting) -> int:
    return x.rank if x.rank is not None else 1 << 30


def settings_to_run(configs: str, offered: Sequence[Setting], extra: Sequence[Setting] = ()) -> list[Setting]:
    """The settings a framework's workers start with beside its default worker, in the table's order: under `best`,
    for each number format the first by rank that acts on it (every one, for a format no ranked setting acts on);
    under `levers`, each that acts on some format; under `all`, every one; then the command line's own (`extra`),
    under any but `default`."""
    if configs == "default":
        return []
    if configs == "all":
        return [*offered, *extra]
    acting = [s for s in offered if s.formats is None or s.formats]
    if configs == "best":
        first: dict[str, Setting] = {}
        for s in sorted((s for s in acting if s.formats is not None and s.rank is not None), key=_rank):
            for f in s.formats:
                first.setdefault(f, s)
        # a format that no ranked setting acts on keeps every setting of its own
        acting = [s for s in acting if s.formats is None or any(first.get(f, s) is s for f in s.formats)]
    return [*acting, *extra]


def best_known(variants: Sequence[Variant]) -> dict[str, Variant]:
    """Number format -> the variant of the best-known configuration among `variants` (one row kind's, at one
    replica count): the one of lowest `rank`; a format none of whose variants is ranked has none."""
    best: dict[str, Variant] = {}
    for v in sorted((v for v in variants if v.rank is not None), key=_rank):
        best.setdefault(v.dtype, v)
    return best


def to_time(
    configs: str, variants: Sequence[Variant], setting: Setting | None, running: Sequence[Setting]
) -> tuple[list[Variant], set[str]]:
    """The variants of one row kind that one worker times, and why others were left out (BY_FORMAT, BY_DISPATCH).
    `setting`: the worker's (None: the framework's default worker); `running`: every setting of its framework that
    this run started."""
    if configs == "default":
        return (out_of_the_box(variants) if setting is None else []), set()
    if configs == "all" or (setting is not None and setting.formats is None):
        return list(variants), set()
    best = best_known(variants)
    kind = variants[0].kind if variants else None
    if configs == "levers":
        if setting is None:
            return list(variants), set()
        kept = [
            v for v in variants if v.dtype in setting.formats and (not v.dispatch or _leads(setting, v, best, running))
        ]
        why = {BY_FORMAT for v in variants if v.dtype not in setting.formats}
        why |= {BY_DISPATCH for v in variants if v.dtype in setting.formats and v not in kept}
        return kept, why
    if setting is not None:
        if kind in setting.slows:  # its best-known runs in the default worker instead
            return [], set()
        return [v for v in variants if best.get(v.dtype) == v and v.dtype in setting.formats], set()
    covered = {f for s in running if s.formats is not None and kind not in s.slows for f in s.formats}
    plain = out_of_the_box(variants)
    return [v for v in variants if v in plain or (best.get(v.dtype) == v and v.dtype not in covered)], set()


def _leads(setting: Setting, v: Variant, best: dict[str, Variant], running: Sequence[Setting]) -> bool:
    """Whether `best` runs variant `v` under `setting`: `v` is its format's best-known (lowest `rank`), and `setting`
    the first by rank of the `running` settings that act on that format."""
    if best.get(v.dtype) is not v:
        return False
    ranked = [s for s in running if s.formats is not None and v.dtype in s.formats and s.rank is not None]
    return bool(ranked) and min(ranked, key=_rank) is setting


def notes(configs: str, settings: Sequence[Setting], why: set[str]) -> list[str]:
    """What the table's notes say about the selection (`settings`: the framework's, as offered here; `why`: every
    reason a variant was left out)."""
    declared = [s for s in settings if s.formats is not None]
    out = []
    if BY_FORMAT in why:
        out.append(
            "--configs levers: each tuned configuration ran only the variants of the number formats it acts on ("
            + ", ".join(f"+{s.name} {'/'.join(s.formats) or 'none'}" for s in declared)
            + "); --configs all runs every combination"
        )
    if BY_DISPATCH in why:
        out.append(
            "--configs levers: the tuned configurations ran without the several-steps-per-dispatch variants "
            "('+scan', '+spe': declared `dispatch`), each measured out of the box, but for a best-known one under the "
            "setting --configs best gives it; --configs all runs them with each"
        )
    if configs == "best":
        out.append(
            "--configs best: each framework out of the box and its best-known configuration for each workload, "
            "replica count and number format (its implementation's variant of lowest `rank`, with the "
            "process-wide setting of lowest rank for that format where it names one); every parity check still "
            "runs each variant; --configs levers times each tuning on its own, --configs all every combination"
        )
    return out
