"""The declared inputs of the image tools and evaluate_analysis, through a real `judge-mcp` over stdio: the checks
their input models make (a cardinality entry, the size limits of briefs, prompts and lists, the deterministic
checks as choices in the listing) answer with the argument named, before any work."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.mcp_helpers import StdioSession, server_env

pytestmark = pytest.mark.e2e

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioSession]:
    home = tmp_path_factory.mktemp("home").resolve()
    running = StdioSession(server_env(home, JUDGE_MCP_MODEL="demo", JUDGE_MCP_WARM_EMBEDDINGS="false",
                                      JUDGE_MCP_LOG_LEVEL="WARNING", JUDGE_MCP_MAX_TEXT_CHARS="1000",
                                      JUDGE_MCP_MAX_LIST_ITEMS="5"))
    try:
        yield running
    finally:
        running.close()



def test_a_cardinality_entry_with_min_above_max_is_named_with_an_example(session: StdioSession) -> None:
    assert session.error("evaluate_analysis", {"analysis": {}, "cardinality": {"insights": [5, 3]}}, unprefixed=True) == (
        "invalid input: cardinality entry 'insights' must be [min, max] with min <= max (got {\"insights\": [5, 3]}), "
        "e.g. {\"insights\": [3, 5]}.")


def test_a_cardinality_entry_that_is_not_a_pair_is_named(session: StdioSession) -> None:
    assert session.error("evaluate_analysis", {"analysis": {}, "cardinality": {"a.b": [1]}}, unprefixed=True) == (
        "invalid input: cardinality entry 'a.b' must be [min, max] with min <= max (got {\"a.b\": [1]}), "
        "e.g. {\"insights\": [3, 5]}.")


def test_an_evaluate_image_brief_over_the_text_limit_is_refused_naming_brief(session: StdioSession) -> None:
    assert session.error("evaluate_image", {"brief": "b" * 1001, "images": [PNG]}, unprefixed=True) == (
        "invalid input: brief is 1,001 characters; the limit is 1,000 (JUDGE_MCP_MAX_TEXT_CHARS). Shorten it or "
        "judge it in parts, e.g. one section per call")


def test_evaluate_image_agent_ids_over_the_list_limit_are_refused(session: StdioSession) -> None:
    assert session.error("evaluate_image", {"brief": "b", "images": [PNG], "agent_ids": ["a"] * 6}, unprefixed=True) == (
        "invalid input: agent_ids has 6 entries; the limit is 5 (JUDGE_MCP_MAX_LIST_ITEMS). Give fewer, e.g. the "
        "agents this brief needs")


def test_an_optimize_prompt_prompt_over_the_text_limit_is_refused_naming_prompt(session: StdioSession) -> None:
    assert session.error("optimize_prompt", {"brief": "b", "prompt": "p" * 1001, "run_id": "r"}, unprefixed=True) == (
        "invalid input: prompt is 1,001 characters; the limit is 1,000 (JUDGE_MCP_MAX_TEXT_CHARS). Shorten it or "
        "judge it in parts, e.g. one section per call")


def test_optimize_prompt_evaluations_over_the_list_limit_are_refused_before_reading(session: StdioSession) -> None:
    assert session.error("optimize_prompt", {"brief": "b", "prompt": "p", "evaluations": [{}] * 6}, unprefixed=True) == (
        "invalid input: evaluations has 6 entries; the limit is 5 (JUDGE_MCP_MAX_LIST_ITEMS). Give fewer, e.g. the "
        "winning image's")


def test_evaluate_analysis_lists_its_deterministic_checks_as_choices(session: StdioSession) -> None:
    tools = session.run(session.client.list_tools()).tools
    tool = next(t for t in tools if t.name == "evaluate_analysis")
    assert tool.input_schema["properties"]["deterministic_checks"] == {
        "default": ["D-1", "D-2", "D-3", "D-4", "D-5"],
        "items": {"enum": ["D-1", "D-2", "D-3", "D-4", "D-5"], "type": "string"}, "type": "array"}
