"""certify_judge's and align_judge's statistics against hand-computed values and statsmodels, and the
certificate of known verdicts (no model)."""

from __future__ import annotations

import math

import pytest

from judges.calibration import stats
from judges.calibration.align import ScoreGain, keeps, split
from judges.calibration.align import TestPairs as Pairs
from judges.calibration.certify import certificate, fingerprint, pin
from judges.calibration.core import Judged, JudgeSpec
from judges.calibration.dataset import Item
from judges.errors import InputError

Z = 1.959963984540054


def wilson_by_hand(k: float, n: int) -> tuple[float, float]:
    """The Wilson score interval from its formula: (p + z²/2n ± z·sqrt(p(1−p)/n + z²/4n²)) / (1 + z²/n)."""
    p = k / n
    centre, half = p + Z * Z / (2 * n), Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return (centre - half) / (1 + Z * Z / n), (centre + half) / (1 + Z * Z / n)


def test_wilson_matches_the_formula_and_a_published_value() -> None:
    assert stats.wilson(45, 50) == pytest.approx(wilson_by_hand(45, 50), abs=1e-12)
    assert stats.wilson(20, 20)[0] == pytest.approx(20 / (20 + Z * Z), abs=1e-12)  # type: ignore[index]  # k = n
    assert stats.wilson(0, 0) is None


def test_the_plan_is_the_smallest_total_whose_lower_bound_reaches_the_bar() -> None:
    smallest = next(n for n in range(1, 10_000) if wilson_by_hand(0.9 * n, n)[0] >= 0.8)
    assert smallest == 62  # found by the formula: 0.9 observed needs 62 items for a 0.8 lower bound
    assert stats.needed_for(0.9, 20, 0.8) == smallest - 20
    assert stats.needed_for(0.9, 100, 0.8) == 0
    assert stats.needed_for(0.8, 20, 0.8) is None and stats.needed_for(0.7, 20, 0.8) is None


def test_rogan_gladen_and_its_delta_method_interval_by_hand() -> None:
    # 50 of 100 passed by a judge with TPR 0.9 (on 50 positives) and TNR 0.8 (on 40 negatives).
    value = (0.5 + 0.8 - 1) / (0.9 + 0.8 - 1)
    variance = (0.5 * 0.5 / 100 + value ** 2 * 0.9 * 0.1 / 50 + (1 - value) ** 2 * 0.8 * 0.2 / 40) / 0.7 ** 2
    assert value == pytest.approx(3 / 7)
    assert stats.rogan_gladen(50, 100, 0.9, 0.8, 50, 40) == pytest.approx(
        (value, value - Z * math.sqrt(variance), value + Z * math.sqrt(variance)), abs=1e-12)


def test_rogan_gladen_is_clipped_and_undefined_for_a_judge_no_better_than_chance() -> None:
    assert stats.rogan_gladen(1, 100, 0.9, 0.8, 50, 40)[:2] == (0.0, 0.0)  # type: ignore[index]  # raw below 1 − TNR
    assert stats.rogan_gladen(30, 100, 0.5, 0.5, 50, 40) is None


def test_mcnemar_exact_is_the_two_sided_binomial_tail() -> None:
    assert stats.mcnemar_exact(1, 8) == pytest.approx(2 * (1 + 9) / 2 ** 9)  # 0.0390625
    assert stats.mcnemar_exact(0, 8) == pytest.approx(2 / 2 ** 8)
    assert stats.mcnemar_exact(3, 3) == 1.0


def test_the_split_is_stratified_seeded_and_disjoint() -> None:
    classes = ["pass"] * 20 + ["fail"] * 10
    train, test = split(classes, seed=7, test_fraction=0.3)  # type: ignore[arg-type]
    assert (sorted(train + test), len(test)) == (list(range(30)), 9)
    assert sum(classes[i] == "pass" for i in test) == 6 and sum(classes[i] == "fail" for i in test) == 3
    assert split(classes, seed=7, test_fraction=0.3) == (train, test)  # type: ignore[arg-type]
    assert split(classes, seed=8, test_fraction=0.3) != (train, test)  # type: ignore[arg-type]


def test_copies_of_one_item_fall_on_the_same_side_of_the_split() -> None:
    # Items 0, 7 and 12 are one text judged thrice; without the keys, seed 3 puts them on both sides.
    classes = ["pass"] * 10 + ["fail"] * 10
    apart = split(classes, seed=3, test_fraction=0.3)  # type: ignore[arg-type]
    assert {0, 7, 12} & set(apart[0]) and {0, 7, 12} & set(apart[1])
    same = ["copy" if i in (0, 7, 12) else f"item {i}" for i in range(20)]
    train, test = split(classes, seed=3, test_fraction=0.3, same=same)  # type: ignore[arg-type]
    assert sorted(train + test) == list(range(20))
    assert {0, 7, 12} <= set(train) or {0, 7, 12} <= set(test)
    assert split(classes, seed=3, test_fraction=0.3, same=list(range(20))) == apart  # type: ignore[arg-type]


def pairs(winners: list[tuple[str, str | None]]) -> tuple[list[Item], list[Judged]]:
    items = [Item(id=str(i), inputs={"instruction": "x", "candidates": ["a", "b"]}, winners=[human])
             for i, (human, _) in enumerate(winners)]
    return items, [Judged(value=judge, failure=None if judge else "parse_error") for _, judge in winners]


def test_a_pairwise_certificate_counts_ties_and_failures_apart() -> None:
    spec = JudgeSpec(judge="pairwise_compare")
    rows = [("A", "A")] * 20 + [("B", "B")] * 19 + [("B", "A"), ("Tie", "A"), ("A", "Tie"), ("A", None)]
    items, judged = pairs(rows)
    cert = certificate(spec, "m", items, judged, threshold=0.8, pass_at=None, human_pass_at=None)
    assert (cert.n_positive, cert.n_negative, cert.ties, cert.failed) == (20, 20, 2, 1)
    assert cert.tpr is not None and cert.tpr.value == 1.0 and cert.tpr.low == pytest.approx(20 / (20 + Z * Z))
    assert cert.tnr is not None and cert.tnr.value == 0.95 and cert.tnr.low == pytest.approx(wilson_by_hand(19, 20)[0])
    assert not cert.certified  # 19/20 has a lower bound of 0.764
    assert cert.needed.positives == 0 and cert.needed.negatives == stats.needed_for(0.95, 20, 0.8)


def test_corrected_rates_beside_the_raw_rate_and_the_fingerprint_check() -> None:
    spec = JudgeSpec(judge="pairwise_compare")
    items, judged = pairs([("A", "A")] * 9 + [("A", "B")] + [("B", "B")] * 8 + [("B", "A")] * 2)
    first = certificate(spec, "m", items, judged, threshold=0.8, pass_at=None, human_pass_at=None)
    cert = certificate(spec, "m", items, judged, threshold=0.8, pass_at=None, human_pass_at=None,
                       verdicts=["A"] * 30 + ["B"] * 70 + ["Tie"] * 5, run_fingerprint=first.fingerprint)
    assert cert.corrected is not None and (cert.corrected.n, cert.corrected.ties) == (100, 5)
    assert cert.corrected.raw.value == 0.3 and cert.corrected.corrected is not None
    assert cert.corrected.corrected.value == pytest.approx(stats.rogan_gladen(30, 100, 0.9, 0.8, 10, 10)[0])  # type: ignore[index]
    assert cert.corrected.covered
    other = certificate(spec, "m", items, judged, threshold=0.8, pass_at=None, human_pass_at=None,
                        verdicts=["pass"], run_fingerprint="0" * 64)
    assert other.corrected is not None and not other.corrected.covered


def test_the_fingerprint_changes_with_the_model_the_prompt_settings_and_samples() -> None:
    spec = JudgeSpec(judge="pairwise_compare")
    base = fingerprint(pin(spec, "openai:a", None, None))
    assert fingerprint(pin(spec, "openai:a", None, None)) == base
    assert len({base, fingerprint(pin(spec, "openai:b", None, None)),
                fingerprint(pin(spec.model_copy(update={"samples": 3}), "openai:a", None, None)),
                fingerprint(pin(spec.model_copy(update={"prompt_id": "text/assessment/pairwise@v1"}), "openai:a",
                                None, None)),
                fingerprint(pin(JudgeSpec(judge="score_text"), "openai:a", 50, 0.5)),
                fingerprint(pin(JudgeSpec(judge="score_text"), "openai:a", 60, 0.5))}) == 6


def test_a_verdict_that_is_no_verdict_is_refused_naming_it() -> None:
    spec = JudgeSpec(judge="pairwise_compare")
    items, judged = pairs([("A", "A"), ("B", "B")])
    with pytest.raises(InputError, match=r"verdicts\[1\]: a verdict is pass or fail, true or false, A, B or Tie"):
        certificate(spec, "m", items, judged, threshold=0.8, pass_at=None, human_pass_at=None,
                    verdicts=["A", "maybe"])


def test_a_paired_bootstrap_interval_matches_scipys_on_the_same_pairs_and_seed() -> None:
    import numpy as np
    from scipy.stats import bootstrap

    first, second = [0.9, 0.1, 0.5, 0.7, 0.2, 0.9], [0.1, 0.1, 0.4, 0.1, 0.3, 0.2]
    value, low, high = stats.paired_bootstrap(first, second, seed=7)  # type: ignore[misc]
    diffs = [a - b for a, b in zip(first, second, strict=True)]  # a paired mean difference is the mean of diffs
    ref = bootstrap((diffs,), np.mean, n_resamples=9999, method="percentile", rng=np.random.default_rng(7))
    assert value == pytest.approx(sum(diffs) / 6)
    assert (low, high) == pytest.approx((ref.confidence_interval.low, ref.confidence_interval.high))


def test_a_paired_bootstrap_of_one_pair_is_none() -> None:
    assert stats.paired_bootstrap([0.5], [0.1], seed=0) is None


def test_a_paired_bootstrap_of_five_pairs_all_better_is_none() -> None:
    assert stats.paired_bootstrap([0.5, 0.4, 0.6, 0.5, 0.7], [0.1] * 5, seed=0) is None


def test_a_paired_bootstrap_of_six_equal_differences_is_that_difference_exactly() -> None:
    assert stats.paired_bootstrap([0.3] * 6, [0.1] * 6, seed=0) == pytest.approx((0.2, 0.2, 0.2))


NO_FLIPS = Pairs(both_right=10, only_current=0, only_revised=0, both_wrong=0, left_out=0)
SIX_FLIPS = Pairs(both_right=4, only_current=0, only_revised=6, both_wrong=0, left_out=0)


def test_a_score_revision_is_kept_when_its_bootstrap_interval_is_above_zero_even_with_no_pass_fail_flip() -> None:
    assert keeps("score_text", NO_FLIPS, 1.0, ScoreGain(n=10, value=0.3, low=0.01, high=0.5)) is True


def test_a_score_revision_whose_bootstrap_interval_reaches_zero_is_rejected_even_with_mcnemar_significant() -> None:
    assert keeps("score_text", SIX_FLIPS, 0.03125, ScoreGain(n=10, value=0.2, low=0.0, high=0.4)) is False
    assert keeps("score_text", SIX_FLIPS, 0.03125, None) is False


def test_a_pairwise_revision_is_kept_on_mcnemars_exact_test_alone() -> None:
    assert keeps("pairwise_compare", SIX_FLIPS, 0.03125, None) is True
    assert keeps("pairwise_compare", NO_FLIPS, 1.0, ScoreGain(n=10, value=0.3, low=0.1, high=0.5)) is False
