"""apply_patch across a crash (issue 28 item 11): a real `judge-mcp` applying a 40-file patch (30 edits, 5
removals, 5 new files in new directories) is SIGKILLed during the apply; the next server start, or the next
apply on that root, leaves the tree all-old or all-new with no temp file or journal.

The kill lands at a chosen step (tests/crash_hook/sitecustomize.py kills the server just before its Nth file
step: a temp write, a backup link, the journal's commit, a rename, an unlink) and at random moments (the
hook slows each step and the test sends SIGKILL from outside)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judges.patches.ops import apply_patch
from tests.mcp_helpers import RawStdio, data_home, server_env

HOOK = Path(__file__).resolve().parent / "crash_hook"
REPO = Path(__file__).resolve().parents[1]
EDITS, REMOVES = 30, 5
NEW_FILES = ["new/a/n0.txt", "new/a/n1.txt", "new/a/n2.txt", "new/b/deep/n3.txt", "new/b/deep/n4.txt"]


def build_old(project: Path) -> None:
    """The tree before the patch (the root itself kept: the server holds it as an allowed root)."""
    for child in project.iterdir():
        shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    (project / "src").mkdir()
    for i in range(EDITS):
        where = project / ("src" if i % 2 else "") / f"f{i:02d}.py"
        where.write_text("".join(f"line {k} of file {i}\n" for k in range(40)) + f"VALUE = {i}\n")
    for i in range(REMOVES):
        (project / f"r{i}.txt").write_text(f"to be removed {i}\n")
    (project / "src" / "untouched.txt").write_text("stays\n")


def patch() -> dict[str, Any]:
    ops: list[dict[str, Any]] = []
    for i in range(EDITS):
        path = f"src/f{i:02d}.py" if i % 2 else f"f{i:02d}.py"
        ops.append({"kind": "edit", "path": path, "find": f"VALUE = {i}\n", "replace": f"VALUE = {i + 1000}\n"})
    ops += [{"kind": "remove", "path": f"r{i}.txt"} for i in range(REMOVES)]
    ops += [{"kind": "add", "path": p, "content": f"new file {p}\n"} for p in NEW_FILES]
    assert len(ops) == 40
    return {"ops": ops}


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under `root` (hidden ones too): file bytes, or 'dir'."""
    return {p.relative_to(root).as_posix(): "dir" if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def expected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, bytes | str]]:
    """The all-old and the all-new tree, the new one made by the same code in this process."""
    project = tmp_path_factory.mktemp("expected")
    build_old(project)
    old = snapshot(project)
    report = apply_patch(patch(), project)
    assert report.applied, report.errors
    return {"old": old, "new": snapshot(project)}


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[Any]:
    """The servers' stderr."""
    with open(tmp_path / "stderr.log", "wb") as f:
        yield f


def state(project: Path, expected: dict[str, dict[str, bytes | str]]) -> str:
    """'old' or 'new', or what differs from both (a temp file, a journal, a mix)."""
    now = snapshot(project)
    for name, tree in expected.items():
        if now == tree:
            return name
    extra = sorted(set(now) - set(expected["old"]) - set(expected["new"]))
    mixed = sorted(k for k in set(now) & set(expected["old"]) & set(expected["new"])
                   if now[k] not in (expected["old"][k], expected["new"][k]) or
                   expected["old"][k] != expected["new"][k])
    return f"mixed: extra {extra}, {len([k for k in mixed if now[k] == expected['new'][k]])} new of {len(mixed)}"


class Server(RawStdio):
    """A `judge-mcp` that may be killed mid-apply."""

    def apply(self, root: Path, id_: int = 2) -> None:
        self.send({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {
            "name": "apply_patch", "arguments": {"root": str(root), "patch": patch()}}})


def plain(home: Path, root: Path) -> dict[str, str]:
    # No warm-up: these servers only apply patches (and start 30 times on a busy machine).
    return server_env(home, JUDGE_MCP_ALLOWED_ROOTS=str(root), JUDGE_MCP_WARM_EMBEDDINGS="0") | {
        "PYTHONPATH": str(REPO)}


def hooked(env: dict[str, str], log: Path, kill_at: int = 0, delay_s: float = 0.0) -> dict[str, str]:
    return env | {"PYTHONPATH": f"{REPO}{os.pathsep}{HOOK}", "CRASH_HOOK_LOG": str(log),
                  "CRASH_HOOK_KILL_AT": str(kill_at), "CRASH_HOOK_DELAY_S": str(delay_s)}


def check(project: Path, expected: dict[str, dict[str, bytes | str]], tried: tuple[int, float], first_rename: int) -> str:
    """The tree after a try's kill and the next start: all old or all new, and which one the kill step implies."""
    k, outside = tried
    outcome = state(project, expected)
    assert outcome in ("old", "new"), (k, outside, outcome)
    if not outside:  # the commit line is written just before the journal's fsync that precedes the first rename
        assert outcome == ("new" if k >= first_rename - 1 else "old"), (k, first_rename, outcome)
    return f"{'outside' if outside else k}:{outcome}"


def steps_of_one_apply(tmp_path: Path, env: dict[str, str], project: Path, errlog: Any) -> list[str]:
    """The file steps of one whole apply of the patch, as the hook counts them."""
    log = tmp_path / "steps.log"
    server = Server(hooked(env, log), errlog)
    try:
        server.apply(project)
        result = server.answer(2, 120)
        assert result is not None and not result["result"].get("isError"), result
    finally:
        server.kill()
    return log.read_text().splitlines()


def test_a_server_killed_during_a_40_file_apply_leaves_the_tree_all_old_or_all_new_after_the_next_start(
        tmp_path: Path, expected: dict[str, dict[str, bytes | str]], errlog: Any) -> None:
    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "home"
    env = plain(home, project)
    build_old(project)
    steps = steps_of_one_apply(tmp_path, env, project, errlog)
    assert state(project, expected) == "new"
    parsed = [(int(n), fn, name) for n, fn, name in (s.split(" ", 2) for s in steps)]
    # The rename phase: each temp renamed over its file, each removed file unlinked.
    renames = [n for n, fn, name in parsed if fn == "replace" or (fn == "unlink" and "judge-mcp" not in name)]
    first_rename = renames[0]
    # 20 kills at chosen steps: while the temps are written, around the commit, at the first, middle and last
    # renames and removals, while the backups are removed, before the journal is removed.
    rng = random.Random(28_11)
    chosen = sorted({2, 5, first_rename - 3, first_rename - 1, first_rename, first_rename + 1, first_rename + 20,
                     len(steps) - 1, len(steps), *renames[::5], *rng.sample(range(1, len(steps) + 1), 6)})[:20]
    while len(chosen) < 20:
        chosen = sorted({*chosen, rng.randrange(1, len(steps) + 1)})
    # 10 kills from outside at random moments while each step is slowed to 5 ms.
    tries = [(k, 0.0) for k in chosen] + [(0, rng.uniform(0, len(steps) * 0.006)) for _ in range(10)]
    outcomes: list[str] = []
    for i, (k, outside) in enumerate(tries):
        log = tmp_path / f"steps-{i}.log"
        # Each server starts by finishing or undoing the previous try's apply, before it answers initialize.
        server = Server(hooked(env, log, kill_at=k, delay_s=0.005 if outside else 0.0), errlog)
        if i:
            outcomes.append(check(project, expected, tries[i - 1], first_rename))
        build_old(project)
        server.apply(project)
        if outside:
            while not log.exists() or not log.read_text():  # the apply has begun
                time.sleep(0.005)
            time.sleep(outside)
            server.kill()
        else:
            assert server.answer(2, 120) is None, f"the hook did not kill the server at step {k}"
            server.kill()
    Server(env, errlog).kill()
    outcomes.append(check(project, expected, tries[-1], first_rename))
    assert [p for p in (data_home(home) / "patch-journals").iterdir()] == []
    print(f"\n  30 tries, all old or new: {outcomes}")
    assert {o.split(":")[1] for o in outcomes[:20]} == {"old", "new"}  # both sides of the commit were hit


def test_the_next_apply_on_the_root_finishes_an_apply_a_killed_server_had_committed(
        tmp_path: Path, expected: dict[str, dict[str, bytes | str]], errlog: Any) -> None:
    area = tmp_path / "area"
    project = area / "project"  # below the allowed root: no server start looks here, only an apply on it
    project.mkdir(parents=True)
    env = plain(tmp_path / "home", area)
    build_old(project)
    steps = steps_of_one_apply(tmp_path, env, project, errlog)
    middle = [int(s.split()[0]) for s in steps if s.split()[1] == "replace"][20]
    build_old(project)
    server = Server(hooked(env, tmp_path / "killed.log", kill_at=middle), errlog)
    server.apply(project)
    assert server.answer(2, 120) is None
    server.kill()
    half = state(project, expected)
    assert half.startswith("mixed") and ".journal" in half  # killed mid-renames: the journal tells the rest
    (project / "other.txt").write_text("a\n")
    later = Server(plain(tmp_path / "other-home", area), errlog)
    try:
        later.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "apply_patch", "arguments": {
            "root": str(project), "patch": {"ops": [{"kind": "edit", "path": "other.txt", "find": "a", "replace": "b"}]}}}})
        result = later.answer(3, 120)
    finally:
        later.kill()
    assert result is not None
    report = result["result"]["structuredContent"]
    assert report["applied"] and report["files_changed"] == ["other.txt"]
    assert report["warnings"] == ["finished an apply of 40 file(s) that a stopped server had committed"]
    (project / "other.txt").unlink()
    assert state(project, expected) == "new"


def test_the_next_apply_on_the_root_undoes_an_apply_killed_before_its_commit(
        tmp_path: Path, expected: dict[str, dict[str, bytes | str]], errlog: Any) -> None:
    area = tmp_path / "area"
    project = area / "project"
    project.mkdir(parents=True)
    env = plain(tmp_path / "home", area)
    build_old(project)
    steps = steps_of_one_apply(tmp_path, env, project, errlog)
    during_temps = [int(s.split()[0]) for s in steps if s.split()[1] == "open" and s.endswith(".tmp")][30]
    build_old(project)
    server = Server(hooked(env, tmp_path / "killed.log", kill_at=during_temps), errlog)
    server.apply(project)
    assert server.answer(2, 120) is None
    server.kill()
    assert (project / "new").is_dir() and any(".judge-mcp.tmp" in p.name for p in project.rglob("*"))
    later = Server(plain(tmp_path / "other-home", area), errlog)
    try:
        later.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "apply_patch", "arguments": {
            "root": str(project), "patch": patch()}}})
        result = later.answer(3, 120)
    finally:
        later.kill()
    assert result is not None
    report = result["result"]["structuredContent"]
    assert report["applied"] and len(report["files_changed"]) == 40
    assert report["warnings"] == ["undid an apply of 40 file(s) that a stopped server had not committed"]
    assert state(project, expected) == "new"


def test_a_journal_a_caller_wrote_that_points_outside_the_root_is_removed_and_nothing_else_changes(
        tmp_path: Path) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("keep\n")
    (project / "a.txt").write_text("a\n")
    forged = {"version": 1, "new_dirs": [], "entries": [{
        "dir": [".."], "name": "secret.txt", "tmp": None, "backup": None,
        "old": hashlib.sha256(b"keep\n").hexdigest(), "new": None}]}
    journal = project / ".judge-mcp-apply.0123456789abcdef.journal"
    journal.write_text(json.dumps(forged) + "\ncommit\n")
    report = apply_patch({"ops": [{"kind": "edit", "path": "a.txt", "find": "a", "replace": "b"}]}, project)
    assert report.applied
    assert report.warnings == ["removed a damaged apply journal .judge-mcp-apply.0123456789abcdef.journal"]
    assert (outside / "secret.txt").read_text() == "keep\n" and not journal.exists()


def test_a_patch_may_not_write_a_name_judge_mcp_keeps_for_its_journals_and_temp_files(tmp_path: Path) -> None:
    report = apply_patch({"ops": [
        {"kind": "add", "path": ".judge-mcp-apply.0123456789abcdef.journal", "content": "{}\n"},
        {"kind": "add", "path": "src/.x.py.1-0123456789ab.judge-mcp.tmp", "content": "x\n"}]}, tmp_path)
    assert not report.applied and report.errors == [
        "op 0 (add .judge-mcp-apply.0123456789abcdef.journal): is a name judge-mcp reserves for its own temporary "
        "files; choose another name",
        "op 1 (add src/.x.py.1-0123456789ab.judge-mcp.tmp): is a name judge-mcp reserves for its own temporary "
        "files; choose another name"]
    assert list(tmp_path.iterdir()) == []


def test_a_committed_journal_naming_a_directory_that_is_now_a_symlink_out_of_the_root_changes_nothing_there(
        tmp_path: Path) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "target.txt").write_text("old\n")
    temp = ".target.txt.1-0123456789ab.judge-mcp.tmp"
    (outside / temp).write_text("planted\n")
    (project / "link").symlink_to(outside)
    (project / "a.txt").write_text("a\n")
    plan = {"version": 1, "new_dirs": [], "entries": [{
        "dir": ["link"], "name": "target.txt", "tmp": temp, "backup": None, "old": None,
        "new": hashlib.sha256(b"planted\n").hexdigest()}]}
    (project / ".judge-mcp-apply.00000000000000aa.journal").write_text(json.dumps(plan) + "\ncommit\n")
    report = apply_patch({"ops": [{"kind": "edit", "path": "a.txt", "find": "a", "replace": "b"}]}, project)
    assert report.applied
    assert report.warnings == ["finished an apply of 1 file(s) that a stopped server had committed",
                               "left as they are now (changed after the interruption): link/target.txt"]
    assert (outside / "target.txt").read_text() == "old\n" and (outside / temp).read_text() == "planted\n"
    assert not (project / ".judge-mcp-apply.00000000000000aa.journal").exists()


def test_a_fifo_named_like_a_journal_is_left_alone_and_the_apply_goes_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / ".judge-mcp-apply.00000000000000bb.journal")
    (tmp_path / "a.txt").write_text("a\n")
    report = apply_patch({"ops": [{"kind": "edit", "path": "a.txt", "find": "a", "replace": "b"}]}, tmp_path)
    assert report.applied and report.warnings == [] and (tmp_path / "a.txt").read_text() == "b\n"
