"""The bootstrap interval bench.tools.served puts beside each median of served / alone."""
import statistics

import pytest

from bench.tools.interval import median_interval


def test_runs_that_agree_leave_no_room():
    assert median_interval({"a": [0.97, 0.97], "b": [0.97], "c": [0.97, 0.97, 0.97]}) == (0.97, 0.97)


def test_an_interval_holds_the_median_and_widens_with_the_spread():
    quiet = {label: [0.93 + 0.002 * i, 0.93 - 0.002 * i] for i, label in enumerate("abcdef")}
    noisy = {label: [0.93 + 0.04 * i, 0.93 - 0.04 * i] for i, label in enumerate("abcdef")}
    median = statistics.median(statistics.median(v) for v in noisy.values())
    low, high = median_interval(noisy)
    assert low <= median <= high and low < 0.9 < 0.96 < high  # a 0.95 target is not settled by these runs
    q_low, q_high = median_interval(quiet)
    assert high - low > 5 * (q_high - q_low) and q_low <= 0.93 <= q_high


def test_one_seed_one_interval():
    runs = {"a": [0.8, 1.1], "b": [0.9, 1.0], "c": [0.95, 0.85]}
    assert median_interval(runs, seed=3) == median_interval(runs, seed=3)


def test_bad_input_says_what_was_given():
    with pytest.raises(ValueError, match="at least one example"):
        median_interval({"a": []})
    with pytest.raises(ValueError, match="1.5"):
        median_interval({"a": [1.0]}, confidence=1.5)
