"""calibrate_judge: each statistic against a hand-computed value, the VIEScore raters' own agreement from the
corpus files, and the tool through a real server with scripted judges whose agreement is known."""

from __future__ import annotations

import json
import math

import pytest

from judges.calibration import stats
from judges.calibration.core import Judged, JudgeSpec, human_agreement, report
from judges.calibration.dataset import Item, parse_dataset
from judges.errors import InputError

# --- (a) each statistic against a hand-computed value ----------------------------------------

def test_krippendorff_alpha_nominal_matches_the_hand_computed_value() -> None:
    # n=6 values, A:3 B:3; observed 2 (the split unit), expected 3·3·2 = 18; alpha = 1 − 5·2/18 = 4/9
    assert stats.krippendorff_alpha([["A", "A"], ["A", "B"], ["B", "B"]], "nominal") == pytest.approx(4 / 9, abs=1e-12)


def test_krippendorff_alpha_interval_leaves_out_unpairable_units() -> None:
    # values 1,2,3,3,1,3 (n=6); observed 2·1 + 0 + 2·4 = 10; expected 2·(2·1·1 + 2·3·4 + 1·3·1) = 58
    units = [[1, 2], [3, 3], [2, None], [1, 3]]
    assert stats.krippendorff_alpha(units, "interval") == pytest.approx(1 - 5 * 10 / 58, abs=1e-12)


def test_krippendorff_alpha_is_none_without_expected_disagreement() -> None:
    assert stats.krippendorff_alpha([[1, 1], [1, 1]], "interval") is None


@pytest.mark.parametrize("level", ["nominal", "interval"])
def test_krippendorff_alpha_is_linear_in_the_raters_and_equals_the_pairwise_sum(level: str) -> None:
    import time

    small = [[1, 2, 2, 5], [3, 3, None, 4], [1, 1, 2]]
    pairwise = _alpha_by_pairs(small, level)
    assert stats.krippendorff_alpha(small, level) == pytest.approx(pairwise, abs=1e-12)  # type: ignore[arg-type]
    start = time.perf_counter()
    stats.krippendorff_alpha([[j % 7 for j in range(200_000)], [j % 5 for j in range(200_000)]], level)  # type: ignore[arg-type]
    assert time.perf_counter() - start < 20.0  # pairs over 200,000 raters would be 4e10 steps (hours)


def _alpha_by_pairs(units: list[list[int | None]], level: str) -> float:
    """The textbook definition, every ordered pair summed: the reference the closed form must match."""
    def d(a: float, b: float) -> float:
        return float(a != b) if level == "nominal" else (a - b) ** 2
    rows = [[v for v in u if v is not None] for u in units]
    rows = [r for r in rows if len(r) >= 2]
    values = [v for r in rows for v in r]
    observed = sum(sum(d(r[i], r[j]) for i in range(len(r)) for j in range(len(r)) if i != j) / (len(r) - 1)
                   for r in rows)
    expected = sum(d(a, b) for i, a in enumerate(values) for j, b in enumerate(values) if i != j)
    return 1.0 - (len(values) - 1) * observed / expected


def test_cohen_kappa_matches_the_hand_computed_value() -> None:
    # p_o = 4/5, p_e = (3·2 + 2·3)/25 = 12/25; kappa = (0.8 − 0.48)/0.52 = 8/13
    assert stats.cohen_kappa(list("AABBA"), list("ABBBA")) == pytest.approx(8 / 13, abs=1e-12)


def test_correlations_match_the_hand_computed_values() -> None:
    x, y = [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0]
    # Spearman 1 − 6·2/(4·15) = 0.8; Kendall (5 − 1)/6; Pearson 4/√(5·5) = 0.8
    assert (stats.spearman(x, y), stats.kendall_tau(x, y), stats.pearson(x, y)) == pytest.approx(
        (0.8, 2 / 3, 0.8), abs=1e-12)


def test_a_constant_series_has_no_correlation() -> None:
    assert (stats.spearman([1, 2, 3], [2, 2, 2]), stats.pearson([1], [1])) == (None, None)


def test_confusion_counts_human_rows_against_judge_columns() -> None:
    assert stats.confusion(list("AABT"), list("ABBA"), ["A", "B", "T"]) == [[1, 1, 0], [0, 1, 0], [1, 0, 0]]


def test_the_human_winner_of_a_split_vote_is_tie() -> None:
    split, decided = (Item(id=i, inputs={}, winners=w) for i, w in (("1", ["A", "B"]), ("2", ["A", "B", "A"])))
    assert (split.human_winner(), decided.human_winner()) == ("Tie", "A")


def _pair(item_id: str, human: list[str], a: str, b: str) -> Item:
    return Item(id=item_id, inputs={"instruction": "x", "candidates": [a, b]}, winners=human)


def test_pairwise_report_counts_flips_accuracy_kappa_and_length_bias() -> None:
    items = [_pair("1", ["A", "A"], "long answer", "short"), _pair("2", ["B", "B"], "s", "longer one"),
             _pair("3", ["A", "B"], "mid", "mid"), _pair("4", ["B", "B"], "abcd", "ab")]
    judged = [Judged(value="A", orders=["A", "A"], first_named=[True, False]),
              Judged(value="B", orders=["B", "B"], first_named=[False, True]),
              Judged(value="Tie", orders=["A", "B"], first_named=[True, True]),
              Judged(value="A", orders=["A", "A"], first_named=[True, False])]
    r = report(JudgeSpec(judge="pairwise_compare"), "m", items, judged)
    assert r.pairwise is not None and r.position_bias is not None and r.length_bias is not None
    # humans A, B, Tie, B against judge A, B, Tie, A: 3 of 4; p_e = (1·2 + 2·1 + 1·1)/16 = 5/16
    assert (r.pairwise.accuracy, r.pairwise.cohen_kappa) == pytest.approx((0.75, (0.75 - 5 / 16) / (1 - 5 / 16)))
    assert (r.position_bias.both_orders, r.position_bias.flipped, r.position_bias.flip_rate) == (4, 1, 0.25)
    assert r.position_bias.first_position_rate == 5 / 8
    # verdict signs 1, −1, 0, 1 against length differences 6, −9, 0, 2
    assert r.length_bias.correlation == pytest.approx(stats.pearson([1, -1, 0, 1], [6, -9, 0, 2]))
    assert r.confusion.matrix == [[1, 0, 0], [1, 1, 0], [0, 0, 1]]
    assert [d.id for d in r.largest_disagreements[:1]] == ["4"]


def test_score_report_puts_both_sides_on_their_scales() -> None:
    items = [Item(id=str(i), inputs={"text": "t" * (i + 1)}, scores=[h, h]) for i, h in enumerate([0.0, 0.5, 1.0])]
    judged = [Judged(value=v) for v in (10.0, 40.0, 100.0)]
    r = report(JudgeSpec(judge="score_text"), "m", items, judged, human_scale=(0, 1))
    assert r.scores is not None
    assert r.scores.mean_absolute_error == pytest.approx((0.1 + 0.1 + 0.0) / 3)
    assert (r.scores.spearman, r.humans.krippendorff_alpha) == (pytest.approx(1.0), pytest.approx(1.0))
    assert [d.id for d in r.largest_disagreements] == ["0", "1"]  # item 2 agrees exactly


def test_a_failed_item_is_counted_and_left_out_of_the_statistics() -> None:
    items = [Item(id=str(i), inputs={"text": "t"}, scores=[float(i)]) for i in range(3)]
    judged = [Judged(value=0.0), Judged(value=None, failure="parse_error"), Judged(value=100.0)]
    r = report(JudgeSpec(judge="score_text"), "m", items, judged)
    assert (r.judged, r.failed, r.scores and r.scores.n) == (2, 1, 2)


def test_dataset_reads_raters_and_names_the_line_of_a_bad_label() -> None:
    items = parse_dataset('{"text": "a", "human_scores": [1, null, 3]}\n\n{"id": "x", "text": "b", "human_score": 2}',
                          "score_text")
    assert [(i.id, i.scores, i.inputs) for i in items] == [("1", [1.0, None, 3.0], {"text": "a"}),
                                                           ("x", [2.0], {"text": "b"})]
    with pytest.raises(InputError, match=r"dataset line 2: a human winner is A, B or Tie \(got 'C'\)"):
        parse_dataset('{"instruction": "i", "candidates": ["a", "b"], "human_winner": "A"}\n'
                      '{"instruction": "i", "candidates": ["a", "b"], "human_winner": "C"}', "pairwise_compare")


# --- (b) the raters' own agreement (on the VIEScore raters' files: tests_corpora/test_calibration.py) ----

def overall(sc: float, pq: float) -> float:
    """VIEScore's overall score: the geometric mean of semantic consistency and perceptual quality."""
    return math.sqrt(sc * pq)


def alpha_by_pairs(units: list[list[float]]) -> float:
    """An independent interval alpha for complete units (numpy): 1 − mean within-unit squared difference /
    mean squared difference over all pairs of values."""
    import numpy as np

    v = np.array(units, dtype=float)
    m = v.shape[1]
    within = ((v[:, :, None] - v[:, None, :]) ** 2).sum() / (v.shape[0] * m * (m - 1))
    flat = v.ravel()
    n = flat.size
    overall_d = ((flat[:, None] - flat[None, :]) ** 2).sum() / (n * (n - 1))
    return float(1 - within / overall_d)


def test_human_agreement_of_a_dataset_is_the_interval_alpha_of_its_raters() -> None:
    # three raters' overall scores of five items, every unit complete
    units = [[4.0, 5.0, 4.0], [2.0, 2.0, 3.0], [7.0, 6.0, 7.0], [1.0, 2.0, 1.0], [5.0, 5.0, 6.0]]
    items = [Item(id=str(i), inputs={"text": "t"}, scores=u) for i, u in enumerate(units)]
    found = human_agreement(items, pairwise=False)
    assert (found.raters, found.units, found.level) == (3, 5, "interval")
    assert found.krippendorff_alpha == pytest.approx(alpha_by_pairs(units), abs=1e-12)


def test_rater_vs_rest_averages_each_raters_spearman_against_the_others_mean() -> None:
    from judges.calibration.core import rater_vs_rest

    units = [[1.0, 1.0, 2.0], [2.0, 3.0, 1.0], [3.0, 2.0, 3.0]]
    # rater 0 vs the mean of the others (1.5, 2, 2.5) → 1; rater 1: ranks (1, 3, 2) vs (1.5, 1.5, 3), rank
    # deviations (−1, 1, 0)·(−.5, −.5, 1) = 0 → 0; rater 2: (0, −1, 1)·(−1, .5, .5) = 0 → 0
    assert rater_vs_rest(units) == pytest.approx(1 / 3, abs=1e-12)


@pytest.mark.anyio
async def test_viescore_calibration_reads_each_image_score_on_its_scale() -> None:
    import base64
    import io
    import re

    from PIL import Image

    from judges.calibration.core import calibrate
    from judges.inputs.images import ImagePolicy
    from tests.scripted_model import ScriptedModel, call_of

    out = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(out, "PNG")
    red = base64.b64encode(out.getvalue()).decode()
    model = ScriptedModel(lambda r: json.dumps({"score": int(re.findall(r"ITEM (\d)", str(r.messages))[0])}))
    items = parse_dataset("\n".join(json.dumps({"instruction": f"ITEM {n}", "candidates": [red],
                                                 "human_scores": [h, h]}) for n, h in ((2, 0.2), (5, 0.3), (9, 1.0))),
                          "viescore")
    r = await calibrate(call_of(model), JudgeSpec(judge="viescore"), items, policy=ImagePolicy(allowed_roots=[]), retries=0,
                        human_scale=(0, 1))
    assert [x.judge for x in r.results] == [2.0, 5.0, 9.0] and r.judge_scale == (0.0, 10.0)
    assert r.length_bias is None and r.scores is not None and r.scores.spearman == pytest.approx(1.0)
    assert [(d.id, round(d.disagreement or 0, 6)) for d in r.largest_disagreements] == [("2", 0.2), ("3", 0.1)]
