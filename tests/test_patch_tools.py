"""validate_patch and apply_patch through the MCP client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from server.app import create_server
from tests.conftest import make_settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "allowed" / "proj"
    root.mkdir(parents=True)
    (root / "app.py").write_text("x = 1\n")
    return root


@pytest.fixture
async def patch_client(tmp_path: Path, project: Path) -> Any:
    settings = make_settings(tmp_path / "home", allowed_roots=[tmp_path / "allowed"])
    async with Client(create_server(settings)) as c:
        yield c


async def test_patch_tools_declare_schemas_and_annotations(patch_client: Any) -> None:
    tools = {t.name: t for t in (await patch_client.list_tools()).tools}
    assert tools["validate_patch"].annotations.read_only_hint is True
    assert tools["apply_patch"].annotations.destructive_hint is True
    assert tools["apply_patch"].output_schema["properties"]["applied"]["type"] == "boolean"
    assert "ops" in str(tools["validate_patch"].input_schema["properties"]["patch"])


async def test_validate_through_mcp_returns_the_diff(patch_client: Any, project: Path) -> None:
    result = await patch_client.call_tool("validate_patch", {
        "patch": {"ops": [{"kind": "edit", "path": "app.py", "find": "x = 1", "replace": "x = 2"}]},
        "root": str(project)})
    assert result.structured_content["ok"] is True
    assert "+x = 2" in result.structured_content["diff"]
    assert (project / "app.py").read_text() == "x = 1\n"


async def test_apply_through_mcp_accepts_search_replace_text(patch_client: Any, project: Path) -> None:
    text = "app.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 42\n>>>>>>> REPLACE\n```\n"
    result = await patch_client.call_tool("apply_patch", {"patch": text, "root": str(project)})
    assert result.structured_content["applied"] is True
    assert (project / "app.py").read_text() == "x = 42\n"


async def test_root_outside_the_allowed_roots_is_an_error(patch_client: Any, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = await patch_client.call_tool("apply_patch", {"patch": {"ops": []}, "root": str(elsewhere)})
    assert result.is_error
    assert "outside the allowed roots" in result.content[0].text and "JUDGE_MCP_ALLOWED_ROOTS" in result.content[0].text


async def test_failed_apply_reports_errors_and_changes_nothing(patch_client: Any, project: Path) -> None:
    result = await patch_client.call_tool("apply_patch", {
        "patch": {"ops": [{"kind": "edit", "path": "app.py", "find": "y = 1", "replace": "y = 2"}]},
        "root": str(project)})
    assert result.structured_content["applied"] is False
    assert result.structured_content["errors"][0].startswith("op 0 (edit app.py): 'find' text not found.")
    assert (project / "app.py").read_text() == "x = 1\n"


THREE_OPS = {"ops": [{"kind": "add", "path": f"n{i}.py", "content": "y = 1\n"} for i in range(3)]}


async def test_the_servers_patch_limit_comes_from_settings_and_a_call_may_set_its_own(tmp_path: Path) -> None:
    from mcp import StdioServerParameters

    from tests.mcp_helpers import JUDGE_MCP, server_env

    env = server_env(tmp_path / "home", JUDGE_MCP_PATCH_MAX_OPS="2")
    async with Client(StdioServerParameters(command=JUDGE_MCP, args=[], env=env)) as c:
        limited = await c.call_tool("validate_patch", {"patch": THREE_OPS})
        own = await c.call_tool("validate_patch", {"patch": THREE_OPS, "max_ops": 3})
    assert limited.structured_content["errors"] == ["too many ops: 3 > 2 (split the patch, or raise max_ops)"]
    assert own.structured_content["ok"] is True
