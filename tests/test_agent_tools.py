"""Judge-agent tools through the real MCP client, in process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from judges.store.database import open_database
from server.app import create_server
from tests.conftest import make_settings
from tests.mcp_helpers import StdioSession, call, error_of, server_env

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(tmp_path: Path, database_url: str | None) -> Any:
    """The agent store through the tools, on SQLite and on PostgreSQL."""
    return make_settings(tmp_path / "home", database_url=database_url)




async def test_every_agent_tool_has_input_and_output_schema(client: Any) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("create_agent", "list_agents", "get_agent", "update_agent", "delete_agent"):
        assert tools[name].input_schema["type"] == "object"
        assert tools[name].output_schema is not None, name


async def test_read_tools_are_annotated_read_only_and_delete_destructive(client: Any) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["list_agents"].annotations.read_only_hint is True
    assert tools["delete_agent"].annotations.destructive_hint is True


async def test_create_agent_defaults(client: Any) -> None:
    agent = await call(client, "create_agent", name="Judge", system_prompt="Judge things.")
    assert agent["scoring_weight"] == 50
    assert agent["optimization_weight"] == 50
    assert agent["rag_config"] == {"top_k": 5, "similarity_threshold": None}
    assert agent["organization_id"] == "default"
    assert agent["deleted_at"] is None


async def test_template_fills_prompt_categories_and_weights(client: Any) -> None:
    agent = await call(client, "create_agent", name="Brand", template_id="brand_compliance")
    assert agent["system_prompt"].startswith("You are a Brand Compliance judge")
    assert agent["evaluation_categories"].startswith("brandAccuracy:")
    assert agent["scoring_weight"] == 80


async def test_explicit_fields_override_the_template(client: Any) -> None:
    agent = await call(client, "create_agent", name="C", template_id="composition", scoring_weight=10)
    assert agent["scoring_weight"] == 10
    assert agent["system_prompt"].startswith("You are a Composition judge")


async def test_unknown_template_is_refused_with_the_choices(client: Any) -> None:
    text = await error_of(client, "create_agent", name="X", template_id="vibes")
    assert "template_id 'vibes' is unknown" in text and "technical_quality" in text


@pytest.mark.parametrize(("field", "value"), [("scoring_weight", 101), ("scoring_weight", -1), ("optimization_weight", 250)])
async def test_weight_outside_0_100_is_refused(client: Any, field: str, value: float) -> None:
    text = await error_of(client, "create_agent", name="X", system_prompt="p", **{field: value})
    assert f"{field} must be between 0 and 100 (got {value:g})" in text
    assert (await call(client, "list_agents"))["agents"] == []


async def test_bad_weight_on_update_leaves_the_agent_unchanged(client: Any) -> None:
    agent = await call(client, "create_agent", name="A", system_prompt="p", scoring_weight=30)
    await error_of(client, "update_agent", agent_id=agent["id"], name="B", scoring_weight=500)
    assert await call(client, "get_agent", agent_id=agent["id"]) == agent


async def test_missing_system_prompt_without_template_is_refused(client: Any) -> None:
    text = await error_of(client, "create_agent", name="X")
    assert "system_prompt is required" in text


async def test_bad_model_override_is_refused(client: Any) -> None:
    text = await error_of(client, "create_agent", name="X", system_prompt="p", model="gpt4")
    assert "openai:<model>" in text


async def test_unknown_agent_id_is_not_found(client: Any) -> None:
    text = await error_of(client, "get_agent", agent_id="nope")
    assert "no agent with id 'nope'" in text


async def test_update_changes_only_given_fields(client: Any) -> None:
    agent = await call(client, "create_agent", name="A", system_prompt="p", scoring_weight=30)
    updated = await call(client, "update_agent", agent_id=agent["id"], optimization_weight=90)
    assert updated["optimization_weight"] == 90
    assert updated["scoring_weight"] == 30 and updated["name"] == "A"
    assert updated["updated_at"] >= agent["updated_at"]


async def test_empty_model_clears_the_override(client: Any) -> None:
    agent = await call(client, "create_agent", name="A", system_prompt="p", model="openai:gpt-x")
    assert (await call(client, "update_agent", agent_id=agent["id"], model=""))["model"] is None


async def test_delete_is_soft(client: Any, settings: Any) -> None:
    agent = await call(client, "create_agent", name="A", system_prompt="p")
    deleted = await call(client, "delete_agent", agent_id=agent["id"])
    assert deleted["id"] == agent["id"] and deleted["deleted_at"]
    assert "no agent" in await error_of(client, "get_agent", agent_id=agent["id"])
    assert (await call(client, "list_agents"))["agents"] == []
    rows = open_database(settings.database_url, settings.database_path).query("SELECT name, deleted_at FROM agents WHERE id=?", (agent["id"],))
    assert rows[0]["name"] == "A" and rows[0]["deleted_at"] == deleted["deleted_at"]


async def test_list_sorts_by_name_in_both_orders(client: Any) -> None:
    for name in ("beta", "Alpha", "gamma"):
        await call(client, "create_agent", name=name, system_prompt="p")
    asc = await call(client, "list_agents", sort_by="name", order="asc")
    desc = await call(client, "list_agents", sort_by="name", order="desc")
    assert [a["name"] for a in asc["agents"]] == ["Alpha", "beta", "gamma"]
    assert [a["name"] for a in desc["agents"]] == ["gamma", "beta", "Alpha"]


async def test_list_default_is_newest_first(client: Any) -> None:
    for name in ("one", "two", "three"):
        await call(client, "create_agent", name=name, system_prompt="p")
    assert [a["name"] for a in (await call(client, "list_agents"))["agents"]] == ["three", "two", "one"]


async def test_list_query_matches_name_or_prompt_case_insensitively(client: Any) -> None:
    await call(client, "create_agent", name="Brand judge", system_prompt="logos")
    await call(client, "create_agent", name="Other", system_prompt="checks LOGO colours")
    await call(client, "create_agent", name="Third", system_prompt="lighting")
    found = await call(client, "list_agents", query="logo", sort_by="name", order="asc")
    assert [a["name"] for a in found["agents"]] == ["Brand judge", "Other"]


async def test_another_organizations_agent_is_not_found(tmp_path: Path, database_url: str | None) -> None:
    home = tmp_path / "shared-home"
    async with Client(create_server(make_settings(home, database_url=database_url, org="org-a"))) as a:
        agent = await call(a, "create_agent", name="A's judge", system_prompt="p")
    async with Client(create_server(make_settings(home, database_url=database_url, org="org-b"))) as b:
        assert "no agent" in await error_of(b, "get_agent", agent_id=agent["id"])
        assert "no agent" in await error_of(b, "update_agent", agent_id=agent["id"], name="stolen")
        assert "no agent" in await error_of(b, "delete_agent", agent_id=agent["id"])
        assert (await call(b, "list_agents"))["agents"] == []
    async with Client(create_server(make_settings(home, database_url=database_url, org="org-a"))) as a:
        assert (await call(a, "get_agent", agent_id=agent["id"]))["name"] == "A's judge"


async def test_agents_survive_a_restart(tmp_path: Path, database_url: str | None) -> None:
    home = tmp_path / "home"
    async with Client(create_server(make_settings(home, database_url=database_url))) as c:
        agent = await call(c, "create_agent", name="Keeper", system_prompt="p")
    async with Client(create_server(make_settings(home, database_url=database_url))) as c:
        assert (await call(c, "get_agent", agent_id=agent["id"])) == agent


async def test_agent_templates_are_exposed_as_mcp_prompts(client: Any) -> None:
    names = [p.name for p in (await client.list_prompts()).prompts]
    assert "agents/product_accuracy@v1" in names
    got = await client.get_prompt("agents/product_accuracy@v1")
    assert got.messages[0].content.text.startswith("You are a Product Accuracy judge")


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioSession]:
    """A real judge-mcp over stdio whose texts may hold at most 100 characters."""
    home = tmp_path_factory.mktemp("limited").resolve()
    session = StdioSession(server_env(home, JUDGE_MCP_MODEL="demo", JUDGE_MCP_WARM_EMBEDDINGS="false",
                                      JUDGE_MCP_LOG_LEVEL="WARNING", JUDGE_MCP_MAX_TEXT_CHARS="100"))
    try:
        yield session
    finally:
        session.close()


LIMIT_SAID = "the limit is 100 (JUDGE_MCP_MAX_TEXT_CHARS). Shorten it or judge it in parts, e.g. one section per call"


@pytest.mark.e2e
@pytest.mark.parametrize("argument", ["name", "system_prompt", "evaluation_categories"])
def test_create_agent_refuses_a_text_past_the_text_limit_and_stores_nothing(limited: StdioSession,
                                                                            argument: str) -> None:
    # Before, an agent's texts had no limit: a 10 MB system prompt was stored and sent with every judgement.
    before = limited.call("list_agents", {}).structured_content["agents"]
    result = limited.call("create_agent", {"name": "Brand", "system_prompt": "Score it."} | {argument: "é" * 101})
    assert result.is_error is True
    assert result.content[0].text == (f"Error executing tool create_agent: invalid input: {argument} is 101 "
                                      f"characters; {LIMIT_SAID}")
    assert limited.call("list_agents", {}).structured_content["agents"] == before


@pytest.mark.e2e
def test_create_agent_takes_texts_exactly_at_the_text_limit(limited: StdioSession) -> None:
    result = limited.call("create_agent", {"name": "é" * 100, "system_prompt": "s" * 100,
                                           "evaluation_categories": "c" * 100})
    assert result.is_error is False and result.structured_content["name"] == "é" * 100


@pytest.mark.e2e
@pytest.mark.parametrize("argument", ["name", "system_prompt", "evaluation_categories"])
def test_update_agent_refuses_a_text_past_the_text_limit_and_changes_nothing(limited: StdioSession,
                                                                            argument: str) -> None:
    agent = limited.call("create_agent", {"name": "Kept", "system_prompt": "Score it."}).structured_content
    result = limited.call("update_agent", {"agent_id": agent["id"], argument: "x" * 101})
    assert result.is_error is True
    assert result.content[0].text == (f"Error executing tool update_agent: invalid input: {argument} is 101 "
                                      f"characters; {LIMIT_SAID}")
    assert limited.call("get_agent", {"agent_id": agent["id"]}).structured_content == agent
