"""SEARCH/REPLACE blocks and unified diffs become ops; measured on real model edits (aider's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judges.errors import InputError
from judges.patches.formats import detect_format, search_replace_ops, to_ops, unified_diff_ops
from judges.patches.ops import PatchLimits, apply_patch
from tests.conftest import corpus


def cases() -> list[dict[str, Any]]:
    path = corpus("patches", "aider_searchreplace_cases.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def render_blocks(path: str, blocks: list[dict[str, str]]) -> str:
    """Blocks as aider writes them: the path line, a fence, SEARCH / ======= / REPLACE."""
    out = []
    for b in blocks:
        out.append(f"{path}\n```python\n<<<<<<< SEARCH\n{b['search']}=======\n{b['replace']}>>>>>>> REPLACE\n```\n\n")
    return "Here are the changes:\n\n" + "".join(out)


def apply_to_before(case: dict[str, Any], patch: Any, tmp: Path) -> bytes:
    target = tmp / case["path"]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(case["before"].encode("utf-8"))
    report = apply_patch(patch, tmp, limits=PatchLimits(max_ops=100, max_bytes=1_000_000))
    assert report.applied, report.errors
    return target.read_bytes()


def test_exact_cases_turn_before_into_after_through_search_replace_import(tmp_path: Path) -> None:
    exact = [c for c in cases() if c["status"] == "exact"]
    passing = 0
    for i, case in enumerate(exact):
        patch = to_ops(render_blocks(case["path"], case["blocks"]))
        passing += apply_to_before(case, patch, tmp_path / str(i)) == case["after"].encode("utf-8")
    assert (passing, len(exact)) == (17, 17)


def test_every_case_turns_before_into_after_through_unified_diff_import(tmp_path: Path) -> None:
    all_cases = cases()
    passing = 0
    for i, case in enumerate(all_cases):
        patch = to_ops(case["unified_diff"])
        passing += apply_to_before(case, patch, tmp_path / str(i)) == case["after"].encode("utf-8")
    assert (passing, len(all_cases)) == (19, 19)


def test_raw_model_chat_yields_the_upstream_blocks(tmp_path: Path) -> None:
    """The model's own chat text, prose and all, parsed: the blocks for the case's file start the upstream list."""
    for case in (c for c in cases() if c["status"] == "exact"):
        ops = [o for o in search_replace_ops(case["raw_llm_chat_section"]) if o["path"] == case["path"]]
        parsed = [(o["find"], o["replace"]) for o in ops]
        upstream = [(b["search"], b["replace"]) for b in case["blocks"]]
        assert parsed and parsed == upstream[: len(parsed)], case["case_id"]


def test_detects_search_replace() -> None:
    assert detect_format("a.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n") == "search_replace"


def test_detects_unified_diff() -> None:
    assert detect_format("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n") == "unified_diff"


def test_unrecognised_text_is_refused_with_the_accepted_forms() -> None:
    with pytest.raises(InputError, match="SEARCH/REPLACE"):
        to_ops("please change line 3")


def test_block_without_a_path_uses_the_default_path() -> None:
    ops = search_replace_ops("<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n", default_path="m.py")
    assert ops == [{"kind": "edit", "path": "m.py", "find": "x = 1\n", "replace": "x = 2\n"}]


def test_block_without_any_path_is_refused() -> None:
    with pytest.raises(InputError, match="has no file path"):
        search_replace_ops("<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n")


def test_empty_search_creates_a_file() -> None:
    ops = search_replace_ops("new.py\n```\n<<<<<<< SEARCH\n=======\nprint(1)\n>>>>>>> REPLACE\n```\n")
    assert ops == [{"kind": "add", "path": "new.py", "content": "print(1)\n"}]


def test_unclosed_block_is_refused() -> None:
    with pytest.raises(InputError, match="not closed"):
        search_replace_ops("a.py\n<<<<<<< SEARCH\nx\n=======\ny\n")


def test_diff_new_and_deleted_files_become_add_and_remove() -> None:
    diff = ("--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"
            "--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n")
    assert unified_diff_ops(diff) == [
        {"kind": "add", "path": "new.txt", "content": "one\ntwo\n"},
        {"kind": "remove", "path": "old.txt"},
    ]


def test_diff_hunk_with_wrong_line_numbers_is_relocated_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a\nb\nc\nd\n")
    report = apply_patch(to_ops("--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n c\n-d\n+D\n"), tmp_path)
    assert report.applied and (tmp_path / "f.txt").read_text() == "a\nb\nc\nD\n"
    assert report.warnings == ["op 0 (splice f.txt): the expected lines were found at line 2, not 0; applied there"]


def test_diff_that_does_not_fit_the_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a\nb\n")
    report = apply_patch(to_ops("--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-zzz\n+y\n"), tmp_path)
    assert not report.applied and "the diff does not fit this file" in report.errors[0]


def test_diff_without_trailing_newline_is_kept(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_bytes(b"a\nb")
    diff = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
    assert apply_patch(to_ops(diff), tmp_path).applied
    assert (tmp_path / "f.txt").read_bytes() == b"a\nc"
