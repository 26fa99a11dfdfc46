"""The twenty most likely mistakes, through a real `judge-mcp` over stdio: each gets one or two sentences
naming the argument, what was wrong and (where it helps) an example of a right value: no pydantic dumps."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mcp_helpers import StdioSession, server_env

PREFIX = "Error executing tool {tool}: "

# (tool, arguments, the exact message after "Error executing tool <tool>: "). {home}: the data home (the
# allowed root), {project}: a project in it, {agent}: an agent's id.
MISTAKES: list[tuple[str, dict[str, Any], str]] = [
    ("get_agent", {"agent_id": "no-such-agent"},
     "invalid input: no agent with id 'no-such-agent' in this organization (list_agents shows the ids)"),
    ("validate_patch", {"patch": {"ops": []}, "root": "/etc"},
     "invalid input: root '/etc' is outside the allowed roots ({home}); set JUDGE_MCP_ALLOWED_ROOTS to allow it"),
    ("create_agent", {"name": "Judge", "system_prompt": "Score it.", "scoring_weight": 150},
     "invalid input: scoring_weight must be between 0 and 100 (got 150)."),
    ("pairwise_compare", {"instruction": "Make the sky blue", "candidates": []},
     'invalid input: method pairwise compares exactly two candidates (got 0), e.g. ["/home/me/project/a.png", '
     '"/home/me/project/b.png"]; method viescore scores one or two'),
    ("upload_guideline", {"agent_id": "{agent}", "content_base64": "not base64!!", "filename": "brand.pdf"},
     "invalid input: content_base64 is not valid base64; send the file's bytes encoded, e.g. 'JVBERi0xLjcK...' "
     "(a PDF), or use text= for plain text"),
    ("evaluate_image", {"brief": "A red square", "images": ["aGVsbG8gd29ybGQ="]},
     "invalid input: images[0]: the base64 decodes to something that is not a PNG, JPEG, WebP or GIF image; send the "
     "image file's bytes in base64, e.g. data:image/png;base64,iVBORw0KGgo..."),
    ("pairwise_compare", {"instruction": "Say hello", "candidates": ["hi", "hello"], "prompt_id": "text/nope@v1"},
     "invalid input: no prompt asset 'text/nope@v1'; the closest: text/reference@v1, text/score/steps@v1, "
     "text/trajectory@v1. prompts/list names all 32."),
    ("create_agent", {"name": "Judge", "template_id": "brand"},
     "invalid input: template_id 'brand' is unknown; choose one of: brand_compliance, composition, "
     "product_accuracy, technical_quality"),
    ("create_agent", {"system_prompt": "Score it."},
     "invalid input: name is required, e.g. 'Brand Compliance Judge'."),
    ("evaluate_image", {"brief": "A red square", "images": "render.png"},
     'invalid input: images must be a list (got "render.png"), e.g. ["/home/me/project/render.png"].'),
    ("judge_code", {"spec": "add() adds", "root": "{project}", "gates": ["fmt"]},
     "invalid input: gate 'fmt' is unknown; use lint, types or tests"),
    ("apply_patch", {"patch": {"ops": [{"kind": "rename", "path": "app.py"}]}, "root": "{project}"},
     "The patch was not applied and no file changed: op 0: 'kind' must be one of add, remove, edit, splice "
     "(got 'rename')."),
    ("evaluate_image", {"brief": "A red square", "images": ["/etc/passwd"]},
     "invalid input: images[0]: path '/etc/passwd' is outside the allowed roots ({home}); set "
     "JUDGE_MCP_ALLOWED_ROOTS to allow it"),
    ("list_agents", {"sort_by": "size"},
     "invalid input: sort_by must be one of 'name', 'created_at' or 'updated_at' (got \"size\"), e.g. \"name\"."),
    ("evaluate_analysis", {"analysis": {}, "deterministic_checks": ["D-9"]},
     "invalid input: deterministic_checks[0] must be one of 'D-1', 'D-2', 'D-3', 'D-4' or 'D-5' (got \"D-9\"); did "
     "you mean \"D-5\"?"),
    ("evaluate_analysis", {"analysis": {}, "llm_judges": ["tone"]},
     "invalid input: unknown LLM judge category 'tone'; known: founder_resonance, general_quality (add your own in "
     "JUDGE_MCP_ANALYSIS_CATEGORIES_DIR)"),
    ("get_run", {"run_id": "no-such-run"},
     "invalid input: no run 'no-such-run' in this organization (evaluate_image returns run_id)"),
    ("search_guidelines", {"agent_id": "{agent}", "query": "logo", "top_k": 0},
     "invalid input: top_k must be between 1 and 50 (got 0)."),
    ("create_agent", {"name": "Judge", "system_prompt": "Score it.", "rag_config": {"top_k": "five"}},
     'invalid input: rag_config.top_k must be a whole number (got "five"), e.g. 5.'),
    ("create_agent", {"name": "Judge", "system_prompt": "Score it.", "model": "gpt4"},
     "invalid input: model 'gpt4' is not understood: use 'auto', 'sampling', 'anthropic:<model>', "
     "'openai:<model>', 'openai-compatible:<model>' or 'demo'"),
]


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StdioSession, dict[str, str]]]:
    home = tmp_path_factory.mktemp("home").resolve()
    project = home / "project"
    project.mkdir()
    (project / "app.py").write_text("def add(a, b):\n    return a + b\n")
    running = StdioSession(server_env(home, JUDGE_MCP_MODEL="demo", JUDGE_MCP_WARM_EMBEDDINGS="false",
                                      JUDGE_MCP_LOG_LEVEL="WARNING"))
    try:
        agent = running.call("create_agent", {"name": "Brand", "template_id": "brand_compliance"})
        yield running, {"home": str(home), "project": str(project), "agent": agent.structured_content["id"]}
    finally:
        running.close()


def _filled(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        for name, text in names.items():
            value = value.replace("{" + name + "}", text)
        return value
    if isinstance(value, list):
        return [_filled(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _filled(v, names) for k, v in value.items()}
    return value


@pytest.mark.e2e
@pytest.mark.parametrize(("tool", "arguments", "message"), MISTAKES,
                         ids=[f"{i:02}-{tool}" for i, (tool, _, _) in enumerate(MISTAKES, 1)])
def test_a_likely_mistake_gets_its_exact_message(session: tuple[StdioSession, dict[str, str]], tool: str,
                                                 arguments: dict[str, Any], message: str) -> None:
    running, names = session
    result = running.call(tool, _filled(arguments, names))
    assert result.is_error is True
    expected = _filled(message, names)
    if tool != "apply_patch":  # the SDK prefixes raised tool errors; apply_patch's failed report is its own text
        expected = PREFIX.format(tool=tool) + expected
    assert result.content[0].text == expected


def test_there_are_twenty_mistakes() -> None:
    assert len(MISTAKES) == 20 and len({(t, str(a)) for t, a, _ in MISTAKES}) == 20


@pytest.mark.e2e
def test_a_failed_apply_patch_is_an_error_with_the_report(session: tuple[StdioSession, dict[str, str]]) -> None:
    running, names = session
    patch = {"ops": [{"kind": "edit", "path": "app.py", "find": "a - b", "replace": "a + b"}]}
    result = running.call("apply_patch", {"patch": patch, "root": names["project"]})
    assert result.is_error is True
    assert result.structured_content["applied"] is False and len(result.structured_content["errors"]) == 1
    assert (Path(names["project"]) / "app.py").read_text() == "def add(a, b):\n    return a + b\n"


@pytest.mark.e2e
def test_a_unified_diff_without_its_last_newline_applies(session: tuple[StdioSession, dict[str, str]]) -> None:
    running, names = session
    diff = "--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n-def add(a, b):\n+def add(b, a):\n     return a + b"
    result = running.call("apply_patch", {"patch": diff, "root": names["project"], "dry_run": True})
    assert result.is_error is False
    assert result.structured_content["diff"] == diff + "\n"


@pytest.mark.e2e
def test_max_rounds_outside_one_to_five_is_refused_by_its_listed_bounds(
        session: tuple[StdioSession, dict[str, str]]) -> None:
    running, names = session
    listed = {t.name: t for t in running.run(running.client.list_tools()).tools}["propose_patch"]
    result = running.call("propose_patch", {"spec": "Fix add.", "root": names["project"], "diagnostics": "E1",
                                            "max_rounds": 6})
    assert (listed.input_schema["properties"]["max_rounds"]["minimum"],
            listed.input_schema["properties"]["max_rounds"]["maximum"]) == (1, 5)
    assert result.content[0].text == ("Error executing tool propose_patch: invalid input: max_rounds must be "
                                      "between 1 and 5 (got 6).")


@pytest.mark.e2e
def test_a_bounded_number_given_as_a_word_gets_an_example_inside_its_bounds(
        session: tuple[StdioSession, dict[str, str]]) -> None:
    running, _ = session
    result = running.call("create_agent", {"name": "Judge", "system_prompt": "Score it.", "scoring_weight": "high"})
    assert result.content[0].text == ('Error executing tool create_agent: invalid input: scoring_weight must be a '
                                      'number (got "high"), e.g. 50.')


@pytest.mark.e2e
def test_a_text_given_as_a_number_gets_an_example_text(session: tuple[StdioSession, dict[str, str]]) -> None:
    running, _ = session
    result = running.call("score_text", {"text": 5, "rubric": "correctness"})
    assert result.content[0].text == ('Error executing tool score_text: invalid input: text must be text (got 5), '
                                      'e.g. "Paris is the capital of France.".')


@pytest.mark.e2e
def test_texts_for_rank_texts_is_answered_with_candidates(session: tuple[StdioSession, dict[str, str]]) -> None:
    running, _ = session
    result = running.call("rank_texts", {"instruction": "Capital of France?", "texts": ["Paris", "Lyon"]})
    assert result.content[0].text == ("Error executing tool rank_texts: invalid input: unknown argument 'texts'; did "
                                      "you mean 'candidates'? valid: instruction, candidates, method, cache, background")


@pytest.mark.e2e
def test_file_for_upload_guideline_is_answered_with_path_not_filename(
        session: tuple[StdioSession, dict[str, str]]) -> None:
    running, names = session
    result = running.call("upload_guideline", {"agent_id": names["agent"], "file": "/home/me/brand.pdf"})
    assert result.content[0].text == ("Error executing tool upload_guideline: invalid input: unknown argument 'file'; "
                                      "did you mean 'path'? valid: agent_id, path, content_base64, text, filename")
