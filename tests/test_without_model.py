"""Without any model backend, through a real `judge-mcp`: each tool does what it can and says what it skipped;
and every MCP prompt renders through prompts/get with its declared arguments."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import prompts
from judges.models.registry import NO_BACKEND
from tests.mcp_helpers import StdioSession, server_env

ANALYSIS = {"company_name": "Acme", "website_url": "https://acme.example"}


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StdioSession, str]]:
    home = tmp_path_factory.mktemp("home").resolve()
    project = home / "project"
    project.mkdir()
    (project / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
    running = StdioSession(server_env(home, JUDGE_MCP_MODEL="auto", JUDGE_MCP_WARM_EMBEDDINGS="false",
                                      JUDGE_MCP_LOG_LEVEL="WARNING"))
    try:
        yield running, str(project)
    finally:
        running.close()


@pytest.mark.e2e
def test_evaluate_analysis_runs_the_checks_and_skips_each_llm_category(session: tuple[StdioSession, str]) -> None:
    running, _ = session
    result = running.call("evaluate_analysis", {"analysis": ANALYSIS, "deterministic_checks": ["D-1", "D-5"],
                                                "input_url": "https://acme.example"})
    assert result.is_error is False
    out = result.structured_content
    assert [c["check_name"] for c in out["checks"]] == ["json_validation", "url_preservation"]
    skipped = {"passed": False, "checks": {}, "skipped": "no model", "read_as": None, "score": None,
               "expected_score": None, "samples": None, "sample_stats": None, "votes": None, "jury": None}
    assert out["categories"] == {"general_quality": skipped, "founder_resonance": skipped}
    assert out["passed"] is True and out["partial"] is True
    assert out["note"] == f"The LLM categories were skipped: {NO_BACKEND}"


@pytest.mark.e2e
def test_judge_code_returns_the_gates_verdict(session: tuple[StdioSession, str]) -> None:
    running, project = session
    result = running.call("judge_code", {"spec": "add() returns the sum", "root": project,
                                         "gates": ["lint"]})
    assert result.is_error is False
    assert result.structured_content["status"] == "no_model"
    assert result.structured_content["verdict"] == "accept"


@pytest.mark.e2e
@pytest.mark.parametrize(("tool", "arguments"), [
    ("evaluate_image", {"brief": "A red square", "images": ["iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQV"
                                                            "R4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"]}),
    ("optimize_prompt", {"brief": "A red square", "prompt": "red square", "evaluations": []}),
    ("pairwise_compare", {"instruction": "Say hello", "candidates": ["hi", "hello"]}),
    ("propose_patch", {"spec": "add() returns the sum", "files": [{"path": "calc.py", "content": "x = 1\n"}],
                       "diagnostics": "calc.py:1: error"}),
])
def test_a_model_tool_fails_with_how_to_configure_a_model(session: tuple[StdioSession, str], tool: str,
                                                           arguments: dict[str, Any]) -> None:
    running, _ = session
    if tool == "evaluate_image":
        running.call("create_agent", {"name": "Brand", "template_id": "brand_compliance"})
    result = running.call(tool, arguments)
    assert result.is_error is True
    assert result.content[0].text == f"Error executing tool {tool}: server configuration: {NO_BACKEND}"


def _arguments(prompt_id: str) -> dict[str, str]:
    """Each declared argument: the asset's own JSON example where it declares JSON, else a recognisable text."""
    template = prompts.load(prompt_id)
    values = {}
    for name in template.variables:
        declared = template.meta.get(f"arg_{name}", "")
        values[name] = declared.split("e.g. ", 1)[1] if declared.startswith("JSON") else f"the {name} given here"
    return values


@pytest.mark.e2e
@pytest.mark.parametrize("prompt_id", prompts.list_templates())
def test_every_prompt_renders_through_prompts_get(session: tuple[StdioSession, str], prompt_id: str) -> None:
    running, _ = session
    listed = {p.name: p for p in running.run(running.client.list_prompts()).prompts}
    assert sorted(a.name for a in listed[prompt_id].arguments or []) == sorted(prompts.load(prompt_id).variables)
    arguments = _arguments(prompt_id)
    got = running.run(running.client.get_prompt(prompt_id, arguments))
    text = got.messages[0].content.text
    assert text == prompts.render(prompt_id, **{k: (v if v.startswith("the ") else json.loads(v))
                                                 for k, v in arguments.items()})
    for value in arguments.values():
        if value.startswith("the "):
            assert value in text


@pytest.mark.e2e
def test_a_json_prompt_argument_that_is_not_json_says_what_it_must_be(session: tuple[StdioSession, str]) -> None:
    running, _ = session
    from mcp.shared.exceptions import MCPError

    with pytest.raises(MCPError) as raised:
        running.run(running.client.get_prompt("analysis/system/general_quality@v1", {"criteria": "clarity"}))
    assert raised.value.error.message == (
        'argument criteria of prompt analysis/system/general_quality@v1 must be JSON list of {"name", '
        '"description"}, e.g. [{"name": "clarity", "description": "Easy to follow"}]')
