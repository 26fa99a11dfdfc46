"""The server as a host meets it: spawned over stdio, and over streamable HTTP with bearer tokens."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mcp_helpers import JUDGE_MCP, free_port, server_env, wait_for_port

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_stdio_server_lists_tools_through_the_sdk_client(tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=JUDGE_MCP, args=[], env=server_env(tmp_path))
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        created = await client.call_tool("create_agent", {"name": "E2E", "template_id": "composition"})
    assert {"create_agent", "list_agents", "get_agent", "update_agent", "delete_agent"} <= names
    assert created.structured_content["name"] == "E2E"


def test_stdout_carries_only_protocol_messages(tmp_path: Path) -> None:
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    # Keep stdin open until both replies are read: EOF may end the server before it answers.
    log = tmp_path / "stderr.log"
    with log.open("w") as err:  # a file, not a pipe: DEBUG logs must not fill a pipe nobody reads
        proc = subprocess.Popen([JUDGE_MCP], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                env=server_env(tmp_path, JUDGE_MCP_LOG_LEVEL="DEBUG"))
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
        proc.stdin.flush()
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        proc.stdin.close()
        lines += proc.stdout.read().splitlines()
        proc.wait(timeout=60)
    replies = [json.loads(line) for line in lines if line.strip()]  # every stdout line is JSON-RPC
    assert [r.get("id") for r in replies] == [1, 2]
    assert "judge-mcp ready" in log.read_text()



def test_while_serving_stdio_the_process_stdout_is_stderr_and_its_stdin_the_null_device(tmp_path: Path) -> None:
    """The wire is served from private copies of the pipes: a library's stray print (fd 1) lands in the log, and
    nothing else can read the host's messages (fd 0)."""
    import os

    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    with (tmp_path / "stderr.log").open("w") as err:
        proc = subprocess.Popen([JUDGE_MCP], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                env=server_env(tmp_path))
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(initialize) + "\n")
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        fds = [os.readlink(f"/proc/{proc.pid}/fd/{fd}") for fd in (0, 1, 2)]
        proc.stdin.close()
        proc.wait(timeout=60)
    assert reply["id"] == 1
    assert fds == ["/dev/null", str(tmp_path / "stderr.log"), str(tmp_path / "stderr.log")]


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [JUDGE_MCP, "--transport", "http", "--port", str(port)],
        env=server_env(tmp_path, JUDGE_MCP_TOKENS="tok-a=org-a,tok-b=org-b"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    assert wait_for_port(port, 30), "the HTTP server did not start within 30 s"
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=10)


def client_with_token(url: str, token: str) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return Client(streamable_http_client(url, http_client=http))


async def test_http_request_without_token_gets_401(http_server: str) -> None:
    import httpx2

    async with httpx2.AsyncClient() as http:
        r = await http.post(http_server, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                            headers={"accept": "application/json, text/event-stream"})
    assert r.status_code == 401


async def test_http_request_with_unknown_token_gets_401(http_server: str) -> None:
    import httpx2

    async with httpx2.AsyncClient() as http:
        r = await http.post(http_server, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                            headers={"authorization": "Bearer nope", "accept": "application/json, text/event-stream"})
    assert r.status_code == 401


async def test_http_token_decides_the_organization(http_server: str) -> None:
    async with client_with_token(http_server, "tok-a") as a:
        created = await a.call_tool("create_agent", {"name": "A only", "system_prompt": "p"})
        assert created.structured_content["organization_id"] == "org-a"
    async with client_with_token(http_server, "tok-b") as b:
        listed = await b.call_tool("list_agents", {})
        got = await b.call_tool("get_agent", {"agent_id": created.structured_content["id"]})
    assert listed.structured_content["agents"] == []
    assert got.is_error


def test_non_loopback_bind_without_tokens_refuses_to_start(tmp_path: Path) -> None:
    proc = subprocess.run(
        [JUDGE_MCP, "--transport", "http", "--host", "0.0.0.0", "--port", str(free_port())],
        env=server_env(tmp_path), capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode != 0
    assert "JUDGE_MCP_TOKENS" in proc.stderr


async def test_a_401_carries_a_plain_bearer_challenge_without_oauth_metadata(http_server: str) -> None:
    import httpx2

    async with httpx2.AsyncClient() as http:
        r = await http.post(http_server, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                            headers={"accept": "application/json, text/event-stream"})
    challenge = r.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and "resource_metadata" not in challenge


def test_an_http_server_with_tokens_starts_without_sdk_warnings(tmp_path: Path) -> None:
    import warnings

    from server.app import create_server
    from tests.conftest import make_settings

    settings = make_settings(tmp_path, tokens={"tok": "org"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        create_server(settings, http_auth=True, base_url="http://127.0.0.1:8000", client_roots=False)
    # Only what the SDK says about our use of it counts (a ResourceWarning from an earlier test's garbage may
    # be collected here).
    assert [str(w.message) for w in caught if not issubclass(w.category, ResourceWarning)] == []
