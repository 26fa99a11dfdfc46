"""The command line as people use it: --help, `check --model`, Ctrl-C, and a quiet first start."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server.settings import Settings
from tests.fake_model_server import FakeModelServer, Scripted
from tests.mcp_helpers import server_env

REPO = str(Path(__file__).resolve().parents[1])
OUR_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: ")


def judge_mcp(*args: str, env: dict[str, str], timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "server", *args], env=env | {"PYTHONPATH": REPO}, cwd="/",
                          capture_output=True, text=True, timeout=timeout_s)


def test_every_setting_has_a_one_line_description() -> None:
    assert [name for name, field in Settings.model_fields.items() if not field.description] == []


def test_help_lists_the_transports_and_every_setting_with_its_variable_default_and_description(
        tmp_path: Path) -> None:
    out = judge_mcp("--help", env=server_env(tmp_path)).stdout
    assert "  stdio  (default) the host starts the server and speaks MCP on its stdin/stdout" in out
    assert "  http   streamable HTTP at http://HOST:PORT/mcp" in out and "  sse    " in out
    for name, field in Settings.model_fields.items():
        sdk_variable = name in ("anthropic_api_key", "anthropic_base_url", "openai_api_key", "openai_base_url")
        var = name.upper() if sdk_variable else f"JUDGE_MCP_{name.upper()}"
        assert f"      {' '.join((field.description or '').split())}\n" in out, name
        assert f"  {var} (default: " in out, var
    assert "  JUDGE_MCP_CONCURRENCY (default: 16)\n" in out


def test_check_model_says_the_model_answered(tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.enqueue("OK")
    env = server_env(tmp_path, JUDGE_MCP_MODEL="openai:judge-test", OPENAI_API_KEY="sk-test",
                     OPENAI_BASE_URL=fake_server.openai_url)
    done = judge_mcp("check", "--model", env=env)
    assert done.returncode == 0, done.stderr
    reach = [line for line in done.stderr.splitlines() if line.startswith("reach ")]
    assert len(reach) == 1 and re.fullmatch(r"reach    ok: the model answered in \d+ ms \(judge-test: 'OK'\)", reach[0])
    assert fake_server.requests[0].body["model"] == "judge-test"


def test_check_model_is_a_problem_when_the_model_refuses(tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.enqueue(Scripted(status=401, text="invalid api key"))
    env = server_env(tmp_path, JUDGE_MCP_MODEL="openai:judge-test", OPENAI_API_KEY="sk-wrong",
                     OPENAI_BASE_URL=fake_server.openai_url, JUDGE_MCP_MAX_RETRIES="0")
    done = judge_mcp("check", "--model", env=env)
    assert done.returncode == 1
    reach = next(line for line in done.stderr.splitlines() if line.startswith("reach "))
    assert reach.startswith("reach    missing: the model did not answer (")
    assert done.stderr.splitlines()[-1] == "result   1 problem(s): reach cannot work as configured (see above)"


def test_check_without_model_sends_nothing(tmp_path: Path, fake_server: FakeModelServer) -> None:
    env = server_env(tmp_path, JUDGE_MCP_MODEL="openai:judge-test", OPENAI_API_KEY="sk-test",
                     OPENAI_BASE_URL=fake_server.openai_url)
    done = judge_mcp("check", env=env)
    assert done.returncode == 0 and fake_server.requests == []
    assert not any(line.startswith("reach ") for line in done.stderr.splitlines())


INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}) + "\n"


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _parse_worker_of(pid: int) -> bool:
    for child in _children(pid):
        try:
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.e2e
def test_ctrl_c_stops_a_stdio_server_at_once_without_a_traceback(tmp_path: Path) -> None:
    env = server_env(tmp_path, JUDGE_MCP_WARM_DELAY_S="0") | {"PYTHONPATH": REPO}
    proc = subprocess.Popen([sys.executable, "-m", "server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd="/", text=True)
    assert proc.stdin and proc.stdout and proc.stderr
    proc.stdin.write(INITIALIZE)
    proc.stdin.flush()
    assert '"id":1' in proc.stdout.readline()
    deadline = time.monotonic() + 60  # the warm-up has started its parse worker
    while not _parse_worker_of(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    children = _children(proc.pid)
    assert children  # the parse worker, which must not outlive the server
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=3) == 130  # stdin is still open: nothing but the signal stopped it
    stderr = proc.stderr.read()
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    # The warm-up thread may still log its end after this line: the signal can arrive while it finishes.
    assert [line for line in stderr.splitlines() if " judge_mcp: stopping" in line][-1].endswith(
        " INFO judge_mcp: stopping on SIGINT")
    deadline = time.monotonic() + 5
    while any(_alive(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [c for c in children if _alive(c)] == []


@pytest.mark.e2e
def test_the_first_start_of_a_fresh_home_prints_only_our_log_lines(tmp_path: Path) -> None:
    # A fresh data home with its own model cache: the warm-up loads every heavy library on this start.
    home = tmp_path / "home"
    env = server_env(home, JUDGE_MCP_WARM_DELAY_S="0", JUDGE_MCP_MODEL_CACHE=str(tmp_path / "models"),
                     JUDGE_MCP_LOG_LEVEL="INFO") | {"PYTHONPATH": REPO}
    proc = subprocess.Popen([sys.executable, "-m", "server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd="/", text=True)
    assert proc.stdin and proc.stdout and proc.stderr
    proc.stdin.write(INITIALIZE)
    proc.stdin.flush()
    assert '"id":1' in proc.stdout.readline()
    deadline = time.monotonic() + 240
    while not _parse_worker_of(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)  # the warm-up starts the parse worker
    proc.stdin.close()
    proc.wait(timeout=30)
    lines = proc.stderr.read().splitlines()
    assert [line for line in lines if not OUR_LOG_LINE.match(line)] == []
    # Nothing from a library (root, py.warnings, onnxruntime, transformers, torch): their loggers reach stderr
    # only from WARNING up.
    own = ("judge_mcp", "server", "judges", "rag", "prompts", "mcp")
    assert [line for line in lines if line.split(" ")[3].rstrip(":").split(".")[0] not in own] == []
