"""The published verdict conventions judges write when they do not answer in JSON.

Part of the one reading path (judges.reading.parsing.run_judge): structured output → tolerant JSON →
these conventions → one repair round → typed failure. Each reader returns the verdict and the
name of the convention that read it (recorded as `read_as: convention:<name>`), or raises
VerdictError whose `kind` is `parse_error` (no verdict), `ambiguous` (two different final
verdicts) or `refusal` ("none", "neither", a refusal).

Rules, measured on ../shared/corpora/judge_outputs and the projects' own parsers:
- Text inside code (``` fences and `inline` spans) is never read: `array[0]` or `char input[100]`
  in quoted code is not a score.
- Strong markers count anywhere: `[[7]]`, `[[8.5]]`, `[[A]]`, `[[A>>B]]`, `[RESULT] 4`. A marker
  introduced by its label (`Rating:`, `評価：`, `Final Verdict:`) beats a bare one; two different
  labelled markers, or two different bare ones with none labelled, are ambiguous (Arena-Hard's
  reader does the same: several different `[[..]]` verdicts read as none).
- Weak forms count only where they cannot be a mention: a whole line `Rating: 7` / `Score: 7/10`,
  the final line `7/10` or `[A]`, a line alone `[5]` (FastChat's backup), a reply that is only a
  number or only "1"/"2"/"Tie" on its first line (PandaLM), a first line "8 7" (JudgeLM).
- When several conventions read a reply, they must agree, or the reply is ambiguous.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from judges.errors import FailureKind
from judges.reading.parsing import REFUSAL, OutputError, json_candidates

Winner = Literal["A", "B", "tie"]
Margin = Literal["strong", "slight", "tie"]


class VerdictError(OutputError):
    """No usable verdict; `kind` says why (shown to the caller as the failure kind)."""

    def __init__(self, message: str, kind: FailureKind = "parse_error"):
        super().__init__(message, kind=kind)


@dataclass(frozen=True)
class RatingRead:
    value: float
    convention: str
    denominator: float | None = None


@dataclass(frozen=True)
class PairRead:
    winner: Winner
    convention: str
    margin: Margin | None = None
    scores: tuple[float, float] | None = None


_NUM = r"[-+]?\d+(?:\.\d+)?"
_CODE_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
# Labels judges put before a rating: English, and the labels of translated MT-Bench prompts.
_RATING_LABEL = (r"(?:overall\s+|final\s+)?(?:rating|score|grade|note|bewertung|puntuaci[oó]n|calificaci[oó]n|"
                 r"valutazione|punteggio|avalia[cç][aã]o|pontua[cç][aã]o|оценка|評価|评分|評分|得分|分数|分數|점수|평가)")
_MAX_CHARS = 400_000


_SPACE_RUN = re.compile(r"\s+")


def _one_space(m: re.Match[str]) -> str:
    return "\n" if "\n" in m.group() else " "


def strip_code(text: str) -> str:
    """The reply without fenced or inline code, where quoted programs and examples live, each run of
    white space as one space (or one line break). The conventions' patterns put several `\\s*` side by
    side: over a long run of spaces (a reply a caller's own sampling model can send) they backtracked
    for seconds, quadratically or worse."""
    text = text[:_MAX_CHARS]
    return _SPACE_RUN.sub(_one_space, _INLINE_CODE.sub(" ", _CODE_FENCE.sub("\n", text)))


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def _clean_line(line: str) -> str:
    """A line without markdown emphasis, heading marks and closing punctuation."""
    line = re.sub(r"^[#>\-\s]+", "", line)
    return line.replace("**", "").replace("__", "").strip().rstrip(".!").strip()


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise VerdictError(f"{text!r} is not a finite number")
    return value


def _agree(found: Sequence[tuple[Any, str]], what: str) -> tuple[Any, str]:
    """One value from the conventions that read it, or ambiguous when they disagree."""
    values = {v for v, _ in found}
    if len(values) > 1:
        shown = "; ".join(f"{name}: {v}" for v, name in found)
        raise VerdictError(f"ambiguous: the reply holds different {what}s ({shown})", "ambiguous")
    return found[-1]


_QUOTES = "\"'“”‘’「」『』«»"


def _quoted(m: re.Match[str]) -> bool:
    """A marker wrapped in quotes, as a judge writes when it repeats the format it was given
    ('… strictly this format: "[[A]]" if A is better, "[[B]]" …')."""
    text, start, end = m.string, m.start(), m.end()
    before = text[max(0, start - 2):start].strip()
    after = text[end:end + 2].strip()
    return bool(before) and before[-1] in _QUOTES and bool(after) and after[0] in _QUOTES


def _decide_markers(matches: list[re.Match[str]], what: str, norm: Callable[[str], Any]) -> Any | None:
    """Quoted markers count only when nothing else does; labelled markers beat bare ones; different
    values among the deciding ones are ambiguous."""
    if not matches:
        return None
    matches = [m for m in matches if not _quoted(m)] or matches
    labelled = [m for m in matches if m.group("label")]
    deciding = labelled or matches
    values = {norm(m.group("value")) for m in deciding}
    if len(values) > 1:
        shown = ", ".join(m.group(0).strip() for m in deciding)
        raise VerdictError(f"ambiguous: several different {what} markers ({shown})", "ambiguous")
    return norm(deciding[-1].group("value"))


# --- ratings ---------------------------------------------------------------------------------

_BRACKET_RATING = re.compile(
    rf"(?P<label>{_RATING_LABEL}\s*(?:is\s*)?[:：=]?\s*)?\[\[\s*(?P<value>{_NUM})\s*(?:/\s*(?P<den>\d+(?:\.\d+)?)\s*)?\]\]",
    re.I)
_RESULT_RATING = re.compile(
    rf"\[\s*RESULT\s*\]\s*[:：]?\s*\(?(?P<value>{_NUM})\)?(?:\s*(?:/|out\s+of)\s*(?P<den>\d+(?:\.\d+)?))?", re.I)
# FastChat's two-score pair prompts: [[8, 7]] (Assistant A's, Assistant B's).
_TWO_SCORES = re.compile(rf"\[\[\s*(?P<a>{_NUM})\s*,\s*(?P<b>{_NUM})\s*\]\]")
_LABELLED_LINE = re.compile(
    rf"^(?:the\s+)?{_RATING_LABEL}\s*(?:\([^)\n]{{0,40}}\)\s*)?[:：=]\s*\[?\s*(?P<value>{_NUM})\s*\]?"
    rf"\s*\(?\s*(?:(?:/|out\s+of)\s*(?P<den>\d+(?:\.\d+)?))?\s*\)?$", re.I)
_FRACTION_LINE = re.compile(rf"^\[?\s*(?P<value>{_NUM})\s*(?:/|out\s+of)\s*(?P<den>\d+(?:\.\d+)?)\s*\]?$", re.I)
_LONE_BRACKET = re.compile(rf"^[ \t]*\[\s*(?P<value>{_NUM})\s*\][ \t]*$", re.M)
_ONLY_NUMBER = re.compile(rf"^\s*(?:\*\*)?\s*(?P<value>{_NUM})\s*(?:\*\*)?\s*\.?\s*$")
_SCORE_PAIR_LINE = re.compile(rf"^\s*(?P<a>{_NUM})\s*(?:,\s*|\s+)(?P<b>{_NUM})\s*$")


def read_rating_on(text: str, high: float, scale: str) -> RatingRead:
    """read_rating, where a score written out of another maximum (7/5 on a 0–10 scale) is out_of_range:
    `high` is the declared scale's maximum, `scale` how the message names the scale (e.g. "0–10")."""
    rating = read_rating(text)
    if rating.denominator is not None and rating.denominator != high:
        raise VerdictError(f"the score is given out of {rating.denominator:g}, not on the declared scale {scale}",
                           "out_of_range")
    return rating


def read_rating(text: str) -> RatingRead:
    """One rating from a free-text reply; VerdictError when there is none or it is ambiguous."""
    body = strip_code(text)
    strong: list[tuple[float, str]] = []
    dens: dict[float, float | None] = {}

    brackets = list(_BRACKET_RATING.finditer(body))
    value = _decide_markers(brackets, "rating", _number)
    if value is not None:
        strong.append((value, "fastchat"))
        dens[value] = next((float(m.group("den")) for m in brackets if m.group("den")
                            and _number(m.group("value")) == value), None)
    result_matches = list(_RESULT_RATING.finditer(body))
    results = {_number(m.group("value")) for m in result_matches}
    if len(results) > 1:
        raise VerdictError(f"ambiguous: several different [RESULT] scores ({sorted(results)})", "ambiguous")
    if results:
        v = results.pop()
        strong.append((v, "prometheus"))
        den = next((m.group("den") for m in result_matches if m.group("den")), None)
        if den:
            dens[v] = float(den)
    two = {(_number(m.group("a")), _number(m.group("b"))) for m in _TWO_SCORES.finditer(body)}
    if two:
        a, b = next(iter(two))
        if len(two) > 1 or a != b:
            raise VerdictError("ambiguous: the reply gives a score pair [[a, b]], FastChat's form for two answers, "
                               "not one rating", "ambiguous")
        strong.append((a, "fastchat_two_score"))
    for line in _lines(body):
        m = _LABELLED_LINE.match(_clean_line(line))
        if m:
            v = _number(m.group("value"))
            strong.append((v, "labelled"))
            if m.group("den"):
                dens[v] = float(m.group("den"))
    if strong:
        v, name = _agree(strong, "rating")
        return RatingRead(v, name, dens.get(v))

    weak: list[tuple[float, str]] = []
    lines = _lines(body)
    if lines:
        m = _FRACTION_LINE.match(_clean_line(lines[-1]))
        if m:
            v = _number(m.group("value"))
            weak.append((v, "fraction"))
            dens[v] = float(m.group("den"))
    lone = list(_LONE_BRACKET.finditer(body))
    if len(lone) == 1:
        weak.append((_number(lone[0].group("value")), "fastchat_single_bracket"))
    m = _ONLY_NUMBER.match(body)
    if m:
        weak.append((_number(m.group("value")), "number_only"))
    elif lines and (pair := _SCORE_PAIR_LINE.match(lines[0])):
        a, b = _number(pair.group("a")), _number(pair.group("b"))
        if a != b:
            raise VerdictError(f"ambiguous: the first line holds a score pair ({a:g} {b:g}), "
                               "JudgeLM's form for two answers, not one rating", "ambiguous")
        weak.append((a, "judgelm"))
    if weak:
        v, name = _agree(weak, "rating")
        return RatingRead(v, name, dens.get(v))
    raise VerdictError("no rating in the reply: no JSON score and no marker such as Rating: [[7]], "
                       "[RESULT] 4, a line 'Score: 7/10' or a reply that is only a number")


# --- pairwise ----------------------------------------------------------------------------------

_PAIR_LABEL = r"(?:final\s+verdict|verdict|decision|answer|winner|result|judgment|judgement|評価|判定|结论|結論)"
_FASTCHAT_PAIR = re.compile(
    rf"(?P<label>{_PAIR_LABEL}\s*(?:is\s*)?[:：]?\s*(?:\*\*)?\s*)?\[\[\s*(?P<value>A|B|C|Tie)\s*\]\]", re.I)
_ARENA = re.compile(r"\[\[\s*(?P<value>[AB]\s*(?:>>|<<|>|<|=)\s*[AB])\s*\]\]")
_RESULT_PAIR = re.compile(r"\[\s*RESULT\s*\]\s*[:：]?\s*\(?(?P<value>A|B|Tie)\)?(?![\w>=<])", re.I)
_SINGLE_BRACKET_LINE = re.compile(r"^(?:(?:final\s+)?verdict\s*[:：]\s*)?\[\s*(?P<value>A|B|C)\s*\]$", re.I)
_LLMBAR = re.compile(r"output\s*\(\s*(?P<value>[ab])\s*\)", re.I)
_LLMBAR_DECIDES = re.compile(
    r"output\s*\(\s*(?P<value>[ab])\s*\)\s*(?:is|was|would\s+be)\s+(?:the\s+)?(?:clearly\s+|slightly\s+|much\s+)?"
    r"(?:better|superior|preferred|preferable|the\s+better\s+(?:one|output|response)|the\s+winner)", re.I)
_AUTOJ = re.compile(r"final\s+decision\s+is\s*[:：]?\s*(?:\*\*)?\s*(?P<value>response\s*1|response\s*2|tie)\b", re.I)
_PANDALM = re.compile(r"^\s*(?P<value>1|2|tie)\s*[.:)]?\s*$", re.I)
_NEITHER = re.compile(r"^\s*(?:none|neither|neither\s+of\s+them|no\s+winner|n/?a|null)\s*\.?\s*$", re.I)

_ARENA_MEANING: dict[str, tuple[Winner, Margin]] = {
    "A>>B": ("A", "strong"), "B<<A": ("A", "strong"), "A>B": ("A", "slight"), "B<A": ("A", "slight"),
    "A=B": ("tie", "tie"), "B=A": ("tie", "tie"),
    "B>A": ("B", "slight"), "A<B": ("B", "slight"), "B>>A": ("B", "strong"), "A<<B": ("B", "strong"),
}
_FIRST_NAMES = {"model_1", "model1", "m1", "1", "a", "output_1", "output (a)", "output a", "assistant a", "assistant 1"}
_SECOND_NAMES = {"model_2", "model2", "m2", "2", "b", "output_2", "output (b)", "output b", "assistant b", "assistant 2"}
# AlpacaEval 2's annotators (alpaca_eval_gpt4_turbo_fn's ranking, weighted_alpaca_eval_gpt4_turbo's one token) name
# the output shown first "m" and the one shown second "M": case decides, so these are read before any lower-casing.
_ALPACA_IDS: dict[str, Winner] = {"m": "A", "M": "B"}


def _ranking(value: Any) -> Winner | None:
    """AlpacaEval's ranking: {"ordered_models": [{"model", "rank"}, …]} or the bare list."""
    if isinstance(value, dict) and "ordered_models" in value:
        value = value["ordered_models"]
    if not (isinstance(value, list) and value and all(isinstance(x, dict) and "model" in x for x in value)):
        return None
    ranks: dict[str, Any] = {}
    for x in value:
        raw = str(x["model"]).strip()
        name = raw.lower()
        side = _ALPACA_IDS.get(raw) or ("A" if name in _FIRST_NAMES else "B" if name in _SECOND_NAMES else None)
        if side is None or side in ranks:
            raise VerdictError(f"ranking names an unknown or repeated model {x['model']!r}")
        ranks[side] = x.get("rank")
    if isinstance(ranks.get("A"), bool) or isinstance(ranks.get("B"), bool):
        raise VerdictError("ranking ranks must be numbers")
    try:
        a = float(ranks["A"]) if "A" in ranks else None
        b = float(ranks["B"]) if "B" in ranks else None
    except (TypeError, ValueError):
        raise VerdictError(f"ranking ranks are not numbers ({ranks})") from None
    if a is None and b is None:
        return None
    if a is not None and b is not None:
        return "A" if a < b else "B" if b < a else "tie"
    known = a if a is not None else b
    if known != 1:
        raise VerdictError(f"ranking gives only one model, at rank {known:g}")
    return "A" if a is not None else "B"


def _ranking_reads(text: str) -> list[tuple[Winner, str]]:
    found: list[tuple[Winner, str]] = []
    for candidate in json_candidates(text):
        winner = _ranking(candidate)
        if winner is not None:
            found.append((winner, "alpaca_eval_ranking"))
    if found:
        return found[-1:]
    start, end = text.find("["), text.rfind("]")
    if start != -1 and end > start:
        try:
            value = ast.literal_eval(text[start:end + 1])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return []
        winner = _ranking(value)
        if winner is not None:
            return [(winner, "alpaca_eval_ranking")]
    return []


def read_pair(text: str) -> PairRead:
    """One A/B/tie verdict from a free-text reply; VerdictError when none, ambiguous or refused."""
    body = strip_code(text)
    stripped = body.strip()
    if _NEITHER.match(stripped):
        raise VerdictError(f"the judge named neither candidate ({stripped!r}); that is not a tie", "refusal")
    found: list[tuple[Winner, str]] = []
    margin: Margin | None = None
    scores: tuple[float, float] | None = None

    fastchat = _decide_markers(list(_FASTCHAT_PAIR.finditer(body)), "verdict",
                               lambda v: {"A": "A", "B": "B", "C": "tie", "TIE": "tie"}[v.upper()])
    if fastchat is not None:
        found.append((fastchat, "fastchat"))
    arena = {re.sub(r"\s+", "", m.group("value")).upper() for m in _ARENA.finditer(body)}
    arena = {a for a in arena if a in _ARENA_MEANING}
    if arena:
        meanings = {_ARENA_MEANING[a] for a in arena}
        if len(meanings) > 1:
            raise VerdictError(f"ambiguous: several different Arena-Hard verdicts ({', '.join(sorted(arena))})",
                               "ambiguous")
        winner, margin = meanings.pop()
        found.append((winner, "arena_hard"))
    two = {(_number(m.group("a")), _number(m.group("b"))) for m in _TWO_SCORES.finditer(body)}
    if len(two) > 1:
        raise VerdictError(f"ambiguous: several different score pairs ({sorted(two)})", "ambiguous")
    if two:
        a, b = scores = two.pop()
        # FastChat counts a difference within 0.1 as a tie.
        found.append(("A" if a - b > 0.1 else "B" if b - a > 0.1 else "tie", "fastchat_two_score"))
    autoj = {re.sub(r"\s+", "", m.group("value")).lower() for m in _AUTOJ.finditer(body)}
    if len(autoj) > 1:
        raise VerdictError(f"ambiguous: several different final decisions ({sorted(autoj)})", "ambiguous")
    if autoj:
        decision: dict[str, Winner] = {"response1": "A", "response2": "B", "tie": "tie"}
        found.append((decision[autoj.pop()], "auto_j"))
    results = {m.group("value").upper() for m in _RESULT_PAIR.finditer(body)}
    if len(results) > 1:
        raise VerdictError(f"ambiguous: several different [RESULT] verdicts ({sorted(results)})", "ambiguous")
    if results:
        found.append(({"A": "A", "B": "B", "TIE": "tie"}[results.pop()], "prometheus"))  # type: ignore[arg-type]
    found += _ranking_reads(body)
    lines = _lines(body)
    if lines:
        m = _SINGLE_BRACKET_LINE.match(_clean_line(lines[-1]))
        if m and fastchat is None:
            single: dict[str, Winner] = {"A": "A", "B": "B", "C": "tie"}
            found.append((single[m.group("value").upper()], "fastchat_single_bracket"))
        first = _clean_line(lines[0])
        m = _PANDALM.match(first)
        if m:
            panda: dict[str, Winner] = {"1": "A", "2": "B", "TIE": "tie"}
            found.append((panda[m.group("value").upper()], "pandalm"))
        elif (pair := _SCORE_PAIR_LINE.match(first)):
            a, b = _number(pair.group("a")), _number(pair.group("b"))
            scores = scores or (a, b)
            found.append(("A" if a > b else "B" if b > a else "tie", "judgelm"))
    llmbar = _llmbar(body, lines)
    if llmbar is not None:
        found.append((llmbar, "llmbar"))
    if lines and not found and (identifier := _clean_line(lines[-1])) in _ALPACA_IDS:
        # weighted_alpaca_eval_*: the reply is "m" or "M"; the *_cot_* ones reason first and end with it.
        found.append((_ALPACA_IDS[identifier], "alpaca_eval_identifier"))
    if len(lines) == 1 and not found:
        alone = winner_word(_clean_line(lines[0]))  # the whole reply is "Image A", "B", "tie", …
        if alone is not None:
            found.append((alone, "winner_only"))
    if not found:
        if REFUSAL.match(stripped):
            raise VerdictError("the judge refused to compare", "refusal")
        raise VerdictError("no verdict in the reply: no JSON winner and no marker such as [[A]], [[A>B]], "
                           "[RESULT] A, 'Output (a)', a ranking, or 1/2/Tie on the first line")
    winner, name = _agree(found, "verdict")
    return PairRead(winner, name, margin if name == "arena_hard" or margin else None, scores)


def _llmbar(body: str, lines: list[str]) -> Winner | None:
    """LLMBar: the reply is "Output (a)"/"Output (b)", or says which output is better."""
    if not lines:
        return None
    whole = _clean_line(" ".join(lines))
    m = _LLMBAR.fullmatch(whole)
    if m:
        return "A" if m.group("value").lower() == "a" else "B"
    decided = {m.group("value").lower() for m in _LLMBAR_DECIDES.finditer(body)}
    if len(decided) > 1:
        raise VerdictError("ambiguous: the reply calls both Output (a) and Output (b) better", "ambiguous")
    if decided:
        return "A" if decided.pop() == "a" else "B"
    last = {m.group("value").lower() for m in _LLMBAR.finditer(lines[-1])}
    if len(last) == 1 and re.match(r"^(?:therefore|thus|so|hence|final(?:ly)?|verdict|answer|winner|"
                                   r"the\s+better\s+output)\b", _clean_line(lines[-1]), re.I):
        return "A" if last.pop() == "a" else "B"
    return None


def winner_word(value: Any) -> Winner | None:
    """A JSON `winner` value: A/B/tie in the forms judges write, None for anything else."""
    if not isinstance(value, str):
        return None
    text = re.sub(r"[\s_\-]+", " ", value.strip().strip("\"'`*.[]()").lower()).strip()
    for prefix in ("image ", "response ", "assistant ", "candidate ", "output ", "model ", ""):
        if text == prefix + "a" or (prefix and text == prefix + "1"):
            return "A"
        if text == prefix + "b" or (prefix and text == prefix + "2"):
            return "B"
    if text in ("tie", "equal", "both", "c", "draw", "same"):
        return "tie"
    if text in ("none", "neither", "null", "n/a", "no winner"):
        raise VerdictError(f"the judge named neither candidate ({value!r}); that is not a tie", "refusal")
    return None
