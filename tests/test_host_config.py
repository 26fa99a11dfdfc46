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


def printed_config(host: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_MCP_")}
    return subprocess.run([JUDGE_MCP, "config", host, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)


def entry_of(host: str, out: str) -> dict[str, Any]:
    block = json.loads(out)
    assert list(block) == [HOST_KEYS[host]] and list(block[HOST_KEYS[host]]) == ["judge"]
    entry: dict[str, Any] = block[HOST_KEYS[host]]["judge"]
    return entry


@pytest.mark.parametrize("host", list(HOST_KEYS))
def test_the_printed_block_has_the_hosts_shape_with_absolute_paths(host: str, tmp_path: Path) -> None:
    done = printed_config(host, cwd=tmp_path)
    entry = entry_of(host, done.stdout)
    expected_keys = {"command", "args", "env"} | ({"type"} if host in ("vscode", "claude-code") else set())
    assert set(entry) == expected_keys
    assert entry.get("type", "stdio") == "stdio"
    assert Path(entry["command"]).is_absolute() and os.access(entry["command"], os.X_OK)
    assert entry["args"] == []
    assert entry["env"] == {"JUDGE_MCP_MODEL": "auto", "JUDGE_MCP_ALLOWED_ROOTS": str(tmp_path.resolve())}
    assert host in done.stderr and "put this in" in done.stderr


@pytest.mark.anyio
@pytest.mark.e2e
@pytest.mark.parametrize("host", list(HOST_KEYS))
async def test_the_printed_command_starts_the_server_from_slash(host: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("Brand colour: HEX#488EFF\n")
    entry = entry_of(host, printed_config(host, "--root", str(project), cwd=tmp_path).stdout)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_MCP_")}
    env.update(entry["env"], JUDGE_MCP_HOME=str(tmp_path / "home"), JUDGE_MCP_WARM_EMBEDDINGS="false")
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


def test_the_version_is_the_packages() -> None:
    from importlib.metadata import version

    done = subprocess.run([JUDGE_MCP, "--version"], capture_output=True, text=True, timeout=60, cwd="/")
    assert done.stdout.strip() == f"judge-mcp {version('judge-mcp')}"
