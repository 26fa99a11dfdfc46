"""apply_patch across a crash: a journal written (and fsynced) before the first rename, finished or undone later.

One apply writes, in this order:
1. the journal `.judge-mcp-apply.<random>.journal` at the root, holding an flock for as long as the apply runs:
   its first line is the plan (per file: the temp file with the new bytes, a backup of the old file, the
   SHA-256 of old and new; the directories it creates);
2. the temp files and backups (a hard link to the old file, or a copy), fsynced, and their directories;
3. the line `commit` (fsynced): from here on the apply is done, whatever happens to the process;
4. the renames (and unlinks of removed files), the directories fsynced, the backups removed, the journal removed.

A journal whose lock is free belongs to a process that died (flocks die with their process, so a reused pid
does not matter). `recover` rolls it forward when it says `commit` (finishing each rename that has not
happened; idempotent), and back otherwise (temps removed, old files put back from their backups, the created
directories removed). Before every apply on a root and at server start (see `recover_registered`), the tree
is made all-old or all-new again and no temp file or journal stays. A file that somebody changed after the
crash is left as they made it (the SHA-256s tell), with a warning.

The journal lies in the user's tree, so a caller may have written one: every name in it is checked (one path
component, a temp name of ours) and every step goes through directory fds that never follow a symlink.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import secrets
import stat
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from judges.errors import InputError
from judges.inputs.paths import Tree, open_file, read_fd

try:
    import fcntl
except ImportError:  # pragma: no cover - no flock (Windows): a journal's owner cannot be told apart
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

# Temp files are named `.<name>.<pid>-<random>.judge-mcp.<kind>`: `tmp` new bytes, `old` a backup, `del` (an
# older version's removed file). The pid lets an older server's leftovers be told apart (ops.clean_leftovers).
TEMP_NAME = re.compile(r"^\..*\.(\d+)-[0-9a-f]{12}\.judge-mcp\.(tmp|del|old)$")
JOURNAL_NAME = re.compile(r"^\.judge-mcp-apply\.[0-9a-f]{16}\.journal$")
_SHA = re.compile(r"^[0-9a-f]{64}$")
MAX_JOURNAL_BYTES = 1024 * 1024
MAX_ENTRIES = 5_000  # a patch has at most a few hundred files; a journal naming more is not ours
MAX_FILE_BYTES = 5 * 1024 * 1024 + 16  # what a patch may touch (ops.MAX_FILE_BYTES), plus a BOM
TURN_WAIT_S = 30.0  # how long an apply waits for another apply on the same directory before giving up


def temp_name(name: str, kind: str) -> str:
    return f".{name[:100]}.{os.getpid()}-{secrets.token_hex(6)}.judge-mcp.{kind}"


def reserved(name: str) -> bool:
    """Whether `name` is one of ours (a temp file or a journal): a patch may not create or change one."""
    return bool(TEMP_NAME.match(name) or JOURNAL_NAME.match(name))


def sha256(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Entry:
    """One file of the apply: its directory (relative to the root) and name, and what happens to it."""

    dir: tuple[str, ...]
    name: str
    tmp: str | None  # the temp file with the new bytes; None: the file is removed
    backup: str | None  # a hard link to (or a copy of) the old file; None: the file is new
    old: str | None  # SHA-256 of the old bytes; None: the file did not exist
    new: str | None  # SHA-256 of the new bytes; None: the file is removed


@dataclass
class Plan:
    entries: list[Entry] = field(default_factory=list)
    new_dirs: list[tuple[str, ...]] = field(default_factory=list)  # shallow first

    def dumps(self) -> str:
        return json.dumps({"version": 1, "entries": [asdict(e) for e in self.entries],
                           "new_dirs": [list(d) for d in self.new_dirs]}, separators=(",", ":"))

    @classmethod
    def loads(cls, line: str) -> Plan:
        """The plan of a journal line; ValueError when it is not one a judge-mcp apply wrote."""
        raw = json.loads(line)
        if not isinstance(raw, dict) or raw.get("version") != 1:
            raise ValueError("not a version 1 plan")
        entries = []
        if len(raw.get("entries") or []) > MAX_ENTRIES or len(raw.get("new_dirs") or []) > MAX_ENTRIES:
            raise ValueError(f"more than {MAX_ENTRIES} entries")
        for e in raw.get("entries") or []:
            if not isinstance(e, dict):
                raise ValueError("an entry is not an object")
            entry = Entry(dir=_parts(e.get("dir")), name=_component(e.get("name")), tmp=_temp(e.get("tmp")),
                          backup=_temp(e.get("backup")), old=_digest(e.get("old")), new=_digest(e.get("new")))
            if (entry.tmp is None) != (entry.new is None) or (entry.backup is None) != (entry.old is None):
                raise ValueError("an entry's temp and hashes disagree")
            entries.append(entry)
        return cls(entries, [_parts(d) for d in raw.get("new_dirs") or []])


def _component(value: Any) -> str:
    if (not isinstance(value, str) or not value or value in (".", "..", ".git") or "/" in value
            or "\\" in value or "\x00" in value):
        raise ValueError(f"not a file name: {value!r}")
    return value


def _parts(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > 64:
        raise ValueError("not a directory path")
    return tuple(_component(p) for p in value)


def _temp(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not TEMP_NAME.match(value) or "/" in value:
        raise ValueError(f"not a judge-mcp temp name: {value!r}")
    return value


def _digest(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _SHA.match(value):
        raise ValueError("not a SHA-256")
    return value


# --- the apply's side ---------------------------------------------------------------------------------


def take_turn(fd: int, what: str, wait_s: float = TURN_WAIT_S) -> None:
    """An exclusive flock on the directory `fd`, held until the fd is closed: applies on one directory (through
    one root, nested roots or several server processes) take turns, so none writes over a file another has
    changed since it read it. After `wait_s` an InputError (nothing was changed). Called from worker threads."""
    if fcntl is None:  # pragma: no cover - Windows: no flock
        return
    deadline = time.monotonic() + wait_s
    pause = 0.005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise InputError(f"another apply_patch has been changing {what} for over {wait_s:g} s; nothing "
                                 "was changed, try again") from None
            time.sleep(pause)
            pause = min(0.1, pause * 2)


class Journal:
    """The journal of one running apply: created with its plan (fsynced), locked until `finish`."""

    def __init__(self, tree: Tree, plan: Plan, register: Path | None = None):
        self.tree = tree
        self.plan = plan
        self.name = f".judge-mcp-apply.{secrets.token_hex(8)}.journal"
        self._pointer: tuple[int, Path] | None = None
        if register is not None:  # the data home's note of this root, for the recovery at server start
            try:
                self._pointer = _write_pointer(register, tree.root, self.name)
            except OSError as exc:  # a read-only data home: the next apply on this root still recovers it
                log.warning("could not note the apply in %s (%s): only the next apply on %s will finish it "
                            "after a crash", register, exc, tree.root)
        try:
            self.fd = os.open(self.name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                              dir_fd=tree.fd)
        except BaseException:
            self._drop_pointer()
            raise
        try:
            if fcntl is not None:
                fcntl.flock(self.fd, fcntl.LOCK_EX)
            _write_all(self.fd, (plan.dumps() + "\n").encode())
            os.fsync(self.fd)
            os.fsync(tree.fd)
        except BaseException:
            self.finish()
            raise

    def mark(self, word: str) -> None:
        """Append `commit` or `abort`, durably."""
        _write_all(self.fd, f"{word}\n".encode())
        os.fsync(self.fd)

    def finish(self) -> None:
        """Remove the journal (the apply is complete or undone), then release it."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.name, dir_fd=self.tree.fd)
        with contextlib.suppress(OSError):
            os.fsync(self.tree.fd)
        os.close(self.fd)
        self._drop_pointer()

    def _drop_pointer(self) -> None:
        if self._pointer is not None:
            fd, path = self._pointer
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            os.close(fd)
            self._pointer = None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_pointer(register: Path, root: Path, journal: str) -> tuple[int, Path]:
    register.mkdir(parents=True, exist_ok=True)
    path = register / f"{secrets.token_hex(8)}.json"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        _write_all(fd, json.dumps({"root": str(root), "journal": journal}).encode())
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    return fd, path


def apply_planned(tree: Tree, plan: Plan, contents: dict[tuple[tuple[str, ...], str], tuple[bytes, int | None]],
                  register: Path | None = None) -> None:
    """Carry out `plan` under a journal: write temps and backups, commit, rename; on an error, undo all of it.

    `contents` gives each written file's new bytes and the mode to keep (None: a new file, mode from the umask)."""
    journal = Journal(tree, plan, register)
    try:
        synced: set[int] = {tree.fd}
        for parts in plan.new_dirs:
            tree.dir(parts, create=True)
        for e in plan.entries:
            dir_fd = tree.dir(e.dir)
            if dir_fd is None:
                raise InputError(f"{'/'.join(e.dir)} vanished while the patch was being applied")
            synced.add(dir_fd)
            if e.tmp is not None:
                data, mode = contents[(e.dir, e.name)]
                _write_file(dir_fd, e.tmp, data, mode)
            if e.backup is not None:
                _backup(dir_fd, e.name, e.backup)
        for fd in synced:
            os.fsync(fd)
        journal.mark("commit")
        for e in plan.entries:
            _forward(tree, e)
        for fd in synced:
            os.fsync(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            journal.mark("abort")
        try:
            roll_back(tree, plan)
        finally:
            journal.finish()
        raise
    for e in plan.entries:
        if e.backup is not None:
            _unlink(tree.dir(e.dir), e.backup)
    journal.finish()


def _write_file(dir_fd: int, name: str, data: bytes, mode: int | None) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if mode is not None:
                os.fchmod(f.fileno(), mode & 0o7777)
            os.fsync(f.fileno())
    except BaseException:
        _unlink(dir_fd, name)
        raise


def _backup(dir_fd: int, name: str, backup: str) -> None:
    """`backup` names the old file too: a hard link (no copy), else a copy with its mode."""
    try:
        os.link(name, backup, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        return
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EACCES, errno.EXDEV, errno.EMLINK, errno.ENOTSUP, errno.ENOSYS):
            raise
    fd = open_file(dir_fd, name)
    mode = os.fstat(fd).st_mode
    _write_file(dir_fd, backup, read_fd(fd, MAX_FILE_BYTES, name), mode)


def _forward(tree: Tree, e: Entry) -> None:
    dir_fd = tree.dir(e.dir)
    assert dir_fd is not None
    if e.tmp is not None:
        os.replace(e.tmp, e.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    else:
        os.unlink(e.name, dir_fd=dir_fd)


# --- recovery ---------------------------------------------------------------------------------------------


def _dir(tree: Tree, parts: tuple[str, ...]) -> int | None:
    """The directory's fd (None when absent); InputError when a component is a symlink or no directory."""
    try:
        return tree.dir(parts)
    except NotADirectoryError:
        raise InputError(f"{'/'.join(parts)} is no longer a directory") from None


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _unlink(dir_fd: int | None, name: str) -> None:
    if dir_fd is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)


def _current(dir_fd: int, name: str) -> str | None:
    """SHA-256 of the file `name` now; None when absent; '-' when it is no regular file we can read."""
    try:
        fd = open_file(dir_fd, name)
    except FileNotFoundError:
        return None
    except InputError:
        return "-"
    try:
        return sha256(read_fd(fd, MAX_FILE_BYTES, name))
    except InputError:
        return "-"


def roll_forward(tree: Tree, plan: Plan) -> list[str]:
    """Finish a committed apply: each rename or removal that has not happened happens (idempotent)."""
    kept: list[str] = []
    dirs: set[int] = set()
    for e in plan.entries:
        rel = "/".join((*e.dir, e.name))
        try:
            dir_fd = _dir(tree, e.dir)
        except InputError:  # a directory became a symlink since: not followed
            kept.append(rel)
            continue
        if dir_fd is None:
            continue
        dirs.add(dir_fd)
        if e.tmp is not None:
            if not _exists(dir_fd, e.tmp):
                continue  # renamed already
            if _current(dir_fd, e.name) == e.old:
                os.replace(e.tmp, e.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            else:
                _unlink(dir_fd, e.tmp)
                kept.append(rel)
        elif (now := _current(dir_fd, e.name)) is not None:
            if now == e.old:
                os.unlink(e.name, dir_fd=dir_fd)
            else:
                kept.append(rel)
    for dir_fd in dirs:
        os.fsync(dir_fd)
    for e in plan.entries:
        if e.backup is not None:
            with contextlib.suppress(InputError):
                _unlink(_dir(tree, e.dir), e.backup)
    return kept


def roll_back(tree: Tree, plan: Plan) -> list[str]:
    """Undo an apply that did not commit (or failed after): temps removed, old files back, new directories gone."""
    kept: list[str] = []
    dirs: set[int] = set()
    for e in reversed(plan.entries):
        try:
            dir_fd = _dir(tree, e.dir)
        except InputError:  # a directory became a symlink since: not followed
            kept.append("/".join((*e.dir, e.name)))
            continue
        if dir_fd is None:
            continue
        dirs.add(dir_fd)
        if e.tmp is not None:
            _unlink(dir_fd, e.tmp)
        now = _current(dir_fd, e.name)
        if now != e.old:
            ours = now == e.new  # this apply's new bytes (or, for a removal, the file gone)
            if ours and e.backup is not None and _exists(dir_fd, e.backup):
                os.replace(e.backup, e.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            elif ours and e.old is None:
                os.unlink(e.name, dir_fd=dir_fd)
            else:
                kept.append("/".join((*e.dir, e.name)))
        if e.backup is not None:
            _unlink(dir_fd, e.backup)
    for dir_fd in dirs:
        os.fsync(dir_fd)
    for parts in reversed(plan.new_dirs):
        try:
            parent = _dir(tree, parts[:-1])
        except InputError:
            continue
        if parent is not None:
            with contextlib.suppress(OSError):  # not empty (somebody wrote there) or already gone
                os.rmdir(parts[-1], dir_fd=parent)
    return kept


@dataclass
class Recovered:
    """What `recover` did at one root: messages for the caller, and the temps of applies still running."""

    notes: list[str] = field(default_factory=list)
    running: set[str] = field(default_factory=set)


class _Own(Tree):
    """The same root (its fd duplicated) with a directory cache of its own: recovery removes directories,
    and the caller's tree must not keep an fd of a removed one (a write there would vanish)."""

    def __init__(self, tree: Tree):  # no super().__init__: it would open the root again, by path
        self.root = tree.root
        self.fd = os.dup(tree.fd)
        self._dirs = {(): self.fd}


def recover(tree: Tree) -> Recovered:
    """Finish or undo every apply at this root whose process died; leave running ones alone."""
    with _Own(tree) as own:
        return _recover(own)


def _recover(tree: Tree) -> Recovered:
    found = Recovered()
    try:
        names = sorted(n for n in os.listdir(tree.fd) if JOURNAL_NAME.match(n))
    except OSError:
        return found
    for name in names:
        try:
            fd = os.open(name, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=tree.fd)
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device named like a journal: not ours
                continue
            if not _owner_gone(fd):
                with contextlib.suppress(ValueError, UnicodeDecodeError):  # still being written: no temps yet
                    live = Plan.loads(os.pread(fd, MAX_JOURNAL_BYTES, 0).decode().split("\n", 1)[0])
                    found.running |= {t for e in live.entries for t in (e.tmp, e.backup) if t}
                continue
            try:
                found.notes += _recover_one(tree, name, fd)
            except OSError as exc:  # e.g. a disk error: the tree stays as it is, the journal for the next try
                log.warning("could not recover the apply journal %s in %s: %s", name, tree.root, exc)
                found.notes.append(f"could not finish or undo an interrupted apply ({name}): {exc}")
        finally:
            os.close(fd)
    return found


def _owner_gone(fd: int) -> bool:
    """True when no process holds the journal (its owner died, or it finished and unlinked it just now).
    Without flock (Windows) a journal's owner cannot be told apart: nothing is recovered, nothing is broken."""
    if fcntl is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return os.fstat(fd).st_nlink > 0


def _recover_one(tree: Tree, name: str, fd: int) -> list[str]:
    data = os.pread(fd, MAX_JOURNAL_BYTES + 1, 0)
    lines = data.decode("utf-8", "replace").split("\n")
    notes: list[str] = []
    try:
        plan = Plan.loads(lines[0]) if len(lines) > 1 else None  # no newline yet: no temp was written
    except ValueError as exc:
        log.warning("ignoring a damaged apply journal %s in %s: %s", name, tree.root, exc)
        notes.append(f"removed a damaged apply journal {name}")
        plan = None
    if plan is not None:
        committed = "commit" in lines[1:] and "abort" not in lines[1:]
        files = len(plan.entries)
        if committed:
            kept = roll_forward(tree, plan)
            notes.append(f"finished an apply of {files} file(s) that a stopped server had committed")
        else:
            kept = roll_back(tree, plan)
            notes.append(f"undid an apply of {files} file(s) that a stopped server had not committed")
        if kept:
            notes.append("left as they are now (changed after the interruption): " + ", ".join(kept[:10]))
        log.warning("patch journal %s in %s: %s", name, tree.root, "; ".join(notes))
    _unlink(tree.fd, name)
    os.fsync(tree.fd)
    return notes


def recover_root(root: Path) -> list[str]:
    """`recover` at one root by path; what was done, each note prefixed with the root."""
    try:
        with Tree(root) as tree:
            return [f"{root}: {note}" for note in recover(tree).notes]
    except (OSError, InputError) as exc:
        log.warning("could not check %s for interrupted patch applies: %s", root, exc)
        return []


def recover_registered(register: Path, roots: list[Path] | tuple[Path, ...] = ()) -> list[str]:
    """At server start: every root an apply of a stopped server noted in `register`, and `roots` (the
    configured ones); the notes of what was finished or undone."""
    notes: list[str] = []
    todo: dict[Path, None] = dict.fromkeys(roots)
    pointers: list[tuple[int, Path]] = []
    with contextlib.suppress(FileNotFoundError):
        for path in sorted(register.glob("*.json")):
            try:
                fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            except OSError:
                continue
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # a running apply's
                    os.close(fd)
                    continue
            try:
                root = Path(json.loads(os.pread(fd, 65536, 0))["root"])
            except (ValueError, KeyError, TypeError):
                root = None
            if root is not None and root.is_absolute():
                todo.setdefault(root)
            pointers.append((fd, path))
    try:
        for root in todo:
            notes += recover_root(root)
    finally:
        for fd, path in pointers:
            path.unlink(missing_ok=True)
            os.close(fd)
    return notes

