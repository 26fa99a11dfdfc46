"""Each key goes only to the address it belongs to, and no secret reaches a caller or the log (issue 28, item 6):
through a real `judge-mcp` process and two loopback fake model servers (OpenAI's address and a compatible one)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from judges.errors import SECRETS, BackendError, JudgeFailure, Secrets
from judges.models.guard import CallPolicy
from judges.models.registry import BackendConfig, ModelRegistry
from server.settings import Settings
from tests.fake_model_server import FakeModelServer, Scripted
from tests.mcp_helpers import JUDGE_MCP, server_env

pytestmark = pytest.mark.anyio

OPENAI_KEY = "sk-openai-0123456789abcdefghij"
COMPATIBLE_KEY = "compat-secret-9f8e7d6c5b4a"
JURY = ["openai:gpt-fake", "openai-compatible:local-fake"]


@pytest.fixture
def compatible_server() -> Iterator[FakeModelServer]:
    server = FakeModelServer().start()
    yield server
    server.stop()


@asynccontextmanager
async def judge_mcp(home: Path, **env: str) -> AsyncIterator[Any]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    home.mkdir(parents=True, exist_ok=True)
    with (home / "stderr.log").open("w") as log:
        params = StdioServerParameters(command=JUDGE_MCP, args=[], env=server_env(home, JUDGE_MCP_MAX_RETRIES="0", **env))
        async with Client(stdio_client(params, errlog=log)) as client:
            yield client


def both_backends(openai: FakeModelServer, compatible: FakeModelServer, **extra: str) -> dict[str, str]:
    return {"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": openai.openai_url,
            "JUDGE_MCP_COMPATIBLE_BASE_URL": compatible.openai_url, "JUDGE_MCP_MODEL": "openai:gpt-fake", **extra}


def authorizations(server: FakeModelServer) -> set[str]:
    return {r.headers.get("authorization", "") for r in server.requests}


async def test_a_jury_sends_each_key_only_to_its_own_server(tmp_path: Path, fake_server: FakeModelServer,
                                                            compatible_server: FakeModelServer) -> None:
    for server in (fake_server, compatible_server):
        server.respond_with(lambda rec: Scripted(text="[[A]]"))
    async with judge_mcp(tmp_path / "home", **both_backends(fake_server, compatible_server,
                                                            JUDGE_MCP_COMPATIBLE_API_KEY=COMPATIBLE_KEY)) as c:
        result = await c.call_tool("pairwise_compare", {"instruction": "say hi", "candidates": ["hi", "yo"],
                                                        "candidate_type": "text", "models": JURY})
    assert not result.is_error, result.content[0].text
    assert authorizations(compatible_server) == {f"Bearer {COMPATIBLE_KEY}"}
    assert authorizations(fake_server) == {f"Bearer {OPENAI_KEY}"}


async def test_a_compatible_server_without_its_own_key_never_receives_the_openai_key(
        tmp_path: Path, fake_server: FakeModelServer, compatible_server: FakeModelServer) -> None:
    for server in (fake_server, compatible_server):
        server.respond_with(lambda rec: Scripted(text="[[A]]"))
    async with judge_mcp(tmp_path / "home", **both_backends(fake_server, compatible_server)) as c:
        result = await c.call_tool("pairwise_compare", {"instruction": "say hi", "candidates": ["hi", "yo"],
                                                        "candidate_type": "text", "models": JURY})
    assert not result.is_error, result.content[0].text
    sent = [str(r.headers) for r in compatible_server.requests]
    assert sent and not any(OPENAI_KEY in h for h in sent)
    assert authorizations(compatible_server) == {"Bearer not-needed"}


async def test_an_upstream_error_body_carrying_the_keys_reaches_neither_the_caller_nor_the_log(
        tmp_path: Path, fake_server: FakeModelServer, compatible_server: FakeModelServer) -> None:
    echo = f"bad request from key {COMPATIBLE_KEY}; upstream {OPENAI_KEY} at http://admin:hunter2pass@10.0.0.7/v1"
    compatible_server.respond_with(lambda rec: Scripted(status=400, text=echo))
    fake_server.respond_with(lambda rec: Scripted(status=400, text=echo))
    home = tmp_path / "home"
    async with judge_mcp(home, **both_backends(fake_server, compatible_server,
                                               JUDGE_MCP_COMPATIBLE_API_KEY=COMPATIBLE_KEY,
                                               JUDGE_MCP_LOG_LEVEL="DEBUG")) as c:
        jury = await c.call_tool("pairwise_compare", {"instruction": "x", "candidates": ["a", "b"],
                                                      "candidate_type": "text", "models": JURY})
        single = await c.call_tool("pairwise_compare", {"instruction": "x", "candidates": ["a", "b"],
                                                        "candidate_type": "text"})
    seen = " ".join(block.text for r in (jury, single) for block in r.content if hasattr(block, "text"))
    seen += repr([jury.structured_content, single.structured_content])
    assert compatible_server.requests and fake_server.requests  # the bodies were sent back to the server
    for secret in (COMPATIBLE_KEY, OPENAI_KEY, "hunter2pass"):
        assert secret not in seen
        assert secret not in (home / "stderr.log").read_text()
    assert "[redacted]" in seen


def test_a_compatible_key_without_its_server_stops_the_start_naming_both_variables(tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run([JUDGE_MCP], env=server_env(tmp_path, JUDGE_MCP_COMPATIBLE_API_KEY=COMPATIBLE_KEY),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert "JUDGE_MCP_COMPATIBLE_API_KEY is set but JUDGE_MCP_COMPATIBLE_BASE_URL is not" in done.stderr
    assert COMPATIBLE_KEY not in done.stderr


# --- units ----------------------------------------------------------------------------------------

def test_openai_base_url_alone_keeps_openai_key_for_a_compatible_model() -> None:
    """OPENAI_BASE_URL is where OPENAI_API_KEY belongs: a compatible model served there may use it."""
    reg = ModelRegistry("auto", BackendConfig(openai_api_key=OPENAI_KEY, openai_base_url="http://127.0.0.1:9/v1"),
                        CallPolicy(), 1)
    client: Any = reg.resolve("openai-compatible:m").inner  # type: ignore[attr-defined]
    assert (client._api_key, client._base_url) == (OPENAI_KEY, "http://127.0.0.1:9/v1")


def test_settings_name_every_secret_they_hold(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, openai_api_key=OPENAI_KEY, compatible_base_url="http://127.0.0.1:9/v1",
                        compatible_api_key=COMPATIBLE_KEY, tokens={"tok-abcdef": "org-a"},
                        database_url="postgresql://judge:db-pass-123@127.0.0.1:5432/judge?sslmode=require",
                        chroma_url="https://chroma-token-77@chroma.example/")
    assert sorted(settings.secrets()) == sorted([OPENAI_KEY, COMPATIBLE_KEY, "tok-abcdef", "db-pass-123",
                                                 "chroma-token-77"])


def test_scrub_masks_registered_values_escaped_and_credential_shaped_text() -> None:
    secrets = Secrets()
    secrets.add("p@ss/word+1", None, "short")
    text = secrets.scrub('{"k": "p@ss/word+1"} p%40ss%2Fword%2B1 Bearer abcdefgh12345 '
                         "https://u:pw@host/x?api_key=zzz&x=1 sk-ant-api03-abcdefghijklmnop short")
    assert text == ('{"k": "[redacted]"} [redacted] Bearer [redacted] '
                    "https://[redacted]@host/x?api_key=[redacted]&x=1 [redacted] short")


def test_a_failure_never_holds_a_registered_secret() -> None:
    SECRETS.add("registered-secret-42")
    err = BackendError("backend_error", "upstream said registered-secret-42")
    failure = JudgeFailure("parse_error", "x registered-secret-42", raw="reply registered-secret-42")
    assert "registered-secret-42" not in str(err) + err.failure.message + failure.message + failure.raw


async def test_a_reply_echoing_a_registered_key_reaches_the_judge_masked(fake_server: FakeModelServer) -> None:
    from judges.models.protocol import Message, ModelRequest

    SECRETS.add(COMPATIBLE_KEY)
    fake_server.respond_with(lambda rec: Scripted(text=f"your header was Bearer {COMPATIBLE_KEY}"))
    reg = ModelRegistry("openai-compatible:m", BackendConfig(compatible_base_url=fake_server.openai_url,
                                                             compatible_api_key=COMPATIBLE_KEY), CallPolicy(), 1)
    reply = await reg.resolve().complete(ModelRequest(messages=[Message.user("hi")]))
    await reg.aclose()
    assert reply.text == "your header was Bearer [redacted]"
