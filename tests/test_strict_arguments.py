"""Misspelt arguments are errors, never ignored: through a real `judge-mcp` over stdio, an argument (or a field
of an object argument) the tool does not declare is refused with its name and the closest valid one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from server.errors import unknown_argument
from tests.mcp_helpers import StdioSession, server_env


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioSession]:
    home = tmp_path_factory.mktemp("home").resolve()
    session = StdioSession(server_env(home, JUDGE_MCP_MODEL="demo", JUDGE_MCP_WARM_EMBEDDINGS="false",
                                      JUDGE_MCP_LOG_LEVEL="WARNING"))
    try:
        session.call("create_agent", {"name": "Brand", "system_prompt": "Score it."})
        yield session
    finally:
        session.close()


@pytest.mark.e2e
def test_a_misspelt_search_argument_of_list_agents_is_an_error_suggesting_query(running: StdioSession) -> None:
    result = running.call("list_agents", {"search": "Brand"})
    assert result.is_error is True
    assert result.content[0].text == ("Error executing tool list_agents: invalid input: unknown argument 'search'; "
                                      "did you mean 'query'? valid: query, sort_by, order")


@pytest.mark.e2e
def test_a_misspelt_swap_of_pairwise_compare_is_an_error_and_asks_no_model(running: StdioSession) -> None:
    result = running.call("pairwise_compare", {"instruction": "Say hello", "candidates": ["hi", "hello"],
                                               "swapp": False})
    assert result.is_error is True
    assert "unknown argument 'swapp'; did you mean 'swap'?" in result.content[0].text


@pytest.mark.e2e
def test_a_misspelt_field_inside_an_object_argument_is_an_error_naming_its_place(running: StdioSession) -> None:
    result = running.call("create_agent", {"name": "J", "system_prompt": "Score it.", "rag_config": {"topk": 3}})
    assert result.is_error is True
    assert result.content[0].text.startswith(
        "Error executing tool create_agent: invalid input: unknown field 'topk' in rag_config; did you mean 'top_k'?")


@pytest.mark.e2e
def test_a_refused_misspelt_create_agent_stores_nothing(running: StdioSession) -> None:
    before = running.call("list_agents", {}).structured_content["agents"]
    assert running.call("create_agent", {"name": "X", "system_prompt": "S", "scoring_wieght": 10}).is_error
    assert running.call("list_agents", {}).structured_content["agents"] == before


def test_an_object_that_declares_no_properties_takes_any_key() -> None:
    schema = {"type": "object", "properties": {"analysis": {"type": "object", "additionalProperties": True}}}
    assert unknown_argument(schema, {"analysis": {"anything": 1, "else": {"deep": 2}}}) is None


def test_an_unknown_key_with_nothing_close_lists_the_valid_names() -> None:
    schema = {"type": "object", "properties": {"agent_id": {"type": "string"}, "query": {"type": "string"}}}
    assert unknown_argument(schema, {"agent_id": "a", "zzz": 1}) == \
        "invalid input: unknown argument 'zzz'; valid: agent_id, query"


def test_a_union_of_objects_accepts_a_key_any_branch_declares() -> None:
    schema = {"type": "object", "properties": {"op": {"anyOf": [
        {"type": "object", "properties": {"kind": {}, "path": {}, "content": {}}},
        {"type": "object", "properties": {"kind": {}, "path": {}, "find": {}, "replace": {}}}]}}}
    assert unknown_argument(schema, {"op": {"kind": "edit", "path": "a", "find": "x", "replace": "y"}}) is None
    assert "unknown field 'fnd' in op" in (unknown_argument(schema, {"op": {"kind": "edit", "fnd": "x"}}) or "")


def test_list_items_are_checked_against_the_items_schema(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"ops": {"type": "array", "items": {
        "type": "object", "properties": {"kind": {}, "path": {}}}}}}
    assert unknown_argument(schema, {"ops": [{"kind": "add", "path": "a"}, {"kind": "add", "pth": "b"}]}) == \
        "invalid input: unknown field 'pth' in ops[1]; did you mean 'path'? valid: kind, path"


@pytest.mark.e2e
def test_a_callers_patch_limit_above_the_ceiling_is_refused_naming_it(running: StdioSession) -> None:
    result = running.call("validate_patch", {"patch": {"ops": []}, "max_ops": 10**9})
    assert result.is_error is True
    assert result.content[0].text.startswith(
        "Error executing tool validate_patch: invalid input: max_ops must be between 1 and 10000 (got 1000000000).")


def test_a_misspelt_synonym_still_finds_the_argument_it_stands_for() -> None:
    schema = {"type": "object", "properties": {"query": {}, "sort_by": {}, "order": {}}}
    assert unknown_argument(schema, {"serch": "x"}) == \
        "invalid input: unknown argument 'serch'; did you mean 'query'? valid: query, sort_by, order"


@pytest.mark.e2e
def test_a_check_of_an_input_model_is_said_as_it_says_it(running: StdioSession) -> None:
    """search_guidelines' query limit is a validator of its input model: its message alone, the argument named once
    and the 10,005 characters not echoed back."""
    agent = running.call("list_agents", {}).structured_content["agents"][0]["id"]
    result = running.call("search_guidelines", {"agent_id": agent, "query": "logo " * 2001})
    assert result.is_error is True
    assert result.content[0].text == (
        "Error executing tool search_guidelines: invalid input: query is 10,005 characters; the limit is 10,000. "
        "Search with the words that matter, e.g. \"logo placement on dark backgrounds\"")
