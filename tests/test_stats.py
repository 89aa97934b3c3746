"""The intervals on synthetic timings with known answers (no framework, no timing of this machine)."""

import numpy as np
import pytest

from parity.judging import stats
from parity.judging.stats import common_rounds, median_ratio, modes


def _pair(rng, n: int, ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """Two rows' times over n interleaved rounds, the second `ratio` times the first: each round's shared drift
    (lognormal, 5%), each call's own noise (lognormal, 8%), and one call in ten slowed by half (a neighbour's
    burst). The same noise law on both sides, so the ratio of their population medians is exactly `ratio`."""
    drift = np.exp(rng.normal(0, 0.05, n))

    def row(base):
        return base * drift * np.exp(rng.normal(0, 0.08, n)) * np.where(rng.random(n) < 0.1, 1.5, 1.0)

    return row(1.0), row(ratio)


@pytest.mark.parametrize("paired", [True, False])
@pytest.mark.parametrize("calls", [5, 12])
def test_the_interval_covers_the_true_ratio(paired, calls):
    rng = np.random.default_rng(7)
    rounds = list(range(calls)) if paired else None
    hits = 0
    for k in range(200):
        a, b = _pair(rng, calls, 2.21)
        r = median_ratio(b, a, rounds, rounds, seed=k)
        assert r.paired == (calls if paired else 0)
        hits += r.low <= 2.21 <= r.high
    assert hits >= 180, f"{hits} of 200 intervals hold the true ratio"


def test_pairing_by_round_narrows_an_interval_that_shared_drift_widens():
    rng = np.random.default_rng(3)
    drift = np.exp(rng.normal(0, 0.3, 20))  # a machine whose speed moves a lot from round to round
    a = drift * np.exp(rng.normal(0, 0.01, 20))
    b = 1.5 * drift * np.exp(rng.normal(0, 0.01, 20))
    rounds = list(range(20))
    paired, unpaired = median_ratio(b, a, rounds, rounds), median_ratio(b, a)
    assert paired.low <= 1.5 <= paired.high
    assert paired.high - paired.low < (unpaired.high - unpaired.low) / 3


def test_a_row_against_itself_shows_no_difference():
    t = [1.02, 0.97, 1.10, 1.01, 0.99, 1.30]
    r = median_ratio(t, t, range(6), range(6))
    assert r.ratio == 1 and r.low == 1 and r.high == 1 and r.contains_one()
    assert "no difference measurable here" in r.text("JAX/TF")


def test_a_clear_difference_is_said_with_its_interval():
    r = median_ratio([2.0, 2.1, 2.05, 1.98, 2.2], [1.0, 1.02, 0.99, 1.01, 1.03], range(5), range(5))
    assert 1.9 < r.low <= r.ratio <= r.high < 2.3
    assert r.text("JAX/TF").startswith("JAX/TF 2.03x (95% CI ") and "no difference" not in r.text()


@pytest.mark.parametrize("calls", [1, 4])
def test_too_few_calls_give_a_ratio_and_no_interval(calls):
    r = median_ratio([2.0] * calls, [1.0, 1.1] * 3)
    assert r.ratio == pytest.approx(2 / 1.05) and r.ci95 is None and not r.contains_one()
    assert "too few for a 95% interval" in r.text()


@pytest.mark.parametrize("bad", [[], [0.0, 1.0], [float("nan"), 1.0], [float("inf"), 1.0], [-1.0, 1.0]])
def test_times_that_are_no_times_are_refused(bad):
    with pytest.raises(ValueError):
        median_ratio(bad, [1.0, 1.0])


def test_rows_pair_on_the_rounds_both_ran():
    assert common_rounds([0, 1, 2], [0, 1, 2]) == [0, 1, 2]
    assert common_rounds([0, 1, 2], [0, 1, 2, 3, 4]) == [0, 1, 2]  # calibrated to more calls: the rest apart
    assert common_rounds(None, [0, 1]) == [] and common_rounds([], []) == []
    assert common_rounds([0, 0], [0, 0]) == []


def test_rows_of_different_lengths_are_paired_on_their_common_rounds_and_still_cover():
    rng = np.random.default_rng(11)
    hits = 0
    for k in range(200):
        a, b = _pair(rng, 20, 0.6)  # one row calibrated to 20 calls, the other (slower) to its first 6 rounds
        r = median_ratio(b[:6], a, range(6), range(20), seed=k)
        assert r.paired == 6 and r.calls == (6, 20)
        hits += r.low <= 0.6 <= r.high
    assert hits >= 180, f"{hits} of 200 intervals hold the true ratio"


def test_two_groups_of_times_are_two_modes():
    m = modes([2.22, 0.93, 1.57, 0.91, 1.71])  # the default run's JAX conv row (issue 28)
    assert (m.low_s, m.low_n, m.high_s, m.high_n) == (pytest.approx(0.92), 2, 1.71, 3)


@pytest.mark.parametrize("times", [[1.0, 1.05, 0.98, 1.02, 1.1], [1.0, 1.0, 1.0, 5.0], [1.0, 2.0, 3.0, 4.0, 5.0]])
def test_one_spread_group_or_a_lone_outlier_is_not_two_modes(times):
    assert modes(times) is None


@pytest.mark.parametrize("n", [5, 6, 7, 20, 31])
def test_the_bootstraps_medians_are_numpys_to_the_bit(n):
    """stats._medians, each resample's median from one sort, is np.median(axis=1) exactly: odd and even counts, ties,
    times that differ in their last bits."""
    rng = np.random.default_rng(n)
    draws = np.concatenate([rng.random((300, n)), rng.integers(0, 3, (300, n)) * 0.1 + 1])
    draws[:, 0] = np.nextafter(draws[:, 1], 2)  # neighbours a bit apart
    assert np.array_equal(stats._medians(draws), np.median(draws, axis=1))
