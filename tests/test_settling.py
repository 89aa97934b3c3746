"""The settling rule (parity.judging.settling): when a row has been timed enough. Pure: no framework, no clock."""

from __future__ import annotations

import numpy as np
import pytest

from parity.judging import settling
from parity.judging.settling import WIDTH, Rule, Timed, ratio_width, row_width, unsettled, wanting
from parity.judging.stats import MIN_CALLS, median_interval


def _row(times) -> Timed:
    return Timed(tuple(times), tuple(range(len(times))))


def test_no_interval_below_the_minimum_calls_so_such_a_row_is_unsettled():
    assert median_interval([1.0] * (MIN_CALLS - 1)) is None and row_width(_row([1.0] * (MIN_CALLS - 1))) is None
    assert unsettled({"a": _row([1.0] * (MIN_CALLS - 1))}) == {"a"}


def test_a_steady_row_settles_at_the_minimum_and_a_noisy_one_does_not():
    steady = _row([1.00, 1.01, 0.99, 1.02, 1.00])
    noisy = _row([0.7, 1.3, 1.0, 0.6, 1.4])
    assert row_width(steady) <= WIDTH < row_width(noisy)
    assert unsettled({"steady": steady, "noisy": noisy}) == {"noisy"}


def test_a_bimodal_row_is_not_settled_by_its_fast_mode():
    # 0.57 s three times and 1.15-1.32 s twice (a JAX conv row on a Zen 4): the median's interval spans both modes
    assert row_width(_row([0.57, 1.15, 0.57, 1.32, 0.57])) > WIDTH


def test_a_comparison_whose_rows_drift_apart_unsettles_both_rows_however_settled_each_is():
    # each row within +-8%, but one rises as the other falls, round by round: their ratio's interval is wider
    a = _row([0.92, 0.96, 1.00, 1.04, 1.08])
    b = _row([1.08, 1.04, 1.00, 0.96, 0.92])
    assert row_width(a) <= WIDTH and row_width(b) <= WIDTH and ratio_width(a, b) > WIDTH
    assert unsettled({"a": a, "b": b}) == set() and unsettled({"a": a, "b": b}, [("a", "b")]) == {"a", "b"}


def test_rows_that_move_together_settle_their_comparison_by_pairing():
    # both rows slow down alike in the same rounds (the machine's drift): paired by round, the ratio is steady
    drift = [1.0, 1.3, 0.8, 1.2, 0.9, 1.1]
    a, b = _row([2.0 * d for d in drift]), _row([1.0 * d for d in drift])
    assert row_width(a) > WIDTH and ratio_width(a, b) == pytest.approx(0.0)


def test_the_budget_stops_an_unsettled_row_and_the_minimum_comes_first():
    rule = Rule(min_calls=5, budget_s=4.0, max_calls=50)
    noisy = [0.7, 1.3, 1.0, 0.6, 1.4]  # 5.0 s: the budget is spent
    assert rule.spent(noisy) and wanting(rule, {"n": _row(noisy)}) == set()
    assert not rule.spent(noisy[:3]) and wanting(rule, {"n": _row(noisy[:3])}) == {"n"}  # below its minimum
    assert wanting(Rule(5, 100.0, 50), {"n": _row(noisy)}) == {"n"}  # budget left: another call
    assert Rule(5, 100.0, 6).spent([*noisy, 1.0])  # the call cap is a budget too
    assert wanting(Rule(2, 0.0, 50), {"few": _row([0.7, 1.3])}) == set()  # --budget 0: exactly --reps calls


def test_calls_added_by_the_rule_settle_a_noisy_row_within_a_budget():
    # the rule run as the schedule runs it, on 10% lognormal noise: calls are added until the interval is within
    # WIDTH, long before a generous budget, and the result is what was asked: a median known to within WIDTH
    rng = np.random.default_rng(7)
    rule, times = Rule(5, 1e9, 500), []
    while wanting(rule, {"r": _row(times)}):
        times.append(float(np.exp(rng.normal(0.0, 0.25))))
    assert MIN_CALLS < len(times) < 500 and row_width(_row(times)) <= WIDTH


def test_width_is_the_span_over_the_point():
    assert settling.width(0.9, 1.1, 1.0) == pytest.approx(0.2) and settling.width(None, 1.0, 1.0) is None


def test_a_comparison_stops_driving_calls_once_one_of_its_rows_has_spent_its_budget():
    a = _row([0.92, 0.96, 1.00, 1.04, 1.08])
    b = _row([1.08, 1.04, 1.00, 0.96, 0.92])
    assert wanting(Rule(5, 100.0, 50), {"a": a, "b": b}, [("a", "b")]) == {"a", "b"}
    # b has spent its budget: a's calls alone would never pair, so the comparison no longer asks for them
    small = _row([t / 10 for t in a.times])  # 0.5 s of calls: budget left
    assert ratio_width(small, b) > WIDTH and Rule(5, 5.0, 50).spent(b.times)
    assert wanting(Rule(5, 5.0, 50), {"a": small, "b": b}, [("a", "b")]) == set()


def test_a_turn_takes_the_rows_calls_two_at_a_time_but_stops_at_the_minimum_and_the_maximum():
    rule = Rule(min_calls=5, budget_s=1.0, max_calls=8, per_visit=2)
    made, turns = 0, []
    while n := rule.visit(made):
        turns.append(n)
        made += n
    assert turns == [2, 2, 1, 2, 1]  # the minimum exactly, then two a turn, never past max_calls
    assert Rule(min_calls=5, per_visit=1).visit(7) == 1 and Rule(min_calls=2, per_visit=2).visit(0) == 2
