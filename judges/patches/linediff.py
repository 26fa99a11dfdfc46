"""Unified diffs of large files, fast: patience-style anchors on unique lines, difflib for the gaps.

difflib.unified_diff on a 5,000-line file with edits spread through it costs ~100 ms; anchoring
on lines that occur once on each side leaves difflib only the small gaps between anchors.
"""

from __future__ import annotations

import bisect
import difflib
from collections import Counter
from collections.abc import Iterator, Sequence

Opcode = tuple[str, int, int, int, int]


def _longest_increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Longest chain of pairs increasing in both coordinates (pairs come sorted by the first)."""
    tails: list[int] = []
    tail_index: list[int] = []
    prev: list[int] = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        pos = bisect.bisect_left(tails, j)
        if pos == len(tails):
            tails.append(j)
            tail_index.append(k)
        else:
            tails[pos] = j
            tail_index[pos] = k
        prev[k] = tail_index[pos - 1] if pos else -1
    chain: list[tuple[int, int]] = []
    k = tail_index[-1] if tail_index else -1
    while k != -1:
        chain.append(pairs[k])
        k = prev[k]
    return chain[::-1]


# difflib's matcher costs far more than quadratic in a gap of repeated lines (1,000 blank lines against an
# edited copy took 72 s): it only gets small gaps (at most SMALL_GAP line pairs), and all of them together at
# most a budget linear in the files' length. A gap beyond either is written as one replace: the diff is then
# not minimal there, but still exact, and its cost stays linear.
SMALL_GAP = 2_500
MAX_DEPTH = 64  # anchors found inside gaps found inside gaps...: deeper gaps are replaced whole


def opcodes(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    out: list[Opcode] = []
    budget = 20 * (len(a) + len(b)) + 100_000  # line pairs difflib may still compare

    def emit(tag: str, i1: int, i2: int, j1: int, j2: int) -> None:
        if i1 == i2 and j1 == j2:
            return
        if out and out[-1][0] == tag:
            _, pi1, _, pj1, _ = out[-1]
            out[-1] = (tag, pi1, i2, pj1, j2)
        else:
            out.append((tag, i1, i2, j1, j2))

    def solve(alo: int, ahi: int, blo: int, bhi: int, depth: int = 0) -> None:
        nonlocal budget
        start_a, start_b = alo, blo
        while alo < ahi and blo < bhi and a[alo] == b[blo]:
            alo, blo = alo + 1, blo + 1
        emit("equal", start_a, alo, start_b, blo)
        end_a, end_b = ahi, bhi
        while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
            ahi, bhi = ahi - 1, bhi - 1
        if alo == ahi or blo == bhi:  # one side empty: a pure insert or delete
            emit("insert" if alo == ahi else "delete", alo, ahi, blo, bhi)
            emit("equal", ahi, end_a, bhi, end_b)
            return
        anchors: list[tuple[int, int]] = []
        if depth < MAX_DEPTH:
            count_a = Counter(a[alo:ahi])
            count_b = Counter(b[blo:bhi])
            unique_b = {b[j]: j for j in range(blo, bhi) if count_b[b[j]] == 1}
            pairs = [(i, unique_b[a[i]]) for i in range(alo, ahi) if count_a[a[i]] == 1 and a[i] in unique_b]
            anchors = _longest_increasing(pairs)
        if not anchors:
            pairs_in_gap = (ahi - alo) * (bhi - blo)
            if pairs_in_gap <= SMALL_GAP and pairs_in_gap <= budget:
                budget -= pairs_in_gap
                matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
                for tag, i1, i2, j1, j2 in matcher.get_opcodes():
                    emit(tag, alo + i1, alo + i2, blo + j1, blo + j2)
            else:
                emit("replace", alo, ahi, blo, bhi)
        else:
            i, j = alo, blo
            for ai, bj in anchors:
                if i < ai or j < bj:
                    solve(i, ai, j, bj, depth + 1)
                emit("equal", ai, ai + 1, bj, bj + 1)
                i, j = ai + 1, bj + 1
            if i < ahi or j < bhi:
                solve(i, ahi, j, bhi, depth + 1)
        emit("equal", ahi, end_a, bhi, end_b)

    solve(0, len(a), 0, len(b))
    return out or [("equal", 0, 0, 0, 0)]


class _Precomputed(difflib.SequenceMatcher[str]):
    """difflib's hunk grouping over opcodes we computed, so it does not match again."""

    def __init__(self, codes: list[Opcode]):
        super().__init__(None, [], [])
        self._codes = codes

    def get_opcodes(self) -> list[Opcode]:  # type: ignore[override]
        return self._codes


def _range(start: int, stop: int) -> str:
    length = stop - start
    beginning = start + 1 if length else start
    return str(beginning) if length == 1 else f"{beginning},{length}"


def unified_diff(a: Sequence[str], b: Sequence[str], fromfile: str, tofile: str, n: int = 3) -> Iterator[str]:
    """The same text difflib.unified_diff writes (lines keep their endings), computed faster."""
    matcher = _Precomputed(opcodes(a, b))
    started = False
    for group in matcher.get_grouped_opcodes(n):
        if not started:
            started = True
            yield f"--- {fromfile}\n"
            yield f"+++ {tofile}\n"
        first, last = group[0], group[-1]
        yield f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (" " + line for line in a[i1:i2])
                continue
            if tag in ("replace", "delete"):
                yield from ("-" + line for line in a[i1:i2])
            if tag in ("replace", "insert"):
                yield from ("+" + line for line in b[j1:j2])
