"""The public fit's bands by situation (app/predict/public/bands.py, issue #41 item 6): conformal intervals of
cross-validated errors, wider where a situation has fewer errors, pooled where it has too few, each holding its
share of new errors of its own situation, and failing where another situation's noise is asked of it."""

from __future__ import annotations

import math
import random
import statistics

from app.predict.public.bands import (
    BAND_FLOOR,
    COVERAGE,
    Basis,
    Residual,
    Situation,
    SituationBand,
    band_for,
    conformal_interval,
    min_residuals,
)

GPU_AS_ASKED = Situation(Basis.GPU, False)
GPU_SUBSTITUTED = Situation(Basis.GPU, True)
BORROWED = Situation(Basis.BORROWED, True)


def residuals(log_errors: list[float], situation: Situation = GPU_AS_ASKED, phase: str = "decode") -> list[Residual]:
    return [Residual(situation, phase, f"publication {i}", e) for i, e in enumerate(log_errors)]


def normal_errors(n: int, sigma: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(0.0, sigma) for _ in range(n)]


def share_inside(band: SituationBand, log_errors: list[float]) -> float:
    return sum(band.low_error <= math.expm1(e) <= band.high_error for e in log_errors) / len(log_errors)


def test_the_interval_needs_enough_errors_and_at_the_minimum_spans_their_extremes() -> None:
    n = min_residuals(COVERAGE)
    assert conformal_interval([0.0] * (n - 1)) is None
    errs = [0.1 * i for i in range(n)]
    assert conformal_interval(errs) == (min(errs), max(errs))
    assert min_residuals(0.5) < n < min_residuals(0.95)  # the higher the coverage, the more errors it takes


def test_the_ranks_are_the_exact_quantiles_where_they_fall_on_a_whole_number() -> None:
    # (n+1)·α/2 is a whole number at n = 9, 19, 29 for 80 %: the k-th smallest, not the (k-1)-th that 1 - 0.8 in
    # binary floating point (0.19999…) would give, which made 10 errors the minimum and bands a rank too wide.
    assert min_residuals(0.80) == 9
    assert conformal_interval([float(i) for i in range(1, 20)]) == (2.0, 18.0)
    assert conformal_interval([float(i) for i in range(1, 30)]) == (3.0, 27.0)


def test_a_situation_with_few_errors_gets_a_wider_band_than_one_with_many() -> None:
    spread = statistics.NormalDist(0.0, 0.2)

    def evenly(n: int) -> list[float]:  # the same spread, as evenly spaced quantiles
        return [spread.inv_cdf((i + 0.5) / n) for i in range(n)]

    few = band_for(residuals(evenly(min_residuals())), GPU_AS_ASKED, "decode")
    many = band_for(residuals(evenly(400)), GPU_AS_ASKED, "decode")
    assert few.width > many.width and (few.n_residuals, many.n_residuals) == (min_residuals(), 400)


def test_a_band_holds_its_share_of_new_errors_of_known_noise() -> None:
    band = band_for(residuals(normal_errors(1000, 0.25, seed=1)), GPU_AS_ASKED, "decode")
    assert abs(share_inside(band, normal_errors(4000, 0.25, seed=2)) - COVERAGE) < 0.05


def test_each_situation_takes_its_own_errors_and_one_band_for_all_fails_the_noisy_one() -> None:
    mixed = [*residuals(normal_errors(1000, 0.1, seed=1), GPU_AS_ASKED),
             *residuals(normal_errors(1000, 0.4, seed=2), BORROWED)]
    calm, wild = band_for(mixed, GPU_AS_ASKED, "decode"), band_for(mixed, BORROWED, "decode")
    pooled = band_for(mixed, Situation(None, None), "decode")
    assert calm.width < pooled.width < wild.width
    for band, sigma, seed in ((calm, 0.1, 3), (wild, 0.4, 4)):
        assert abs(share_inside(band, normal_errors(4000, sigma, seed)) - COVERAGE) < 0.05, band
    assert share_inside(pooled, normal_errors(4000, 0.4, seed=5)) < COVERAGE - 0.1  # the rule can fail
    assert share_inside(calm, normal_errors(4000, 0.4, seed=6)) < COVERAGE - 0.3


def test_a_situation_with_too_few_errors_pools_the_coarser_one_and_says_so() -> None:
    few = residuals(normal_errors(min_residuals() - 1, 0.1, seed=1), GPU_SUBSTITUTED)
    rest = residuals(normal_errors(100, 0.3, seed=2), GPU_AS_ASKED)
    band = band_for([*few, *rest], GPU_SUBSTITUTED, "decode")
    assert band.asked == GPU_SUBSTITUTED and band.used == Situation(Basis.GPU, None)
    assert band.n_residuals == len(few) + len(rest) and "too few of GPU with training rows, with a substitution" \
        in band.text()
    other_phase = residuals(normal_errors(100, 0.3, seed=3), GPU_SUBSTITUTED, phase="prefill")
    assert band_for([*few, *rest, *other_phase], GPU_SUBSTITUTED, "decode") == band  # the other phase's never count


def test_coarser_situations_pool_the_finer_ones() -> None:
    exact = Situation(Basis.ARCHITECTURE, True)
    assert exact.coarser() == Situation(Basis.ARCHITECTURE, None)
    assert Situation(Basis.ARCHITECTURE, None).coarser() == Situation(None, None)
    assert Situation(None, None).coarser() is None
    assert Situation(Basis.ARCHITECTURE, None).holds(exact) and Situation(None, None).holds(exact)
    assert not Situation(Basis.GPU, None).holds(exact) and not Situation(Basis.ARCHITECTURE, False).holds(exact)


def test_a_band_always_holds_its_figure_and_says_where_its_errors_come_from() -> None:
    band = band_for(residuals([0.2 + 0.01 * i for i in range(50)]), GPU_AS_ASKED, "decode")  # all too high
    low, high = band.edges(100.0)
    assert low < 100.0 < high and band.low_error == -BAND_FLOOR
    assert "50 cross-validated errors of figures made the same way, GPU with training rows, as asked" in band.text()
    assert "from 50 publications, each left out in turn" in band.text()


def test_without_errors_the_band_says_it_is_no_measured_spread() -> None:
    band = band_for([], GPU_AS_ASKED, "decode")
    assert band.n_residuals == 0 and (band.low_error, band.high_error) == (-BAND_FLOOR, BAND_FLOOR)
    assert "not a measured spread" in band.text()
