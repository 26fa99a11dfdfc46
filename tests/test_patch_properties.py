"""Properties of apply_patch, checked with hypothesis over generated trees and patches."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from judges.patches.ops import apply_patch
from tests.conftest import memory_tmpdir

NAMES = ["a.txt", "b.txt", "d/c.txt"]
WORDS = st.sampled_from(["alpha", "beta", "gamma", "delta", "x", "y"])
TEXT = st.lists(WORDS, min_size=0, max_size=6).map(lambda ws: "".join(w + "\n" for w in ws))


@st.composite
def ops(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["add", "remove", "edit", "splice"]))
    path = draw(st.sampled_from([*NAMES, "e.txt"]))
    if kind == "add":
        return {"kind": "add", "path": path, "content": draw(TEXT), "overwrite": draw(st.booleans())}
    if kind == "remove":
        return {"kind": "remove", "path": path}
    if kind == "edit":
        return {"kind": "edit", "path": path, "find": draw(WORDS), "replace": draw(WORDS)}
    return {"kind": "splice", "path": path, "start": draw(st.integers(0, 7)),
            "deleteCount": draw(st.integers(0, 3)), "insert": draw(TEXT)}


SCRATCH = memory_tmpdir()  # thousands of trees: in memory their syncs and removals cost ~nothing


def build(files: dict[str, str]) -> Path:
    root = Path(tempfile.mkdtemp(prefix="judge-prop-", dir=SCRATCH))
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


TREES = st.fixed_dictionaries({n: TEXT for n in NAMES})
PATCHES = st.lists(ops(), min_size=1, max_size=6)
EXAMPLES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@EXAMPLES
@given(TREES, PATCHES)
def test_a_patch_that_fails_leaves_the_tree_unchanged(files: dict[str, str], patch_ops: list[dict[str, Any]]) -> None:
    root = build(files)
    try:
        before = snapshot(root)
        report = apply_patch({"ops": patch_ops}, root)
        event("applied" if report.applied else "refused")
        if not report.applied:
            assert snapshot(root) == before
    finally:
        shutil.rmtree(root)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREES, PATCHES)
def test_a_valid_patch_equals_its_ops_applied_one_by_one(files: dict[str, str], patch_ops: list[dict[str, Any]]) -> None:
    whole, stepwise = build(files), build(files)
    try:
        if not apply_patch({"ops": patch_ops}, whole).applied:
            event("refused")
            return
        event("applied")
        for op in patch_ops:
            assert apply_patch({"ops": [op]}, stepwise).applied
        assert snapshot(whole) == snapshot(stepwise)
    finally:
        shutil.rmtree(whole)
        shutil.rmtree(stepwise)
