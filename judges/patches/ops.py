"""Patch ops (seed 003): shape checks, a simulation against the files, and all-or-nothing application.

Ops: the models AddOp, RemoveOp, EditOp, SpliceOp below are their one definition; the JSON schema shown
to callers (PATCH_SCHEMA) and the fixer prompt's op lines (describe_ops) derive from them. Splice offsets count LINES: `start` is a 0-based line index, `deleteCount` a number of lines.
Several ops on one file apply in order, each to the file as the earlier ops left it.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import re
import stat
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeGuard, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field

import prompts
from judges.errors import InputError
from judges.inputs.paths import Tree, open_file, read_fd, resolve_relative
from judges.patches import journal, linediff
from judges.processes import pid_alive

MAX_FILE_BYTES = 5 * 1024 * 1024


@dataclass(frozen=True)
class PatchLimits:
    """How big one patch may be: the one place these numbers are written. Settings expose them as
    JUDGE_MCP_PATCH_MAX_OPS / JUDGE_MCP_PATCH_MAX_BYTES; a tool call may pass its own."""

    max_ops: int = 50
    max_bytes: int = 51_200

    def with_overrides(self, max_ops: int | None = None, max_bytes: int | None = None) -> PatchLimits:
        return PatchLimits(self.max_ops if max_ops is None else max_ops,
                           self.max_bytes if max_bytes is None else max_bytes)


DEFAULT_LIMITS = PatchLimits()
BOM = b"\xef\xbb\xbf"


# --- the one definition of the ops: the schema callers and the fixer see, and the fixer prompt's lines, derive from it


class AddOp(BaseModel):
    """Create a file."""

    model_config = ConfigDict(defer_build=True)
    kind: Literal["add"]
    path: str
    content: str
    overwrite: bool = Field(default=False, description="Replace an existing file.")


class RemoveOp(BaseModel):
    """Delete a file."""

    model_config = ConfigDict(defer_build=True)
    kind: Literal["remove"]
    path: str


class EditOp(BaseModel):
    """Replace exact text."""

    model_config = ConfigDict(defer_build=True)
    kind: Literal["edit"]
    path: str
    find: str
    replace: str
    occurrences: int | None = Field(default=None, ge=1,
                                    description="Replace exactly this many matches; default: find must occur once.")


class SpliceOp(BaseModel):
    """Replace whole lines."""

    model_config = ConfigDict(defer_build=True, populate_by_name=True)
    kind: Literal["splice"]
    path: str
    start: int = Field(ge=0, description="0-based LINE index.")
    delete_count: int = Field(alias="deleteCount", ge=0, description="Number of LINES removed.")
    insert: str = Field(default="", description="Text inserted at that line.")
    expect: str | None = Field(default=None, description=(
        "Guard: the deleted lines' exact text; not at start, the op moves to their one place or fails."))


OP_MODELS: tuple[type[BaseModel], ...] = (AddOp, RemoveOp, EditOp, SpliceOp)
KINDS: tuple[str, ...] = tuple(m.model_fields["kind"].annotation.__args__[0] for m in OP_MODELS)  # type: ignore[union-attr]
# The fields each kind accepts (both spellings of an aliased one, e.g. deleteCount and delete_count).
_FIELDS: dict[str, set[str]] = {
    kind: {n for name, f in m.model_fields.items() for n in (name, f.alias or name)} for kind, m in zip(KINDS, OP_MODELS, strict=True)
}


_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", bool: "boolean"}


@functools.cache
def op_schema(model: type[BaseModel]) -> dict[str, Any]:
    """An op model's JSON schema as a person would write it (no titles or defaults, `X | None` as X), read
    straight from its fields: pydantic's own generator would cost start-up time (this is in a tool's input
    schema); tests check the two agree."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, f in model.model_fields.items():
        annotation = f.annotation
        if get_origin(annotation) is Literal:
            spec: dict[str, Any] = {"const": get_args(annotation)[0]}
        else:
            (kind,) = [a for a in get_args(annotation) if a is not type(None)] or [annotation]
            spec = {"type": _JSON_TYPES[kind]}
        for rule in f.metadata:
            if hasattr(rule, "ge"):
                spec["minimum"] = rule.ge
        if f.description:
            spec["description"] = f.description
        properties[f.alias or name] = spec
        if f.is_required():
            required.append(f.alias or name)
    return {"description": (model.__doc__ or "").strip(), "properties": properties, "required": required,
            "type": "object"}


PATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["ops"],
    "properties": {
        "ops": {
            "type": "array",
            "description": "Applied in order; several ops on one file see the earlier ops' result.",
            "items": {"oneOf": [op_schema(m) for m in OP_MODELS]},
        }
    },
}

_JSON_TYPE = {"string": "string", "integer": "number", "boolean": "boolean"}


def describe_ops(order: tuple[str, ...] = ("edit", "splice", "add", "remove")) -> str:
    """The ops as the fixer prompt lists them, one line each, e.g.
    {"kind":"edit","path":string,"find":string,"replace":string,"occurrences":number?}."""
    lines = []
    for kind in order:
        schema = op_schema(OP_MODELS[KINDS.index(kind)])
        required = set(schema["required"])
        parts = [f'"{name}":' + (f'"{spec["const"]}"' if "const" in spec else _JSON_TYPE[spec["type"]])
                 + ("" if name in required else "?") for name, spec in schema["properties"].items()]
        lines.append("{" + ",".join(parts) + "}")
    return "{ \"ops\": [\n" + ",\n".join(f"  {line}" for line in lines) + "\n] }"


prompts.provide("patch_ops", describe_ops)  # the fixer prompt's op lines (code/fixer@v1)


@dataclass(frozen=True)
class PatchOp:
    kind: Literal["add", "remove", "edit", "splice"]
    path: str
    content: str = ""
    overwrite: bool = False
    find: str = ""
    replace: str = ""
    occurrences: int | None = None
    start: int = 0
    delete_count: int = 0
    insert: str = ""
    expect: str | None = None


class ValidationReport(BaseModel):
    ok: bool
    errors: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    diff: str | None = Field(default=None, description="Unified diff the patch would produce (with a root).")
    ops: int = Field(default=0, description="How many ops the patch has.")


class ApplyReport(BaseModel):
    applied: bool
    files_changed: list[str] = Field(default_factory=list)
    diff: str = ""
    errors: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    dry_run: bool = False


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _text_field(op: dict[str, Any], name: str, where: str, errors: list[str], *, required: bool = True,
                nonempty: bool = False) -> str:
    value = op.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        errors.append(f"{where}: '{name}' must be a string")
        return ""
    if nonempty and not value:
        errors.append(f"{where}: '{name}' must not be empty (to create a file use kind add)")
    return value


def check_shape(patch: Any, *, limits: PatchLimits = DEFAULT_LIMITS) -> tuple[list[PatchOp], list[str], list[str]]:
    """The seed's validateFixerPatch, with errors that name the op index and the field."""
    errors: list[str] = []
    warnings: list[str] = []
    if not isinstance(patch, dict) or not isinstance(patch.get("ops"), list):
        return [], ["patch must be an object with an 'ops' array, e.g. {\"ops\": [{\"kind\": \"edit\", ...}]}"], []
    raw_ops: list[Any] = patch["ops"]
    if not raw_ops:
        errors.append("patch has no ops")
    if len(raw_ops) > limits.max_ops:
        errors.append(f"too many ops: {len(raw_ops)} > {limits.max_ops} (split the patch, or raise max_ops)")
    ops: list[PatchOp] = []
    total = 0
    for i, op in enumerate(raw_ops):
        if not isinstance(op, dict):
            errors.append(f"op {i}: must be an object with 'kind' and 'path'")
            continue
        kind = op.get("kind")
        if kind not in KINDS:
            # closer than judges.errors.closest's 0.6: a 'rename' must not be pointed at 'remove'
            near = difflib.get_close_matches(kind, KINDS, n=1, cutoff=0.75) if isinstance(kind, str) else []
            errors.append(f"op {i}: 'kind' must be one of add, remove, edit, splice (got {kind!r})"
                          + (f"; did you mean {near[0]!r}?" if near else ""))
            continue
        where = f"op {i} ({kind})"
        bad = len(errors)
        path = op.get("path")
        if not isinstance(path, str) or not path.strip():
            errors.append(f"{where}: 'path' must be a non-empty string (a path relative to the root)")
        for extra in sorted(set(op) - _FIELDS[kind]):
            warnings.append(f"{where}: ignored unknown field {extra!r}")

        fields: dict[str, Any] = {}
        if kind == "add":
            fields["content"] = _text_field(op, "content", where, errors)
            if "overwrite" in op and not isinstance(op["overwrite"], bool):
                errors.append(f"{where}: 'overwrite' must be true or false")
            fields["overwrite"] = op.get("overwrite") is True
        elif kind == "edit":
            fields["find"] = _text_field(op, "find", where, errors, nonempty=True)
            fields["replace"] = _text_field(op, "replace", where, errors)
            occ = op.get("occurrences")
            if occ is not None and (not _is_int(occ) or occ < 1):
                errors.append(f"{where}: 'occurrences' must be a whole number of at least 1 (got {occ!r})")
            fields["occurrences"] = occ if _is_int(occ) else None
        elif kind == "splice":
            count = op.get("deleteCount", op.get("delete_count"))
            for name, value in (("start", op.get("start")), ("deleteCount", count)):
                if not _is_int(value) or value < 0:
                    errors.append(f"{where}: '{name}' must be a non-negative whole number of lines (got {value!r})")
            fields.update(start=op.get("start") if _is_int(op.get("start")) else 0,
                          delete_count=count if _is_int(count) else 0,
                          insert=_text_field(op, "insert", where, errors, required=False))
            if op.get("expect") is not None:
                fields["expect"] = _text_field(op, "expect", where, errors)
                if _is_int(count) and len(fields["expect"].splitlines()) != count:
                    errors.append(f"{where}: 'expect' has {len(fields['expect'].splitlines())} lines but "
                                  f"deleteCount is {count}")
        total += sum(len(v.encode("utf-8")) for v in fields.values() if isinstance(v, str))
        if len(errors) == bad:
            ops.append(PatchOp(kind=kind, path=str(path), **fields))
    if total > limits.max_bytes:
        errors.append(f"patch text is {total} bytes, more than max_bytes={limits.max_bytes} (split the patch)")
    return ops, errors, warnings


@dataclass
class FileState:
    rel: str
    path: Path
    original: bytes | None  # None: did not exist before the patch
    text: str | None  # current content (LF-normalised when crlf); None: absent
    crlf: bool = False
    bom: bool = False
    mode: int | None = None
    created: bool = False
    parts: tuple[str, ...] = ()  # the resolved location, relative to the root

    def encoded(self) -> bytes | None:
        if self.text is None:
            return None
        text = self.text.replace("\n", "\r\n") if self.crlf else self.text
        return (BOM if self.bom else b"") + text.encode("utf-8")

    def original_text(self) -> str:
        if self.original is None:
            return ""
        data = self.original[len(BOM):] if self.bom else self.original
        return data.decode("utf-8")


def _read_current(tree: Tree, parts: tuple[str, ...]) -> tuple[bytes, int] | None:
    """(bytes, mode) of the file at root/parts, read through directory fds; None when absent."""
    dir_fd = tree.dir(parts[:-1])
    if dir_fd is None:
        return None
    try:
        fd = open_file(dir_fd, parts[-1])
    except FileNotFoundError:
        return None
    info = os.fstat(fd)
    if info.st_size > MAX_FILE_BYTES:
        os.close(fd)
        raise InputError(f"is {info.st_size} bytes, more than the {MAX_FILE_BYTES} bytes a patch may touch")
    return read_fd(fd, MAX_FILE_BYTES, "the file"), info.st_mode


def _load(rel: str, path: Path, parts: tuple[str, ...], tree: Tree) -> FileState:
    found = _read_current(tree, parts)
    if found is None:
        return FileState(rel, path, None, None, parts=parts)
    data, mode = found
    bom = data.startswith(BOM)
    try:
        text = data[len(BOM):].decode("utf-8") if bom else data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"is not UTF-8 text (byte {exc.start}); patch it another way") from None
    # CRLF files are edited as LF and written back as CRLF; mixed endings are left byte for byte.
    crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")
    return FileState(rel, path, data, text.replace("\r\n", "\n") if crlf else text, crlf=crlf, bom=bom,
                     mode=mode, parts=parts)


_QUOTES = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "–": "-", "—": "-", "\u00a0": " "})


def _normal(line: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", line).translate(_QUOTES).split())


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def did_you_mean(text: str, find: str) -> str:
    """The closest lines of `text` to `find`, with whitespace and Unicode quotes/dashes normalised."""
    lines = text.split("\n")
    want = [_normal(x) for x in find.strip("\n").split("\n")]
    k = max(1, len(want))
    if len(lines) < k:
        return ""
    have = [_normal(x) for x in lines]
    joined_want = "\n".join(want)
    best, best_i = 0.0, -1
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(joined_want)
    first = want[0]
    for i in range(len(lines) - k + 1):
        window = "\n".join(have[i : i + k])
        if window == joined_want:
            best, best_i = 1.0, i
            break
        # Cheap filter before the full ratio: the window's first line must look related.
        if first and have[i] and difflib.SequenceMatcher(None, have[i], first).quick_ratio() < 0.5:
            continue
        matcher.set_seq1(window)
        if matcher.quick_ratio() <= best:
            continue
        ratio = matcher.ratio()
        if ratio > best:
            best, best_i = ratio, i
    if best_i < 0 or best < 0.5:
        return ""
    shown = "\n".join(lines[best_i : best_i + k])
    if best == 1.0:
        return (f" The text is at line {best_i + 1} but differs in whitespace, quotes or dashes; copy it exactly:\n"
                f"{shown}")
    return f" Did you mean lines {best_i + 1}-{best_i + k} ({best:.0%} similar)?\n{shown}"


def _apply_op(op: PatchOp, state: FileState, errors: list[str], warnings: list[str], where: str) -> None:
    if op.kind == "add":
        if state.text is not None and not op.overwrite:
            errors.append(f"{where}: the file already exists; use edit ops, or set overwrite: true to replace it")
            return
        state.text, state.crlf = op.content, False
        if state.original is None:
            state.created = True
        return
    if state.text is None:
        errors.append(f"{where}: the file does not exist" + (" (use kind add to create it)" if op.kind != "remove" else ""))
        return
    if op.kind == "remove":
        state.text = None
        return
    if op.kind == "edit":
        find = op.find.replace("\r\n", "\n") if state.crlf else op.find
        replace = op.replace.replace("\r\n", "\n") if state.crlf else op.replace
        count = state.text.count(find)
        wanted = op.occurrences or 1
        if count == 0:
            if replace and replace in state.text:
                errors.append(f"{where}: already applied: 'find' is absent and 'replace' is already in the file")
            else:
                errors.append(f"{where}: 'find' text not found.{did_you_mean(state.text, find)}")
            return
        if count != wanted:
            starts = [m.start() for m in re.finditer(re.escape(find), state.text)]
            at = ", ".join(str(_line_of(state.text, s)) for s in starts[:10])
            hint = ("add surrounding lines to make it unique, or set occurrences" if op.occurrences is None
                    else "adjust occurrences")
            errors.append(f"{where}: 'find' occurs {count} times (lines {at}), expected {wanted}; {hint}")
            return
        if find == replace:
            warnings.append(f"{where}: find and replace are the same; the op changes nothing")
        state.text = state.text.replace(find, replace)
        return
    # splice, in lines
    lines = state.text.splitlines(keepends=True)
    n = len(lines)
    start = op.start
    if op.expect is not None and op.delete_count:
        expect = op.expect.replace("\r\n", "\n") if state.crlf else op.expect
        if "".join(lines[start : start + op.delete_count]) != expect:
            found = [i for i in range(n - op.delete_count + 1) if "".join(lines[i : i + op.delete_count]) == expect]
            if len(found) != 1:
                errors.append(f"{where}: the expected lines are not at line {start} and occur {len(found)} times "
                              f"elsewhere; the diff does not fit this file.{did_you_mean(state.text, expect)}")
                return
            warnings.append(f"{where}: the expected lines were found at line {found[0]}, not {start}; applied there")
            start = found[0]
    op = dataclasses.replace(op, start=start)
    if op.start > n:
        errors.append(f"{where}: start {op.start} is past the end of the file ({n} lines; lines count from 0)")
        return
    if op.start + op.delete_count > n:
        errors.append(f"{where}: start {op.start} + deleteCount {op.delete_count} runs past the end of the file ({n} lines)")
        return
    insert = op.insert.replace("\r\n", "\n") if state.crlf else op.insert
    if insert and not insert.endswith("\n") and op.start + op.delete_count < n:
        insert += "\n"
    if not op.delete_count and not insert:
        warnings.append(f"{where}: deletes and inserts nothing; the op changes nothing")
    state.text = "".join(lines[: op.start]) + insert + "".join(lines[op.start + op.delete_count :])


@dataclass
class Simulation:
    files: dict[Path, FileState] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def changed(self) -> list[FileState]:
        return [s for s in self.files.values() if s.encoded() != s.original]

    def diff(self) -> str:
        return "".join(unified_diff(s) for s in sorted(self.changed(), key=lambda s: s.rel))


def simulate(ops: list[PatchOp], root: Path, tree: Tree | None = None, *,
             allow_read_only: bool = False) -> Simulation:
    """Run the ops against the files under `root`, in memory; nothing is written.

    Every path is resolved once; files are read through directory fds (`tree`), never by path.
    """
    if tree is None:
        with Tree(root) as own:
            return simulate(ops, root, own, allow_read_only=allow_read_only)
    sim = Simulation()
    for i, op in enumerate(ops):
        where = f"op {i} ({op.kind} {op.path})"
        try:
            path = resolve_relative(op.path, root)
            parts = path.relative_to(root).parts
            if ".git" in parts:
                raise InputError("must not point into .git")
            if journal.reserved(parts[-1]):
                raise InputError("is a name judge-mcp reserves for its own temporary files; choose another name")
            state = sim.files.get(path)
            if state is None:
                state = sim.files[path] = _load(path.relative_to(root).as_posix(), path, parts, tree)
        except InputError as exc:
            sim.errors.append(f"{where}: {exc}")
            continue
        _apply_op(op, state, sim.errors, sim.warnings, where)
    if not allow_read_only:
        for state in sim.changed():
            if state.mode is not None and not state.mode & stat.S_IWUSR:
                sim.errors.append(f"{state.rel}: the file is read-only (mode {stat.S_IMODE(state.mode):o}); "
                                  "make it writable, or pass allow_read_only: true to change it anyway")
    return sim


def unified_diff(state: FileState) -> str:
    before = state.original_text().replace("\r\n", "\n") if state.crlf else state.original_text()
    after = state.text or ""
    a = f"a/{state.rel}" if state.original is not None else "/dev/null"
    b = f"b/{state.rel}" if state.text is not None else "/dev/null"
    out = []
    for line in linediff.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), a, b):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def validate_patch(patch: Any, root: Path | None = None, *, limits: PatchLimits = DEFAULT_LIMITS,
                   allow_read_only: bool = False) -> ValidationReport:
    """Shape checks, then (with a root) every op checked against the files as the earlier ops leave them."""
    ops, errors, warnings = check_shape(patch, limits=limits)
    count = len(patch.get("ops", [])) if isinstance(patch, dict) and isinstance(patch.get("ops"), list) else 0
    if errors or root is None:
        return ValidationReport(ok=not errors, errors=errors, warnings=warnings, ops=count)
    sim = simulate(ops, root, allow_read_only=allow_read_only)
    return ValidationReport(ok=not sim.errors, errors=sim.errors, warnings=warnings + sim.warnings,
                            diff=sim.diff(), ops=count)


def apply_patch(patch: Any, root: Path, *, dry_run: bool = False, limits: PatchLimits = DEFAULT_LIMITS,
                allow_read_only: bool = False, register: Path | None = None) -> ApplyReport:
    """All-or-nothing: every new file is computed first; on any failure the tree is left byte-identical, and a
    crash (kill -9) is finished or undone by the next apply on this root or the next server start (journal.py;
    `register`: the data home's folder that notes roots with an apply under way, for that start).

    The root is opened once; every read, write, rename and unlink below it goes through directory
    fds that never follow a symlink, so a directory swapped for a link mid-way fails the patch.
    """
    ops, errors, warnings = check_shape(patch, limits=limits)
    if errors:
        return ApplyReport(applied=False, errors=errors, warnings=warnings, dry_run=dry_run)
    with Tree(root) as tree:
        if not dry_run:  # applies on this root take turns: each reads the tree another left, never a tree mid-write
            journal.take_turn(tree.fd, str(root))
        # An apply that a crash interrupted here is finished or undone first: the patch meets a whole tree.
        recovered = journal.recover(tree) if not dry_run else journal.Recovered()
        warnings += recovered.notes
        sim = simulate(ops, root, tree, allow_read_only=allow_read_only)
        warnings += sim.warnings
        diff = sim.diff()
        changed = sorted(sim.changed(), key=lambda s: s.rel)
        names = [s.rel for s in changed]
        if sim.errors:
            return ApplyReport(applied=False, diff=diff, errors=sim.errors, warnings=warnings, dry_run=dry_run)
        if dry_run:
            return ApplyReport(applied=False, files_changed=names, diff=diff, warnings=warnings, dry_run=True)
        cleaned = clean_leftovers(tree, keep=recovered.running)
        if cleaned:
            warnings.append(f"removed {len(cleaned)} temporary file(s) left by an interrupted earlier apply: "
                            + ", ".join(cleaned[:10]))
        try:
            _commit(changed, tree, register)
        except (OSError, InputError) as exc:
            return ApplyReport(applied=False, diff=diff, errors=[f"nothing was changed: {exc}"], warnings=warnings)
    return ApplyReport(applied=True, files_changed=names, diff=diff, warnings=warnings)


# Temp files (journal.TEMP_NAME) whose process is gone were left by an interrupted apply of a server without
# journals; the next apply removes them (a journal's own temps are finished or undone by journal.recover first).
_SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".tox"}


def clean_leftovers(tree: Tree, max_entries: int = 50_000, keep: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Remove temp files of applies whose process died (kill -9), except `keep` (a running apply's);
    returns their relative paths."""
    removed: list[str] = []
    seen = 0
    for top, dirs, files, dir_fd in os.fwalk(".", dir_fd=tree.fd):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        seen += len(dirs) + len(files)
        for name in files:
            match = journal.TEMP_NAME.match(name)
            if match and name not in keep and not pid_alive(int(match.group(1))):
                try:
                    os.unlink(name, dir_fd=dir_fd)
                except FileNotFoundError:
                    continue
                removed.append(os.path.normpath(os.path.join(top, name)))
        if seen > max_entries:
            break
    return removed


def _commit(changed: list[FileState], tree: Tree, register: Path | None) -> None:
    """Write through temp files and renames inside directory fds, under a journal (journal.py): all or nothing,
    across a crash too."""
    # An apply through another root (nested in this one, or holding it) writes the same directories: each changed
    # file's nearest existing directory is held too (in one order), so the check below stays true until the renames.
    held: set[tuple[str, ...]] = set()
    for s in changed:
        parts = s.parts[:-1]
        while parts and tree.dir(parts) is None:
            parts = parts[:-1]
        held.add(parts)
    for parts in sorted(held):
        fd = tree.dir(parts)
        assert fd is not None
        journal.take_turn(fd, "/".join(parts) or str(tree.root))
    for s in changed:  # the tree must still be as we read it
        now = _read_current(tree, s.parts)
        if (now[0] if now else None) != s.original:
            raise InputError(f"{s.rel} changed while the patch was being prepared; validate again")
    plan = journal.Plan()
    contents: dict[tuple[tuple[str, ...], str], tuple[bytes, int | None]] = {}
    for s in changed:
        folder, name = s.parts[:-1], s.parts[-1]
        data = s.encoded()
        if data is not None:
            for depth in range(1, len(s.parts)):
                prefix = s.parts[:depth]
                if prefix not in plan.new_dirs and tree.dir(prefix) is None:
                    plan.new_dirs.append(prefix)
            contents[(folder, name)] = (data, s.mode)
        plan.entries.append(journal.Entry(
            dir=folder, name=name, tmp=None if data is None else journal.temp_name(name, "tmp"),
            backup=None if s.original is None else journal.temp_name(name, "old"),
            old=journal.sha256(s.original), new=journal.sha256(data)))
    journal.apply_planned(tree, plan, contents, register)
