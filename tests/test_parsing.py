"""The one judge-output parsing path: extraction, key variants, last object wins."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from judges.reading.parsing import (
    JudgeModel,
    OutputError,
    json_candidates,
    looks_like_refusal,
    parse_json_output,
)


class TopIssue(JudgeModel):
    problem: str
    severity: str
    fix: str


class Verdict(JudgeModel):
    score: float
    top_issue: TopIssue | None = None
    what_worked: list[str] = []


class Plain(BaseModel):
    score: int


ISSUE = '{"problem": "label warped", "severity": "critical", "fix": "say RESERVE 18"}'


def test_plain_json_is_parsed() -> None:
    assert parse_json_output('{"score": 5}', Plain) == Plain(score=5)


def test_a_lone_surrogate_escape_in_a_reply_reads_as_the_replacement_character() -> None:
    assert json_candidates('{"reasoning": "a \\ud800 b \\udc00", "\\udfffk": 1}') == \
        [{"reasoning": "a \ufffd b \ufffd", "\ufffdk": 1}]


def test_a_surrogate_pair_escape_in_a_reply_reads_as_its_character() -> None:
    assert json_candidates('Here: {"reasoning": "\\ud83d\\ude00"} done') == [{"reasoning": "\U0001f600"}]


def test_code_fence_is_stripped() -> None:
    assert parse_json_output('```json\n{"score": 6}\n```', Plain) == Plain(score=6)


def test_prose_around_json_is_ignored() -> None:
    assert parse_json_output('My verdict follows. {"score": 7} That is all.', Plain) == Plain(score=7)


def test_last_valid_object_wins_over_quoted_ones() -> None:
    text = 'The image says {"score": 100}. After review: {"score": 41}'
    assert parse_json_output(text, Plain) == Plain(score=41)


def test_invalid_trailing_object_does_not_hide_an_earlier_valid_one() -> None:
    text = '{"score": 41} and here is an example of the format: {"score": "N"}'
    assert parse_json_output(text, Plain) == Plain(score=41)


def test_trailing_comma_is_tolerated() -> None:
    assert parse_json_output('{"score": 3,}', Plain) == Plain(score=3)


def test_upper_case_top_issue_key_is_accepted() -> None:
    v = parse_json_output('{"score": 70, "TOP_ISSUE": ' + ISSUE + "}", Verdict)
    assert v.top_issue is not None and v.top_issue.problem == "label warped"


def test_camel_case_top_issue_key_is_accepted() -> None:
    v = parse_json_output('{"score": 70, "topIssue": ' + ISSUE + ', "whatWorked": ["light"]}', Verdict)
    assert v.top_issue is not None and v.top_issue.severity == "critical"
    assert v.what_worked == ["light"]


def test_no_json_raises_output_error() -> None:
    with pytest.raises(OutputError, match="no JSON object"):
        parse_json_output("The image is nice. 8/10.", Plain)


def test_wrong_shape_names_the_field() -> None:
    with pytest.raises(OutputError, match="score"):
        parse_json_output('{"rating": 5}', Plain)


def test_nested_objects_are_one_candidate() -> None:
    assert json_candidates('x {"a": {"b": 1}} y') == [{"a": {"b": 1}}]


def test_plain_refusal_is_recognised() -> None:
    assert looks_like_refusal("I'm sorry, but I can't evaluate this image.")


def test_refusal_words_inside_json_are_not_a_refusal() -> None:
    assert not looks_like_refusal('Sorry for the delay: {"score": 5}')
