"""What a host pays for the listing: JUDGE_MCP_TOOLSETS chooses the groups of tools listed and callable, a
caller sees only the tools its role may call, and input schemas carry no automatic titles. Through real
`judge-mcp` processes (stdio, and HTTP with member and admin tokens)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from server.roles import TOOL_ROLES, TOOLSETS
from server.settings import Settings
from tests.mcp_helpers import JUDGE_MCP, StdioSession, server_env
from tests.test_http_access import client, start, stop

pytestmark = [pytest.mark.e2e]


def _session(home: Path, **env: str) -> StdioSession:
    return StdioSession(server_env(home, JUDGE_MCP_MODEL="demo", JUDGE_MCP_WARM_EMBEDDINGS="false",
                                   JUDGE_MCP_LOG_LEVEL="WARNING", **env))


def test_every_tool_is_in_exactly_one_toolset() -> None:
    listed = [tool for tools in TOOLSETS.values() for tool in tools]
    assert sorted(listed) == sorted(TOOL_ROLES)


def test_code_and_patches_list_exactly_their_four_tools(tmp_path: Path) -> None:
    running = _session(tmp_path, JUDGE_MCP_TOOLSETS="code, patches")
    try:
        names = sorted(t.name for t in running.run(running.client.list_tools()).tools)
    finally:
        running.close()
    assert names == ["apply_patch", "judge_code", "propose_patch", "validate_patch"]


def _shown(tools: list[Any]) -> int:
    """What a host puts into its model's context: names, descriptions and input schemas, compact JSON."""
    return sum(len(json.dumps({"name": t.name, "description": t.description, "inputSchema": t.input_schema},
                              separators=(",", ":"), ensure_ascii=False).encode()) for t in tools)


def test_code_and_patches_cost_a_host_at_most_8_kb_with_apply_patch_listing_its_patch_by_reference(
        tmp_path: Path) -> None:
    running = _session(tmp_path, JUDGE_MCP_TOOLSETS="code,patches")
    try:
        tools = running.run(running.client.list_tools()).tools
        refused = running.call("apply_patch", {"root": str(tmp_path), "patch": {"ops": [{"kind": "rename"}]}})
    finally:
        running.close()
    patch = {t.name: t.input_schema["properties"]["patch"] for t in tools if "patch" in t.input_schema["properties"]}
    assert _shown(tools) <= 8000
    assert patch["apply_patch"] == {"type": ["object", "string"],
                                    "description": "The patch, in any form validate_patch's patch takes."}
    assert "oneOf" in json.dumps(patch["validate_patch"])
    assert refused.is_error and "patch" in refused.content[0].text  # still validated against the whole schema


def test_all_tools_cost_a_host_at_most_25_kb(tmp_path: Path) -> None:
    running = _session(tmp_path)
    try:
        tools = running.run(running.client.list_tools()).tools
    finally:
        running.close()
    assert len(tools) == len(TOOL_ROLES)
    assert _shown(tools) <= 25000


def test_certify_judge_lists_calibrate_judges_arguments_by_reference_and_still_validates_them(
        tmp_path: Path) -> None:
    running = _session(tmp_path)
    try:
        tools = {t.name: t for t in running.run(running.client.list_tools()).tools}
        refused = running.call("certify_judge", {"judge": "score_txt", "dataset": "{}"})
    finally:
        running.close()
    certify = tools["certify_judge"]
    assert certify.description.endswith("Other arguments as in calibrate_judge.")
    assert certify.input_schema["properties"]["judge"]["enum"] == [  # its own judges: more than calibrate_judge's
        "pairwise_compare", "score_text", "viescore", "judge_code", "evaluate_analysis"]
    assert certify.input_schema["properties"]["agent_id"] == {"type": "string"}
    assert certify.input_schema["properties"]["dataset"] == {"type": ["string", "object", "array"]}
    assert "description" in tools["calibrate_judge"].input_schema["properties"]["dataset"]
    assert tools["align_judge"].description.endswith("Other arguments as in certify_judge.")
    assert refused.is_error and "judge" in refused.content[0].text and "score_text" in refused.content[0].text


def test_apply_patch_lists_validate_patchs_options_by_reference_and_still_bounds_them(tmp_path: Path) -> None:
    running = _session(tmp_path, JUDGE_MCP_TOOLSETS="patches")
    try:
        tools = {t.name: t for t in running.run(running.client.list_tools()).tools}
        refused = running.call("apply_patch", {"root": str(tmp_path), "patch": {"ops": []}, "max_ops": 0})
    finally:
        running.close()
    assert tools["apply_patch"].input_schema["properties"]["max_ops"] == {"type": "integer"}
    assert tools["validate_patch"].input_schema["properties"]["max_ops"]["maximum"] == 10000
    assert refused.is_error and "max_ops" in refused.content[0].text


def test_a_shared_options_usual_default_is_stated_once_in_the_instructions(tmp_path: Path) -> None:
    running = _session(tmp_path)
    try:
        tools = {t.name: t for t in running.run(running.client.list_tools()).tools}
        instructions = running.client.instructions or ""
    finally:
        running.close()
    assert tools["score_text"].input_schema["properties"]["cache"] == {"type": "boolean"}
    assert tools["pairwise_compare"].input_schema["properties"]["samples"] == {"type": "integer"}
    assert "cache: Default true;" in instructions and "background: Default false;" in instructions


def test_a_tool_description_is_listed_on_one_line(tmp_path: Path) -> None:
    running = _session(tmp_path)
    try:
        tools = running.run(running.client.list_tools()).tools
    finally:
        running.close()
    assert [t.name for t in tools if "\n" in (t.description or "") or "  " in (t.description or "")] == []


def test_a_tool_outside_the_toolsets_is_not_callable_and_says_how_to_enable_it(tmp_path: Path) -> None:
    running = _session(tmp_path, JUDGE_MCP_TOOLSETS="patches")
    try:
        result = running.call("list_agents", {})
    finally:
        running.close()
    assert result.is_error is True
    assert result.content[0].text == (
        "invalid input: list_agents is in the toolset 'agents', which this server does not enable (JUDGE_MCP_TOOLSETS=patches); add it there to use list_agents")


def test_an_unknown_toolset_stops_the_server_at_start_naming_the_closest(tmp_path: Path) -> None:
    done = subprocess.run([JUDGE_MCP, "check"], env=server_env(tmp_path, JUDGE_MCP_TOOLSETS="code,patch"),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert "unknown toolset 'patch' (did you mean 'patches'?)" in done.stderr


def test_all_is_every_toolset(tmp_path: Path) -> None:
    assert Settings(home=tmp_path, toolsets="all").toolsets is None  # type: ignore[arg-type]


def test_no_input_schema_has_an_automatic_title(tmp_path: Path) -> None:
    running = _session(tmp_path)
    try:
        tools = running.run(running.client.list_tools()).tools
    finally:
        running.close()
    assert len(tools) == len(TOOL_ROLES)
    assert [t.name for t in tools if '"title"' in json.dumps(t.input_schema)] == []


@pytest.mark.anyio
async def test_a_member_token_lists_no_admin_tool_and_an_admin_token_lists_every_tool(tmp_path: Path) -> None:
    proc, port = start(tmp_path / "home", JUDGE_MCP_TOKENS="tok-m=org-a:member,tok-a=org-a")
    listed: dict[str, Any] = {}
    try:
        for token in ("tok-m", "tok-a"):
            async with client(f"http://127.0.0.1:{port}", token) as c:
                listed[token] = sorted(t.name for t in (await c.list_tools()).tools)
    finally:
        stop(proc)
    assert listed["tok-m"] == sorted(t for t, role in TOOL_ROLES.items() if role == "member")
    assert listed["tok-a"] == sorted(TOOL_ROLES)


def test_optimize_prompt_reads_given_evaluations_as_evaluate_image_wrote_them() -> None:
    from server.image_tools import given_evaluations

    with pytest.raises(Exception) as refused:
        given_evaluations([{"agent_id": "a"}])
    assert str(refused.value).startswith("evaluations[0].")
    assert str(refused.value).endswith("pass the evaluations evaluate_image returned, unchanged (or run_id)")


def test_a_shared_option_is_described_once_in_the_instructions_not_in_each_tool(tmp_path: Path) -> None:
    from server.options import SHARED_OPTIONS

    running = _session(tmp_path)
    try:
        tools = running.run(running.client.list_tools()).tools
        instructions = running.client.instructions or ""
    finally:
        running.close()
    assert all(f"{name}: {text}" in instructions for name, text in SHARED_OPTIONS.items())
    repeated = [(t.name, name) for t in tools for name, text in SHARED_OPTIONS.items()
                if t.input_schema["properties"].get(name, {}).get("description") == text]
    assert repeated == []  # an option with a meaning of its own (calibrate_judge's background) keeps its own words
    assert sum(name in t.input_schema["properties"] for t in tools for name in SHARED_OPTIONS) == 43  # the uses said once (certify_judge: samples, background, cache; align_judge: background, cache)


def test_a_tool_listed_by_reference_points_to_a_tool_every_caller_who_sees_it_also_sees(tmp_path: Path) -> None:
    """"As in X" (a tool's description or an argument's): X is in the same toolset and no caller who may list the
    tool is refused X, so the full form is always listed beside the short one."""
    import re

    import anyio

    from server.app import create_server
    from tests.conftest import make_settings

    tools = anyio.run(create_server(make_settings(tmp_path)).list_tools)
    toolset = {tool: name for name, members in TOOLSETS.items() for tool in members}
    references = {(t.name, named) for t in tools
                  for named in re.findall(r"[Aa]s in (\w+)|(\w+)'s patch takes", json.dumps([t.description, t.input_schema]))
                  for named in named if named}
    assert {("certify_judge", "calibrate_judge"), ("align_judge", "certify_judge"), ("apply_patch", "validate_patch"),
            ("update_agent", "create_agent")} <= references
    assert [(tool, named) for tool, named in references
            if toolset[named] != toolset[tool] or (TOOL_ROLES[named] == "admin" and TOOL_ROLES[tool] != "admin")] == []
