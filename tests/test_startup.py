"""Start fast: nothing heavy is imported by what the server loads to answer `initialize`, tool modules are
imported when first used when the data home has this code's tool listing, and the listing is the same."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.mcp_helpers import data_home

# numpy and onnxruntime too: a tool module is imported beside the warm-up's heavy imports (server/startup.py).
HEAVY = ("torch", "sentence_transformers", "chromadb", "anthropic", "openai", "transformers", "numpy", "onnxruntime")
REPO = Path(__file__).resolve().parents[1]

PROBE = f"""
import sys
import time
from server.cli import main
from server.app import create_server
from server.settings import Settings
create_server(Settings(home={{home!r}}))
print(",".join(m for m in {HEAVY!r} if m in sys.modules))
"""


def test_building_the_server_imports_no_heavy_library(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(home=str(tmp_path))], capture_output=True, text=True, check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert out.stdout.strip() == ""


def _listing(home: Path) -> tuple[list[dict[str, object]], list[str], dict[str, object]]:
    """One start of a real server on `home`: its tools/list, its resource templates, and a tool call's result."""
    from tests.mcp_helpers import StdioSession, server_env

    running = StdioSession(server_env(home, JUDGE_MCP_WARM_EMBEDDINGS="false"))
    try:
        tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True)
                 for t in running.run(running.client.list_tools()).tools]
        templates = [t.uri_template for t in running.run(running.client.list_resource_templates()).resource_templates]
        created = running.call("create_agent", {"name": "Brand", "template_id": "brand_compliance"})
        assert not created.is_error, created.content[0].text
        return tools, templates, created.structured_content
    finally:
        running.close()


def test_a_second_start_lists_the_same_tools_from_the_data_home_cache(tmp_path: Path) -> None:
    first, templates, _ = _listing(tmp_path)
    cached = list((data_home(tmp_path) / "cache").glob("tools-*.json"))
    assert len(cached) == 1 and json.loads(cached[0].read_text())["tools"] == first
    second, templates_again, created = _listing(tmp_path)
    assert second == first and templates_again == templates
    assert created["name"] == "Brand"  # a tool listed from the cache is built on its first call


def test_a_cached_listing_that_does_not_name_the_same_tools_is_rebuilt(tmp_path: Path) -> None:
    first, _, _ = _listing(tmp_path)
    cached = next((data_home(tmp_path) / "cache").glob("tools-*.json"))
    cached.write_text(json.dumps({"tools": [{"name": "bogus", "inputSchema": {"type": "object"}}],
                                  "modules": {"agent_tools": ["bogus"]}}))
    again, _, _ = _listing(tmp_path)
    assert again == first and json.loads(cached.read_text())["tools"] == first


def test_the_listing_key_changes_with_any_source_file(tmp_path: Path) -> None:
    from server.startup import PACKAGES, listing_key

    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    before = listing_key(tmp_path)
    assert len(before) == 24 and listing_key(tmp_path) == before
    (tmp_path / "judges" / "verdicts.py").write_text("SCALE = 5\n")
    assert listing_key(tmp_path) != before


def test_a_tool_registered_twice_is_listed_once_with_its_first_function() -> None:
    from server.startup import ToolCatalog

    tools = ToolCatalog(warn_on_duplicate_tools=False)

    def first() -> str:
        """The first."""
        return "1"

    def second() -> str:
        """The second."""
        return "2"

    tools.add_tool(first, name="ping")
    tools.add_tool(second, name="ping")
    assert [(t.name, t.description) for t in tools.list_tools()] == [("ping", "The first.")]


# A tool module and its module-level imports: what a start with the listing cached does not import.
TOOL_MODULES = ("server.agent_tools", "server.guideline_tools", "server.image_tools", "server.compare_tools",
                "server.patch_tools", "server.code_tools", "server.analysis_tools", "server.text_tools",
                "server.calibration_tools", "server.usage_tools")
TOOL_ONLY = ("judges.pairwise.judge", "judges.code.judge", "judges.text.scoring", "judges.calibration.core")
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \| +(\S+)$", re.MULTILINE)


class Started:
    def __init__(self, client: Any, log: Path):
        self.client, self.log = client, log

    def imported(self) -> set[str]:
        """Every module the server process has imported so far (its -X importtime lines on stderr)."""
        return set(IMPORTED.findall(self.log.read_text(errors="replace")))


@asynccontextmanager
async def started(home: Path, **env: str) -> AsyncIterator[Started]:
    """A real stdio `judge-mcp` (python -m server, this checkout) on `home` through the mcp client, run with
    -X importtime so that its stderr says which modules it imported, as it imports them."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from tests.mcp_helpers import server_env

    home.mkdir(parents=True, exist_ok=True)
    log = home / "server.stderr"
    params = StdioServerParameters(command=sys.executable, args=["-m", "server"], cwd="/", env=server_env(
        home, PYTHONPATH=str(REPO), PYTHONPROFILEIMPORTTIME="1", **{"JUDGE_MCP_WARM_EMBEDDINGS": "false", **env}))
    with log.open("w") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            yield Started(client, log)


async def cache_listing(home: Path) -> None:
    """A first start on `home`: its tools/list writes this code's listing into the data home."""
    async with started(home) as first:
        await first.client.list_tools()
    assert list((data_home(home) / "cache").glob("tools-*.json"))


@pytest.mark.anyio
async def test_a_cached_start_imports_no_tool_module_until_one_of_its_tools_is_called(tmp_path: Path) -> None:
    await cache_listing(tmp_path)
    async with started(tmp_path, JUDGE_MCP_WARM_DELAY_S="600") as server:
        listed = await server.client.list_tools()
        before = server.imported()
        created = await server.client.call_tool("create_agent", {"name": "Brand", "template_id": "brand_compliance"})
        after = server.imported()
    assert len(listed.tools) == 32 and not created.is_error
    assert before & {*TOOL_MODULES, *TOOL_ONLY} == set()
    assert after & {*TOOL_MODULES, *TOOL_ONLY} == {"server.agent_tools"}


@pytest.mark.anyio
async def test_a_cached_start_imports_the_tool_modules_in_the_background_after_the_warm_up_delay(
        tmp_path: Path) -> None:
    await cache_listing(tmp_path)
    async with started(tmp_path, JUDGE_MCP_WARM_DELAY_S="0") as server:
        await server.client.list_tools()
        for _ in range(600):  # in the background, a moment after start: up to 60 s on a busy machine
            if set(TOOL_MODULES) <= server.imported():
                break
            await anyio.sleep(0.1)
        loaded = server.imported()
        listed = await server.client.call_tool("list_agents", {})
    assert set(TOOL_MODULES) <= loaded
    assert listed.structured_content == {"agents": []}


TOOLS_LIST = "".join(json.dumps(m) + "\n" for m in (
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
))


def raw_tools_list(home: Path) -> str:
    """The tools/list answer of one start on `home`, as the bytes on the wire (stdio, JSON-RPC)."""
    from tests.mcp_helpers import server_env

    proc = subprocess.Popen([sys.executable, "-m", "server"], cwd="/", text=True, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=server_env(home, PYTHONPATH=str(REPO), JUDGE_MCP_WARM_EMBEDDINGS="false"))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(TOOLS_LIST)
        proc.stdin.flush()
        for line in proc.stdout:
            if json.loads(line).get("id") == 2:
                return line
        raise AssertionError("the server ended without answering tools/list")
    finally:
        proc.kill()
        proc.wait()


def test_the_tools_list_answer_is_byte_for_byte_the_same_with_and_without_the_cached_listing(tmp_path: Path) -> None:
    built = raw_tools_list(tmp_path)
    assert list((data_home(tmp_path) / "cache").glob("tools-*.json"))
    cached = raw_tools_list(tmp_path)
    assert cached == built and len(json.loads(built)["result"]["tools"]) == 32


def test_a_cached_start_still_refuses_to_start_when_the_required_gate_sandbox_is_missing(tmp_path: Path) -> None:
    from tests.mcp_helpers import server_env

    anyio.run(cache_listing, tmp_path)
    out = subprocess.run([sys.executable, "-m", "server"], cwd="/", stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=120, env=server_env(
                             tmp_path, PYTHONPATH=str(REPO), JUDGE_MCP_GATE_SANDBOX="bwrap", PATH=os.devnull))
    assert out.returncode != 0
    assert "JUDGE_MCP_GATE_SANDBOX=bwrap but the sandbox cannot be used: bwrap not found" in out.stderr


def test_a_module_listed_from_the_cache_is_registered_by_the_first_use_of_one_of_its_tools() -> None:
    from server.startup import ToolCatalog

    tools = ToolCatalog()
    registered: list[str] = []

    def register() -> None:
        registered.append("pings")
        tools.add_tool(lambda: "pong", name="ping")
        tools.add_tool(lambda: "pung", name="pung")

    tools.add_module("pings", register, ["ping", "pung"])
    assert (tools.names, registered, tools.ready("ping")) == (["ping", "pung"], [], False)
    ping = tools.get_tool("ping")
    assert ping is not None and ping.name == "ping" and registered == ["pings"]
    assert tools.get_tool("pung") is not None and registered == ["pings"]
    assert [t.name for t in tools.list_tools()] == ["ping", "pung"] and not tools.stale


def test_a_listed_tool_its_module_does_not_register_is_dropped_and_the_listing_marked_stale() -> None:
    from server.startup import ToolCatalog

    tools = ToolCatalog()
    tools.add_module("pings", lambda: tools.add_tool(lambda: "pong", name="ping"), ["ping", "gone"])
    assert tools.get_tool("gone") is None
    assert tools.stale and tools.names == ["ping"] and [t.name for t in tools.list_tools()] == ["ping"]


def test_importing_the_cli_leaves_the_collector_on_with_what_it_imported_frozen() -> None:
    probe = "import gc; import server.cli; print(gc.isenabled(), gc.get_freeze_count() > 10000)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.split() == ["True", "True"]


def test_importing_the_cli_leaves_a_paused_collector_paused() -> None:
    probe = "import gc; gc.disable(); import server.cli; print(gc.isenabled(), gc.get_freeze_count())"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.split() == ["False", "0"]


def test_a_nullable_field_is_published_as_a_type_list() -> None:
    from server.startup import lean_schema

    schema = {"type": "object", "properties": {
        "name": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Name"},
        "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
        "scale": {"anyOf": [{"$ref": "#/$defs/Scale"}, {"type": "null"}]},
        "either": {"anyOf": [{"type": "array", "items": {"type": "string"}},
                             {"type": "array", "items": {"type": "integer"}}]}}}
    lean = lean_schema(schema)["properties"]
    assert lean["name"] == {"type": ["string", "null"], "default": None, "title": "Name"}
    assert lean["tags"] == {"type": ["array", "null"], "items": {"type": "string"}}
    assert lean["scale"] == schema["properties"]["scale"]  # a reference stays a branch
    assert lean["either"] == schema["properties"]["either"]  # two branches of one type stay apart


def test_the_lean_output_schema_of_an_agent_admits_and_refuses_what_the_pydantic_one_does() -> None:
    import jsonschema

    from judges.store.agents import Agent
    from server.startup import lean_schema

    full = Agent.model_json_schema(mode="serialization")
    lean = lean_schema(full)
    agent = {"id": "a1", "organization_id": "o", "name": "n", "system_prompt": "p", "evaluation_categories": None,
             "scoring_weight": 50, "optimization_weight": 50, "rag_config": {"top_k": 5, "similarity_threshold": None},
             "template_id": None, "model": None, "models": ["openai:a", "openai:b"], "score_scale": {"min": 0, "max": 10},
             "created_at": "t", "updated_at": "t", "deleted_at": None}
    wrong = [{**agent, "model": 5}, {**agent, "models": "openai:a"}, {**agent, "models": [1]},
             {**agent, "rag_config": {"top_k": 5, "similarity_threshold": "high"}}, {**agent, "name": None}]
    for schema in (full, lean):
        jsonschema.validate(agent, schema)
        for value in wrong:
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(value, schema)
    assert "anyOf" not in json.dumps(lean) and "$ref" not in json.dumps(lean)


def test_a_reference_to_a_definition_is_replaced_by_the_definition_with_the_uses_own_annotations() -> None:
    from server.startup import lean_schema

    schema = {"type": "object", "$defs": {"Scale": {"title": "Scale", "type": "object",
                                                     "properties": {"max": {"type": "number"}}}},
              "properties": {"scale": {"$ref": "#/$defs/Scale", "description": "The agent's scale."}}}
    assert lean_schema(schema) == {"type": "object", "properties": {"scale": {
        "title": "Scale", "type": "object", "properties": {"max": {"type": "number"}}, "description": "The agent's scale."}}}


def test_a_recursive_definition_stays_a_reference_and_keeps_its_definition() -> None:
    from server.startup import lean_schema

    node = {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}
    schema = {"$defs": {"Node": node}, "properties": {"root": {"$ref": "#/$defs/Node"}}, "type": "object"}
    assert lean_schema(schema) == schema


def test_a_reference_with_a_constraint_beside_it_stays_a_reference() -> None:
    from server.startup import lean_schema

    schema = {"$defs": {"Tags": {"type": "array", "items": {"type": "string"}}},
              "properties": {"tags": {"$ref": "#/$defs/Tags", "maxItems": 3}}, "type": "object"}
    assert lean_schema(schema) == schema


def test_no_tools_output_schema_has_a_reference_left(tmp_path: Path) -> None:
    """None of our results is recursive: every definition is inlined, so a client's check of a result resolves
    no reference (the tools' listing is the one hosts get)."""
    from server.app import create_server
    from server.settings import Settings

    async def output_schemas() -> list[str]:
        server = create_server(Settings(home=tmp_path))
        return [json.dumps(t.output_schema) for t in await server.list_tools() if t.output_schema]

    schemas = anyio.run(output_schemas)
    assert len(schemas) == 32 and not [s for s in schemas if "$ref" in s or "$defs" in s]


def test_no_tools_output_schema_carries_pydantics_automatic_titles(tmp_path: Path) -> None:
    """A client fetches and checks the whole listing before a tool's first call (the mcp client lists tools to
    check results against their output schemas): titles repeating each name were ~25 KB of its 173."""
    from server.app import create_server
    from server.settings import Settings

    def titled(node: object) -> bool:
        if isinstance(node, list):
            return any(titled(n) for n in node)
        if not isinstance(node, dict):
            return False
        return any((key == "title" and isinstance(value, str)) or (key != "properties" and titled(value))
                   or (key == "properties" and any(titled(sub) for sub in value.values()))
                   for key, value in node.items())

    async def output_schemas() -> list[Any]:
        server = create_server(Settings(home=tmp_path))
        return [t.output_schema for t in await server.list_tools() if t.output_schema]

    schemas = anyio.run(output_schemas)
    assert len(schemas) == 32 and [s for s in schemas if titled(s)] == []


@pytest.mark.anyio
async def test_get_agent_publishes_its_nullable_fields_as_type_lists_and_its_result_passes_the_clients_check(
        tmp_path: Path) -> None:
    async with started(tmp_path) as server:
        tools = {t.name: t for t in (await server.client.list_tools()).tools}
        created = await server.client.call_tool("create_agent", {"name": "Brand", "system_prompt": "p"})
        got = await server.client.call_tool("get_agent", {"agent_id": created.structured_content["id"]})
    assert tools["get_agent"].output_schema["properties"]["model"]["type"] == ["string", "null"]
    assert not got.is_error and got.structured_content["model"] is None  # the client checked it against the schema


def test_a_tool_called_while_the_background_build_builds_it_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up builds every tool in the background; a call of one being built waits for it ('Unknown tool'
    before: the recipe was taken and the tool not stored yet)."""
    import threading

    from mcp.server.mcpserver.tools.base import Tool

    from server.startup import ToolCatalog

    tools = ToolCatalog()
    tools.add_tool(lambda: "pong", name="ping")
    real = Tool.from_function
    building = threading.Event()

    def slow(*args: Any, **kwargs: Any) -> Tool:
        building.set()
        time.sleep(0.3)
        return real(*args, **kwargs)

    monkeypatch.setattr(Tool, "from_function", slow)
    background = threading.Thread(target=tools.list_tools)
    background.start()
    assert building.wait(10)
    found = tools.get_tool("ping")
    background.join(10)
    assert found is not None and found.name == "ping"


def test_a_listed_input_schema_keeps_only_the_definitions_its_arguments_use(tmp_path: Path) -> None:
    """update_agent and calibrate_judge list some arguments in a short form (LISTED_AS); the definitions only the
    full form used are not listed, while the server still validates against the full schema."""
    from server.app import create_server
    from server.startup import _used_definitions
    from tests.conftest import make_settings

    server = create_server(make_settings(tmp_path))
    tools = {t.name: t.input_schema for t in anyio.run(server.list_tools)}
    unused = {name: set(schema.get("$defs", {})) - _used_definitions(schema) for name, schema in tools.items()}
    assert {name: left for name, left in unused.items() if left} == {}
    assert [name for name in ("update_agent", "calibrate_judge", "score_text", "judge_code") if "$defs" in tools[name]] == []
    assert {"Criterion", "HumanScale", "ScoreScale"} <= set(server.input_schema("calibrate_judge")["$defs"])


@pytest.mark.anyio
async def test_after_the_warm_up_an_image_judges_first_call_imports_nothing(tmp_path: Path) -> None:
    """The warm-up imports Pillow and its plugins, which the first evaluate_image of a start imported before."""
    import base64
    import io

    from PIL import Image

    image = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(image, "PNG")
    async with started(tmp_path, JUDGE_MCP_WARM_EMBEDDINGS="true", JUDGE_MCP_WARM_DELAY_S="0",
                       JUDGE_MCP_MODEL="demo", JUDGE_MCP_LOG_LEVEL="INFO") as server:
        agent = await server.client.call_tool("create_agent", {"name": "A", "template_id": "composition"})
        for _ in range(1200):  # up to 120 s on a busy machine
            if "warm-up done" in server.log.read_text(errors="replace"):
                break
            await anyio.sleep(0.1)
        before = server.imported()
        judged = await server.client.call_tool("evaluate_image", {
            "brief": "A red square", "agent_ids": [agent.structured_content["id"]],
            "images": [base64.b64encode(image.getvalue()).decode()]})
        after = server.imported()
    assert "PIL.Image" in before and not judged.is_error
    assert {m for m in after - before if m.split(".")[0] == "PIL"} == set()
