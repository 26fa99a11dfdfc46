"""File paths from callers, resolved and checked against allowed roots (symlinks and `..` included)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from .errors import InputError


def inside(path: Path, root: Path) -> bool:
    """True when `path` is `root` or below it, compared by path components (so `<root>-evil` is not)."""
    return path == root or path.is_relative_to(root)


def _allowed(path: str | os.PathLike[str], allowed: Sequence[Path], what: str) -> tuple[str, Path]:
    """The real location of a caller-named path, which must lie inside one of `allowed`."""
    text = os.fspath(path)
    if not text or "\x00" in text:
        raise InputError(f"{what} must be a non-empty path without NUL bytes")
    real = Path(os.path.realpath(Path(text).expanduser()))
    if not any(inside(real, Path(os.path.realpath(a))) for a in allowed):
        shown = ", ".join(str(a) for a in allowed)
        raise InputError(f"{what} {text!r} is outside the allowed roots ({shown}); set JUDGE_MCP_ALLOWED_ROOTS to allow it")
    return text, real


def resolve_root(root: str | os.PathLike[str], allowed: Sequence[Path]) -> Path:
    """A directory the caller named, real path resolved, that must lie inside one of `allowed`."""
    text, real = _allowed(root, allowed, "root")
    if not real.is_dir():
        raise InputError(f"root {text!r} is not an existing directory")
    return real


def resolve_file(path: str | os.PathLike[str], allowed: Sequence[Path]) -> Path:
    """A file the caller named by absolute or relative path, that must lie inside one of `allowed`."""
    text, real = _allowed(path, allowed, "path")
    if not real.is_file():
        raise InputError(f"path {text!r} is not an existing file")
    return real


def resolve_relative(rel: str, root: Path) -> Path:
    """`rel` (relative, no `..`) joined to `root`; its real location, symlinks resolved, must stay in `root`.

    Works for files that do not exist yet: realpath resolves the existing part of the path,
    so a symlinked directory pointing outside the root is caught before anything is written.
    """
    if not rel or "\x00" in rel:
        raise InputError("path must be non-empty and without NUL bytes")
    if rel.startswith(("/", "\\")) or os.path.isabs(rel) or (len(rel) > 1 and rel[1] == ":"):
        raise InputError(f"path {rel!r} must be relative to the root, not absolute")
    parts = rel.replace("\\", "/").split("/")
    if ".." in parts:
        raise InputError(f"path {rel!r} must not contain '..'")
    real = Path(os.path.realpath(root / rel))
    if not inside(real, root) or real == root:
        raise InputError(f"path {rel!r} resolves outside the root (through a symlink?)")
    return real
