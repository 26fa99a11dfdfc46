"""The gate sandbox: bubblewrap (`bwrap`) around every quality gate.

Each gate runs in new user, PID, IPC, UTS, cgroup and network namespaces (no network at all;
nested user namespaces disabled), in its own session, killed with its parent. Its filesystem
is a fresh tmpfs root holding only:

- read-only: `/usr` (with the `/bin`, `/lib*`, `/sbin` links of a merged-/usr system), the
  Python installation the server runs on (`sys.base_prefix`) and its virtualenv (`sys.prefix`,
  with the gate tools and their site-packages), `/etc/ld.so.cache`, and a two-line
  `/etc/passwd` and `/etc/group` naming the sandbox user;
- the work copy at `/judge/work`: a size-capped tmpfs filled from a read-only view of the
  server's copy (`/judge/in`) at the start of each gate, so nothing a gate writes reaches the
  server's disk;
- private size-capped tmpfs `/tmp` and HOME (`/home/judge`), a new `/proc` (the PID namespace:
  the server's processes are not in it) and a minimal `/dev`.

The private `/tmp` is mounted before the read-only binds, so an interpreter, virtualenv or project
under the host's /tmp is bound on top of it and stays visible (mounted after, it would hide them).

The environment is built here from an allowlist (PATH, HOME, LANG, LC_ALL, PYTHON* flags, tool
cache directories), never copied from the server. Limits (CPU seconds, address space, open files,
processes, file size) are set by the shell that starts the gate inside the sandbox, so they bind
the gate and everything it starts. RLIMIT_NPROC does not bind root: when the server runs as root
the process limit is a cgroup `pids.max` instead, entered before bwrap starts.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("judge_mcp")

WORKDIR = "/judge/work"
INDIR = "/judge/in"
OUTDIR = "/judge/out"  # the gate's own result files (junit), apart from the work copy the tests may fill
HOME = "/home/judge"
SANDBOX_UID = 1000
INSTALL_HINT = "Debian/Ubuntu: apt-get install bubblewrap"
USERNS_HINT = ("this host does not let bubblewrap create user namespaces: allow them (Debian: sysctl -w "
               "kernel.unprivileged_userns_clone=1; Ubuntu 24.04: sysctl -w kernel.apparmor_restrict_unprivileged_userns=0; "
               "sysctl -w user.max_user_namespaces=15000 where it is 0; in a container: run it with "
               "--security-opt seccomp=unconfined --security-opt apparmor=unconfined)")
OTHER_HINT = "`bwrap --unshare-all --ro-bind / / true` shows the same failure outside judge-mcp"
# Mount points the sandbox owns: no bound path may be one of them, contain one, or lie inside one
# (except under /tmp, mounted first so that binds under it stay visible).
_OWN_MOUNTS = ("/tmp", HOME, "/judge", "/proc", "/dev")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one gate (the sandbox and everything in it)."""

    cpu_s: int = 120
    memory_mb: int = 3072
    processes: int = 256
    open_files: int = 1024
    file_mb: int = 64
    work_mb: int = 256
    tmp_mb: int = 64


@dataclass(frozen=True)
class Bwrap:
    """A usable bubblewrap: where it is and what it exposes."""

    path: str
    version: str
    read_only: tuple[tuple[str, str], ...]  # (host path, sandbox path)
    symlinks: tuple[tuple[str, str], ...]  # (target, sandbox path)
    pids_cgroup: Path | None = None  # where per-gate cgroups with pids.max go (root only)
    python: str = field(default=sys.executable)

    @property
    def process_limit(self) -> str:
        return "cgroup pids.max" if self.pids_cgroup else "RLIMIT_NPROC"

    def describe(self) -> str:
        exposed = ", ".join(dst for _, dst in self.read_only)
        return (f"bwrap {self.version} (user, pid, net, ipc, uts, cgroup namespaces; no network; read-only: {exposed}; "
                f"process limit by {self.process_limit})")


def _python_paths() -> list[str]:
    """The interpreter's installation and virtualenv, outermost first, without duplicates."""
    paths: list[str] = []
    for p in (sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix,
              os.path.dirname(os.path.realpath(sys.executable))):
        real = os.path.realpath(p)
        if real.startswith("/usr/") or real == "/usr":
            continue  # inside /usr, which is bound anyway
        if not any(real == q or real.startswith(q + "/") for q in paths):
            paths = [q for q in paths if not q.startswith(real + "/")] + [real]
    if os.path.realpath(sys.prefix) != sys.prefix:  # the venv by the path its scripts name
        paths.append(sys.prefix)
    return paths


def _layout() -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    read_only: list[tuple[str, str]] = [("/usr", "/usr")]
    symlinks: list[tuple[str, str]] = []
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            symlinks.append((os.readlink(top), top))
        elif os.path.isdir(top):
            read_only.append((top, top))
    read_only += [(p, p) for p in _python_paths()]
    if os.path.isfile("/etc/ld.so.cache"):
        read_only.append(("/etc/ld.so.cache", "/etc/ld.so.cache"))
    for _, dst in read_only:
        clash = next((m for m in _OWN_MOUNTS if dst == m or m.startswith(dst.rstrip("/") + "/")
                      or (m != "/tmp" and dst.startswith(m + "/"))), None)
        if clash is not None:
            raise RuntimeError(f"the Python installation at {dst} would be bound over the sandbox's own {clash}; "
                               "run judge-mcp from an interpreter and virtualenv installed elsewhere")
    return tuple(read_only), tuple(symlinks)


def _pids_cgroup_base() -> Path | None:
    """A writable cgroup (v1 `pids` hierarchy or v2 with the pids controller) for per-gate limits."""
    if os.geteuid() != 0:
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    candidates = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            candidates.append(Path("/sys/fs/cgroup/pids") / path.lstrip("/"))
        elif controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
            candidates.append(Path("/sys/fs/cgroup") / path.lstrip("/"))
    for base in candidates:
        probe = base / f"judge-mcp-probe-{os.getpid()}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            (probe / "pids.max").write_text("8")
            return base
        except OSError:
            continue
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
    return None


class PidsCgroup:
    """One gate's cgroup with pids.max; every process in it is killed before it is removed."""

    def __init__(self, base: Path, limit: int):
        self.path = base / f"judge-mcp-gate-{uuid.uuid4().hex[:12]}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(limit))

    def kill_all(self) -> None:
        for _ in range(200):
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except OSError:
                return
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        self.kill_all()
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)
        log.warning("could not remove the gate cgroup %s", self.path)


def _script(limits: Limits, results: Sequence[str]) -> str:
    """The shell that starts the gate inside the sandbox: fill the work copy, set the limits, run the gate
    (stdin /dev/null), then hand the named result files out on fd 0 as `<name> <size>\\n<bytes>` frames."""
    copy_out = "".join(f'f="{OUTDIR}/{name}"; [ -f "$f" ] && [ ! -L "$f" ] && {{ printf "%s %s\\n" "{name}" '
                       f'"$(wc -c < "$f")"; cat -- "$f"; }} >&0 2>/dev/null\n' for name in results)
    return (
        f"cp -R {INDIR}/. {WORKDIR}/ || {{ echo 'judge-mcp: the work copy does not fit in "
        f"{limits.work_mb} MB' >&2; exit 125; }}\n"
        f"ulimit -t {limits.cpu_s} && ulimit -v {limits.memory_mb * 1024} && ulimit -n {limits.open_files} "
        f"&& ulimit -f {limits.file_mb * 2048} && ulimit -p {limits.processes} || exit 125\n"
        '"$@" </dev/null\n'
        "rc=$?\n"
        f"{copy_out}"
        "exit $rc\n"
    )


def read_results(data: bytes) -> dict[str, bytes]:
    """The frames the script wrote on fd 0 (see _script), as far as they are well formed."""
    out: dict[str, bytes] = {}
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos, pos + 300)
        if end < 0:
            break
        name, _, size = data[pos:end].decode(errors="replace").rpartition(" ")
        if not name or not size.isdigit():
            break
        out[name] = data[end + 1 : end + 1 + int(size)]
        pos = end + 1 + int(size)
    return out


def environment(python: str) -> dict[str, str]:
    """The gate's whole environment (inside the sandbox)."""
    venv_bin = os.path.dirname(python)
    return {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": HOME,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TMPDIR": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONPATH": WORKDIR,
        "PYTHONHASHSEED": "0",
        "MYPY_CACHE_DIR": "/tmp/.mypy_cache",
        "RUFF_CACHE_DIR": "/tmp/.ruff_cache",
        "NO_COLOR": "1",
    }


@dataclass
class Prepared:
    argv: list[str]
    pass_fds: list[int]
    owned_fds: list[int]  # closed once bwrap has started
    cgroup: PidsCgroup | None

    def close(self) -> None:
        for fd in self.owned_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.owned_fds = []


def _data_fd(text: str) -> int:
    r, w = os.pipe()
    os.write(w, text.encode())
    os.close(w)
    return r


def prepare(bwrap: Bwrap, box: Path, argv: Sequence[str], limits: Limits, results: Sequence[str] = ()) -> Prepared:
    """The full command that runs `argv` (paths as seen inside: the work copy is WORKDIR) in a sandbox
    over a copy of `box`. The files `results` (names in OUTDIR) come back on stdin (see run)."""
    cgroup = PidsCgroup(bwrap.pids_cgroup, limits.processes) if bwrap.pids_cgroup else None
    passwd = _data_fd(f"judge:x:{SANDBOX_UID}:{SANDBOX_UID}:judge:{HOME}:/bin/sh\n")
    group = _data_fd(f"judge:x:{SANDBOX_UID}:\n")
    cmd = [bwrap.path, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
           "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "judge-sandbox",
           "--proc", "/proc", "--dev", "/dev",
           # /tmp before the binds: a venv or interpreter under the host's /tmp is bound on top of it, not hidden
           "--size", str(limits.tmp_mb << 20), "--tmpfs", "/tmp",
           "--size", str(limits.tmp_mb << 20), "--tmpfs", HOME]
    for src, dst in bwrap.read_only:
        cmd += ["--ro-bind", src, dst]
    for target, dst in bwrap.symlinks:
        cmd += ["--symlink", target, dst]
    cmd += ["--ro-bind-data", str(passwd), "/etc/passwd", "--ro-bind-data", str(group), "/etc/group",
            "--size", str(limits.work_mb << 20), "--tmpfs", WORKDIR, "--size", str(16 << 20), "--tmpfs", OUTDIR,
            "--ro-bind", str(box), INDIR, "--remount-ro", "/", "--chdir", WORKDIR, "--clearenv"]
    for key, value in environment(bwrap.python).items():
        cmd += ["--setenv", key, value]
    cmd += ["--", "/bin/sh", "-c", _script(limits, results), "judge-gate", *argv]
    if cgroup:  # enter the cgroup before bwrap starts, so nothing in the sandbox is outside it
        cmd = ["/bin/sh", "-c", f'echo $$ > {cgroup.path / "cgroup.procs"} || exit 125; exec "$@"', "judge-enter",
               *cmd]
    return Prepared(argv=cmd, pass_fds=[passwd, group], owned_fds=[passwd, group], cgroup=cgroup)


def _probe(bwrap: Bwrap) -> str | None:
    """None when a sandbox starts and runs the interpreter; else why not."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="judge-probe-") as empty:
        try:
            prepared = prepare(bwrap, Path(empty), [bwrap.python, "-c", "pass"], Limits())
        except OSError as exc:
            return f"cannot set up the sandbox: {exc}"
        try:
            proc = subprocess.run(prepared.argv, pass_fds=prepared.pass_fds, stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap did not run: {exc}"
        finally:
            prepared.close()
            if prepared.cgroup:
                prepared.cgroup.remove()
    if proc.returncode != 0:
        return _probe_failure(bwrap, proc.returncode, proc.stderr.decode(errors="replace"))
    return None


def _probe_failure(bwrap: Bwrap, code: int, stderr: str) -> str:
    """Why the probe's sandbox did not run, in bubblewrap's (or the shell's) own words, and what to do."""
    said = " ".join(line.strip() for line in stderr.strip().splitlines()[-4:])[-600:] or f"exit code {code}"
    if "bwrap:" in said:
        userns = any(word in said for word in ("namespace", "uid map", "Operation not permitted", "Permission denied",
                                               "ENOSPC"))
        return (f"bubblewrap {bwrap.path} cannot start a sandbox here: {said!r}; "
                f"{USERNS_HINT if userns else OTHER_HINT}")
    missing = any(word in said for word in ("not found", "No such file", "cannot open shared object"))
    return (f"the sandbox started but the interpreter {bwrap.python} did not run inside it: {said!r}; "
            + (f"it sees only {', '.join(dst for _, dst in bwrap.read_only)} read-only: run judge-mcp from an "
               "interpreter and virtualenv whose files are all under those paths" if missing else
               "that is the interpreter's own error inside the sandbox"))


@functools.lru_cache(maxsize=4)
def detect(path: str | None = None) -> tuple[Bwrap | None, str]:
    """The bubblewrap to use and a one-line description, or None and why not (cached per process)."""
    found = path or shutil.which("bwrap")
    if not found or not os.path.exists(found):
        return None, f"bwrap not found{f' at {path}' if path else ''} ({INSTALL_HINT})"
    try:
        version = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=10).stdout.split()[-1]
    except (OSError, IndexError, subprocess.TimeoutExpired) as exc:
        return None, f"{found} does not run: {exc}"
    try:
        read_only, symlinks = _layout()
    except RuntimeError as exc:
        return None, str(exc)
    bwrap = Bwrap(path=found, version=version, read_only=read_only, symlinks=symlinks,
                  pids_cgroup=_pids_cgroup_base())
    if os.geteuid() == 0 and bwrap.pids_cgroup is None:
        return None, ("the server runs as root and no writable pids cgroup was found, so the sandbox's process "
                      "limit could not bind (RLIMIT_NPROC does not bind root); run the server as a regular user")
    problem = _probe(bwrap)
    if problem:
        return None, problem
    return bwrap, bwrap.describe()


def run(prepared: Prepared, sink: int, timeout_s: float, results: int | None = None) -> tuple[int | None, bool]:
    """Run a prepared sandbox, output to `sink`, result frames to `results` (a file opened for writing;
    read it with read_results); at the timeout kill it all. Returns (exit code or None, timed out)."""
    try:
        proc = subprocess.Popen(prepared.argv, stdin=subprocess.DEVNULL if results is None else results, stdout=sink, stderr=subprocess.STDOUT,
                                pass_fds=prepared.pass_fds, start_new_session=True, env={"PATH": "/usr/bin:/bin"}, cwd="/")
    finally:
        prepared.close()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        # bwrap's child is PID 1 of the sandbox's PID namespace and dies with bwrap (--die-with-parent);
        # when PID 1 dies the kernel kills every process in the namespace, new sessions included.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if prepared.cgroup:
            prepared.cgroup.remove()
    return (None if timed_out else proc.returncode), timed_out
