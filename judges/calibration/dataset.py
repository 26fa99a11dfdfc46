"""The calibration dataset: JSONL items with the judged tool's inputs and the humans' labels."""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from pydantic import BaseModel

from judges.errors import InputError
from judges.inputs import caller_values

JudgeName = Literal["pairwise_compare", "score_text", "viescore", "judge_code", "evaluate_analysis"]
BINARY = ("judge_code", "evaluate_analysis")  # a human label pass/fail: human_verdict(s)
MAX_ITEMS = 2000
MAX_RATERS = 100  # human labels of one item
EXAMPLES: dict[str, str] = {
    "pairwise_compare": '{"instruction": "Summarise the text.", "candidates": ["short", "longer summary"], '
                        '"human_winners": ["B", "B", "A"]}',
    "score_text": '{"text": "Paris is the capital.", "instruction": "Capital of France?", "human_scores": [5, 4]}',
    "viescore": '{"instruction": "a red bicycle", "candidates": ["images/0.png"], "human_score": 7}',
    "judge_code": '{"spec": "add(a, b) returns a + b", "files": [{"path": "m.py", "content": "def add(a, b): '
                  'return a + b"}], "human_verdict": "accept"}',
    "evaluate_analysis": '{"analysis": {"product_overview": "…"}, "human_verdict": "fail"}',
}
_VERDICTS = {"accept": "pass", "reject": "fail", "pass": "pass", "fail": "fail", "true": "pass", "false": "fail"}
_WINNERS = {"a": "A", "b": "B", "tie": "Tie", "image a": "A", "image b": "B", "response a": "A",
            "response b": "B", "text a": "A", "text b": "B"}


class Item(BaseModel):
    """One dataset line: its id (given, or the line number), the judge's inputs and the raters' labels
    (one per rater; None where a rater gave none)."""

    id: str
    inputs: dict[str, Any]
    scores: list[float | None] = []
    winners: list[str | None] = []
    verdicts: list[str | None] = []  # judge_code / evaluate_analysis: "pass" (accept) or "fail" (reject)

    def human_score(self) -> float | None:
        given = [s for s in self.scores if s is not None]
        return sum(given) / len(given) if given else None

    def human_winner(self) -> str | None:
        from judges.reading.samples import vote

        given = [w for w in self.winners if w is not None]
        return vote(given).majority if given else None

    def human_verdict(self) -> str | None:
        """The raters' majority pass or fail; Tie when they split evenly."""
        from judges.reading.samples import vote

        given = [v for v in self.verdicts if v is not None]
        return vote(given).majority if given else None


# The largest human score, either sign: a rating scale of any size a person rates on, far inside a float's range,
# so the scale's width, means and errors stay finite (scores of ±1e308 made the width inf: NaN errors, an
# unreadable align_judge result, a division by zero in calibrate_judge).
MAX_HUMAN_SCORE = 1e12


def _bad(line: int, what: str, judge: str) -> InputError:
    return InputError(f"dataset line {line}: {what}; e.g. {EXAMPLES[judge]}")


def _score(value: Any, line: int, judge: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(line, f"a human score must be a number or null (got {value!r})", judge)
    if abs(value) > MAX_HUMAN_SCORE:
        raise _bad(line, f"a human score must lie within ±{MAX_HUMAN_SCORE:g} (got {value:g})", judge)
    return float(value)


def _winner(value: Any, line: int, judge: str) -> str | None:
    if value is None:
        return None
    label = _WINNERS.get(str(value).strip().lower()) if isinstance(value, str) else None
    if label is None:
        raise _bad(line, f"a human winner is A, B or Tie (got {value!r})", judge)
    return label


def _verdict(value: Any, line: int, judge: str) -> str | None:
    if value is None:
        return None
    word = str(value).strip().lower() if isinstance(value, str | bool) else None
    found = _VERDICTS.get(word) if word is not None else None
    if found is None or (judge == "judge_code") != (word in ("accept", "reject")):
        words = "accept or reject" if judge == "judge_code" else "pass or fail (or true/false)"
        raise _bad(line, f"a human verdict is {words} (got {value!r})", judge)
    return found


def _labels(raw: dict[str, Any], one: str, many: str) -> list[Any] | None:
    if one in raw and many in raw:
        return None
    if many in raw:
        values = raw.pop(many)
        return values if isinstance(values, list) else [values]
    if one in raw:
        return [raw.pop(one)]
    return []


def parse_dataset(text: str, judge: JudgeName) -> list[Item]:
    """The items of a JSONL dataset (blank lines skipped), checked for the labels `judge` needs."""
    if judge not in EXAMPLES:
        raise InputError(f"judge must be one of {', '.join(EXAMPLES)} (got {judge!r})")
    pairwise, binary = judge == "pairwise_compare", judge in BINARY
    one, many = (("human_winner", "human_winners") if pairwise else ("human_verdict", "human_verdicts") if binary
                 else ("human_score", "human_scores"))
    items: list[Item] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = caller_values.loads(line, f"line {number}", nul=True)
        except json.JSONDecodeError as exc:
            raise _bad(number, f"not JSON ({exc.msg})", judge) from None
        if not isinstance(raw, dict):
            raise _bad(number, "each line is one JSON object", judge)
        labels = _labels(raw, one, many)
        if labels is None:
            raise _bad(number, f"give {one} or {many}, not both", judge)
        if len(labels) > MAX_RATERS:
            raise _bad(number, f"at most {MAX_RATERS} human labels per item (got {len(labels)})", judge)
        if not any(v is not None for v in labels):
            raise _bad(number, f"no human label: give {one} (one rater) or {many} (a list, one per rater)", judge)
        item_id = str(raw.pop("id", number))
        if item_id in seen:
            raise _bad(number, f"id {item_id!r} appears twice", judge)
        seen.add(item_id)
        for key in ("human_score", "human_scores", "human_winner", "human_winners", "human_verdict", "human_verdicts"):
            raw.pop(key, None)
        item = Item(id=item_id, inputs=raw)
        if pairwise:
            item.winners = [_winner(v, number, judge) for v in labels]
        elif binary:
            item.verdicts = [_verdict(v, number, judge) for v in labels]
        else:
            item.scores = [_score(v, number, judge) for v in labels]
        _check_inputs(item, number, judge)
        items.append(item)
        if len(items) > MAX_ITEMS:
            raise InputError(f"dataset: at most {MAX_ITEMS} items per calibration; split it")
    if len(items) < 2:
        raise InputError(f"dataset: at least two items are needed for any statistic (got {len(items)}); "
                         f"one JSON object a line, e.g. {EXAMPLES[judge]}")
    return items


def _check_inputs(item: Item, line: int, judge: str) -> None:
    inputs = item.inputs
    if judge == "score_text":
        if not isinstance(inputs.get("text"), str) or not inputs["text"]:
            raise _bad(line, "score_text items need a non-empty 'text'", judge)
        return
    if judge == "judge_code":
        files = inputs.get("files")
        if not isinstance(inputs.get("spec"), str) or not inputs["spec"]:
            raise _bad(line, "judge_code items need a non-empty 'spec'", judge)
        if (not isinstance(files, list) or not files or not all(
                isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("content"), str)
                for f in files)):
            raise _bad(line, "judge_code items need 'files': a list of {path, content}", judge)
        return
    if judge == "evaluate_analysis":
        if not isinstance(inputs.get("analysis"), str | dict | list) or not inputs["analysis"]:
            raise _bad(line, "evaluate_analysis items need 'analysis': JSON text or an object", judge)
        return
    if not isinstance(inputs.get("instruction"), str) or not inputs["instruction"]:
        raise _bad(line, f"{judge} items need a non-empty 'instruction'", judge)
    candidates = inputs.get("candidates")
    wanted = 2 if judge == "pairwise_compare" else 1
    if not isinstance(candidates, list) or len(candidates) != wanted or not all(isinstance(c, str) for c in candidates):
        raise _bad(line, f"{judge} items need 'candidates': a list of {wanted} string(s)", judge)
