"""Quality gates for real (seed 003's runPortablePipeline): ruff, mypy and pytest on a sandbox copy.

Every gate runs as an argument list (never a shell string) in its own process group, with a
timeout after which the whole group is killed, capped output, and an environment without API
keys or tokens. The caller's tree is never touched: gates run on a copy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from .errors import InputError
from .paths import open_dir, open_file, resolve_relative, resolve_root

SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", "node_modules", ".mypy_cache", ".ruff_cache", ".pytest_cache",
             ".tox", "build", "dist"}
_SECRET = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.I)
MAX_FILES = 5000
MAX_BYTES = 50 * 1024 * 1024


class SourceFile(BaseModel):
    path: str
    content: str


class TestReport(BaseModel):
    passed: int = 0
    failed: int = 0
    details: list[str] = Field(default_factory=list, description="One line per failed or erroring test.")
    coveragePct: float | None = Field(default=None, description="Line coverage when pytest-cov is installed.")


class Signals(BaseModel):
    """The seed's JudgeInput.signals."""

    lintErrors: list[str] = []
    typeErrors: list[str] = []
    test: TestReport = Field(default_factory=TestReport)
    boundaryErrors: list[str] = []
    logsTail: list[str] = []


class GateRun(BaseModel):
    name: str
    argv: list[str]
    exit_code: int | None
    timed_out: bool = False
    passed: bool
    duration_s: float
    output_tail: str = ""


@dataclass(frozen=True)
class GateSettings:
    timeout_s: float = 120.0
    max_output_bytes: int = 200_000


def sandbox_from(root: str | Path | None, files: Sequence[SourceFile] | None, allowed_roots: Sequence[Path]) -> Path:
    """A fresh directory holding a copy of `root` (inside the allowed roots) or the given files."""
    if (root is None) == (files is None):
        raise InputError("give exactly one of root (a project directory) or files ([{path, content}])")
    if root is not None:
        source = resolve_root(root, allowed_roots)
        box = Path(tempfile.mkdtemp(prefix="judge-gates-")).resolve()
        try:
            copy_tree(source, box)
        except BaseException:
            shutil.rmtree(box, ignore_errors=True)
            raise
        return box
    assert files is not None
    box = Path(tempfile.mkdtemp(prefix="judge-gates-")).resolve()
    try:
        for f in files:
            target = resolve_relative(f.path, box)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f.content, encoding="utf-8")
    except BaseException:
        shutil.rmtree(box, ignore_errors=True)
        raise
    return box


def copy_tree(source: Path, box: Path) -> None:
    """Copy the regular files under `source` (resolved once) into `box`, reading only through
    directory fds that never follow a symlink: a directory swapped for a link mid-copy is skipped."""
    counts = [0, 0]

    def copy_dir(dir_fd: int, rel: Path) -> None:
        (box / rel).mkdir(parents=True, exist_ok=True)
        with os.scandir(dir_fd) as entries:
            listed = sorted((e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False))
                            for e in entries)
        for name, is_dir, is_file in listed:
            if is_dir:
                if name in SKIP_DIRS:
                    continue
                try:
                    sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
                except OSError:
                    continue  # replaced by a link (or removed) since it was listed
                try:
                    copy_dir(sub, rel / name)
                finally:
                    os.close(sub)
            elif is_file:  # a link could point anywhere; the copy holds regular files only
                try:
                    fd = open_file(dir_fd, name)
                except (OSError, InputError):
                    continue
                with os.fdopen(fd, "rb") as src:
                    info = os.fstat(src.fileno())
                    counts[0] += 1
                    counts[1] += info.st_size
                    if counts[0] > MAX_FILES or counts[1] > MAX_BYTES:
                        raise InputError(f"the project is larger than {MAX_FILES} files / {MAX_BYTES} bytes")
                    with open(box / rel / name, "wb") as dst:
                        shutil.copyfileobj(src, dst)
                os.chmod(box / rel / name, stat.S_IMODE(info.st_mode))
                os.utime(box / rel / name, ns=(info.st_atime_ns, info.st_mtime_ns))

    top = open_dir(source)
    try:
        copy_dir(top, Path())
    finally:
        os.close(top)


def gate_env(sandbox: Path) -> dict[str, str]:
    """The environment for gates: no keys, tokens or secrets; caches inside the sandbox."""
    env = {k: v for k, v in os.environ.items()
           if not _SECRET.search(k) and not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(sandbox), MYPY_CACHE_DIR=str(sandbox / ".mypy_cache"),
               RUFF_CACHE_DIR=str(sandbox / ".ruff_cache"), HOME=str(sandbox))
    return env


def run_gate(name: str, argv: list[str], cwd: Path, settings: GateSettings) -> tuple[GateRun, str]:
    """Run one gate; kill its whole process group at the timeout (and after it exits, so forked
    children do not outlive it). Returns the record and the (capped) output."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as sink:
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                env=gate_env(cwd), start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=settings.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        sink.seek(0)
        raw = sink.read(settings.max_output_bytes + 1)
    output = raw[: settings.max_output_bytes].decode("utf-8", errors="replace")
    if len(raw) > settings.max_output_bytes:
        output += f"\n[output cut at {settings.max_output_bytes} bytes]"
    code = None if timed_out else proc.returncode
    run = GateRun(name=name, argv=argv, exit_code=code, timed_out=timed_out, passed=code == 0,
                  duration_s=round(time.monotonic() - started, 3), output_tail=output[-2000:])
    return run, output


def default_gates(sandbox: Path) -> dict[str, list[str]]:
    py = sys.executable
    tests = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", str(sandbox / ".judge-junit.xml")]
    try:
        import pytest_cov  # noqa: F401

        tests += ["--cov", ".", "--cov-report", f"json:{sandbox / '.judge-coverage.json'}"]
    except ImportError:
        pass
    return {
        "lint": [py, "-m", "ruff", "check", "--output-format", "json", "--no-cache", "."],
        "types": [py, "-m", "mypy", "--no-error-summary", "--show-column-numbers", "--no-color-output",
                  "--ignore-missing-imports", "--explicit-package-bases", "."],
        "tests": tests,
    }


def check_custom_gates(gates: dict[str, list[str]]) -> dict[str, list[str]]:
    """Caller-given gates: argument lists for ruff, mypy or pytest, run as `python -m <tool>`."""
    allowed = {"ruff", "mypy", "pytest"}
    checked = {}
    for name, argv in gates.items():
        if name not in ("lint", "types", "tests"):
            raise InputError(f"gate {name!r} is unknown; use lint, types or tests")
        if not argv or argv[0] not in allowed:
            raise InputError(f"gate {name}: the command must start with one of {', '.join(sorted(allowed))}")
        for arg in argv[1:]:
            if not isinstance(arg, str) or "\x00" in arg:
                raise InputError(f"gate {name}: arguments must be strings without NUL bytes")
        checked[name] = [sys.executable, "-m", *argv]
    return checked


def _lint(output: str) -> list[str]:
    try:
        items = json.loads(output[output.find("[") :] or "[]")
    except ValueError:
        return [line for line in output.splitlines() if line.strip()][:50]
    return [f"{i.get('filename', '')}:{i['location']['row']}:"
            f"{i['location']['column']}: {i.get('code') or 'syntax'} {i['message']}" for i in items]


def _relative(lines: list[str], sandbox: Path) -> list[str]:
    prefix = str(sandbox) + os.sep
    return [line.replace(prefix, "") for line in lines]


def _types(output: str) -> list[str]:
    return [line for line in output.splitlines() if ": error:" in line]


def _tests(sandbox: Path, output: str) -> TestReport:
    report = TestReport()
    junit = sandbox / ".judge-junit.xml"
    if junit.exists():
        try:
            for case in ET.parse(junit).getroot().iter("testcase"):
                name = f"{case.get('classname', '')}::{case.get('name', '')}"
                problem = case.find("failure")
                if problem is None:
                    problem = case.find("error")
                if problem is not None:
                    report.failed += 1
                    message = (problem.get("message") or "").splitlines()
                    report.details.append(f"{name}: {message[0] if message else problem.tag}")
                elif case.find("skipped") is None:
                    report.passed += 1
        except ET.ParseError:
            pass
    coverage = sandbox / ".judge-coverage.json"
    if coverage.exists():
        try:
            report.coveragePct = round(json.loads(coverage.read_text())["totals"]["percent_covered"], 2)
        except (ValueError, KeyError):
            pass
    if not junit.exists() and output.strip():
        report.details.append(output.strip().splitlines()[-1])
    return report


def run_gates(sandbox: Path, settings: GateSettings, gates: dict[str, list[str]] | None = None,
              boundary_errors: list[str] | None = None) -> tuple[Signals, list[GateRun]]:
    """Run the gates on the sandbox and turn their output into the seed's signals."""
    commands = gates or default_gates(sandbox)
    signals = Signals(boundaryErrors=boundary_errors or [])
    runs = []
    tail: list[str] = []
    for name, argv in commands.items():
        run, output = run_gate(name, argv, sandbox, settings)
        runs.append(run)
        if run.timed_out:
            tail.append(f"{name}: killed after {settings.timeout_s:g} s")
        if name == "lint":
            signals.lintErrors = _relative(_lint(output), sandbox) if not run.passed else []
        elif name == "types":
            signals.typeErrors = _relative(_types(output), sandbox)
        elif name == "tests":
            signals.test = _tests(sandbox, output)
            if run.timed_out:
                signals.test.details.append(f"the test run was killed after {settings.timeout_s:g} s")
            elif not run.passed and run.exit_code not in (0, 1, 5):  # collection errors, crashes
                signals.test.details.append(f"pytest exited with {run.exit_code}: "
                                            f"{(output.strip().splitlines() or [''])[-1]}")
        if name != "lint":  # lint findings are in lintErrors already; its JSON would only crowd the tail
            tail += [f"{name}: {line}" for line in output.strip().splitlines()[-5:]]
    signals.logsTail = _relative(tail[-30:], sandbox)
    return signals, runs


def gate_score(runs: Sequence[GateRun], signals: Signals) -> float:
    """A tournament score: gates passed, plus the share of tests passing."""
    total = signals.test.passed + signals.test.failed
    return sum(r.passed for r in runs) + (signals.test.passed / total if total else 0.0)


def discard(sandbox: Path) -> None:
    shutil.rmtree(sandbox, ignore_errors=True)
