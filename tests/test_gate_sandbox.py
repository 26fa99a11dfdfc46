"""judge_code's gates in the bubblewrap sandbox, attacked the way a hostile organization would,
through the real HTTP server with two organizations (issue 14).

Organization B submits tests that try to read the server's secrets and organization A's data,
write outside their copy, reach the server's port, outlive the timeout, fill the disk and fork
without bound. Each attack test reports what it got in its own assertion message, so the outcome
is in the tool result; canaries (org A's token, secret environment variables, an SQLite marker,
a private key) must never be there, and the files outside must stay as they were.

Without bubblewrap these tests skip with the reason; with JUDGE_MCP_REQUIRE_SANDBOX_TESTS=1 (set
by .ci/run) they fail instead.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from judges.code import sandbox
from tests.mcp_helpers import data_home, free_port, processes_with, wait_for_port
from tests.test_transports import JUDGE_MCP, client_with_token, server_env

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def require_bwrap() -> sandbox.Bwrap:
    bwrap, why = sandbox.detect()
    if bwrap is None:
        if os.environ.get("JUDGE_MCP_REQUIRE_SANDBOX_TESTS") == "1":
            pytest.fail(f"the gate sandbox is required here (JUDGE_MCP_REQUIRE_SANDBOX_TESTS=1) but unusable: {why}")
        pytest.skip(f"gate sandbox unavailable: {why}")
    return bwrap


@dataclass
class Server:
    url: str
    port: int
    pid: int
    home: Path
    fake_home: Path
    stderr: Path
    canaries: dict[str, str]


def start_server(root: Path, command: Sequence[str] = (JUDGE_MCP,), **extra: str) -> tuple[subprocess.Popen[bytes], Server]:
    tag = uuid.uuid4().hex
    home, fake_home = root / "data", root / "user-home"
    (fake_home / ".ssh").mkdir(parents=True)
    canaries = {"token": f"tok-a-{tag}", "database_url": f"canary-db-{tag}", "sentry": f"canary-sentry-{tag}",
                "ssh": f"canary-ssh-{tag}", "sqlite": f"canary-agent-{tag}"}
    (fake_home / ".ssh" / "id_rsa").write_text(canaries["ssh"])
    port = free_port()
    env = server_env(home, JUDGE_MCP_TOKENS=f"{canaries['token']}=org-a,tok-b=org-b", HOME=str(fake_home),
                     DATABASE_URL=f"postgres://u:{canaries['database_url']}@db/x",
                     SENTRY_DSN=f"https://{canaries['sentry']}@sentry.invalid/1",
                     JUDGE_MCP_GATE_TIMEOUT_S="12", JUDGE_MCP_GATE_MAX_PROCESSES="64", JUDGE_MCP_GATE_DISK_MB="128",
                     JUDGE_MCP_WARM_EMBEDDINGS="false", **extra)
    stderr = root / "server.log"
    with stderr.open("wb") as err:
        proc = subprocess.Popen([*command, "--transport", "http", "--port", str(port)], env=env,
                                stdout=subprocess.DEVNULL, stderr=err)
    assert wait_for_port(port, 30), "the HTTP server did not start within 30 s"
    return proc, Server(f"http://127.0.0.1:{port}/mcp", port, proc.pid, home, fake_home, stderr, canaries)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    require_bwrap()
    proc, srv = start_server(tmp_path_factory.mktemp("sandboxed"))
    yield srv
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


ATTACKS = '''
import os, socket, subprocess, sys, time

SERVER_PID = {pid}
PORT = {port}
DATA = {data!r}
FAKE_HOME = {fake_home!r}
MARKER = {marker!r}


def got(what):
    raise AssertionError("GOT " + repr(what))


def attempt(fn):
    try:
        return fn()
    except BaseException as exc:
        return type(exc).__name__


def read(path):
    with open(path, "rb") as f:
        return f.read(4000).decode("latin-1")


def environ(pid):
    return dict(item.split("=", 1) for item in read(f"/proc/{{pid}}/environ").split("\\0") if "=" in item)


def test_environ():
    names, secrets = set(), {{}}
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        env = attempt(lambda: environ(pid))
        if isinstance(env, dict):
            names |= set(env)
            secrets.update({{k: v for k, v in env.items() if k in ("JUDGE_MCP_TOKENS", "DATABASE_URL", "SENTRY_DSN")}})
    got({{"parent_home": attempt(lambda: environ(os.getppid())["HOME"]),
         "server": attempt(lambda: environ(SERVER_PID)), "names": sorted(names), "secrets": secrets}})


def test_cmdline():
    parent = attempt(lambda: read(f"/proc/{{os.getppid()}}/cmdline"))
    got({{"parent": parent[:20], "mentions_server": "--transport" in parent,
         "server": attempt(lambda: read(f"/proc/{{SERVER_PID}}/cmdline"))}})


def test_sqlite_and_data_dir():
    got({{"sqlite": attempt(lambda: read(os.path.join(DATA, "judge.sqlite3"))),
         "list": attempt(lambda: os.listdir(DATA))}})


def test_ssh_and_shadow():
    got({{"home_ssh": attempt(lambda: os.listdir(os.path.expanduser("~/.ssh"))),
         "server_home_key": attempt(lambda: read(os.path.join(FAKE_HOME, ".ssh", "id_rsa"))),
         "root_ssh": attempt(lambda: os.listdir("/root/.ssh")),
         "shadow": attempt(lambda: read("/etc/shadow"))}})


def write(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("pwned")
    return "written"


def test_write_outside():
    got({{"data": attempt(lambda: write(os.path.join(DATA, "pwned"))),
         "home": attempt(lambda: write(os.path.join(FAKE_HOME, "pwned"))),
         "tmp": attempt(lambda: write("/tmp/" + MARKER)),
         "usr": attempt(lambda: write("/usr/pwned")),
         "input": attempt(lambda: write("/judge/in/pwned"))}})


def test_connect_to_the_server():
    got(attempt(lambda: socket.create_connection(("127.0.0.1", PORT), timeout=3) and "connected"))


def test_setsid_daemon():
    proc = subprocess.Popen(["setsid", sys.executable, "-c", "import time; time.sleep(300)", MARKER])
    time.sleep(0.3)
    got("daemon started" if proc.poll() is None else "daemon exited")


def test_write_3_gb():
    written, error, chunk = 0, None, b"x" * (1 << 20)
    try:
        while written < 3 << 30:
            with open(f"big-{{written >> 25}}.bin", "ab") as f:
                f.write(chunk)
            written += len(chunk)
    except OSError as exc:
        error = exc.strerror
    for name in os.listdir("."):
        if name.startswith("big-"):
            os.remove(name)
    got({{"mb": written >> 20, "error": error}})


def test_fork_loop():
    children, error = [], None
    try:
        while len(children) < 2000:
            children.append(subprocess.Popen(["sleep", "30"]))
    except OSError as exc:
        error = type(exc).__name__
    for child in children:
        child.kill()
    got({{"started": len(children), "error": error}})
'''


def no_process_with(marker: str, within_s: float = 3.0) -> bool:
    deadline = time.monotonic() + within_s
    while processes_with(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def reports(result: dict[str, Any]) -> dict[str, Any]:
    """{test name: what the attack got}, from the failure lines of the tool result."""
    out = {}
    for line in result["signals"]["test"]["details"]:
        name, _, message = line.partition(": AssertionError: GOT ")
        if message:
            out[name.rsplit("::", 1)[-1]] = ast.literal_eval(message)  # the repr of plain data the attack wrote
    return out


@pytest.fixture(scope="module")
async def attack(server: Server) -> dict[str, Any]:
    """One judge_code call as organization B with every attack, after organization A stored data."""
    async with client_with_token(server.url, server.canaries["token"]) as a:
        created = await a.call_tool("create_agent", {"name": server.canaries["sqlite"], "system_prompt": "p"})
        assert not created.is_error
    marker = f"judge-attack-{uuid.uuid4().hex}"
    source = ATTACKS.format(pid=server.pid, port=server.port, data=str(data_home(server.home)), fake_home=str(server.fake_home),
                            marker=marker)
    before = {p: p.read_bytes() for p in server.fake_home.rglob("*") if p.is_file()}
    async with client_with_token(server.url, "tok-b") as b:
        result = await b.call_tool("judge_code", {"spec": "harmless tests", "gates": ["tests"],
                                                  "files": [{"path": "test_attack.py", "content": source}]})
    assert not result.is_error, result.content[0].text
    return {"result": result.structured_content, "marker": marker, "before": before,
            "got": reports(result.structured_content)}


async def test_the_verdict_comes_back_from_the_sandbox(attack: dict[str, Any]) -> None:
    result = attack["result"]
    assert result["verdict"] == "revise"
    assert [(g["name"], g["sandbox"]) for g in result["gates"]] == [("tests", "bwrap")]
    assert result["signals"]["test"]["failed"] == 9


async def test_no_canary_reaches_the_tool_result(attack: dict[str, Any], server: Server) -> None:
    text = json.dumps(attack["result"])
    assert [name for name, value in server.canaries.items() if value in text] == []


async def test_the_server_environment_is_not_readable(attack: dict[str, Any]) -> None:
    got = attack["got"]["test_environ"]
    assert (got["server"], got["parent_home"], got["secrets"]) == ("FileNotFoundError", "/home/judge", {})
    assert set(got["names"]) <= set(sandbox.environment("python")) | {"PWD"}


async def test_the_parent_command_line_is_the_sandbox_shell(attack: dict[str, Any]) -> None:
    assert attack["got"]["test_cmdline"] == {"parent": "/bin/sh\0-c\0cp -R /ju", "mentions_server": False,
                                             "server": "FileNotFoundError"}


async def test_the_sqlite_file_and_data_directory_are_not_there(attack: dict[str, Any]) -> None:
    assert attack["got"]["test_sqlite_and_data_dir"] == {"sqlite": "FileNotFoundError", "list": "FileNotFoundError"}


async def test_ssh_keys_and_shadow_are_not_there(attack: dict[str, Any]) -> None:
    assert attack["got"]["test_ssh_and_shadow"] == {"home_ssh": "FileNotFoundError",
                                                    "server_home_key": "FileNotFoundError",
                                                    "root_ssh": "FileNotFoundError", "shadow": "FileNotFoundError"}


async def test_writes_outside_the_copy_reach_nothing_outside(attack: dict[str, Any], server: Server) -> None:
    got = attack["got"]["test_write_outside"]
    # /tmp and the paths under it (the data directory lives in the host's /tmp here) are the sandbox's own tmpfs
    assert got["usr"] == "OSError" and got["input"] == "OSError"
    assert not (data_home(server.home) / "pwned").exists() and not (server.fake_home / "pwned").exists()
    assert not Path("/tmp", attack["marker"]).exists()
    after = {p: p.read_bytes() for p in server.fake_home.rglob("*") if p.is_file()}
    assert after == attack["before"]


async def test_the_servers_port_is_unreachable(attack: dict[str, Any]) -> None:
    assert attack["got"]["test_connect_to_the_server"] == "ConnectionRefusedError"


async def test_a_setsid_daemon_does_not_outlive_the_gate(attack: dict[str, Any]) -> None:
    assert attack["got"]["test_setsid_daemon"] == "daemon started"
    assert no_process_with(attack["marker"])


async def test_writing_3_gb_stops_at_the_work_copy_cap(attack: dict[str, Any]) -> None:
    got = attack["got"]["test_write_3_gb"]
    assert got["error"] == "No space left on device" and got["mb"] <= 128


async def test_a_fork_loop_is_stopped_by_the_process_limit(attack: dict[str, Any]) -> None:
    got = attack["got"]["test_fork_loop"]
    assert got["error"] == "BlockingIOError" and 0 < got["started"] < 64


async def test_a_gate_killed_at_the_timeout_leaves_no_process(server: Server) -> None:
    marker = f"judge-hang-{uuid.uuid4().hex}"
    source = ("import subprocess, sys, time\n\n\ndef test_hang():\n"
              f"    subprocess.Popen(['setsid', sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])\n"
              "    time.sleep(300)\n")
    async with client_with_token(server.url, "tok-b") as b:
        result = await b.call_tool("judge_code", {"spec": "x", "gates": ["tests"],
                                                  "files": [{"path": "test_hang.py", "content": source}]})
    gate = result.structured_content["gates"][0]
    assert gate["timed_out"] and gate["sandbox"] == "bwrap"
    assert no_process_with(marker)


REFUSED = [
    ({"lint": ["--fix"]}, "gates.lint: option '--fix' is not allowed"),
    ({"lint": ["--select", "F", "../outside"]}, "gates.lint: '../outside' is not allowed"),
    ({"tests": ["--basetemp=/tmp/x"]}, "gates.tests: option '--basetemp=/tmp/x' is not allowed"),
    ({"tests": ["--junitxml", "/tmp/x.xml"]}, "gates.tests: option '--junitxml' is not allowed"),
    ({"tests": ["-p", "evil"]}, "gates.tests: option '-p' is not allowed"),
    ({"tests": ["-c", "evil.ini"]}, "gates.tests: option '-c' is not allowed"),
    ({"tests": ["-o", "addopts=-p evil"]}, "gates.tests: option '-o' is not allowed"),
    ({"tests": ["--rootdir=/"]}, "gates.tests: option '--rootdir=/' is not allowed"),
    ({"tests": ["/etc/passwd"]}, "gates.tests: '/etc/passwd' is not allowed"),
    ({"tests": ["tests/../../x.py::test_a"]}, "gates.tests: 'tests/../../x.py::test_a' is not allowed"),
    ({"types": ["--config-file", "/etc/passwd"]}, "gates.types: option '--config-file' is not allowed"),
    ({"types": ["--cache-dir=/tmp"]}, "gates.types: option '--cache-dir=/tmp' is not allowed"),
    ({"tests": ["pytest", "-q"]}, "gates.tests: give only arguments, not a command"),
    ({"deploy": []}, "gate 'deploy' is unknown; use lint, types or tests"),
]


@pytest.mark.parametrize(("gates", "message"), REFUSED, ids=[m for _, m in REFUSED])
async def test_refused_gate_arguments_say_what_is_allowed(server: Server, gates: dict[str, Any], message: str) -> None:
    async with client_with_token(server.url, "tok-b") as b:
        result = await b.call_tool("judge_code", {"spec": "x", "gates": gates,
                                                  "files": [{"path": "test_a.py", "content": "def test_a():\n    pass\n"}]})
    text = result.content[0].text
    assert result.is_error and message in text
    if "unknown" not in message:
        assert "allowed for" in text


PROJECT = {
    "calc/__init__.py": "from calc.ops import add\n\n__all__ = [\"add\"]\n",
    "calc/ops.py": "def add(a: int, b: int) -> int:\n    return a + b\n",
    "tests/conftest.py": "import pytest\n\n\n@pytest.fixture\ndef pair() -> tuple[int, int]:\n    return (2, 3)\n",
    "tests/test_ops.py": ("from calc import add\n\n\ndef test_add(pair: tuple[int, int]) -> None:\n"
                          "    assert add(*pair) == 5\n\n\ndef test_add_negative() -> None:\n"
                          "    assert add(-1, 1) == 0\n"),
}


async def test_a_normal_project_passes_every_gate_inside_the_sandbox(server: Server) -> None:
    root = server.home / "projects" / "calc"
    for rel, content in PROJECT.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content)
    async with client_with_token(server.url, "tok-b") as b:
        result = await b.call_tool("judge_code", {"spec": "add numbers", "root": str(root)})
    out = result.structured_content
    assert [(g["name"], g["passed"], g["sandbox"]) for g in out["gates"]] == [
        ("lint", True, "bwrap"), ("types", True, "bwrap"), ("tests", True, "bwrap")]
    assert (out["verdict"], out["signals"]["test"]["passed"]) == ("accept", 2)


async def test_selected_test_node_ids_and_options_reach_pytest(server: Server) -> None:
    files = [{"path": "test_sel.py", "content": "def test_one():\n    pass\n\n\ndef test_two():\n    assert False\n"}]
    async with client_with_token(server.url, "tok-b") as b:
        result = await b.call_tool("judge_code", {"spec": "x", "files": files,
                                                  "gates": {"tests": ["-x", "-k", "one or two", "test_sel.py::test_one"]}})
    out = result.structured_content
    assert (out["signals"]["test"]["passed"], out["signals"]["test"]["failed"]) == (1, 0)
    assert out["gates"][0]["argv"][-3:] == ["-x", "-k=one or two", "test_sel.py::test_one"]


def test_the_server_logs_the_sandbox_at_start(server: Server) -> None:
    import time

    deadline = time.monotonic() + 10  # the probe runs beside start-up, not before it
    while "gate sandbox:" not in (log := server.stderr.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "gate sandbox: bwrap" in log and "no network" in log


@pytest.fixture(scope="module")
def unsandboxed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    proc, srv = start_server(tmp_path_factory.mktemp("unsandboxed"), JUDGE_MCP_GATE_SANDBOX="none")
    yield srv
    proc.terminate()
    proc.wait(timeout=10)


async def test_http_with_tokens_refuses_unsandboxed_gates(unsandboxed_server: Server) -> None:
    async with client_with_token(unsandboxed_server.url, "tok-b") as b:
        result = await b.call_tool("judge_code", {"spec": "x", "files": [{"path": "a.py", "content": "x = 1\n"}]})
        without = await b.call_tool("judge_code", {"spec": "x", "run_gates": False,
                                                   "files": [{"path": "a.py", "content": "x = 1\n"}]})
    assert result.is_error and "set JUDGE_MCP_UNSANDBOXED_GATES=1 to run gates without a sandbox" in result.content[0].text
    assert not without.is_error


async def test_operator_opt_in_runs_unsandboxed_gates_and_says_so(tmp_path: Path) -> None:
    proc, srv = start_server(tmp_path, JUDGE_MCP_GATE_SANDBOX="none", JUDGE_MCP_UNSANDBOXED_GATES="1")
    try:
        async with client_with_token(srv.url, "tok-b") as b:
            result = await b.call_tool("judge_code", {"spec": "x", "gates": ["tests"], "files": [
                {"path": "test_a.py", "content": "def test_a():\n    pass\n"}]})
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    gate = result.structured_content["gates"][0]
    assert (gate["passed"], gate["sandbox"]) == (True, "none")
    assert gate["sandbox_note"] == ("gates ran without a sandbox: JUDGE_MCP_GATE_SANDBOX=none (auto, the default, "
                                    "isolates them with bubblewrap where it works)")


async def test_stdio_without_a_sandbox_runs_gates_and_every_result_says_none(tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=JUDGE_MCP, args=[], env=server_env(
        tmp_path, JUDGE_MCP_GATE_SANDBOX="none", JUDGE_MCP_WARM_EMBEDDINGS="false"))
    async with Client(params) as client:
        result = await client.call_tool("judge_code", {"spec": "x", "files": [
            {"path": "test_a.py", "content": "def test_a() -> None:\n    pass\n"}]})
    gates = result.structured_content["gates"]
    assert [(g["name"], g["passed"], g["sandbox"]) for g in gates] == [
        ("lint", True, "none"), ("types", True, "none"), ("tests", True, "none")]
    assert all(g["sandbox_note"].startswith("gates ran without a sandbox: JUDGE_MCP_GATE_SANDBOX=none") for g in gates)


def test_option_values_are_joined_so_none_can_pass_for_an_option() -> None:
    from judges.code.gates import parse_gates

    assert parse_gates({"tests": ["-k", "-p evil", "-mslow", "--maxfail", "2"]}) == {
        "tests": ["-k=-p evil", "-m=slow", "--maxfail=2"]}


def test_a_list_of_names_chooses_gates_in_their_fixed_order() -> None:
    from judges.code.gates import parse_gates

    assert parse_gates(["tests", "lint"]) == {"lint": [], "tests": []}


def test_a_missing_bwrap_is_reported_with_how_to_install_it() -> None:
    bwrap, why = sandbox.detect("/nonexistent/bwrap")
    assert (bwrap, why) == (None, "bwrap not found at /nonexistent/bwrap (Debian/Ubuntu: apt-get install bubblewrap)")


def test_without_a_cgroup_the_process_limit_binds_an_unprivileged_server() -> None:
    """The RLIMIT_NPROC path a server not running as root takes (as root here: the sandbox is started as
    nobody, so the limit is not exempt)."""
    bwrap = require_bwrap()
    plain = sandbox.Bwrap(path=bwrap.path, version=bwrap.version, read_only=(("/usr", "/usr"),),
                          symlinks=bwrap.symlinks, pids_cgroup=None)
    box = Path(tempfile.mkdtemp(prefix="judge-nproc-"))  # pytest's tmp_path is not traversable for nobody
    box.chmod(0o755)
    loop = "n=0; while [ $n -lt 200 ]; do sleep 5 & n=$((n+1)); done; echo all 200 started"
    prepared = sandbox.prepare(plain, box, ["/bin/sh", "-c", loop], sandbox.Limits(processes=32))
    as_nobody: dict[str, Any] = {"user": 65534, "group": 65534, "extra_groups": []} if os.geteuid() == 0 else {}
    try:
        proc = subprocess.run(prepared.argv, pass_fds=prepared.pass_fds, capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin"}, cwd="/", **as_nobody)
    finally:
        prepared.close()
        box.rmdir()
    assert "Cannot fork" in proc.stderr and "all 200 started" not in proc.stdout


# --- the sandbox wherever the interpreter, virtualenv and project live (issue 29) -------------------------

GATE_TOOLS = ("ruff", "mypy", "pytest")


def _distributions(names: Sequence[str]) -> list[Any]:
    """The installed distributions of `names` and everything they require (extras aside)."""
    import importlib.metadata

    from packaging.requirements import Requirement

    found: dict[str, Any] = {}
    todo = list(names)
    while todo:
        dist = importlib.metadata.distribution(todo.pop())
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key not in found:
            found[key] = dist
            todo += [r.name for r in map(Requirement, dist.requires or [])
                     if r.marker is None or r.marker.evaluate({"extra": ""})]
    return list(found.values())


def venv_at(where: Path) -> Path:
    """A virtualenv at `where` with its own copy of the gate tools (ruff, mypy, pytest and their requirements;
    hard links where it can); the server's other packages come from the running environment through a .pth
    file, whose directories the sandbox does not show. Returns its python."""
    import shutil
    import site
    import sys

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True)
    packages = where / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    for dist in _distributions(GATE_TOOLS):
        for name in dist.files or []:
            source = Path(dist.locate_file(name))
            target = Path(os.path.normpath(packages / name))  # scripts are listed as ../../../bin/<name>
            if source.is_file() and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(source, target)
                except OSError:
                    shutil.copy2(source, target)
    (packages / "zz-server-packages.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in site.getsitepackages()))
    return where / "bin" / "python"


IN_THE_SANDBOX = '''import os
import socket
import sys


def test_runs_in_the_sandbox_on_the_venv_under_tmp() -> None:
    assert (socket.gethostname(), os.getuid(), os.getcwd()) == ("judge-sandbox", 1000, "/judge/work")
    assert sys.prefix == {venv!r}
    with open("/proc/1/cmdline", "rb") as init:  # PID 1 of the sandbox's own PID namespace
        assert init.read().split(b"\\0")[0].endswith(b"bwrap")
'''


async def test_gates_run_sandboxed_with_the_venv_and_the_project_under_tmp() -> None:
    """Issue 29: a private /tmp mounted over the binds hid a venv under /tmp ("python: not found"), so the
    sandbox was off, and over HTTP with tokens judge_code refused to run gates at all."""
    import shutil

    require_bwrap()
    root = Path(tempfile.mkdtemp(prefix="judge-under-tmp-", dir="/tmp"))
    try:
        python = venv_at(root / "venv")
        project = root / "data" / "project"
        for rel, content in {**PROJECT, "tests/test_where.py": IN_THE_SANDBOX.format(venv=str(root / "venv"))}.items():
            (project / rel).parent.mkdir(parents=True, exist_ok=True)
            (project / rel).write_text(content)
        proc, srv = start_server(root, command=(str(python), "-m", "server"))
        try:
            async with client_with_token(srv.url, "tok-b") as b:
                result = await b.call_tool("judge_code", {"spec": "add numbers", "root": str(project)})
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        assert not result.is_error, result.content[0].text
        out = result.structured_content
        assert [(g["name"], g["passed"], g["sandbox"]) for g in out["gates"]] == [
            ("lint", True, "bwrap"), ("types", True, "bwrap"), ("tests", True, "bwrap")], [g["output_tail"] for g in out["gates"]]
        assert out["signals"]["test"]["passed"] == 3
    finally:
        shutil.rmtree(root, ignore_errors=True)


NO_NAMESPACES = ("echo 1 > /proc/sys/user/max_user_namespaces && "
                 'exec unshare --user --map-user=1000 --map-group=1000 -- "$@"')


async def test_when_bubblewrap_cannot_start_the_refusal_gives_its_own_reason_and_what_to_do(tmp_path: Path) -> None:
    """The server runs where bubblewrap is installed but may not create a user namespace (a user namespace
    whose limit is used up, as a locked-down host or container has): the refusal quotes bubblewrap's own
    error and says what to change, and does not tell the operator to install what is installed."""
    require_bwrap()
    command = ("unshare", "--user", "--map-root-user", "--", "/bin/sh", "-c", NO_NAMESPACES, "judge-userns", JUDGE_MCP)
    proc, srv = start_server(tmp_path, command=command)
    try:
        async with client_with_token(srv.url, "tok-b") as b:
            result = await b.call_tool("judge_code", {"spec": "x", "files": [{"path": "a.py", "content": "x = 1\n"}]})
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    text = result.content[0].text
    assert result.is_error
    assert ("there is no sandbox for them here: bubblewrap /usr/bin/bwrap cannot start a sandbox here: 'bwrap: "
            "Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded (ENOSPC)'; "
            "this host does not let bubblewrap create user namespaces: allow them") in text
    assert "sysctl -w user.max_user_namespaces=15000 where it is 0" in text and "apt-get install" not in text


def test_an_interpreter_the_sandbox_does_not_show_is_named_with_what_it_sees() -> None:
    import sys

    bwrap = require_bwrap()
    bare = sandbox.Bwrap(path=bwrap.path, version=bwrap.version, read_only=(("/usr", "/usr"),), symlinks=bwrap.symlinks,
                         pids_cgroup=bwrap.pids_cgroup, python=sys.executable)
    why = sandbox._probe(bare)
    assert why is not None and why.startswith(
        f"the sandbox started but the interpreter {sys.executable} did not run inside it: ")
    assert why.endswith("it sees only /usr read-only: run judge-mcp from an interpreter and virtualenv whose files "
                        "are all under those paths")


@pytest.mark.parametrize("prefix", ["/tmp", "/", "/home/judge/venv", "/judge/venv"])
def test_a_python_installation_over_the_sandboxs_own_mounts_is_refused(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "_python_paths", lambda: [prefix])
    with pytest.raises(RuntimeError, match=f"the Python installation at {prefix} would be bound over the sandbox's own"):
        sandbox._layout()
