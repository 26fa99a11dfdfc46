"""The probability-weighted score (G-Eval): where the backend gave the top log-probabilities of the
score token, the expectation Σ p(v)·v / Σ p(v) over the alternatives that are values on the scale: whole
scores (expected_score) or rating labels (expected_ratings)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence

from judges.models.protocol import TokenLogprob


def _whole(token: str, low: float, high: float) -> int | None:
    text = token.strip()
    if not text.isdigit() or len(text) > 4:
        return None
    value = int(text)
    return value if low <= value <= high else None


def expected_value(position: TokenLogprob, value_of: Callable[[str], float | None]) -> float | None:
    """Σ p(v)·v / Σ p(v) over the token at `position` and its top alternatives that `value_of` reads as a
    value (several tokens of one value add up); None when none does."""
    alternatives = {**position.top, position.token: position.logprob}
    weights: dict[float, float] = {}
    for token, logprob in alternatives.items():
        value = value_of(token)
        if value is not None:
            weights[value] = weights.get(value, 0.0) + math.exp(logprob)
    total = sum(weights.values())
    return round(sum(v * p for v, p in weights.items()) / total, 6) if total else None


def expected_score(tokens: Sequence[TokenLogprob] | None, score: float, low: float, high: float) -> float | None:
    """The expectation at the position of the reply's score token (the last token that is the score as
    written); None when there are no log-probabilities, the score is not whole, or no token carries it."""
    if not tokens or score != int(score):
        return None
    position = next((t for t in reversed(tokens) if _whole(t.token, low, high) == int(score)), None)
    if position is None:
        return None
    return expected_value(position, lambda token: _whole(token, low, high))


def token_at(tokens: Sequence[TokenLogprob], offset: int) -> TokenLogprob | None:
    """The token whose text covers character `offset` of the tokens' joined text."""
    start = 0
    for token in tokens:
        if start <= offset < start + len(token.token):
            return token
        start += len(token.token)
    return None


def label_reader(labels: Mapping[str, float]) -> Callable[[str], float | None]:
    """A token → the value of the one label it starts (or spells out): "suff", ' "imp' and "poor" all count;
    a token that could start two labels, or none, is no value."""
    def value_of(token: str) -> float | None:
        text = token.strip().lstrip('"').strip().lower()
        if not text:
            return None
        found = [v for label, v in labels.items() if label.startswith(text) or text.startswith(label)]
        return found[0] if len(found) == 1 else None
    return value_of


def expected_ratings(tokens: Sequence[TokenLogprob] | None, names: Sequence[str],
                     labels: Mapping[str, float]) -> dict[str, float | None]:
    """Per name of a JSON reply `{"<name>": {"rating": "<label>", …}, …}`: the expected rating value at the
    first token of that name's rating; None for a name whose rating token is not found."""
    out: dict[str, float | None] = {name: None for name in names}
    if not tokens:
        return out
    text, read = "".join(t.token for t in tokens), label_reader(labels)
    for name in names:
        found = re.search(rf'"{re.escape(name)}"\s*:\s*\{{.*?"rating"\s*:\s*"', text, re.S)
        position = token_at(tokens, found.end()) if found else None
        out[name] = expected_value(position, read) if position is not None else None
    return out
