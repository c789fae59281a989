"""The leaderboard's accuracy cells: mean ± std, 95% Student-t intervals, ties with the best, flags."""

import math
import random

import numpy as np
import pytest

from lra.leaderboard import cells as leaderboard


def student_t_cdf(t: float, df: int) -> float:
    """P(T <= t) for t >= 0 by Simpson's rule on the density (no scipy here)."""
    x = np.linspace(0.0, t, 200_001)
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    pdf = np.exp(log_c - (df + 1) / 2 * np.log1p(x**2 / df))
    h = x[1] - x[0]
    integral = h / 3 * (pdf[0] + pdf[-1] + 4 * pdf[1:-1:2].sum() + 2 * pdf[2:-1:2].sum())
    return 0.5 + float(integral)


@pytest.mark.parametrize("df", range(1, 31))
def test_t_table_is_the_975_quantile(df):
    # 3 printed decimals move the CDF by at most 0.0005 * density <= 2e-5
    assert student_t_cdf(leaderboard.t975(df), df) == pytest.approx(0.975, abs=5e-5)


def test_beyond_30_degrees_of_freedom_the_normal_quantile():
    assert leaderboard.t975(31) == 1.96 and leaderboard.t975(1000) == 1.96


def test_cell_stats_mean_std_interval():
    one = leaderboard.cell_stats([0.5])
    assert (one.n, one.mean, one.std, one.low) == (1, 50.0, None, None)
    s = leaderboard.cell_stats([0.34, 0.30, 0.32])  # mean 32, std 2, half-width 4.303 * 2 / sqrt(3)
    assert s.n == 3 and s.mean == pytest.approx(32.0) and s.std == pytest.approx(2.0)
    assert (s.low, s.high) == pytest.approx((32 - 4.303 * 2 / math.sqrt(3), 32 + 4.303 * 2 / math.sqrt(3)))
    assert leaderboard.cell_stats([]) is None


def cells():
    """listops: a is best; b's interval overlaps a's (tied); c's does not; d has one seed.
    text: only d and e, one seed each (no intervals: nothing is tied)."""
    return {("a", "listops"): [0.50, 0.52, 0.54], ("b", "listops"): [0.48, 0.50, 0.52],
            ("c", "listops"): [0.30, 0.32, 0.34], ("d", "listops"): [0.51],
            ("d", "text"): [0.60], ("e", "text"): [0.62]}


def test_best_tied_and_flagged_cells():
    out = leaderboard.marked_cells(cells(), ["a", "b", "c", "d", "e"], ["listops", "text"])
    assert out[("a", "listops")] == "**52.00 ± 2.00 [47.03, 56.97] (3)**"
    assert out[("b", "listops")] == "50.00 ± 2.00 [45.03, 54.97] (3) ≈"
    assert out[("c", "listops")] == "32.00 ± 2.00 [27.03, 36.97] (3)"
    assert out[("d", "listops")] == "51.00 (1) †"  # n=1 < the usual 3; no interval, so not tied
    assert out[("e", "listops")] == "—"
    assert out[("e", "text")] == "**62.00 (1)** †" and out[("d", "text")] == "60.00 (1) †"


def test_the_usual_n_is_the_most_common_one():
    c = {("a", "listops"): [0.5, 0.6], ("b", "listops"): [0.5, 0.6], ("c", "listops"): [0.5, 0.6, 0.7]}
    out = leaderboard.marked_cells(c, ["a", "b", "c"], ["listops"])
    assert out[("a", "listops")].endswith("(2) ≈") and out[("c", "listops")].endswith("(3)**")
    assert not any(v.endswith("†") for v in out.values())  # none has fewer than the usual 2


def test_cells_do_not_depend_on_the_order_of_the_seeds():
    first = leaderboard.marked_cells(cells(), ["a", "b", "c", "d", "e"], ["listops", "text"])
    for seed in range(5):
        shuffled = {k: random.Random(seed).sample(v, len(v)) for k, v in cells().items()}
        assert leaderboard.marked_cells(shuffled, ["a", "b", "c", "d", "e"], ["listops", "text"]) == first
