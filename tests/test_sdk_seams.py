"""The SDK names server/ uses that are not its public API all live in server/sdk.py; each still exists and
behaves as relied on. An SDK upgrade that moves one fails here, naming it."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from server.sdk import SEAMS

SERVER = Path(__file__).resolve().parents[1] / "server"


def _resolve(path: str) -> object:
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attribute in parts[i:]:
            found = getattr(found, attribute)
        return found
    raise ImportError(path)


@pytest.mark.parametrize(("owner", "name"), SEAMS)
def test_each_private_sdk_name_server_sdk_uses_still_exists(owner: str, name: str) -> None:
    target = _resolve(owner)
    if name == "_lowlevel_server":  # an instance attribute: made by the constructor
        from mcp.server.lowlevel.server import Server
        from mcp.server.mcpserver import MCPServer

        assert isinstance(MCPServer("seam")._lowlevel_server, Server), \
            "mcp upgrade: MCPServer._lowlevel_server is gone or changed (server/sdk.py lowlevel)"
    else:
        assert hasattr(target, name), f"mcp upgrade: {owner}.{name} is gone (server/sdk.py)"


def test_the_sdk_logging_is_left_alone_while_ours_is_configured() -> None:
    import mcp.server.mcpserver.server as sdk_server

    from server.sdk import logging_left_alone

    calls: list[object] = []
    original = sdk_server.configure_logging
    sdk_server.configure_logging = lambda *a, **k: calls.append(a)
    try:
        with logging_left_alone(True):
            sdk_server.MCPServer("quiet")
        assert calls == [], "mcp upgrade: MCPServer no longer calls configure_logging through its module"
        sdk_server.MCPServer("loud")
        assert len(calls) == 1, "mcp upgrade: MCPServer.__init__ no longer calls configure_logging"
    finally:
        sdk_server.configure_logging = original


def test_no_module_of_server_but_sdk_uses_a_private_sdk_name() -> None:
    private = re.compile(r"\._(lowlevel_server|tool_manager|resource_manager|prompt_manager|tool_input_schema|"
                         r"connection)\b|configure_logging = ")
    found = [f"{path.name}:{n}" for path in sorted(SERVER.glob("*.py")) if path.name != "sdk.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if private.search(line)]
    assert found == []


def test_the_server_subclasses_no_sdk_manager() -> None:
    from mcp.server.mcpserver.prompts.manager import PromptManager
    from mcp.server.mcpserver.resources.resource_manager import ResourceManager
    from mcp.server.mcpserver.tools import ToolManager

    import server.app
    import server.startup

    classes = [c for m in (server.app, server.startup) for c in vars(m).values() if isinstance(c, type)]
    assert [c.__name__ for c in classes if issubclass(c, (ToolManager, ResourceManager, PromptManager))] == []
