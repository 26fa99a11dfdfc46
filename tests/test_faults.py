"""Faults that heal, through a real HTTP `judge-mcp`: its PostgreSQL cluster stopped under load and started again,
and its `chroma run` server restarted. Calls fail clearly and quickly while the fault lasts, /readyz says not ready
while /healthz stays alive, and the replica serves again by itself once the engine is back, nothing lost."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.mcp_helpers import JUDGE_MCP, call, free_port, server_env, wait_for_port
from tests.test_transports import client_with_token

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
TOKEN = "tok-f"


@pytest.fixture
def cluster() -> Iterator[Any]:
    """A PostgreSQL cluster of this test's own (the session's is shared by other tests: never stopped)."""
    from tests.postgres import PgCluster, pg_bin

    bindir = pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL binaries not found (/usr/lib/postgresql/*/bin): apt-get install postgresql")
    pg = PgCluster(bindir).start()
    try:
        yield pg
    finally:
        pg.stop()


def replica(home: Path, **env: str) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    proc = subprocess.Popen([JUDGE_MCP, "--transport", "http", "--port", str(port)], cwd="/", env=server_env(
        home, JUDGE_MCP_TOKENS=f"{TOKEN}=org-f", JUDGE_MCP_WARM_EMBEDDINGS="false", **env),
        stdout=subprocess.DEVNULL, stderr=(home.parent / "stderr.log").open("ab"))
    assert wait_for_port(port, 60), "the replica did not start within 60 s"
    return f"http://127.0.0.1:{port}", proc


async def timed_call(client: Any, tool: str, args: dict[str, Any]) -> tuple[bool, float, str]:
    started = time.monotonic()
    result = await client.call_tool(tool, args)
    return not result.is_error, time.monotonic() - started, result.content[0].text


async def served_after(outcomes: list[tuple[float, bool, float, str]], since: float) -> None:
    """Until a call that ended after `since` succeeded."""
    while True:
        if any(when > since and ok for when, ok, _, _ in outcomes):
            return
        await anyio.sleep(0.1)


async def test_postgresql_stopped_under_load_fails_calls_quickly_and_the_replica_recovers_by_itself(
        cluster: Any, tmp_path: Path) -> None:
    base, proc = replica(tmp_path / "home", JUDGE_MCP_DATABASE_URL=cluster.create_database())
    outcomes: list[tuple[float, bool, float, str]] = []  # (when, ok, seconds, text)
    try:
        async with client_with_token(base + "/mcp", TOKEN) as client, httpx.AsyncClient(trust_env=False) as http:
            agent = (await call(client, "create_agent", name="Kept", system_prompt="judge"))["id"]

            async def load(stop: anyio.Event) -> None:
                while not stop.is_set():
                    ok, seconds, text = await timed_call(client, "get_agent", {"agent_id": agent})
                    outcomes.append((time.monotonic(), ok, seconds, text))
                    await anyio.sleep(0.05)

            stop = anyio.Event()
            async with anyio.create_task_group() as tg:
                for _ in range(4):
                    tg.start_soon(load, stop)
                await anyio.sleep(1)
                await anyio.to_thread.run_sync(cluster.pause)
                stopped_at = time.monotonic()
                await anyio.sleep(6)
                ready, alive = await http.get(base + "/readyz"), await http.get(base + "/healthz")
                await anyio.to_thread.run_sync(cluster.resume)
                started_at = time.monotonic()
                with anyio.fail_after(30):
                    await served_after(outcomes, started_at)
                stop.set()
            again = await call(client, "get_agent", agent_id=agent)
            ready_again = await http.get(base + "/readyz")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    during = [o for o in outcomes if stopped_at < o[0] < started_at]  # calls that ended while it was stopped
    first_error = min(when for when, ok, _, _ in outcomes if not ok and when > stopped_at) - stopped_at
    recovered = min(when for when, ok, _, _ in outcomes if ok and when > started_at) - started_at
    print(f"PostgreSQL stop: first clear error after {first_error:.1f} s, longest call "
          f"{max(o[2] for o in during):.1f} s; serving again {recovered:.1f} s after the start")
    assert during and not any(ok for _, ok, _, _ in during)
    assert all("unavailable: the state database (PostgreSQL) did not answer" in text for *_, text in during)
    assert first_error < 10 and max(o[2] for o in during) < 10 and recovered < 15
    assert (ready.status_code, ready.json()["checks"]["database"], alive.status_code) == (503, "fail", 200)
    assert (again["id"], ready_again.status_code) == (agent, 200)


def chroma_server(path: Path, port: int) -> subprocess.Popen[bytes]:
    from tests.replicas import chroma_command

    command = chroma_command()
    assert command is not None
    proc = subprocess.Popen([command, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_for_port(port, 60), "chroma run did not start within 60 s"
    return proc


async def until_ok(client: Any, tool: str, args: dict[str, Any]) -> tuple[bool, float, str]:
    while True:
        outcome = await timed_call(client, tool, args)
        if outcome[0]:
            return outcome
        await anyio.sleep(0.2)


async def test_a_chroma_server_restart_fails_uploads_and_searches_clearly_then_they_work_again(
        tmp_path: Path) -> None:
    from tests.replicas import chroma_command

    if chroma_command() is None:
        pytest.skip("the chroma command is not installed")
    port = free_port()
    chroma = chroma_server(tmp_path / "chroma", port)
    base, proc = replica(tmp_path / "home", JUDGE_MCP_CHROMA_URL=f"http://127.0.0.1:{port}")
    try:
        async with client_with_token(base + "/mcp", TOKEN) as client, httpx.AsyncClient(trust_env=False) as http:
            agent = (await call(client, "create_agent", name="Docs", system_prompt="judge"))["id"]
            kept = await call(client, "upload_guideline", agent_id=agent, filename="a.md",
                              text="Never stretch the logo.")
            chroma.terminate()
            chroma.wait(timeout=20)
            with anyio.fail_after(30):
                upload = await timed_call(client, "upload_guideline",
                                          {"agent_id": agent, "filename": "b.md", "text": "Blue is HEX#488EFF."})
                search = await timed_call(client, "search_guidelines",
                                          {"agent_id": agent, "query": "logo", "similarity_threshold": 0})
            ready = await http.get(base + "/readyz")
            chroma = chroma_server(tmp_path / "chroma", port)
            restarted_at = time.monotonic()
            with anyio.fail_after(30):
                found = await until_ok(client, "search_guidelines",
                                       {"agent_id": agent, "query": "logo", "similarity_threshold": 0})
            recovered = time.monotonic() - restarted_at
            again = await call(client, "upload_guideline", agent_id=agent, filename="b.md", text="Blue is HEX#488EFF.")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        chroma.terminate()
        chroma.wait(timeout=20)
    print(f"Chroma restart: upload failed after {upload[1]:.1f} s, search after {search[1]:.1f} s; searches work "
          f"again {recovered:.1f} s after the restart")
    print(upload[2][:300], "|", search[2][:300])
    assert (upload[0], search[0], ready.json()["checks"]["chroma"]) == (False, False, "fail")
    assert upload[1] < 10 and search[1] < 10
    assert "guideline store" in upload[2] and "guideline store" in search[2]
    assert kept["id"] in found[2] and again["processing_status"] == "processed" and recovered < 15


def test_a_server_started_with_its_database_down_stops_with_one_sentence_naming_it_and_no_password(
        tmp_path: Path) -> None:
    """JUDGE_MCP_DATABASE_URL at a port nobody answers on: the start ends after the wait, exit 1, with one line saying
    which database (host, port, name; not its password) and what to do: no traceback."""
    home = tmp_path / "home"
    port = free_port()  # nothing listens there
    proc = subprocess.run([JUDGE_MCP, "--transport", "http", "--port", str(free_port())], cwd="/", env=server_env(
        home, JUDGE_MCP_DATABASE_URL=f"postgresql://judge:s3cretPW@127.0.0.1:{port}/judges",
        JUDGE_MCP_DATABASE_START_WAIT_S="2.5", JUDGE_MCP_WARM_EMBEDDINGS="false"), capture_output=True, text=True,
        timeout=120)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1
    assert last == (f"judge-mcp: the state database postgresql://127.0.0.1:{port}/judges "
                    "(JUDGE_MCP_DATABASE_URL) did not answer within 2.5 s of the start (start PostgreSQL, correct "
                    "the URL's host, port, database and credentials, or wait longer: JUDGE_MCP_DATABASE_START_WAIT_S)")
    assert "Traceback" not in proc.stderr and "s3cretPW" not in proc.stderr
