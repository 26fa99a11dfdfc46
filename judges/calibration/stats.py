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
