"""Overlapping chunks (seed 001: 1000 characters, 200 overlap) that prefer paragraph, then
sentence, then word boundaries inside the window, and remember offsets and PDF pages."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

_SENTENCE_END = re.compile(r"[.!?;:][\"')\]]?\s")


@dataclass(frozen=True)
class Chunk:
    index: int
    text: str
    start: int
    end: int
    page: int | None = None


def _cut(text: str, lo: int, hi: int) -> int:
    """The best end for a chunk in text[lo:hi]: after a paragraph, a sentence, a line, or a space."""
    para = text.rfind("\n\n", lo, hi)
    if para != -1:
        return para + 2
    last = None
    for m in _SENTENCE_END.finditer(text, lo, hi):
        last = m
    if last is not None:
        return last.end()
    for sep in ("\n", " "):
        at = text.rfind(sep, lo, hi)
        if at != -1:
            return at + 1
    return hi


def chunk_text(text: str, size: int = 1000, overlap: int = 200, page_starts: list[int] | None = None) -> list[Chunk]:
    if size <= 0 or not 0 <= overlap < size:
        raise ValueError("chunk size must be positive and overlap between 0 and size-1")
    chunks: list[Chunk] = []
    pos, n = 0, len(text)
    while pos < n:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n:
            break
        end = n if pos + size >= n else _cut(text, pos + size // 2, pos + size)
        body = text[pos:end].rstrip()
        if body:
            page = bisect.bisect_right(page_starts, pos) if page_starts else None
            chunks.append(Chunk(len(chunks), body, pos, pos + len(body), page))
        if end >= n:
            break
        # Start the next chunk `overlap` characters back, at a word start.
        nxt = max(end - overlap, pos + 1)
        space = text.find(" ", nxt, end)
        pos = space + 1 if space != -1 and end - overlap > pos else nxt
    return chunks
