"""File paths from callers, resolved and checked against allowed roots (symlinks and `..` included)."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from judges.errors import InputError

NO_ROOTS = ("no file access: no allowed roots are configured and the client offers no MCP roots. Set "
            "JUDGE_MCP_ALLOWED_ROOTS to the project directories (separated by ':', e.g. "
            "JUDGE_MCP_ALLOWED_ROOTS=/home/me/project) in the server's env, or pass the content inline instead")
OUTSIDE = "set JUDGE_MCP_ALLOWED_ROOTS to allow it"
MAX_PATH = 4096  # Linux's PATH_MAX: a longer path names nothing
_FOREIGN_ABSOLUTE = re.compile(r"^(?:[A-Za-z]:[\\/]|\\)")  # C:\x, C:/x, \\server\share, \x


class Roots(list[Path]):
    """The directories one call may touch, with what to tell the caller when there are none (`none`) and when
    an absolute path lies outside them (`outside`): how whoever runs the server configures them."""

    def __init__(self, paths: Iterable[Path] = (), *, none: str = NO_ROOTS, outside: str = OUTSIDE):
        super().__init__(paths)
        self.none = none
        self.outside = outside


def inside(path: Path, root: Path) -> bool:
    """True when `path` is `root` or below it, compared by path components (so `<root>-evil` is not)."""
    return path == root or path.is_relative_to(root)


def _absolute(text: str, allowed: Sequence[Path], what: str) -> tuple[str, bool]:
    """`text` as an absolute path of this machine: `~` expanded, a relative path joined to the one allowed
    root. The bool says whether the caller wrote it absolute (only then is configuring roots the fix)."""
    example = f"{allowed[0]}/guides/brand.pdf" if allowed else "/home/me/project/guides/brand.pdf"
    if _FOREIGN_ABSOLUTE.match(text):
        raise InputError(f"{what} {text!r} is a Windows path, and this server reads its own (POSIX) file system: "
                         f"use an absolute path on the server's machine, e.g. {example}")
    if text.startswith("file:"):
        raise InputError(f"{what} {text!r} is a URI: give the plain path instead, e.g. {example}")
    if not allowed:
        raise InputError(getattr(allowed, "none", NO_ROOTS))
    expanded = os.path.expanduser(text)
    if expanded.startswith("~"):
        raise InputError(f"{what} {text!r}: {expanded.split('/')[0]!r} names no user home on the server's machine; "
                         f"use an absolute path, e.g. {example}")
    if os.path.isabs(expanded):
        return expanded, True
    if len(allowed) > 1:
        shown = ", ".join(str(a) for a in allowed)
        raise InputError(f"{what} {text!r} is relative, and there are several allowed roots ({shown}): use an "
                         f"absolute path that says which, e.g. {allowed[0] / text}")
    return os.path.join(allowed[0], expanded), False


def _allowed(path: str | os.PathLike[str], allowed: Sequence[Path], what: str) -> tuple[str, Path]:
    """The real location of a caller-named path, which must lie inside one of `allowed`. A relative path is
    taken relative to the one allowed root (never the server's working directory); `~` is expanded."""
    text = os.fspath(path)
    if not text or "\x00" in text:
        raise InputError(f"{what} must be a non-empty path without NUL bytes")
    if len(text) > MAX_PATH:
        raise InputError(f"{what} is {len(text)} characters long, more than a path may be ({MAX_PATH}); "
                         "e.g. /home/me/project/guides/brand.pdf")
    absolute, written_absolute = _absolute(text, allowed, what)
    try:
        real = Path(os.path.realpath(absolute))
    except OSError:  # a component vanished or changed while it was being resolved
        raise InputError(f"{what} {text!r} changed while it was being resolved; try again") from None
    if not any(inside(real, Path(os.path.realpath(a))) for a in allowed):
        shown = ", ".join(str(a) for a in allowed)
        if not written_absolute:  # '..' or a symlink led out of the root: configuring roots is not the fix
            raise InputError(f"{what} {text!r} resolves to {real}, outside the allowed root ({shown}); name a "
                             f"file inside it, e.g. {allowed[0] / 'guides' / 'brand.pdf'}")
        raise InputError(f"{what} {text!r} is outside the allowed roots ({shown}); "
                         f"{getattr(allowed, 'outside', OUTSIDE)}")
    return text, real


def resolve_root(root: str | os.PathLike[str], allowed: Sequence[Path]) -> Path:
    """A directory the caller named, real path resolved, that must lie inside one of `allowed`."""
    text, real = _allowed(root, allowed, "root")
    try:
        if not real.is_dir():
            raise InputError(f"root {text!r} is not an existing directory")
    except OSError as exc:  # a name longer than the file system allows (ENAMETOOLONG), a permission...
        raise InputError(f"root {text!r}: {exc.strerror}") from None
    return real


def resolve_file(path: str | os.PathLike[str], allowed: Sequence[Path]) -> Path:
    """A file the caller named by absolute or relative path, that must lie inside one of `allowed`."""
    text, real = _allowed(path, allowed, "path")
    try:
        if not real.exists():
            raise InputError(f"path {text!r}: no such file")
        if not real.is_file():
            raise InputError(f"path {text!r} is not a regular file")
    except OSError as exc:  # a name longer than the file system allows (ENAMETOOLONG), a permission...
        raise InputError(f"path {text!r}: {exc.strerror}") from None
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
    if parts[-1] in ("", "."):  # `notes/` named a directory; it was written as a file called notes
        raise InputError(f"path {rel!r} names a directory; name a file in it, e.g. "
                         f"{'/'.join(p for p in parts if p not in ('', '.')) or 'docs'}/notes.md")
    try:
        real = Path(os.path.realpath(root / rel))
    except OSError:  # a component vanished or changed while it was being resolved
        raise InputError(f"path {rel!r} changed while it was being resolved; try again") from None
    if not inside(real, root) or real == root:
        raise InputError(f"path {rel!r} resolves outside the root (through a symlink?)")
    return real


# --- working through directory file descriptors -------------------------------------------
# A path is resolved once (above); from then on every open, mkdir, rename and unlink goes
# through a directory fd opened component by component with O_NOFOLLOW, so a directory
# swapped for a symlink after the check makes the operation fail instead of escaping.

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0)


def _moved(what: str) -> InputError:
    return InputError(f"{what} changed while it was being used (a directory replaced by a symlink?); "
                      "nothing was done, try again")


def open_dir(real: Path) -> int:
    """An fd for the absolute directory `real`, opened from `/` one component at a time, none a symlink."""
    fd = os.open("/", _DIR_FLAGS)
    try:
        for part in real.parts[1:]:
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError:  # ELOOP (a symlink) or ENOTDIR (no longer a directory)
                raise _moved(str(real)) from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def _is_regular_file(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_file(dir_fd: int, name: str) -> int:
    """A read-only fd for the regular file `name` in `dir_fd`; a symlink or a non-file is refused."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError:
        raise _moved(name) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{name!r} is not a regular file")
    return fd


def read_fd(fd: int, limit: int, what: str) -> bytes:
    """At most `limit` bytes from `fd` (closing it); more than that is an InputError."""
    with os.fdopen(fd, "rb", closefd=True) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{what} is more than {limit} bytes")
    return data


def read_resolved(real: Path, limit: int, what: str) -> bytes:
    """The bytes of a file found by resolve_file, read through directory fds (a swapped path fails)."""
    try:
        dir_fd = open_dir(real.parent)
    except FileNotFoundError:
        raise _moved(what) from None
    try:
        try:
            fd = open_file(dir_fd, real.name)
        except FileNotFoundError:
            raise InputError(f"{what} no longer exists") from None
        size = os.fstat(fd).st_size
        if size > limit:
            os.close(fd)
            raise InputError(f"{what} is {size} bytes, more than {limit}")
        return read_fd(fd, limit, what)
    finally:
        os.close(dir_fd)


class Tree:
    """A directory opened once; everything below it is reached through cached directory fds."""

    def __init__(self, root: Path):
        self.root = root
        self.fd = open_dir(root)
        self._dirs: dict[tuple[str, ...], int] = {(): self.fd}

    def dir(self, parts: tuple[str, ...], *, create: bool = False, made: list[tuple[str, ...]] | None = None) -> int | None:
        """The fd of the directory root/parts; None when it does not exist (and create is off)."""
        if parts in self._dirs:
            return self._dirs[parts]
        parent = self.dir(parts[:-1], create=create, made=made)
        if parent is None:
            return None
        try:
            fd = os.open(parts[-1], _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                return None
            os.mkdir(parts[-1], 0o777, dir_fd=parent)
            if made is not None:
                made.append(parts)
            fd = os.open(parts[-1], _DIR_FLAGS, dir_fd=parent)
        except OSError:
            if _is_regular_file(parent, parts[-1]):  # the caller's path runs through a file: not a race, no retry
                raise InputError(f"{'/'.join(parts)} is a file, not a directory, so nothing lies inside it (one "
                                 "patch cannot replace a file by a directory)") from None
            raise _moved("/".join(parts)) from None
        self._dirs[parts] = fd
        return fd

    def close(self) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
