"""Free-text verdict markers written by judges: MT-Bench `Rating: [[x]]` and `[[A]]`/`[[B]]`/`[[C]]`.

Rules (measured on ../shared/corpora/judge_outputs, see tests/test_verdicts_corpus.py):
- Double-bracket markers count; a single-bracket `[x]` counts only alone on its line. FastChat's
  fallback took any `[x]`, so list indexes in quoted code (`array[0]`) became scores of 0; we
  return a failure instead.
- A marker introduced by its label (`Rating:` / `Verdict:`) beats a bare one, and among
  labelled markers the LAST wins, so text the judge quotes early cannot decide.
- Bare markers only decide when they all agree; disagreeing bare markers ("a rating of [[9]]
  ... could earn [[10]]") are ambiguous and fail rather than guess.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel

from .parsing import OutputError

_RATING = re.compile(r"(?P<label>rating\s*[:：]?\s*)?\[\[\s*(?P<value>\d+(?:\.\d+)?)\s*\]\]", re.I)
# FastChat's single-bracket fallback, only where the marker stands alone on its line
# ("[The Start of Rating]\n[5]"), never inside code such as `array[0]`.
_LONE_RATING = re.compile(r"^[ \t]*\[\s*(?P<value>\d+(?:\.\d+)?)\s*\][ \t]*$", re.M)
_PAIR = re.compile(r"(?P<label>verdict\s*[:：]?\s*(?:is\s*)?)?\[\[\s*(?P<value>A|B|C|Tie)\s*\]\]", re.I)


class Rating(BaseModel):
    score: float


class PairVerdict(BaseModel):
    winner: Literal["A", "B", "tie"]


def _decide(matches: list[re.Match[str]], what: str) -> str:
    if not matches:
        raise OutputError(f"no {what} marker such as [[...]] in the reply")
    labelled = [m for m in matches if "label" in m.re.groupindex and m.group("label")]
    if labelled:
        return labelled[-1].group("value")
    values = {m.group("value").upper() for m in matches}
    if len(values) > 1:
        shown = ", ".join(f"[[{m.group('value')}]]" for m in matches)
        raise OutputError(f"ambiguous: several different {what} markers ({shown}) and none labelled")
    return matches[-1].group("value")


def parse_rating(text: str, *, low: float = 1, high: float = 10) -> Rating:
    """A `Rating: [[x]]` score in [low, high]; OutputError when absent, ambiguous or out of range."""
    matches = list(_RATING.finditer(text))
    if not matches:
        lone = list(_LONE_RATING.finditer(text))
        if len(lone) == 1:
            matches = lone
    value = float(_decide(matches, "rating"))
    if not low <= value <= high:
        raise OutputError(f"rating {value:g} is outside {low:g}..{high:g}")
    return Rating(score=value)


def parse_pair_verdict(text: str) -> PairVerdict:
    """`[[A]]`, `[[B]]` or `[[C]]` (tie); OutputError when absent or ambiguous."""
    value = _decide(list(_PAIR.finditer(text)), "verdict").upper()
    return PairVerdict(winner="tie" if value in ("C", "TIE") else value)  # type: ignore[arg-type]
