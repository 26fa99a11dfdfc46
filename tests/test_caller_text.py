"""Caller text is data, never code or a destination (issue 28, items 1, 2 and 9), through real `judge-mcp`
processes: templates never run Python, a caller's schema never makes the server fetch, and NUL bytes, deep JSON
and one model spelled twice are the caller's input errors on both engines."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.fake_model_server import FakeModelServer, Recorded, Scripted
from tests.mcp_helpers import JUDGE_MCP, call, error_of, free_port, server_env, wait_for_port
from tests.test_analysis import GOOD
from tests.test_text_tools_as_used import judge_mcp

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

API_KEY = "sk-test"  # the key judge_mcp() gives the server


class Listener:
    """A loopback TCP listener that counts every connection and keeps what each one sent."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(1)
            try:
                self.received.append(conn.recv(65536))
            except OSError:
                self.received.append(b"")
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    found = Listener()
    yield found
    found.close()


# --- 1. templates never run Python ----------------------------------------------------------------------------

PAYLOAD = "{{ cycler.__init__.__globals__.os.makedirs(%r) }}{{ cycler.__init__.__globals__.os.environ }}"


def category(folder: Path, name: str, system: str, user: str = "{{ analysis | fence('analysis') }}") -> None:
    (folder / name).mkdir(parents=True)
    (folder / name / "spec.json").write_text(json.dumps({"criteria": [{"name": "voice", "description": "On brand"}]}))
    (folder / name / "system.j2").write_text(system)
    (folder / name / "user.j2").write_text(user)


def voice_reply(rec: Recorded) -> Scripted:
    return Scripted(text=json.dumps({"voice": {"rating": "sufficient", "rationale": "ok"}}))


async def test_a_category_template_cannot_run_python_in_the_server(tmp_path: Path, fake_server: FakeModelServer) -> None:
    """The payload sits behind a condition the start-up render does not take: the call takes it, the sandbox
    refuses it, nothing is created outside and the key reaches no model request."""
    canary = tmp_path / "outside" / "pwned"
    folder = tmp_path / "categories"
    category(folder, "voice", "{% if user_context != '(none)' %}" + PAYLOAD % str(canary) + "{% endif %}"
                              "Rate:{% for c in criteria %}\n- {{ c.name }}: {{ c.description }}{% endfor %}")
    fake_server.respond_with(voice_reply)
    async with judge_mcp(tmp_path / "home", fake_server,
                         JUDGE_MCP_ANALYSIS_CATEGORIES_DIR=str(folder)) as c:
        plain = await call(c, "evaluate_analysis", analysis=GOOD, llm_judges=["voice"])
        message = await error_of(c, "evaluate_analysis", analysis=GOOD, llm_judges=["voice"], user_context="go")
    assert plain["categories"]["voice"]["passed"] is True  # the category itself works
    assert "unsafe" in message and "__init__" in message
    assert not canary.parent.exists()
    assert len(fake_server.requests) == 1 and all(API_KEY not in json.dumps(r.body) for r in fake_server.requests)


def test_a_category_template_with_an_unsafe_access_stops_the_server_at_start(tmp_path: Path) -> None:
    canary = tmp_path / "outside" / "pwned"
    folder = tmp_path / "categories"
    category(folder, "voice", PAYLOAD % str(canary))
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.run([JUDGE_MCP], env=server_env(home, JUDGE_MCP_ANALYSIS_CATEGORIES_DIR=str(folder)),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "JUDGE_MCP_ANALYSIS_CATEGORIES_DIR: category 'voice'" in proc.stderr and "unsafe" in proc.stderr
    assert not canary.parent.exists()


@pytest.mark.parametrize("inside", ["allowed root", "data home"])
def test_a_categories_directory_where_callers_write_stops_the_server_at_start(tmp_path: Path, inside: str) -> None:
    from tests.mcp_helpers import data_home

    root, home = tmp_path / "project", tmp_path / "home"
    root.mkdir()  # a root must exist
    folder = (root if inside == "allowed root" else data_home(home)) / "categories"
    category(folder, "voice", "Rate {{ criteria | length }} criteria.")
    env = server_env(home, JUDGE_MCP_ALLOWED_ROOTS=str(root), JUDGE_MCP_ANALYSIS_CATEGORIES_DIR=str(folder))
    proc = subprocess.run([JUDGE_MCP], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    setting = "JUDGE_MCP_ALLOWED_ROOTS" if inside == "allowed root" else "JUDGE_MCP_HOME"
    assert proc.returncode != 0
    assert f"JUDGE_MCP_ANALYSIS_CATEGORIES_DIR: the directory '{folder}' overlaps" in proc.stderr
    assert f"({setting}), where callers can write files" in proc.stderr


async def test_a_category_added_after_start_is_not_read(tmp_path: Path, fake_server: FakeModelServer) -> None:
    folder = tmp_path / "categories"
    category(folder, "voice", "Rate:{% for c in criteria %}\n- {{ c.name }}{% endfor %}")
    async with judge_mcp(tmp_path / "home", fake_server, JUDGE_MCP_ANALYSIS_CATEGORIES_DIR=str(folder)) as c:
        category(folder, "later", "Rate:{% for c in criteria %}\n- {{ c.name }}{% endfor %}")
        message = await error_of(c, "evaluate_analysis", analysis=GOOD, llm_judges=["later"])
    assert "unknown LLM judge category 'later'; known: founder_resonance, general_quality, voice" in message
    assert fake_server.requests == []


# --- 2. a caller's schema never makes the server fetch -------------------------------------------------------

TOKENS = "tok-a=org-a:member,tok-b=org-b:member"


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("http-home")
    port = free_port()
    with (home / "stderr.log").open("w") as err:
        proc = subprocess.Popen([JUDGE_MCP, "--transport", "http", "--port", str(port)], stdout=subprocess.DEVNULL,
                                stderr=err, env=server_env(home, JUDGE_MCP_TOKENS=TOKENS, JUDGE_MCP_MODEL="demo",
                                                           JUDGE_MCP_WARM_EMBEDDINGS="false"))
        assert wait_for_port(port, 30), "the HTTP server did not start within 30 s"
        yield f"http://127.0.0.1:{port}/mcp"
        proc.terminate()
        proc.wait(timeout=10)


def http_client(url: str, token: str) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=60)))


def remote_schemas(base: str) -> dict[str, tuple[dict[str, Any], str]]:
    """name → (schema, the reference the refusal must name)."""
    return {
        "absolute $ref": ({"$ref": f"{base}/schema.json"}, f"{base}/schema.json"),
        "$ref relative to a remote $id": ({"$id": f"{base}/root.json", "type": "object",
                                           "properties": {"company_name": {"$ref": "other.json"}}}, "other.json"),
        "$dynamicRef": ({"properties": {"market": {"$dynamicRef": f"{base}/d.json#meta"}}}, f"{base}/d.json#meta"),
    }


@pytest.mark.parametrize("kind", ["absolute $ref", "$ref relative to a remote $id", "$dynamicRef"])
async def test_a_remote_schema_reference_is_refused_and_never_fetched(http_server: str, listener: Listener,
                                                                      kind: str) -> None:
    schema, ref = remote_schemas(f"http://127.0.0.1:{listener.port}")[kind]
    slowest = 0.0
    async with http_client(http_server, "tok-a") as attacker, http_client(http_server, "tok-b") as other:
        await other.call_tool("list_agents", {})  # connected and warm before the attack
        done = anyio.Event()
        outcome: list[Any] = []

        async def attack() -> None:
            for _ in range(20):
                outcome.append(await attacker.call_tool("evaluate_analysis", {
                    "analysis": GOOD, "schema": schema, "deterministic_checks": ["D-2"], "llm_judges": []}))
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(attack)
            while not done.is_set():
                started = time.monotonic()
                probe = await other.call_tool("list_agents", {})
                slowest = max(slowest, time.monotonic() - started)
                assert not probe.is_error
    await anyio.sleep(0.3)  # a late connection would have arrived by now
    print(f"\n  {kind}: the other organization's slowest call {slowest * 1000:.0f} ms")
    assert all(r.is_error for r in outcome)
    message = outcome[0].content[0].text
    assert f"the reference {ref!r} points outside the given schema" in message and "never fetched" in message
    assert listener.received == []
    assert slowest < 0.2


async def test_a_reference_inside_the_schema_still_resolves(http_server: str) -> None:
    schema = {"$defs": {"name": {"type": "string", "minLength": 50}}, "type": "object",
              "properties": {"company_name": {"$ref": "#/$defs/name"}}}
    async with http_client(http_server, "tok-a") as c:
        result = await call(c, "evaluate_analysis", analysis=GOOD, schema=schema, deterministic_checks=["D-2"],
                            llm_judges=[])
    assert result["checks"][0]["pass"] is False and "is too short" in result["checks"][0]["rationale"]


@pytest.mark.parametrize("schema", [{"$ref": "#"}, {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                                     "$ref": "#/$defs/a"}], ids=["itself", "two $defs"])
async def test_a_schema_whose_references_loop_in_place_is_an_input_error(http_server: str,
                                                                         schema: dict[str, Any]) -> None:
    async with http_client(http_server, "tok-a") as c:
        message = await error_of(c, "evaluate_analysis", analysis=GOOD, schema=schema, deterministic_checks=["D-2"],
                                 llm_judges=[])
    assert "invalid input: schema: its references loop without descending into the data" in message


# --- 9. NUL bytes, deep JSON, one model spelled twice ------------------------------------------------------

NUL_CALLS = {
    "create_agent name": ("create_agent", {"name": "a\x00b", "system_prompt": "x"}, "name"),
    "list_agents query": ("list_agents", {"query": "\x00"}, "query"),
    "upload_guideline filename": ("upload_guideline", {"agent_id": "x", "text": "t", "filename": "a\x00.txt"},
                                  "filename"),
    "a patch path": ("validate_patch", {"patch": {"ops": [{"kind": "remove", "path": "a\x00"}]}}, "patch.ops[0].path"),
}


@pytest.mark.usefixtures("on_engine")
@pytest.mark.parametrize("case", list(NUL_CALLS))
async def test_a_nul_byte_in_a_callers_text_is_an_input_error(tmp_path: Path, fake_server: FakeModelServer,
                                                              case: str) -> None:
    tool, args, where = NUL_CALLS[case]
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        message = await error_of(c, tool, **args)
        agents = await call(c, "list_agents")
    assert f"invalid input: {where}: contains a NUL byte (\\x00)" in message
    assert agents["agents"] == []


@pytest.mark.usefixtures("on_engine")
async def test_a_nul_byte_in_a_calibration_dataset_is_an_input_error(tmp_path: Path,
                                                                     fake_server: FakeModelServer) -> None:
    home = tmp_path / "home"
    home.mkdir()
    line = {"instruction": "x", "response_a": "a", "response_b": "b", "human_winner": "A", "id": "one\x00"}
    (home / "data.jsonl").write_text(json.dumps(line) + "\n")
    async with judge_mcp(home, fake_server) as c:
        message = await error_of(c, "calibrate_judge", judge="pairwise_compare",
                                 dataset_path=str(home / "data.jsonl"))
    assert "invalid input: line 1.id: contains a NUL byte (\\x00)" in message and fake_server.requests == []


DEEP = 100_000


@pytest.mark.parametrize("tool, args, where", [
    ("evaluate_analysis", {"analysis": "[" * DEEP + "]" * DEEP, "llm_judges": []}, "analysis"),
    ("validate_patch", {"patch": '{"ops": ' + "[" * DEEP + "]" * DEEP + "}"}, "patch"),
    ("calibrate_judge", {"judge": "pairwise_compare", "dataset": "[" * DEEP + "]" * DEEP}, "line 1"),
    ("evaluate_analysis", {"analysis": GOOD, "schema": "nested", "deterministic_checks": ["D-2"], "llm_judges": []},
     "schema.properties.a.properties.…58 more….a.properties.a: nested"),
], ids=["analysis text", "patch text", "dataset text", "schema object"])
async def test_deeply_nested_json_is_an_input_error(tmp_path: Path, fake_server: FakeModelServer, tool: str,
                                                    args: dict[str, Any], where: str) -> None:
    if args.get("schema") == "nested":  # 90 levels of properties: under the transport's ~200, over ours
        schema: dict[str, Any] = {"type": "object"}
        node = schema
        for _ in range(90):
            node["properties"] = {"a": {"type": "object"}}
            node = node["properties"]["a"]
        args = {**args, "schema": schema}
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        message = await error_of(c, tool, **args)
    assert f"invalid input: {where}" in message and "nested more than 64 levels deep; send flatter JSON" in message


async def test_a_jury_naming_one_model_twice_counts_it_once(tmp_path: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        message = await error_of(c, "pairwise_compare", instruction="x", candidates=["a", "b"],
                                 models=[" openai:gpt-x", "openai:gpt-x ", "OpenAI:gpt-y"])
        stored = await error_of(c, "create_agent", name="n", system_prompt="x",
                                models=["openai:gpt-x", " OPENAI: gpt-x"])
    assert "models must name different models; 'openai:gpt-x ' and ' openai:gpt-x' are both openai:gpt-x" in message
    assert "are both openai:gpt-x" in stored
    assert fake_server.requests == []


async def test_a_jury_is_asked_under_each_models_one_spelling(tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text='{"winner": "A", "reason": "r"}'))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await call(c, "pairwise_compare", instruction="x", candidates=["a", "b"], swap=False,
                            models=[" OpenAI:gpt-x", "openai:gpt-y "])
    assert [m["model"] for m in result["jury"]["members"]] == ["openai:gpt-x", "openai:gpt-y"]
    assert sorted(r.body["model"] for r in fake_server.requests) == ["gpt-x", "gpt-y"]


def test_nothing_is_left_listening(listener: Listener) -> None:
    """The listener fixture itself: a connection is counted (so an empty `received` means none came)."""
    with socket.create_connection(("127.0.0.1", listener.port)) as s:
        s.sendall(b"hello")
    deadline = time.monotonic() + 2
    while not listener.received and time.monotonic() < deadline:
        time.sleep(0.01)
    assert listener.received == [b"hello"]
    assert os.environ.get("JUDGE_MCP_ANALYSIS_CATEGORIES_DIR") is None
