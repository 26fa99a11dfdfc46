"""validate_patch and apply_patch, one rule per test, through the plain functions."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from judges.patches.ops import apply_patch, check_shape, validate_patch


def tree_hash(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() or p.is_symlink()
    }


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "proj"
    (r / "src").mkdir(parents=True)
    (r / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n\n\nprint(add(1, 2))\n")
    (r / "README.md").write_text("# proj\n")
    return r


def edit(path: str, find: str, replace: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "edit", "path": path, "find": find, "replace": replace, **extra}


def errors_of(patch: Any, root: Path | None = None, **kw: Any) -> list[str]:
    return validate_patch(patch, root, **kw).errors


# --- shape (the seed's validateFixerPatch) ---

def test_ops_must_be_an_array() -> None:
    assert errors_of({"ops": "x"}) == [
        "patch must be an object with an 'ops' array, e.g. {\"ops\": [{\"kind\": \"edit\", ...}]}"
    ]


def test_unknown_kind_names_the_op_index() -> None:
    assert errors_of({"ops": [{"kind": "rename", "path": "a"}]}) == [
        "op 0: 'kind' must be one of add, remove, edit, splice (got 'rename')"
    ]


def test_missing_path_names_op_and_field() -> None:
    assert errors_of({"ops": [{"kind": "remove"}]}) == [
        "op 0 (remove): 'path' must be a non-empty string (a path relative to the root)"
    ]


def test_add_needs_content() -> None:
    assert errors_of({"ops": [{"kind": "add", "path": "a"}]}) == ["op 0 (add): 'content' must be a string"]


def test_edit_needs_find_and_replace() -> None:
    assert errors_of({"ops": [{"kind": "edit", "path": "a"}]}) == [
        "op 0 (edit): 'find' must be a string",
        "op 0 (edit): 'replace' must be a string",
    ]


def test_splice_needs_non_negative_whole_numbers() -> None:
    assert errors_of({"ops": [{"kind": "splice", "path": "a", "start": -1, "deleteCount": 1.5}]}) == [
        "op 0 (splice): 'start' must be a non-negative whole number of lines (got -1)",
        "op 0 (splice): 'deleteCount' must be a non-negative whole number of lines (got 1.5)",
    ]


def test_too_many_ops_uses_the_seed_wording() -> None:
    patch = {"ops": [{"kind": "add", "path": f"f{i}", "content": "x"} for i in range(100)]}
    assert errors_of(patch) == ["too many ops: 100 > 50 (split the patch, or raise max_ops)"]


def test_too_many_bytes_is_refused() -> None:
    patch = {"ops": [{"kind": "add", "path": "big", "content": "x" * 60000}]}
    assert errors_of(patch) == ["patch text is 60000 bytes, more than max_bytes=51200 (split the patch)"]


def test_unknown_fields_are_warned_about() -> None:
    report = validate_patch({"ops": [{"kind": "remove", "path": "a", "force": True}]})
    assert report.ok and report.warnings == ["op 0 (remove): ignored unknown field 'force'"]


def test_shape_only_without_root_is_ok_for_a_good_patch() -> None:
    report = validate_patch({"ops": [edit("a.py", "x", "y")]})
    assert report.ok and report.diff is None


# --- paths ---

@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/etc/passwd", "must be relative to the root, not absolute"),
        ("../outside.txt", "must not contain '..'"),
        ("src/../../x", "must not contain '..'"),
        ("a\x00b", "without NUL bytes"),
        (".git/config", "must not point into .git"),
        ("notes/", "path 'notes/' names a directory; name a file in it, e.g. notes/notes.md"),
    ],
)
def test_unsafe_paths_are_refused(root: Path, path: str, message: str) -> None:
    (errors,) = errors_of({"ops": [{"kind": "add", "path": path, "content": "x"}]}, root)
    assert message in errors


def test_symlink_leaving_the_root_is_refused_for_a_new_file(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "link").symlink_to(outside)
    (error,) = errors_of({"ops": [{"kind": "add", "path": "link/new.py", "content": "x"}]}, root)
    assert "resolves outside the root" in error
    assert list(outside.iterdir()) == []


def test_a_path_through_a_file_is_the_callers_error_not_a_race(root: Path) -> None:
    # Before: "f.txt changed while it was being used (a directory replaced by a symlink?) ... try again".
    (root / "f.txt").write_text("a\n")
    (error,) = errors_of({"ops": [{"kind": "add", "path": "f.txt/new.py", "content": "x"}]}, root)
    assert error == ("op 0 (add f.txt/new.py): f.txt is a file, not a directory, so nothing lies inside it (one "
                     "patch cannot replace a file by a directory)")


def test_sibling_prefix_escape_through_symlink_is_refused(root: Path) -> None:
    evil = root.parent / (root.name + "-evil")
    evil.mkdir()
    (evil / "x.py").write_text("a\n")
    (root / "sneaky").symlink_to(evil / "x.py")
    (error,) = errors_of({"ops": [edit("sneaky", "a", "b")]}, root)
    assert "resolves outside the root" in error


# --- ops against the files ---

def test_edit_find_must_occur(root: Path) -> None:
    (error,) = errors_of({"ops": [edit("src/app.py", "def sub(a, b):", "x")]}, root)
    assert error.startswith("op 0 (edit src/app.py): 'find' text not found.")


def test_missing_find_suggests_the_closest_lines(root: Path) -> None:
    (error,) = errors_of({"ops": [edit("src/app.py", "def add(a, c):\n    return a + c\n", "x")]}, root)
    assert "Did you mean lines 1-2" in error and "def add(a, b):" in error


def test_whitespace_and_unicode_quotes_are_normalised_in_the_suggestion(root: Path) -> None:
    (root / "q.py").write_text('msg = "it\'s  done"\n')
    (error,) = errors_of({"ops": [edit("q.py", "msg = “it’s done”", "x")]}, root)
    assert "at line 1 but differs in whitespace, quotes or dashes" in error


def test_ambiguous_find_says_how_many_and_where(root: Path) -> None:
    (root / "dup.py").write_text("x = 1\ny = 2\nx = 1\n")
    (error,) = errors_of({"ops": [edit("dup.py", "x = 1", "x = 3")]}, root)
    assert "'find' occurs 2 times (lines 1, 3), expected 1" in error


def test_occurrences_replaces_exactly_that_many(root: Path) -> None:
    (root / "dup.py").write_text("x = 1\ny = 2\nx = 1\n")
    report = apply_patch({"ops": [edit("dup.py", "x = 1", "x = 3", occurrences=2)]}, root)
    assert report.applied and (root / "dup.py").read_text() == "x = 3\ny = 2\nx = 3\n"


def test_occurrences_mismatch_is_an_error(root: Path) -> None:
    (root / "dup.py").write_text("x = 1\nx = 1\n")
    (error,) = errors_of({"ops": [edit("dup.py", "x = 1", "x = 3", occurrences=3)]}, root)
    assert "occurs 2 times (lines 1, 2), expected 3; adjust occurrences" in error


def test_already_applied_edit_is_reported_as_such(root: Path) -> None:
    (error,) = errors_of({"ops": [edit("src/app.py", "return a - b", "return a + b")]}, root)
    assert "already applied" in error


def test_find_equal_to_replace_is_a_no_op_warning(root: Path) -> None:
    report = validate_patch({"ops": [edit("src/app.py", "return a + b", "return a + b")]}, root)
    assert report.ok and report.warnings == ["op 0 (edit src/app.py): find and replace are the same; the op changes nothing"]


def test_splice_counts_lines(root: Path) -> None:
    report = apply_patch({"ops": [{"kind": "splice", "path": "src/app.py", "start": 1, "deleteCount": 1,
                                   "insert": "    return b + a"}]}, root)
    assert report.applied
    assert (root / "src/app.py").read_text().splitlines()[:2] == ["def add(a, b):", "    return b + a"]


def test_splice_past_the_end_is_refused(root: Path) -> None:
    (error,) = errors_of({"ops": [{"kind": "splice", "path": "src/app.py", "start": 4, "deleteCount": 3}]}, root)
    assert "start 4 + deleteCount 3 runs past the end of the file (5 lines)" in error


def test_add_refuses_an_existing_file(root: Path) -> None:
    (error,) = errors_of({"ops": [{"kind": "add", "path": "README.md", "content": "x"}]}, root)
    assert "already exists; use edit ops, or set overwrite: true" in error


def test_add_with_overwrite_replaces_the_file(root: Path) -> None:
    assert apply_patch({"ops": [{"kind": "add", "path": "README.md", "content": "new\n", "overwrite": True}]}, root).applied
    assert (root / "README.md").read_text() == "new\n"


def test_remove_needs_an_existing_file(root: Path) -> None:
    (error,) = errors_of({"ops": [{"kind": "remove", "path": "nope.txt"}]}, root)
    assert error == "op 0 (remove nope.txt): the file does not exist"


def test_ops_on_one_file_apply_in_order(root: Path) -> None:
    patch = {"ops": [edit("src/app.py", "a + b", "a + b + c"), edit("src/app.py", "a + b + c", "sum((a, b, c))")]}
    assert apply_patch(patch, root).applied
    assert "return sum((a, b, c))" in (root / "src/app.py").read_text()


def test_an_op_sees_a_file_added_by_an_earlier_op(root: Path) -> None:
    patch = {"ops": [{"kind": "add", "path": "new/mod.py", "content": "X = 1\n"}, edit("new/mod.py", "X = 1", "X = 2")]}
    assert apply_patch(patch, root).applied
    assert (root / "new/mod.py").read_text() == "X = 2\n"


def test_validate_returns_the_unified_diff(root: Path) -> None:
    report = validate_patch({"ops": [edit("src/app.py", "a + b", "a - b")]}, root)
    assert report.diff is not None
    assert "--- a/src/app.py\n+++ b/src/app.py\n" in report.diff
    assert "-    return a + b\n+    return a - b\n" in report.diff


def test_validate_writes_nothing(root: Path) -> None:
    before = tree_hash(root)
    validate_patch({"ops": [edit("src/app.py", "a + b", "a - b")]}, root)
    assert tree_hash(root) == before


# --- apply ---

def test_failing_op_leaves_the_tree_byte_identical(root: Path) -> None:
    before = tree_hash(root)
    patch = {"ops": [edit("src/app.py", "a + b", "a - b"), {"kind": "add", "path": "x/y.py", "content": "1"},
                     {"kind": "remove", "path": "missing.txt"}]}
    report = apply_patch(patch, root)
    assert not report.applied and report.errors == ["op 2 (remove missing.txt): the file does not exist"]
    assert tree_hash(root) == before and not (root / "x").exists()


def test_failure_during_the_write_phase_rolls_everything_back(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = tree_hash(root)
    real_replace = os.replace
    calls = {"n": 0}

    def flaky(src: Any, dst: Any, **fds: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:  # README.md is removed and pkg/new.py in place: src/app.py's rename fails
            raise OSError("disk full")
        real_replace(src, dst, **fds)

    monkeypatch.setattr(os, "replace", flaky)
    patch = {"ops": [edit("src/app.py", "a + b", "a - b"), {"kind": "remove", "path": "README.md"},
                     {"kind": "add", "path": "pkg/new.py", "content": "x\n"}]}
    report = apply_patch(patch, root)
    monkeypatch.setattr(os, "replace", real_replace)
    assert not report.applied and report.errors == ["nothing was changed: disk full"]
    assert tree_hash(root) == before and not (root / "pkg").exists()
    assert not [p for p in root.rglob("*") if "judge-mcp" in p.name]


def test_dry_run_returns_the_diff_and_writes_nothing(root: Path) -> None:
    before = tree_hash(root)
    report = apply_patch({"ops": [edit("src/app.py", "a + b", "a * b")]}, root, dry_run=True)
    assert report.dry_run and not report.applied and report.files_changed == ["src/app.py"]
    assert "+    return a * b" in report.diff
    assert tree_hash(root) == before


def test_crlf_file_stays_crlf(root: Path) -> None:
    (root / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    assert apply_patch({"ops": [edit("win.txt", "two\n", "TWO\nand a half\n")]}, root).applied
    assert (root / "win.txt").read_bytes() == b"one\r\nTWO\r\nand a half\r\nthree\r\n"


def test_bom_is_preserved(root: Path) -> None:
    (root / "bom.txt").write_bytes(b"\xef\xbb\xbfhello\n")
    assert apply_patch({"ops": [edit("bom.txt", "hello", "bye")]}, root).applied
    assert (root / "bom.txt").read_bytes() == b"\xef\xbb\xbfbye\n"


def test_non_utf8_file_is_refused_clearly(root: Path) -> None:
    (root / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (error,) = apply_patch({"ops": [edit("latin.txt", "caf", "tea")]}, root).errors
    assert error == "op 0 (edit latin.txt): is not UTF-8 text (byte 3); patch it another way"


def test_file_mode_is_preserved(root: Path) -> None:
    script = root / "run.sh"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    assert apply_patch({"ops": [edit("run.sh", "hi", "bye")]}, root).applied
    assert script.stat().st_mode & 0o777 == 0o755


def test_remove_deletes_the_file(root: Path) -> None:
    report = apply_patch({"ops": [{"kind": "remove", "path": "README.md"}]}, root)
    assert report.applied and report.files_changed == ["README.md"] and not (root / "README.md").exists()
    assert "--- a/README.md\n+++ /dev/null" in report.diff


def test_check_shape_accepts_delete_count_spelling() -> None:
    ops, errors, _ = check_shape({"ops": [{"kind": "splice", "path": "a", "start": 0, "delete_count": 2}]})
    assert errors == [] and ops[0].delete_count == 2


def test_the_fixer_prompt_lists_each_op_model_with_every_field() -> None:
    import prompts
    from judges.patches.ops import KINDS, OP_MODELS

    text = prompts.render("code/fixer@v1")
    for kind, model in zip(KINDS, OP_MODELS, strict=True):
        (line,) = [ln for ln in text.splitlines() if f'"kind":"{kind}"' in ln]
        assert [part.split(":")[0].strip('{"') for part in line.strip().rstrip(",}").split(",")] == [
            f.alias or name for name, f in model.model_fields.items()]


def test_the_patch_schema_marks_required_exactly_the_fields_without_defaults() -> None:
    from judges.patches.ops import OP_MODELS, PATCH_SCHEMA

    shown = PATCH_SCHEMA["properties"]["ops"]["items"]["oneOf"]
    assert [s["required"] for s in shown] == [
        [f.alias or name for name, f in m.model_fields.items() if f.is_required()] for m in OP_MODELS]
    assert [s["properties"]["kind"] for s in shown] == [
        {"const": "add"}, {"const": "remove"}, {"const": "edit"}, {"const": "splice"}]


def _lean(node: Any) -> Any:
    """pydantic's schema without titles or defaults, `X | None` as X (how the ops' schema is written)."""
    if isinstance(node, list):
        return [_lean(n) for n in node]
    if not isinstance(node, dict):
        return node
    options = node.get("anyOf")
    if options and {"type": "null"} in options:
        (kept,) = [o for o in options if o != {"type": "null"}]
        node = {**{k: v for k, v in node.items() if k != "anyOf"}, **kept}
    out = {k: _lean(v) for k, v in node.items() if k not in ("title", "default")}
    if "const" in out:
        out.pop("type", None)
    return out


def test_each_op_schema_is_what_pydantic_generates_for_its_model() -> None:
    from judges.patches.ops import OP_MODELS, op_schema

    for model in OP_MODELS:
        assert op_schema(model) == _lean(model.model_json_schema(by_alias=True))


def test_a_misspelt_kind_is_answered_with_the_kind_it_is_closest_to() -> None:
    assert errors_of({"ops": [{"kind": "edti", "path": "a", "find": "x", "replace": "y"}]}) == [
        "op 0: 'kind' must be one of add, remove, edit, splice (got 'edti'); did you mean 'edit'?"
    ]
