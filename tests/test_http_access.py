"""HTTP as a team deploys it: stateless streamable HTTP, /healthz and /readyz, token roles against every tool,
stored tokens (`judge-mcp tokens`), and per-organization rate limits — each over a real `judge-mcp` process."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judges.store.access import RateLimiter, TokenStore
from judges.store.database import Database, open_database
from server.roles import TOOL_ROLES
from tests.mcp_helpers import JUDGE_MCP, free_port, server_env, wait_for_port

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

TOKENS = "tok-member=org-a:member,tok-admin=org-a,tok-super=ops:superadmin,tok-b=org-b:member"
ACCEPT = {"accept": "application/json, text/event-stream"}


def start(home: Path, **env: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    home.mkdir(parents=True, exist_ok=True)
    err = (home / "stderr.log").open("w")
    proc = subprocess.Popen([JUDGE_MCP, "--transport", "http", "--port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=err, env=server_env(home, **{"JUDGE_MCP_MODEL": "demo", **env}))
    assert wait_for_port(port, 30), "the HTTP server did not start within 30 s"
    return proc, port


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, port = start(tmp_path_factory.mktemp("http-access"), JUDGE_MCP_TOKENS=TOKENS)
    yield f"http://127.0.0.1:{port}"
    stop(proc)


def client(base: str, token: str, **headers: str) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}", **headers}, timeout=60)
    return Client(streamable_http_client(f"{base}/mcp", http_client=http))


async def call_text(base: str, token: str, tool: str, args: dict[str, Any], **headers: str) -> tuple[bool, str]:
    async with client(base, token, **headers) as c:
        result = await c.call_tool(tool, args)
    return bool(result.is_error), result.content[0].text if result.content else ""


# --- stateless HTTP ------------------------------------------------------------------------------------

async def test_http_answers_without_a_session_id(server: str) -> None:
    import httpx2

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    async with httpx2.AsyncClient(headers={"Authorization": "Bearer tok-admin", **ACCEPT}) as http:
        r = await http.post(f"{server}/mcp", json=init)
    assert r.status_code == 200 and "mcp-session-id" not in r.headers


async def test_a_tool_call_without_initialize_is_answered(server: str) -> None:
    """Stateless: a request reaching a replica that never saw this client's initialize is still served."""
    import httpx2

    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "list_agents", "arguments": {}}}
    async with httpx2.AsyncClient(headers={"Authorization": "Bearer tok-admin", **ACCEPT,
                                           "mcp-protocol-version": "2025-06-18"}) as http:
        r = await http.post(f"{server}/mcp", json=call)
    assert r.status_code == 200 and '"agents"' in r.text


async def test_progress_flows_on_the_requests_own_stream(server: str) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with client(server, "tok-member") as c:
        result = await c.call_tool("pairwise_compare", {"instruction": "say hi", "candidates": ["hi", "hello"],
                                                        "candidate_type": "text"}, progress_callback=on_progress)
    assert not result.is_error, result.content[0].text
    assert seen == [0, 1, 2]


# --- health --------------------------------------------------------------------------------------------

async def test_healthz_says_ok_without_a_token(server: str) -> None:
    import httpx2

    async with httpx2.AsyncClient() as http:
        r = await http.get(f"{server}/healthz")
    assert (r.status_code, r.json()) == (200, {"status": "ok"})


async def test_an_idle_connection_is_kept_open_past_the_common_five_second_timeout(server: str) -> None:
    """A client pool or load balancer reuses idle connections for up to ~60 s; a server closing them sooner (uvicorn's
    default is 5 s) races the next request sent on one, which then fails with a read error."""
    import anyio

    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    answers = []
    async with await anyio.connect_tcp("127.0.0.1", int(server.rsplit(":", 1)[1])) as stream:
        for pause in (0, 6):
            await anyio.sleep(pause)
            await stream.send(request)
            answers.append((await stream.receive()).split(b"\r\n", 1)[0])
    assert answers == [b"HTTP/1.1 200 OK", b"HTTP/1.1 200 OK"]


async def test_readyz_checks_the_database_without_a_token(server: str) -> None:
    import httpx2

    async with httpx2.AsyncClient() as http:
        r = await http.get(f"{server}/readyz")
    assert (r.status_code, r.json()) == (200, {"status": "ok", "checks": {"database": "ok"}})


async def test_readyz_fails_naming_only_the_unreachable_components(tmp_path: Path) -> None:
    import httpx2

    dead = free_port()
    proc, port = start(tmp_path, JUDGE_MCP_TOKENS=TOKENS, JUDGE_MCP_WARM_EMBEDDINGS="0",
                       JUDGE_MCP_CHROMA_URL=f"http://127.0.0.1:{dead}", JUDGE_MCP_READYZ_CHECK_MODEL="1",
                       JUDGE_MCP_MODEL="openai:gpt-x", OPENAI_API_KEY="sk-test",
                       OPENAI_BASE_URL=f"http://127.0.0.1:{dead}/v1")
    try:
        async with httpx2.AsyncClient() as http:
            ready = await http.get(f"http://127.0.0.1:{port}/readyz")
            alive = await http.get(f"http://127.0.0.1:{port}/healthz")
    finally:
        stop(proc)
    assert (ready.status_code, ready.json()) == (503, {"status": "fail", "checks": {
        "database": "ok", "chroma": "fail", "model": "fail"}})
    assert alive.status_code == 200


# --- roles -----------------------------------------------------------------------------------------------

def test_every_tool_has_one_role_in_the_table(tmp_path: Path) -> None:
    from server.app import create_server
    from tests.conftest import make_settings

    tools = {t.name for t in create_server(make_settings(tmp_path)).catalog.list_tools()}
    assert tools == set(TOOL_ROLES)


@pytest.mark.parametrize("tool", sorted(TOOL_ROLES))
async def test_a_member_gets_exactly_the_member_tools(server: str, tool: str) -> None:
    is_error, text = await call_text(server, "tok-member", tool, {})
    if TOOL_ROLES[tool] == "admin":
        assert is_error and text == (f"permission denied: {tool} needs the admin role; this token has the member "
                                     "role (ask an administrator of your organization for an admin token)")
    else:
        assert "permission denied" not in text


@pytest.mark.parametrize("tool", sorted(TOOL_ROLES))
@pytest.mark.parametrize("token", ["tok-admin", "tok-super"])
async def test_admins_and_superadmins_may_call_every_tool(server: str, token: str, tool: str) -> None:
    _, text = await call_text(server, token, tool, {})
    assert "permission denied" not in text


async def test_a_superadmin_acts_for_the_organization_its_header_names(server: str) -> None:
    is_error, text = await call_text(server, "tok-super", "create_agent", {"name": "Made by ops", "system_prompt": "p"},
                                     **{"X-Judge-Organization": "org-b"})
    async with client(server, "tok-b") as b:
        listed = (await b.call_tool("list_agents", {})).structured_content
    assert not is_error, text
    assert [a["name"] for a in listed["agents"]] == ["Made by ops"]


async def test_the_organization_header_is_ignored_for_an_admin(server: str) -> None:
    await call_text(server, "tok-admin", "create_agent", {"name": "Stays in org-a", "system_prompt": "p"},
                    **{"X-Judge-Organization": "org-b"})
    async with client(server, "tok-b") as b:
        listed = (await b.call_tool("list_agents", {})).structured_content
    assert "Stays in org-a" not in [a["name"] for a in listed["agents"]]


# --- stored tokens ---------------------------------------------------------------------------------------

def tokens_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "server", "tokens", *args], env=server_env(home),
                          capture_output=True, text=True, timeout=60)


@pytest.mark.usefixtures("on_engine")
def test_tokens_create_shows_the_secret_once_and_list_never_does(tmp_path: Path) -> None:
    created = tokens_cli(tmp_path, "create", "--org", "acme", "--role", "admin", "--name", "ci")
    listed = tokens_cli(tmp_path, "list")
    secret = created.stdout.split()[-1]
    assert created.returncode == 0 and secret.startswith("jm_") and len(secret) > 40
    assert secret not in listed.stdout and re.fullmatch(r"\w{12}  acme  admin  live  created \S+  ci\n", listed.stdout)


@pytest.mark.usefixtures("on_engine")
async def test_a_stored_token_decides_organization_and_role_until_revoked(tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError  # noqa: F401  (the SDK's client raises on a 401)

    secret = tokens_cli(tmp_path, "create", "--org", "acme", "--role", "member").stdout.split()[-1]
    token_id = tokens_cli(tmp_path, "list").stdout.split()[0]
    proc, port = start(tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        denied = await call_text(base, secret, "create_agent", {"name": "x", "system_prompt": "p"})
        allowed = await call_text(base, secret, "list_agents", {})
        revoked = tokens_cli(tmp_path, "revoke", token_id)
        import httpx2

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}", **ACCEPT}) as http:
            after = await http.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    finally:
        stop(proc)
    assert denied == (True, "permission denied: create_agent needs the admin role; this token has the member role "
                            "(ask an administrator of your organization for an admin token)")
    assert allowed[0] is False and revoked.returncode == 0
    assert after.status_code == 401


@pytest.mark.usefixtures("on_engine")
def test_an_http_server_with_only_stored_tokens_refuses_requests_without_one(tmp_path: Path) -> None:
    import httpx2

    tokens_cli(tmp_path, "create", "--org", "acme")
    proc, port = start(tmp_path)
    try:
        r = httpx2.post(f"http://127.0.0.1:{port}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                        headers=ACCEPT)
    finally:
        stop(proc)
    assert r.status_code == 401


@pytest.mark.usefixtures("on_engine")
def test_tokens_revoke_of_an_unknown_id_says_so(tmp_path: Path) -> None:
    out = tokens_cli(tmp_path, "revoke", "nope")
    assert out.returncode == 1
    assert out.stderr.strip() == "judge-mcp tokens revoke: no live token with id 'nope' (see `judge-mcp tokens list`)"


def test_a_stored_token_is_kept_only_as_its_hash(db: Database) -> None:
    _, secret = TokenStore(db).create("acme", "member")
    dump = "\n".join(str([r[i] for i in range(len(r))]) for r in db.query("SELECT * FROM api_tokens"))
    assert secret not in dump


# --- rate limits -----------------------------------------------------------------------------------------

def test_the_call_after_the_limit_is_refused_with_when_to_retry(db: Database) -> None:
    from datetime import UTC, datetime

    from judges.errors import OverLimitError

    limiter = RateLimiter(db, 2)
    now = datetime(2026, 1, 1, 12, 0, 45, tzinfo=UTC)
    counted = [limiter.take("acme", now), limiter.take("acme", now)]
    with pytest.raises(OverLimitError) as refused:
        limiter.take("acme", now)
    assert counted == [1, 2]
    assert str(refused.value) == ("organization 'acme' has made its 2 requests this minute (calls, reads, lists and "
                                  "model requests count together: JUDGE_MCP_RATE_LIMIT_PER_MINUTE); retry in 15 s")


def test_each_organization_and_minute_has_its_own_count(db: Database) -> None:
    from datetime import UTC, datetime

    limiter = RateLimiter(db, 5)
    now = datetime(2026, 1, 1, 12, 0, 45, tzinfo=UTC)
    later = datetime(2026, 1, 1, 12, 1, 1, tzinfo=UTC)
    assert [limiter.take("a", now), limiter.take("b", now), limiter.take("a", now), limiter.take("a", later)] == [
        1, 1, 2, 1]


def test_two_connections_count_every_call_once(database_url: str | None, tmp_path: Path) -> None:
    """Two Database objects stand for two replicas sharing one database: no call is lost or counted twice."""
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    databases = [open_database(database_url, tmp_path / "db.sqlite3") for _ in range(2)]
    limiters = [RateLimiter(db, 10_000) for db in databases]
    threads = [threading.Thread(target=lambda lim=lim: [lim.take("acme", now) for _ in range(100)])
               for lim in limiters]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counted = limiters[0].take("acme", now)
    for db in databases:
        db.close()
    assert counted == 201


@pytest.mark.usefixtures("on_engine")
async def test_an_organization_over_its_rate_limit_is_refused_over_http(tmp_path: Path) -> None:
    proc, port = start(tmp_path, JUDGE_MCP_TOKENS=TOKENS, JUDGE_MCP_RATE_LIMIT_PER_MINUTE="3")
    base = f"http://127.0.0.1:{port}"
    try:
        async with client(base, "tok-member") as c:
            texts = [(await c.call_tool("list_agents", {})).content[0].text for _ in range(8)]
        other_org = await call_text(base, "tok-b", "list_agents", {})
    finally:
        stop(proc)
    refused = [t for t in texts if t.startswith("limit reached")]
    # 8 calls span at most one minute boundary: at least the 4th..7th of one minute are refused.
    assert refused and re.fullmatch(r"limit reached: organization 'org-a' has made its 3 requests this minute "
                                    r"\(calls, reads, lists and model requests count together: "
                                    r"JUDGE_MCP_RATE_LIMIT_PER_MINUTE\); retry in \d+ s", refused[0])
    assert other_org[0] is False
