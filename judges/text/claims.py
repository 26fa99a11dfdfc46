"""Deterministic text handling: claims of an answer, and the normalised form answers are compared in."""

from __future__ import annotations

import re
import string
import unicodedata

# Abbreviations whose full stop does not end a sentence.
_ABBREVIATIONS = frozenset({
    "e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "st", "no", "fig", "approx", "inc", "ltd", "jr",
    "sr", "cf", "al", "u.s", "u.k", "e.u", "a.m", "p.m",
})
_SENTENCE_END = re.compile(r"([.!?])[\"'”’)\]]*\s+")
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d+[.)]|[a-z][.)])\s+", re.I)
_CODE_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)


_WORD_BEFORE = re.compile(r"[\w.]+$")
_LOOKBEHIND = 16  # longer than any abbreviation: a longer word cannot be one, nor an initial


def _ends_sentence(text: str, dot: int) -> bool:
    """Whether the mark at `dot` ends a sentence (not an abbreviation, an initial or a decimal).

    Only the few characters before the mark are looked at, so splitting a long answer stays linear."""
    if text[dot] != ".":
        return True
    start = max(0, dot - _LOOKBEHIND)
    word = _WORD_BEFORE.search(text, start, dot)
    if word is None:
        return True
    if word.start() == start and start > 0 and _WORD_BEFORE.match(text[start - 1]):
        return True  # the word runs on before the window: too long to be an abbreviation or an initial
    token = word.group(0).lower()
    if token in _ABBREVIATIONS or token.rstrip(".") in _ABBREVIATIONS:
        return False
    return not (len(token) == 1 and token.isalpha() and text[dot - 1].isupper())  # an initial: "J. Smith"


def split_sentences(text: str) -> list[str]:
    """Sentences of one paragraph, split after . ! ? followed by space (abbreviations and initials kept)."""
    out: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        if _ends_sentence(text, m.start(1)):
            piece = text[start : m.end()].strip()
            if piece:
                out.append(piece)
            start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def split_claims(answer: str) -> list[str]:
    """The answer's claims, in order: one per sentence or list item; headings (a line ending in ':'),
    code blocks and lines without a letter or digit are not claims."""
    claims: list[str] = []
    for paragraph in re.split(r"\n\s*\n|\n(?=\s*(?:[-*•·]|\d+[.)])\s)", _CODE_FENCE.sub("\n\n", answer)):
        lines = [_BULLET.sub("", ln).strip() for ln in paragraph.splitlines()]
        lines = [ln for ln in lines if ln and not ln.endswith(":")]
        for sentence in split_sentences(" ".join(lines)):
            if any(ch.isalnum() for ch in sentence) and not sentence.rstrip().endswith(":"):
                claims.append(sentence)
    return claims


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation + "“”‘’«»„–—…")


def normalise_answer(text: str) -> str:
    """The SQuAD normalisation: NFKC, lower case, no punctuation, no articles (a, an, the), single spaces."""
    text = unicodedata.normalize("NFKC", text).lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


# Marks the SQuAD normalisation drops that change what an answer says: signs and operators (-5 / 5, x-y / x+y,
# C++ / C#, 5% / 5) and any mark beside a digit (1.0 / 10, 3/4 / 34, 1,5 / 15). Texts whose marks differ are not
# a normalised match: the model judges them.
_MEANINGFUL = re.compile(r"[+\-*/^%$#=<>&|~@°§€£¥]|(?<=\d)[^\w\s]|[^\w\s](?=\d)")


def _marks(text: str) -> list[str]:
    return _MEANINGFUL.findall(unicodedata.normalize("NFKC", text))


def reference_match(text: str, reference: str) -> str | None:
    """"exact" when the texts are equal after trimming, "normalised" when their normalised forms are
    equal and not empty and they carry the same signs, operators and marks beside digits, otherwise None (a
    model must judge)."""
    if text.strip() == reference.strip():
        return "exact"
    normal = normalise_answer(text)
    if normal and normal == normalise_answer(reference) and _marks(text) == _marks(reference):
        return "normalised"
    return None
