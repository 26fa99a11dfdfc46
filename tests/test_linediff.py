"""The fast line diff: its hunks, applied to the old lines, give the new lines."""

from __future__ import annotations

import difflib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judges.patches.linediff import unified_diff

LINES = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "d\n", "e\n", "z\n"]), max_size=40)


def apply_unified(a: list[str], diff: str) -> list[str]:
    lines = diff.splitlines(keepends=True)[2:]
    out: list[str] = []
    i = k = 0
    while k < len(lines):
        old = lines[k].split()[1][1:].split(",")
        start = int(old[0]) - (0 if len(old) == 2 and old[1] == "0" else 1)
        out += a[i:start]
        i, k = start, k + 1
        while k < len(lines) and not lines[k].startswith("@@"):
            tag, body = lines[k][0], lines[k][1:]
            if tag in " -":
                assert a[i] == body
                i += 1
            if tag in " +":
                out.append(body)
            k += 1
    return out + a[i:]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LINES, LINES)
def test_diff_applied_to_the_old_lines_gives_the_new_lines(a: list[str], b: list[str]) -> None:
    diff = "".join(unified_diff(a, b, "a/f", "b/f"))
    assert (diff == "") == (a == b)
    if diff:
        assert apply_unified(a, diff) == b


def test_a_single_change_reads_as_difflib_writes_it() -> None:
    a = [f"line {i}\n" for i in range(20)]
    b = list(a)
    b[10] = "changed\n"
    assert "".join(unified_diff(a, b, "a/f", "b/f")) == "".join(difflib.unified_diff(a, b, "a/f", "b/f"))
