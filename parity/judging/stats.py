"""How sure a ratio is: the ratio of two rows' medians with a 95% bootstrap interval, paired by interleaving round
on the rounds both rows ran in, and the rows' modes where a row's times fall into two groups.

Paired: the harness interleaves the timed calls of every case in rounds, so a machine's slow moment falls on every
row of the round; resampling whole rounds keeps that shared part out of the ratio's spread. Two rows calibrated to
different numbers of calls share only their first rounds: those are resampled together, each row's other calls on
their own (a stratified bootstrap). Rows of two files share no round: each row's times are resampled on their own.
The interval is the bootstrap's 2.5th to 97.5th percentile of the resampled ratio of medians (Efron & Tibshirani,
"An Introduction to the Bootstrap", ch. 13). With n calls a row's bootstrap medians take only its n values, so
with few calls the interval is wide: that is what few calls can say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 4000
LEVEL = 0.95
# Fewer calls give no interval: a bootstrap median takes only the sample's values, so with n calls its widest
# interval is the sample's range, which holds the true median with probability 1 - 2 / 2**n: 87.5% at n = 4,
# 93.8% at n = 5 (a ratio of two such medians, paired or not, covers 95% and more at 5: tests/test_stats.py).
MIN_CALLS = 5
# Values drawn at once: the resamples are made in chunks of at most this many drawn times per row, so that memory
# stays near 64 MiB whatever the calls (a chunk of 4000 x n arrays would take 1.9 GB at n = 20,000). A row of up
# to 1,000 calls is drawn in one chunk, as it always was: the same draws, the same interval.
CHUNK_VALUES = 2**22


@dataclass(frozen=True)
class Ratio:
    """num's median over den's, with its 95% interval."""

    ratio: float
    low: float | None  # None: fewer than MIN_CALLS calls on a side
    high: float | None
    paired: int  # rounds both rows ran in, resampled together (0: unpaired)
    calls: tuple[int, int]  # timed calls behind num and den

    @property
    def ci95(self) -> list[float] | None:
        return None if self.low is None else [self.low, self.high]

    def contains_one(self) -> bool:
        return self.low is not None and self.low <= 1 <= self.high

    def text(self, what: str = "") -> str:
        """'JAX/TF 2.21x (95% CI 2.05-2.40)'; an interval containing 1 is said as no measurable difference."""
        head = f"{what} {self.ratio:.2f}x".strip()
        if self.low is None:
            n = min(self.calls)
            return f"{head} ({n} timed call{'s' * (n != 1)}: too few for a 95% interval, {MIN_CALLS} needed)"
        tail = "; no difference measurable here" if self.contains_one() else ""
        return f"{head} (95% CI {self.low:.2f}-{self.high:.2f}{tail})"


def common_rounds(a: Sequence[int] | None, b: Sequence[int] | None) -> list[int]:
    """The rounds two rows both ran a timed call in (each at most once per round), in order; [] without rounds."""
    if not a or not b or len(set(a)) != len(a) or len(set(b)) != len(b):
        return []
    return sorted(set(a) & set(b))


def median_ratio(
    num: Sequence[float],
    den: Sequence[float],
    num_rounds: Sequence[int] | None = None,
    den_rounds: Sequence[int] | None = None,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Ratio:
    """median(num) / median(den) with a 95% percentile-bootstrap interval; the rounds both rows ran in are
    resampled together (pass each row's rounds, one per time), every other call on its own."""
    x, y = np.asarray(num, float), np.asarray(den, float)
    if x.size == 0 or y.size == 0:
        raise ValueError("a ratio needs at least one time on each side")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and x.min() > 0 and y.min() > 0):
        raise ValueError("times must be finite and above zero")
    point = float(np.median(x) / np.median(y))
    both = num_rounds is not None and den_rounds is not None and (len(num_rounds), len(den_rounds)) == (x.size, y.size)
    common = common_rounds(num_rounds, den_rounds) if both else []
    if min(x.size, y.size) < MIN_CALLS:
        return Ratio(point, None, None, len(common), (x.size, y.size))
    rng = np.random.default_rng(seed)
    step = max(1, CHUNK_VALUES // max(x.size, y.size))
    boot = np.empty(resamples)
    for at in range(0, resamples, step):
        m = min(step, resamples - at)
        shared = rng.integers(0, len(common), (m, len(common)))  # rounds drawn once, for both rows
        xs = _resample(rng, x, num_rounds if common else None, common, shared)
        ys = _resample(rng, y, den_rounds if common else None, common, shared)
        boot[at : at + m] = _medians(xs) / _medians(ys)
    tail = 100 * (1 - LEVEL) / 2
    low, high = (float(v) for v in np.percentile(boot, [tail, 100 - tail]))
    return Ratio(point, low, high, len(common), (x.size, y.size))


def median_interval(
    times: Sequence[float], resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float, float] | None:
    """A row's median with the 95% percentile-bootstrap interval of it: (median, low, high); None below MIN_CALLS
    calls (see MIN_CALLS)."""
    t = np.asarray(times, float)
    if t.size < MIN_CALLS:
        return None
    rng = np.random.default_rng(seed)
    step = max(1, CHUNK_VALUES // t.size)
    boot = np.concatenate(
        [_medians(t[rng.integers(0, t.size, (min(step, resamples - at), t.size))]) for at in range(0, resamples, step)]
    )
    tail = 100 * (1 - LEVEL) / 2
    low, high = (float(v) for v in np.percentile(boot, [tail, 100 - tail]))
    return float(np.median(t)), low, high


def _medians(draws: np.ndarray) -> np.ndarray:
    """Each row's median of a (resamples, n) array, as np.median(draws, axis=1) computes it (the middle value, or the
    two middle ones' sum halved) from one sort of each row: several times faster on the few calls a row has."""
    s, n = np.sort(draws, axis=1), draws.shape[1]
    return (s[:, (n - 1) // 2] + s[:, n // 2]) / 2


def _resample(rng, t: np.ndarray, rounds, common: list[int], shared: np.ndarray) -> np.ndarray:
    """(resamples, len(t)) draws of a row's times: its calls in the common rounds by the shared draw of rounds
    (`shared`: indices into `common`), its other calls on their own."""
    at = {k: i for i, k in enumerate(rounds)} if rounds is not None else {}
    parts = [t[[at[k] for k in common]][shared]] if common else []
    paired = set(common)
    own = np.array([i for i in range(t.size) if rounds is None or rounds[i] not in paired], dtype=int)
    if own.size:
        parts.append(t[own][rng.integers(0, own.size, (shared.shape[0], own.size))])
    return np.concatenate(parts, axis=1)


@dataclass(frozen=True)
class Modes:
    """Two groups of a row's times, split at its largest gap: their medians and sizes."""

    low_s: float
    high_s: float
    low_n: int
    high_n: int


BIMODAL_GAP = 0.25  # the gap between the groups, relative to the faster group's median


def modes(times: Sequence[float]) -> Modes | None:
    """The row's two modes when its times split into two groups far apart, else None: split at the largest gap
    between consecutive sorted times; two modes when each group holds at least 2 calls, the gap exceeds
    BIMODAL_GAP of the faster group's median and the faster group's own range (the slower one may spread: slow
    calls are slowed by varied causes). One median between two such groups describes neither."""
    t = np.sort(np.asarray(times, float))
    if t.size < 4:
        return None
    k = int(np.argmax(t[1:] - t[:-1]))
    lo, hi = t[: k + 1], t[k + 1 :]
    if min(lo.size, hi.size) < 2:
        return None
    gap, mlo = float(t[k + 1] - t[k]), float(np.median(lo))
    if gap > BIMODAL_GAP * mlo and gap > lo[-1] - lo[0]:
        return Modes(mlo, float(np.median(hi)), int(lo.size), int(hi.size))
    return None
