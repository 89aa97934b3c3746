"""When a row has been timed enough: the one rule that stops a row's timed calls (parity.engine.schedule asks it
after every round) and that the summary holds the run's figures to.

A row is settled when the 95% interval of its median spans at most WIDTH of the median; a comparison (one row's
median over another's: the summary's ratios) when its interval spans at most WIDTH of the ratio. Round after
round, a call is added to every row that is not settled, or that takes part in a comparison that is not, until the
row has spent its budget: its timed calls add up to `budget_s`, or it has made `max_calls` (a comparison stops
driving calls once one of its rows has spent its budget). Never fewer than `min_calls` (the run's --reps); a row
below MIN_CALLS calls has no interval, so it counts as unsettled. What is still unsettled when the budget is spent
is said in the run's summary (parity.judging.summary.unsettled_note).

Why WIDTH = 0.20 (a median known to +-10%): the calls of a CPU row on these 2-core VMs spread by about 10% (the
rows' IQRs), and the interval of a median narrows only as the square root of the calls: +-10% takes 5-8 such calls,
+-5% four times as many, which the default run's budget cannot pay on the slowest class. +-10% still tells the
differences this tool reports apart: a ratio of 1.25x (the CNN's target) from 1.0, a tuning's 0.8x from none. What
it cannot do is show a 10% change between two runs (compare's default threshold): that needs a longer budget
(--budget) or more calls (--reps), said in docs/statistics.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from parity.judging.stats import MIN_CALLS, median_interval, median_ratio

WIDTH = 0.20  # an interval settles a figure when it spans at most this share of it (the reason: the module's doc)


def width(low: float | None, high: float | None, point: float) -> float | None:
    """An interval's span over its point figure (None where there is no interval)."""
    return None if low is None or high is None or not point else (high - low) / point


@dataclass(frozen=True)
class Rule:
    """How many timed calls a row gets: at least min_calls, then more while it (or one of its comparisons) is not
    settled, until its timed calls add up to budget_s or number max_calls."""

    min_calls: int = MIN_CALLS
    budget_s: float = 8.0  # the default preset's (parity.engine.config.PRESETS)
    max_calls: int = 200
    per_visit: int = 1  # timed calls a row makes back to back each time its turn comes in a round

    def spent(self, times: Sequence[float]) -> bool:
        """The row may have no more calls: its budget is spent (and it has its minimum)."""
        return len(times) >= self.min_calls and (sum(times) >= self.budget_s or len(times) >= self.max_calls)

    def visit(self, made: int) -> int:
        """How many timed calls a row that has made `made` makes at its next turn: per_visit, but only what its
        minimum still needs where that is fewer, and never beyond max_calls (the schedule ends a turn early once
        the row has spent its budget)."""
        left = self.min_calls - made
        n = left if 0 < left < self.per_visit else self.per_visit
        return max(0, min(n, self.max_calls - made))


@dataclass(frozen=True)
class Timed:
    """One row as the rule sees it: its timed calls so far and the round of each."""

    times: tuple[float, ...]
    rounds: tuple[int, ...]


def row_width(t: Timed) -> float | None:
    """The span of the 95% interval of the row's median over the median (None: too few calls)."""
    ci = median_interval(t.times)
    return None if ci is None else width(*ci[1:], ci[0])


def ratio_width(a: Timed, b: Timed) -> float | None:
    """The span of the 95% interval of a's median over b's (paired on their common rounds), over the ratio."""
    if min(len(a.times), len(b.times)) < MIN_CALLS:
        return None
    q = median_ratio(a.times, b.times, a.rounds, b.rounds)
    return width(q.low, q.high, q.ratio)


def unsettled(rows: dict[str, Timed], pairs: Iterable[tuple[str, str]] = (), rule: Rule | None = None) -> set[str]:
    """The rows (keys of `rows`) that are not settled: too few calls for an interval, an interval wider than WIDTH,
    or a part in one of `pairs` (comparisons, each a pair of keys) whose ratio's interval is wider than WIDTH; given
    the `rule`, a comparison one of whose rows has spent its budget no longer counts (the other's calls alone would
    not pair)."""
    out = {k for k, t in rows.items() if (w := row_width(t)) is None or w > WIDTH}
    for a, b in pairs:
        if rule and (rule.spent(rows[a].times) or rule.spent(rows[b].times)):
            continue
        if (w := ratio_width(rows[a], rows[b])) is None or w > WIDTH:
            out |= {a, b}
    return out


def wanting(rule: Rule, rows: dict[str, Timed], pairs: Iterable[tuple[str, str]] = ()) -> set[str]:
    """The rows that get another call in the next round: below their minimum, or unsettled with budget left."""
    low = {k for k, t in rows.items() if len(t.times) < rule.min_calls}
    return low | {k for k in unsettled(rows, pairs, rule) if not rule.spent(rows[k].times)}
