"""How many timed calls each row of a round gets: the settling rule (parity.judging.settling) applied to the cases the
schedule is running, their comparisons those the summary will make."""

from __future__ import annotations

from parity.engine.assemble import Case
from parity.engine.config import Config
from parity.judging import settling, summary
from parity.judging.stats import MIN_CALLS
from parity.workloads import RowKind

# An operation's timed calls come two at a time after one untimed call of its own. The untimed call is there so that
# no timed call follows another worker's (on a VM that hands freed memory back to its host, fresh buffers are then
# slow to touch: docs/statistics.md); one serves two timed calls as well as one, so a timed call costs 1.5 calls
# instead of 2. Not more: a turn's calls are alike (no other row's calls between them), and the interval wants
# rounds, not turns. A training row's epochs follow each other anyway (one per turn).
OP_CALLS_PER_TURN = 2


def rule(cfg: Config, kind: RowKind, spec) -> settling.Rule:
    """How many timed calls each row of this kind gets (parity.judging.settling): a training row at least the
    epochs its spec asks for after the first, an operation's at least cfg.reps; more while unsettled, within
    cfg.budget_s and cfg.max_reps. Exactly the minimum in a multi-process run (every process must make the same
    collective calls), and for a training schedule of fewer epochs than an interval takes (--quick's 2: a smoke run
    of the training, not a measurement to settle)."""
    least = spec.epochs - 1 if kind.epochs else cfg.reps
    turn = 1 if kind.epochs else OP_CALLS_PER_TURN
    if cfg.cluster is not None or (kind.epochs and least < MIN_CALLS):
        return settling.Rule(least, 0.0, least, turn)
    return settling.Rule(least, cfg.budget_s, max(least, cfg.max_reps), turn)


def wanting(rule: settling.Rule, todo: list[Case], workers: dict, times: dict, rounds: dict, invalid: set) -> set[str]:
    """The cases that get a call in the next round: the rule's choice among the valid ones, their comparisons the
    summary's (parity.judging.summary.pairs) on the rows as they stand."""
    timed = {c.key: settling.Timed(tuple(times[c.key]), tuple(rounds[c.key])) for c in todo if c.key not in invalid}
    like = [
        {
            "key": c.key,
            "kind": "",
            "replicas": c.replicas,
            "dtype": c.dtype,
            "framework": workers[c.worker].framework,
            "variant": c.shown,
            "tuned": c.tuned,
            "verified": True,
            "median_s": sorted(times[c.key])[len(times[c.key]) // 2],
        }
        for c in todo
        if c.key in timed and times[c.key]
    ]
    pairs = [(num["key"], den["key"]) for *_, num, den, _ in summary.pairs(like)]
    return settling.wanting(rule, timed, pairs)
