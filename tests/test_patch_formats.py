"""SEARCH/REPLACE blocks and unified diffs become ops (measured on real model edits, aider's: tests_corpora/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from judges.errors import InputError
from judges.patches.formats import detect_format, search_replace_ops, to_ops, unified_diff_ops
from judges.patches.ops import apply_patch


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
