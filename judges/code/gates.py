"""Quality gates for real (seed 003's runPortablePipeline): ruff, mypy and pytest on a copy.

Every gate runs as an argument list (never a shell string) built by the server; callers choose
gates by name and may add only test node ids, relative paths and allowlisted options
(`parse_gates`). With a sandbox (judges/code/sandbox.py: bubblewrap) each gate runs isolated on its own
size-capped copy, under resource limits, killed whole at the timeout. Without one (`sandbox:
"none"`) a gate runs in its own process group on the server's copy with an environment stripped
of keys and tokens, killed with its group at the timeout. The caller's tree is never touched.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from judges.code import sandbox as sandboxing
from judges.errors import InputError, did_you_mean
from judges.inputs.paths import open_dir, open_file, resolve_relative, resolve_root

SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", "node_modules", ".mypy_cache", ".ruff_cache", ".pytest_cache",
             ".tox", "build", "dist"}
_SECRET = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.I)


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
    sandbox: Literal["bwrap", "none"] = Field(
        default="none", description="bwrap: the gate ran isolated (bubblewrap); none: unisolated, see sandbox_note.")
    sandbox_note: str | None = Field(default=None, description="Without a sandbox: why not, and how to enable it.")


@dataclass(frozen=True)
class GateSettings:
    """The gates' limits (built from Settings by server/code_tools.py; these defaults are the one place the
    numbers are written)."""

    timeout_s: float = float(sandboxing.Limits.cpu_s)
    max_output_bytes: int = 200_000
    sandbox: sandboxing.Bwrap | None = None
    no_sandbox_reason: str = "no sandbox was given to the gates"  # said in each result when sandbox is None
    limits: sandboxing.Limits = field(default_factory=sandboxing.Limits)
    max_result_bytes: int = 5_000_000
    max_files: int = 5000  # of a project copied for the gates
    max_project_bytes: int = 50 * 1024 * 1024


MAX_GATE_ARGS = 50  # extra arguments a caller may give one gate
MAX_FILES = GateSettings.max_files
MAX_BYTES = GateSettings.max_project_bytes


def check_source(root: str | Path | None, files: Sequence[SourceFile] | None, allowed_roots: Sequence[Path]
                 ) -> None:
    """Exactly one of `root` (a directory inside the allowed roots) or `files`, else an InputError saying so."""
    if (root is None) == (files is None):
        raise InputError("give exactly one of root (a project directory) or files ([{path, content}])")
    if root is not None:
        resolve_root(root, allowed_roots)


def sandbox_from(root: str | Path | None, files: Sequence[SourceFile] | None, allowed_roots: Sequence[Path],
                 settings: GateSettings | None = None) -> Path:
    """A fresh directory holding a copy of `root` (inside the allowed roots) or the given files."""
    check_source(root, files, allowed_roots)
    if root is not None:
        source = resolve_root(root, allowed_roots)
        box = Path(tempfile.mkdtemp(prefix="judge-gates-")).resolve()
        try:
            copy_tree(source, box, settings or GateSettings())
        except BaseException:
            shutil.rmtree(box, ignore_errors=True)
            raise
        return box
    assert files is not None
    limits = settings or GateSettings()
    if len(files) > limits.max_files:  # the limit of a project copied from a root
        raise InputError(f"files: {len(files)} files; the limit is {limits.max_files} (as for a project copied "
                         "from root). Give the files the spec concerns, e.g. the module and its tests")
    box = Path(tempfile.mkdtemp(prefix="judge-gates-")).resolve()
    try:
        written: dict[Path, int] = {}
        for i, f in enumerate(files):
            target = resolve_relative(f.path, box)
            if target in written:
                raise InputError(f"files[{i}].path {f.path!r} names the same file as files[{written[target]}]; "
                                 "give each file once")
            written[target] = i
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(f.content, encoding="utf-8")
            except OSError as exc:  # the caller's path: a file where a directory must be, a name too long
                clash = isinstance(exc, (FileExistsError, NotADirectoryError, IsADirectoryError))
                reason = ("another entry of files is a file where this path needs a directory (or the reverse), "
                          "e.g. 'app' and 'app/main.py'" if clash else exc.strerror or type(exc).__name__)
                shown = f.path if len(f.path) <= 80 else f"{f.path[:60]}…({len(f.path)} characters)"
                raise InputError(f"files[{i}].path {shown!r} cannot be written: {reason}; use paths like a "
                                 "project's, e.g. 'src/app.py' and 'tests/test_app.py'") from None
    except BaseException:
        shutil.rmtree(box, ignore_errors=True)
        raise
    return box


def _utf8(name: str) -> bool:
    """A file name as the file system gave it is text only when its bytes were UTF-8 (otherwise Python holds the
    undecodable bytes as lone surrogates, which no JSON reply or model request can encode)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def copy_tree(source: Path, box: Path, settings: GateSettings | None = None) -> None:
    """Copy the regular files under `source` (resolved once) into `box`, reading only through
    directory fds that never follow a symlink: a directory swapped for a link mid-copy is skipped, and so is a
    name that is not UTF-8."""
    counts = [0, 0]
    limits = settings or GateSettings()

    def copy_dir(dir_fd: int, rel: Path) -> None:
        (box / rel).mkdir(parents=True, exist_ok=True)
        with os.scandir(dir_fd) as entries:
            listed = sorted((e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False))
                            for e in entries)
        for name, is_dir, is_file in listed:
            if not _utf8(name):
                continue  # a name no prompt or tool result can carry
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
                    if counts[0] > limits.max_files or counts[1] > limits.max_project_bytes:
                        raise InputError(f"the project is larger than {limits.max_files} files / "
                                         f"{limits.max_project_bytes} bytes")
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
    """The environment for unsandboxed gates: no keys, tokens or secrets; caches inside the copy."""
    env = {k: v for k, v in os.environ.items()
           if not _SECRET.search(k) and not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(sandbox), MYPY_CACHE_DIR=str(sandbox / ".mypy_cache"),
               RUFF_CACHE_DIR=str(sandbox / ".ruff_cache"), HOME=str(sandbox))
    return env


JUNIT = ".judge-junit.xml"
COVERAGE = ".judge-coverage.json"


def _read_capped(path: Path, limit: int) -> bytes | None:
    """A regular file's first `limit` bytes, never through a symlink (unsandboxed gates write the copy)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return f.read(limit)


def run_gate(name: str, argv: list[str], cwd: Path, settings: GateSettings,
             results: Sequence[str] = ()) -> tuple[GateRun, str, dict[str, bytes]]:
    """Run one gate; kill it whole at the timeout (and after it exits, so forked children do not
    outlive it). Returns the record, the (capped) output and the result files (relative to the copy)."""
    started = time.monotonic()
    got: dict[str, bytes] = {}
    with tempfile.TemporaryFile() as sink:
        if settings.sandbox is not None:
            code, timed_out = _run_sandboxed(argv, cwd, settings, sink.fileno(), results, got)
        else:
            code, timed_out = _run_unsandboxed(argv, cwd, settings, sink.fileno())
            for name_ in results:
                data = _read_capped(cwd / name_, settings.max_result_bytes)
                if data is not None:
                    got[name_] = data
        sink.seek(0)
        raw = sink.read(settings.max_output_bytes + 1)
    output = raw[: settings.max_output_bytes].decode("utf-8", errors="replace")
    if len(raw) > settings.max_output_bytes:
        output += f"\n[output cut at {settings.max_output_bytes} bytes]"
    run = GateRun(name=name, argv=argv, exit_code=code, timed_out=timed_out, passed=code == 0,
                  duration_s=round(time.monotonic() - started, 3), output_tail=output[-2000:],
                  sandbox="bwrap" if settings.sandbox else "none",
                  sandbox_note=None if settings.sandbox else f"gates ran without a sandbox: {settings.no_sandbox_reason}")
    return run, output, got


def _run_unsandboxed(argv: list[str], cwd: Path, settings: GateSettings, sink: int) -> tuple[int | None, bool]:
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
    return (None if timed_out else proc.returncode), timed_out


def _run_sandboxed(argv: list[str], box: Path, settings: GateSettings, sink: int, results: Sequence[str],
                   got: dict[str, bytes]) -> tuple[int | None, bool]:
    assert settings.sandbox is not None
    with tempfile.TemporaryFile() as frames:
        prepared = sandboxing.prepare(settings.sandbox, box, argv, settings.limits, results)
        code, timed_out = sandboxing.run(prepared, sink, settings.timeout_s, frames.fileno())
        frames.seek(0)
        got.update(sandboxing.read_results(frames.read(len(results) * (settings.max_result_bytes + 300))))
    return code, timed_out


GATE_NAMES = ("lint", "types", "tests")
TOOLS = {"lint": "ruff", "types": "mypy", "tests": "pytest"}
_CODES = re.compile(r"^[A-Z]+[0-9]*(,[A-Z]+[0-9]*)*$")
_INT = re.compile(r"^[0-9]{1,4}$")
# option -> None (a flag) or (what its value is called, the pattern the value must match)
ALLOWED_OPTIONS: dict[str, dict[str, tuple[str, re.Pattern[str]] | None]] = {
    "tests": {"-x": None, "--exitfirst": None, "-q": None, "--quiet": None, "-v": None, "--verbose": None,
              "-k": ("EXPR", re.compile(r"^[^\x00]{1,500}$")), "-m": ("MARKEXPR", re.compile(r"^[^\x00]{1,500}$")),
              "--maxfail": ("N", _INT), "--tb": ("STYLE", re.compile(r"^(auto|long|short|line|native|no)$"))},
    "lint": {"--select": ("CODES", _CODES), "--ignore": ("CODES", _CODES), "--extend-select": ("CODES", _CODES),
             "--line-length": ("N", _INT), "--target-version": ("py3X", re.compile(r"^py3[0-9]{1,2}$"))},
    "types": {"--strict": None, "--check-untyped-defs": None, "--disallow-untyped-defs": None,
              "--disallow-incomplete-defs": None, "--warn-unused-ignores": None, "--warn-return-any": None,
              "--no-implicit-optional": None, "--python-version": ("3.X", re.compile(r"^3\.[0-9]{1,2}$"))},
}
_COMMAND_WORDS = re.compile(r"^(ruff|mypy|pytest|py\.test|python[0-9.]*|bash|sh|dash|zsh|env|uv|uvx|pipx?|coverage)$")


def allowed_text(name: str) -> str:
    options = ", ".join(opt if spec is None else f"{opt} {spec[0]}" for opt, spec in ALLOWED_OPTIONS[name].items())
    what = "test node ids or paths" if name == "tests" else "paths"
    return (f"allowed for {name} ({TOOLS[name]}): {options}; and {what} relative to the project "
            "(no absolute paths, no '..')")


def _example() -> str:
    return 'e.g. {"tests": ["-x", "-k", "cart", "tests/test_cart.py::test_total"], "lint": ["--select", "F,E"]}'


def _check_path(name: str, arg: str) -> str:
    path = arg.split("::", 1)[0] if name == "tests" else arg
    parts = path.replace("\\", "/").split("/")
    if (not path or path.startswith(("/", "\\", "~")) or os.path.isabs(path) or (len(path) > 1 and path[1] == ":")
            or ".." in parts):
        raise InputError(f"gates.{name}: {arg!r} is not allowed: paths must be relative to the project, without "
                         f"'..'. {allowed_text(name)}")
    return arg


def parse_gate_args(name: str, args: Sequence[object]) -> list[str]:
    """The caller's extra arguments for one gate, checked against the allowlist; options normalised to
    `--opt=value` so no value can be read as an option."""
    if len(args) > MAX_GATE_ARGS:
        raise InputError(f"gates.{name}: at most {MAX_GATE_ARGS} arguments (got {len(args)})")
    if args and isinstance(args[0], str) and _COMMAND_WORDS.match(args[0].rsplit("/", 1)[-1]):
        raise InputError(f"gates.{name}: give only arguments, not a command: the server runs {TOOLS[name]} itself "
                         f"(the old form [{args[0]!r}, ...] is no longer accepted). {allowed_text(name)}; {_example()}")
    allowed = ALLOWED_OPTIONS[name]
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not isinstance(arg, str) or "\x00" in arg or len(arg) > 500:
            raise InputError(f"gates.{name}: arguments must be strings of at most 500 characters without NUL bytes")
        if not arg.startswith("-"):
            out.append(_check_path(name, arg))
            continue
        option, eq, value = arg.partition("=")
        if option not in allowed and len(option) > 2 and option[:2] in allowed and not option.startswith("--"):
            option, eq, value = option[:2], "=", arg[2:]  # -kexpr
        if option not in allowed:
            raise InputError(f"gates.{name}: option {arg!r} is not allowed. {allowed_text(name)}")
        spec = allowed[option]
        if spec is None:
            if eq:
                raise InputError(f"gates.{name}: {option} takes no value. {allowed_text(name)}")
            out.append(option)
            continue
        if not eq:
            if i >= len(args) or not isinstance(args[i], str):
                raise InputError(f"gates.{name}: {option} needs a value ({spec[0]}). {allowed_text(name)}")
            value = str(args[i])
            i += 1
        if not spec[1].match(value):
            raise InputError(f"gates.{name}: {value!r} is not a valid {spec[0]} for {option}. {allowed_text(name)}")
        out.append(f"{option}={value}")
    return out


def parse_gates(raw: object) -> dict[str, list[str]] | None:
    """The caller's `gates`: a list of gate names (lint, types, tests), or {name: [extra arguments]}.
    Returns {name: checked extra arguments} in the order lint, types, tests; None for the default."""
    if raw is None:
        return None
    if isinstance(raw, dict):
        chosen = dict(raw)
    elif isinstance(raw, list | tuple):
        if not all(isinstance(n, str) for n in raw):
            raise InputError(f"gates: a list must hold gate names (lint, types, tests); {_example()}")
        chosen = {str(n): [] for n in raw}
    else:
        raise InputError(f"gates: expected a list of gate names or an object of gate arguments; {_example()}")
    if not chosen:
        raise InputError("gates: name at least one gate (lint, types, tests), or leave gates out for all three")
    checked: dict[str, list[str]] = {}
    for name, args in chosen.items():
        if name not in GATE_NAMES:
            raise InputError(f"gate {name!r} is unknown; {did_you_mean(name, GATE_NAMES)}"
                             "use lint, types or tests")
        if not isinstance(args, list | tuple):
            raise InputError(f"gates.{name}: expected a list of arguments; {_example()}")
        checked[name] = parse_gate_args(name, args)
    return {n: checked[n] for n in GATE_NAMES if n in checked}


def default_gates(outdir: str, chosen: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
    """The gate commands (run in the copy) with the caller's checked extras; result files go to `outdir`."""
    py = sys.executable
    chosen = {n: [] for n in GATE_NAMES} if chosen is None else chosen

    def split(extra: list[str]) -> tuple[list[str], list[str]]:
        return [a for a in extra if a.startswith("-")], [a for a in extra if not a.startswith("-")]

    commands: dict[str, list[str]] = {}
    if "lint" in chosen:
        options, paths = split(chosen["lint"])
        commands["lint"] = [py, "-m", "ruff", "check", "--output-format", "json", "--no-cache", *options,
                            *(paths or ["."])]
    if "types" in chosen:
        options, paths = split(chosen["types"])
        commands["types"] = [py, "-m", "mypy", "--no-error-summary", "--show-column-numbers", "--no-color-output",
                             "--ignore-missing-imports", "--explicit-package-bases", *options, *(paths or ["."])]
    if "tests" in chosen:
        options, paths = split(chosen["tests"])
        tests = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", f"{outdir}/{JUNIT}"]
        try:
            import pytest_cov  # noqa: F401

            tests += ["--cov", ".", "--cov-report", f"json:{outdir}/{COVERAGE}"]
        except ImportError:
            pass
        commands["tests"] = [*tests, *options, *paths]
    return commands


def _lint(output: str) -> list[str]:
    try:
        items = json.loads(output[output.find("[") :] or "[]")
    except (ValueError, RecursionError):  # the judged project's own output: anything, any depth
        return [line for line in output.splitlines() if line.strip()][:50]
    return [f"{i.get('filename', '')}:{i['location']['row']}:"
            f"{i['location']['column']}: {i.get('code') or 'syntax'} {i['message']}" for i in items]


def _relative(lines: list[str], workdir: str) -> list[str]:
    prefix = workdir.rstrip("/") + "/"
    return [line.replace(prefix, "") for line in lines]


def _types(output: str) -> list[str]:
    return [line for line in output.splitlines() if ": error:" in line]


def _tests(junit: bytes | None, coverage: bytes | None, output: str) -> TestReport:
    report = TestReport()
    if junit is not None:
        import xml.etree.ElementTree as ET  # only when a test gate ran (start-up never needs it)

        try:
            for case in ET.fromstring(junit).iter("testcase"):
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
    if coverage is not None:
        try:
            report.coveragePct = round(json.loads(coverage)["totals"]["percent_covered"], 2)
        except (ValueError, KeyError, TypeError):
            pass
    if junit is None and output.strip():
        report.details.append(output.strip().splitlines()[-1])
    return report


def run_gates(sandbox: Path, settings: GateSettings, gates: dict[str, list[str]] | None = None,
              boundary_errors: list[str] | None = None,
              on_gate: Callable[[int, int, GateRun], None] | None = None) -> tuple[Signals, list[GateRun]]:
    """Run the gates (all three, or the caller's checked choice from `parse_gates`) on the copy and
    turn their output into the seed's signals. `on_gate(done, count, run)` is called after each gate."""
    workdir = sandboxing.WORKDIR if settings.sandbox else str(sandbox)
    commands = default_gates(sandboxing.OUTDIR if settings.sandbox else str(sandbox), gates)
    signals = Signals(boundaryErrors=boundary_errors or [])
    runs = []
    tail: list[str] = []
    for name, argv in commands.items():
        results = [JUNIT, COVERAGE] if name == "tests" else []
        run, output, got = run_gate(name, argv, sandbox, settings, results)
        runs.append(run)
        if on_gate is not None:
            on_gate(len(runs), len(commands), run)
        if run.timed_out:
            tail.append(f"{name}: killed after {settings.timeout_s:g} s")
        if name == "lint":
            signals.lintErrors = _relative(_lint(output), workdir) if not run.passed else []
        elif name == "types":
            signals.typeErrors = _relative(_types(output), workdir)
        elif name == "tests":
            signals.test = _tests(got.get(JUNIT), got.get(COVERAGE), output)
            if run.timed_out:
                signals.test.details.append(f"the test run was killed after {settings.timeout_s:g} s")
            elif not run.passed and run.exit_code not in (0, 1, 5):  # collection errors, crashes
                signals.test.details.append(f"pytest exited with {run.exit_code}: "
                                            f"{(output.strip().splitlines() or [''])[-1]}")
        if name != "lint":  # lint findings are in lintErrors already; its JSON would only crowd the tail
            tail += [f"{name}: {line}" for line in output.strip().splitlines()[-5:]]
    signals.logsTail = _relative(tail[-30:], workdir)
    return signals, runs


def gate_score(runs: Sequence[GateRun], signals: Signals) -> float:
    """A tournament score: gates passed, plus the share of tests passing."""
    total = signals.test.passed + signals.test.failed
    return sum(r.passed for r in runs) + (signals.test.passed / total if total else 0.0)


def discard(sandbox: Path) -> None:
    shutil.rmtree(sandbox, ignore_errors=True)
