"""The statistics of a calibration: agreement with the humans, the humans' own agreement, biases.

Correlations come from scipy (imported when first used, never at start-up); Krippendorff's alpha, Cohen's
kappa and the confusion matrix are small and exact here. A statistic that is undefined for its data
(fewer than two pairs, a constant series, no disagreement possible) is None, never a made-up number.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Literal

Level = Literal["nominal", "interval"]


def _pair_sum(counts: Counter[Hashable], level: Level) -> float:
    """The sum of the squared difference (interval) or of inequality (nominal) over every ordered pair of
    positions of a multiset (value: count), in O(distinct values): m² - Σ count² (nominal), 2m·Σ count·(value - mean)² (interval)."""
    m = sum(counts.values())
    if level == "nominal":
        return float(m * m - sum(c * c for c in counts.values()))
    numbers = [(float(v), c) for v, c in counts.items()]  # type: ignore[arg-type]
    mean = math.fsum(x * c for x, c in numbers) / m
    return 2.0 * m * math.fsum(c * (x - mean) ** 2 for x, c in numbers)


def krippendorff_alpha(units: Sequence[Sequence[Hashable | None]], level: Level) -> float | None:
    """Krippendorff's alpha over `units` (one row per item, one value per rater, None when a rater gave
    none), from the coincidence matrix: alpha = 1 - D_o / D_e. Units with fewer than two values are not
    pairable and left out. None when fewer than two pairable values or no expected disagreement."""
    pairable = [[v for v in unit if v is not None] for unit in units]
    pairable = [u for u in pairable if len(u) >= 2]
    n = sum(len(u) for u in pairable)
    if n < 2:
        return None
    totals: Counter[Hashable] = Counter()
    observed = 0.0
    for unit in pairable:  # each sum over ordered pairs in closed form: linear in the raters, not quadratic
        totals.update(unit)
        observed += _pair_sum(Counter(unit), level) / (len(unit) - 1)
    if len(totals) < 2:  # one value throughout: no expected disagreement
        return None
    expected = _pair_sum(totals, level)
    return 1.0 - (n - 1) * observed / expected


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two labellings of the same items: (p_o - p_e) / (1 - p_e); None when p_e is 1."""
    if len(a) != len(b) or not a:
        return None
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[label] * cb[label] for label in ca) / (n * n)
    if p_e == 1:
        return None
    return (p_o - p_e) / (1 - p_e)


def accuracy(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a) if a else None


def confusion(rows: Sequence[Hashable], cols: Sequence[Hashable], labels: Sequence[Hashable]) -> list[list[int]]:
    """matrix[i][j]: how many items have label i in `rows` (the humans) and label j in `cols` (the judge)."""
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for r, c in zip(rows, cols, strict=True):
        matrix[index[r]][index[c]] += 1
    return matrix


def _defined(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _varies(xs: Sequence[float]) -> bool:
    return len(set(xs)) > 1


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    if len(x) < 2 or not (_varies(x) and _varies(y)):
        return None
    from scipy import stats

    return _defined(stats.pearsonr(x, y).statistic)


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    if len(x) < 2 or not (_varies(x) and _varies(y)):
        return None
    from scipy import stats

    return _defined(stats.spearmanr(x, y).statistic)


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b (ties in either series accounted for)."""
    if len(x) < 2 or not (_varies(x) and _varies(y)):
        return None
    from scipy import stats

    return _defined(stats.kendalltau(x, y).statistic)



# Certification (certify_judge, align_judge): statsmodels, imported when first used (never at start-up).
Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval


def wilson(successes: float, n: float) -> tuple[float, float] | None:
    """The 95% Wilson score interval of a proportion (statsmodels' proportion_confint); None when n is 0."""
    if n <= 0:
        return None
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(successes, n, alpha=0.05, method="wilson")
    return float(low), float(high)


def needed_for(rate: float, n: int, threshold: float, cap: int = 1_000_000) -> int | None:
    """How many more labelled items (beyond `n`) the 95% Wilson lower bound of `rate` needs to reach `threshold`,
    if the rate stays as observed: 0 when it already does, None when no number can (rate at or below the
    threshold, or more than `cap` items)."""
    if n > 0 and wilson(rate * n, n)[0] >= threshold:  # type: ignore[index]
        return 0
    if rate <= threshold:
        return None
    low, high = max(n, 1), max(n, 1)
    while wilson(rate * high, high)[0] < threshold:  # type: ignore[index]  # the bound rises with n at a fixed rate
        low, high = high, high * 2
        if high > cap:
            return None
    while low < high:  # the smallest total whose bound reaches the threshold
        mid = (low + high) // 2
        if wilson(rate * mid, mid)[0] >= threshold:  # type: ignore[index]
            high = mid
        else:
            low = mid + 1
    return high - n


def rogan_gladen(positive: int, n: int, tpr: float, tnr: float, n_pos: int, n_neg: int
                 ) -> tuple[float, float, float] | None:
    """The Rogan–Gladen corrected prevalence (p + TNR − 1) / (TPR + TNR − 1) of an observed pass rate p =
    positive / n, with its 95% delta-method interval, which carries the sampling error of p and of the TPR and
    TNR (estimated on n_pos positives and n_neg negatives). Clipped to [0, 1]. None when TPR + TNR <= 1 (the
    judge is no better than chance: nothing can be corrected) or n is 0."""
    youden = tpr + tnr - 1
    if n <= 0 or youden <= 0:
        return None
    p = positive / n
    value = (p + tnr - 1) / youden
    variance = (p * (1 - p) / n
                + (value ** 2 * tpr * (1 - tpr) / n_pos if n_pos else 0.0)
                + ((1 - value) ** 2 * tnr * (1 - tnr) / n_neg if n_neg else 0.0)) / youden ** 2
    half = Z95 * math.sqrt(variance)
    clip = min(1.0, max(0.0, value))
    return clip, max(0.0, value - half), min(1.0, value + half)


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """McNemar's exact (binomial) two-sided p-value of paired right/wrong outcomes: `only_first` items only the
    first judge got right, `only_second` only the second (statsmodels)."""
    from statsmodels.stats.contingency_tables import mcnemar

    return float(mcnemar([[0, only_first], [only_second, 0]], exact=True).pvalue)


# The fewest pairs a paired interval is given for: below 6, even every pair going the same way is not significant
# at 5% (a two-sided sign test of 5 of 5 has p = 0.0625), yet a percentile bootstrap of so few differences lies
# wholly on their side (two pairs both better: an interval above 0). McNemar's exact test needs 6 as well.
MIN_BOOTSTRAP_PAIRS = 6


def paired_bootstrap(first: Sequence[float], second: Sequence[float], seed: int,
                     resamples: int = 9999) -> tuple[float, float, float] | None:
    """mean(first) − mean(second) over paired values, with a 95% percentile interval from scipy's paired
    bootstrap (the same items resampled for both), seeded; None with fewer than MIN_BOOTSTRAP_PAIRS pairs."""
    if len(first) != len(second) or len(first) < MIN_BOOTSTRAP_PAIRS:
        return None
    import numpy as np
    from scipy.stats import bootstrap

    def gain(a: Sequence[float], b: Sequence[float], axis: int = -1) -> float:
        return np.mean(a, axis=axis) - np.mean(b, axis=axis)

    found = bootstrap((list(first), list(second)), gain, paired=True, vectorized=True, n_resamples=resamples,
                      confidence_level=0.95, method="percentile", rng=np.random.default_rng(seed))
    value = float(np.mean(first) - np.mean(second))
    return value, float(found.confidence_interval.low), float(found.confidence_interval.high)
