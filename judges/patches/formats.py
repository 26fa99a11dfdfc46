"""Other formats agents speak, converted to patch ops so one validation and one atomic apply serve all:
aider-style SEARCH/REPLACE blocks and unified diffs."""

from __future__ import annotations

import re
from typing import Any, Literal

from judges.errors import InputError
from judges.inputs import caller_values

PatchFormat = Literal["auto", "ops", "search_replace", "unified_diff"]

_SEARCH = re.compile(r"^<{5,9} SEARCH\s*$")
_DIVIDER = re.compile(r"^={5,9}\s*$")
_REPLACE = re.compile(r"^>{5,9} REPLACE\s*$")
_FENCE = re.compile(r"^\s*```")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def detect_format(text: str) -> PatchFormat:
    if any(_SEARCH.match(line) for line in text.splitlines()):
        return "search_replace"
    if re.search(r"^--- .*\n\+\+\+ .*\n@@ ", text, re.M) or re.search(r"^@@ -\d+", text, re.M):
        return "unified_diff"
    stripped = text.strip()
    if stripped.startswith("{"):
        return "ops"
    raise InputError(
        "the patch text is neither SEARCH/REPLACE blocks, a unified diff, nor JSON ops; "
        'send {"ops": [...]}, aider-style blocks (path line, <<<<<<< SEARCH, =======, >>>>>>> REPLACE) or a diff'
    )


def to_ops(patch: Any, fmt: PatchFormat = "auto", *, default_path: str | None = None) -> dict[str, Any]:
    """Any accepted patch form → {"ops": [...]} (shape checks come after, in check_shape)."""
    if isinstance(patch, dict):
        if fmt not in ("auto", "ops"):
            raise InputError(f"format {fmt!r} expects the patch as text, not an object")
        return patch
    if not isinstance(patch, str):
        raise InputError("patch must be an object with 'ops', or text (SEARCH/REPLACE blocks or a unified diff)")
    kind = detect_format(patch) if fmt == "auto" else fmt
    if kind == "ops":
        try:
            value = caller_values.loads(patch, "patch")
        except InputError:
            raise
        except ValueError as exc:
            raise InputError(f"patch text is not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise InputError("patch JSON must be an object with an 'ops' array")
        return value
    if kind == "search_replace":
        return {"ops": search_replace_ops(patch, default_path=default_path)}
    return {"ops": unified_diff_ops(patch)}


def _filename(line: str) -> str | None:
    name = line.strip().strip("`*").strip()
    name = name.removeprefix("#").strip().rstrip(":").strip()
    if not name or " " in name or _FENCE.match(line) or _SEARCH.match(line):
        return None
    return name


def search_replace_ops(text: str, *, default_path: str | None = None) -> list[dict[str, Any]]:
    """Aider's blocks: a file path line (before or above the fence), then SEARCH / ======= / REPLACE.

    Each block becomes an edit whose SEARCH text must match exactly once; an empty SEARCH
    creates a new file.
    """
    lines = text.splitlines(keepends=True)
    ops: list[dict[str, Any]] = []
    path = default_path
    i = 0
    while i < len(lines):
        if not _SEARCH.match(lines[i].rstrip("\r\n")):
            i += 1
            continue
        for back in range(i - 1, max(-1, i - 4), -1):  # the path is on one of the few lines above
            candidate = _filename(lines[back])
            if candidate:
                path = candidate
                break
            if lines[back].strip() and not _FENCE.match(lines[back]):
                break
        if path is None:
            raise InputError(f"SEARCH block at line {i + 1} has no file path above it (or pass path=)")
        j = i + 1
        search: list[str] = []
        while j < len(lines) and not _DIVIDER.match(lines[j].rstrip("\r\n")):
            search.append(lines[j])
            j += 1
        k = j + 1
        replace: list[str] = []
        while k < len(lines) and not _REPLACE.match(lines[k].rstrip("\r\n")):
            replace.append(lines[k])
            k += 1
        if j >= len(lines) or k >= len(lines):
            raise InputError(f"SEARCH block at line {i + 1} is not closed by ======= and >>>>>>> REPLACE")
        find, new = "".join(search), "".join(replace)
        ops.append({"kind": "add", "path": path, "content": new} if not find.strip()
                   else {"kind": "edit", "path": path, "find": find, "replace": new})
        i = k + 1
    if not ops:
        raise InputError("no SEARCH/REPLACE blocks found")
    return ops


def _diff_path(line: str) -> str | None:
    name = line[4:].split("\t")[0].strip()
    if name == "/dev/null":
        return None
    return name[2:] if name.startswith(("a/", "b/")) else name


def unified_diff_ops(text: str) -> list[dict[str, Any]]:
    """A unified diff (git or plain) → ops: new files add, deleted files remove, hunks splice.

    Each hunk becomes a line splice that carries the old lines in `expect`, so it only applies
    where those lines are (at the stated line, or found exactly once elsewhere).
    """
    if text and not text.endswith("\n"):
        # The text's own last line ending went missing (trimmed by a host, an editor or a JSON string): that is
        # not the file losing its newline, which a diff says with "\ No newline at end of file".
        text += "\n"
    lines = text.splitlines(keepends=True)
    ops: list[dict[str, Any]] = []
    i = 0
    while i < len(lines):
        if not (lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")):
            i += 1
            continue
        old, new = _diff_path(lines[i]), _diff_path(lines[i + 1])
        i += 2
        hunks: list[tuple[int, int, list[str], list[str]]] = []
        while i < len(lines) and (match := _HUNK.match(lines[i])):
            old_count = int(match.group(2)) if match.group(2) is not None else 1
            new_start = int(match.group(3))
            new_count = int(match.group(4)) if match.group(4) is not None else 1
            i += 1
            before: list[str] = []
            after: list[str] = []
            seen_old = seen_new = 0
            last_tag = " "
            while i < len(lines) and (seen_old < old_count or seen_new < new_count or lines[i].startswith("\\")):
                line = lines[i]
                tag, body = line[:1], line[1:]
                if tag == "\\":  # "\ No newline at end of file" belongs to the line before it
                    for side in (before, after) if last_tag == " " else ((before,) if last_tag == "-" else (after,)):
                        side[-1] = side[-1].rstrip("\r\n")
                elif tag in (" ", "-", "+") or line in ("\n", "\r\n"):
                    if line in ("\n", "\r\n"):
                        tag, body = " ", line  # an empty context line whose space was stripped
                    if tag in (" ", "-"):
                        before.append(body)
                        seen_old += 1
                    if tag in (" ", "+"):
                        after.append(body)
                        seen_new += 1
                else:
                    break
                last_tag = tag
                i += 1
            hunks.append((new_start, new_count, before, after))
        if old is None:
            ops.append({"kind": "add", "path": new, "content": "".join("".join(h[3]) for h in hunks)})
            continue
        if new is None:
            ops.append({"kind": "remove", "path": old})
            continue
        for new_start, new_count, before, after in hunks:
            # In the file as the earlier hunks leave it, this hunk starts at its new-file line.
            start = new_start - 1 if new_count else new_start
            ops.append({"kind": "splice", "path": new, "start": max(0, start), "deleteCount": len(before),
                        "insert": "".join(after), "expect": "".join(before)})
    if not ops:
        raise InputError("no file changes found in the unified diff (need '--- a/path', '+++ b/path', '@@' hunks)")
    return ops
