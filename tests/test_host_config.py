"""`judge-mcp config <host>`: a block each host accepts, whose command starts the server from `/`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

JUDGE_MCP = str(Path(sys.executable).with_name("judge-mcp"))
HOST_KEYS = {"claude-desktop": "mcpServers", "cursor": "mcpServers", "vscode": "servers", "claude-code": "mcpServers"}


def printed_config(host: str, *args: str, cwd: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    return subprocess.run([JUDGE_MCP, "config", host, *args], cwd=cwd, env=env | settings, capture_output=True,
                          text=True, timeout=60)


def entry_of(host: str, out: str) -> dict[str, Any]:
    block = json.loads(out)
    assert list(block) == [HOST_KEYS[host]] and list(block[HOST_KEYS[host]]) == ["judge"]
    entry: dict[str, Any] = block[HOST_KEYS[host]]["judge"]
    return entry


@pytest.mark.parametrize("host", list(HOST_KEYS))
def test_the_printed_block_has_the_hosts_shape_with_absolute_paths(host: str, tmp_path: Path) -> None:
    done = printed_config(host, cwd=tmp_path, JUDGE_MCP_HOME=str(tmp_path / "data"))
    entry = entry_of(host, done.stdout)
    expected_keys = {"command", "args", "env"} | ({"type"} if host in ("vscode", "claude-code") else set())
    assert set(entry) == expected_keys
    assert entry.get("type", "stdio") == "stdio"
    assert Path(entry["command"]).is_absolute() and os.access(entry["command"], os.X_OK)
    assert entry["args"] == []
    assert entry["env"] == {"JUDGE_MCP_MODEL": "auto", "JUDGE_MCP_ALLOWED_ROOTS": str(tmp_path.resolve()),
                            "JUDGE_MCP_HOME": str(tmp_path.resolve() / "data")}
    assert host in done.stderr and "put this in" in done.stderr


@pytest.mark.anyio
@pytest.mark.e2e
@pytest.mark.parametrize("host", list(HOST_KEYS))
async def test_the_printed_command_starts_the_server_from_slash(host: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("Brand colour: HEX#488EFF\n")
    entry = entry_of(host, printed_config(host, "--root", str(project), cwd=tmp_path,
                                          JUDGE_MCP_HOME=str(tmp_path / "home"),
                                          JUDGE_MCP_WARM_EMBEDDINGS="false").stdout)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_MCP_")}
    env.update(entry["env"])
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env, cwd="/")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        patch = {"ops": [{"kind": "edit", "path": "notes.txt", "find": "HEX#488EFF", "replace": "HEX#3274F9"}]}
        result = await session.call_tool("validate_patch", {"patch": patch, "root": str(project)})
    assert not result.is_error and result.structured_content["ok"] is True


def test_a_missing_root_is_refused_with_what_to_give(tmp_path: Path) -> None:
    done = printed_config("cursor", "--root", "no-such-dir", cwd=tmp_path)
    assert done.returncode != 0 and done.stdout == ""
    assert "judge-mcp config: --root no-such-dir: no such directory" in done.stderr


def test_no_root_given_from_the_filesystem_root_says_it_took_the_current_directory(tmp_path: Path) -> None:
    done = printed_config("cursor", cwd=Path("/"), JUDGE_MCP_HOME=str(tmp_path / "home"))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == ("judge-mcp config: no --root given, so the current directory (/): the whole "
                                   "filesystem is never a root; name a project directory, e.g. --root ~/code/my-project")


def test_the_version_is_the_packages() -> None:
    from importlib.metadata import version

    done = subprocess.run([JUDGE_MCP, "--version"], capture_output=True, text=True, timeout=60, cwd="/")
    assert done.stdout.strip() == f"judge-mcp {version('judge-mcp')}"


# The settings of the shell travel in the block; credentials only as placeholders (issue 29.6).

def test_every_setting_set_in_the_shell_travels_in_the_block_with_paths_made_absolute(tmp_path: Path) -> None:
    done = printed_config("claude-desktop", cwd=tmp_path, JUDGE_MCP_HOME="data", JUDGE_MCP_MODEL="demo",
                          JUDGE_MCP_MODEL_CACHE="models", JUDGE_MCP_CONCURRENCY="4", JUDGE_MCP_ORG="acme",
                          OPENAI_BASE_URL="http://127.0.0.1:8080/v1")
    assert entry_of("claude-desktop", done.stdout)["env"] == {
        "JUDGE_MCP_MODEL": "demo", "JUDGE_MCP_ALLOWED_ROOTS": str(tmp_path.resolve()),
        "JUDGE_MCP_HOME": str(tmp_path.resolve() / "data"), "JUDGE_MCP_ORG": "acme",
        "JUDGE_MCP_CONCURRENCY": "4", "JUDGE_MCP_MODEL_CACHE": str(tmp_path.resolve() / "models"),
        "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}


def test_keys_tokens_and_passwords_travel_as_placeholders_never_their_values(tmp_path: Path) -> None:
    done = printed_config("cursor", cwd=tmp_path, JUDGE_MCP_HOME=str(tmp_path), OPENAI_API_KEY="sk-live-123",
                          ANTHROPIC_API_KEY="sk-ant-456", JUDGE_MCP_TOKENS="tok-789=acme",
                          JUDGE_MCP_DATABASE_URL="postgresql://judge:hunter2@db:5432/judge")
    env = entry_of("cursor", done.stdout)["env"]
    assert (env["OPENAI_API_KEY"], env["ANTHROPIC_API_KEY"], env["JUDGE_MCP_TOKENS"]) == (
        "<your OPENAI_API_KEY>", "<your ANTHROPIC_API_KEY>", "<your JUDGE_MCP_TOKENS>")
    assert env["JUDGE_MCP_DATABASE_URL"] == "postgresql://judge:<password for JUDGE_MCP_DATABASE_URL>@db:5432/judge"
    for secret in ("sk-live-123", "sk-ant-456", "tok-789", "hunter2"):
        assert secret not in done.stdout and secret not in done.stderr
    assert ("# fill in the placeholders (<...>) of JUDGE_MCP_TOKENS, JUDGE_MCP_DATABASE_URL, ANTHROPIC_API_KEY, "
            "OPENAI_API_KEY: their values are never printed") in done.stderr.splitlines()


def test_the_shells_allowed_roots_are_kept_when_no_root_is_given(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    roots = f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}"
    done = printed_config("vscode", cwd=tmp_path, JUDGE_MCP_HOME=str(tmp_path / "home"),
                          JUDGE_MCP_ALLOWED_ROOTS=roots)  # a root may not lie inside the data home
    assert entry_of("vscode", done.stdout)["env"]["JUDGE_MCP_ALLOWED_ROOTS"] == roots


def test_a_variable_that_is_no_setting_is_left_out_and_named(tmp_path: Path) -> None:
    done = printed_config("cursor", cwd=tmp_path, JUDGE_MCP_HOME=str(tmp_path), JUDGE_MCP_CONCURENCY="4")
    assert "JUDGE_MCP_CONCURENCY" not in entry_of("cursor", done.stdout)["env"]
    assert "# left out, not settings of this version: JUDGE_MCP_CONCURENCY" in done.stderr.splitlines()


@pytest.mark.anyio
@pytest.mark.e2e
async def test_the_host_opens_the_data_home_the_shell_used(tmp_path: Path) -> None:
    from tests.conftest import MODEL_CACHE

    shell = {"JUDGE_MCP_HOME": str(tmp_path / "data"), "JUDGE_MCP_MODEL_CACHE": str(MODEL_CACHE),
             "JUDGE_MCP_WARM_EMBEDDINGS": "false"}
    base = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_MCP_")}
    async with stdio_client(StdioServerParameters(command=JUDGE_MCP, env=base | shell, cwd="/")) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        await session.call_tool("create_agent", {"name": "Brand", "template_id": "brand_compliance"})
    (tmp_path / "project").mkdir()
    entry = entry_of("claude-desktop", printed_config("claude-desktop", "--root", str(tmp_path / "project"),
                                                      cwd=tmp_path, **shell).stdout)
    # The host passes its own small environment (no JUDGE_MCP_HOME of the shell), then the block's env.
    host = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=host | entry["env"], cwd="/")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        agents = (await session.call_tool("list_agents", {})).structured_content
    assert [a["name"] for a in agents["agents"]] == ["Brand"]


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://judge:hunter2@db:5432/judge", "postgresql://judge:***@db:5432/judge"),
    ("postgresql://db/judge?user=j&password=hunter2&sslmode=require",
     "postgresql://db/judge?user=j&password=***&sslmode=require"),
    ("host=db password=hunter2 dbname=judge", "host=db password=*** dbname=judge"),
    ("https://gw.example/v1?api-key=hunter2&monkey=1", "https://gw.example/v1?api-key=***&monkey=1"),
    ("http://127.0.0.1:8001", "http://127.0.0.1:8001"),
])
def test_a_urls_password_is_hidden_wherever_it_is_written(url: str, shown: str) -> None:
    from server.settings import url_without_password

    assert url_without_password(url) == shown
