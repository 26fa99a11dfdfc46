"""What a stranger's first hour met, through a real `judge-mcp` over stdio: a misspelt name (tool, template,
rubric, allowed value, gate) is answered with the closest valid one, and an empty guideline names the argument
that was empty; a port that cannot be is refused before the server starts."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp_helpers import StdioSession, server_env

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StdioSession, dict[str, str]]]:
    home = tmp_path_factory.mktemp("home").resolve()
    project = home / "project"
    project.mkdir()
    (project / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (project / "empty.pdf").write_bytes(b"")
    running = StdioSession(server_env(home, JUDGE_MCP_MODEL="demo", JUDGE_MCP_WARM_EMBEDDINGS="false",
                                      JUDGE_MCP_LOG_LEVEL="WARNING"))
    try:
        agent = running.call("create_agent", {"name": "Brand", "template_id": "brand_compliance"})
        yield running, {"project": str(project), "agent": agent.structured_content["id"]}
    finally:
        running.close()



def test_a_misspelt_tool_name_gets_the_closest_tool(session: tuple[StdioSession, dict[str, str]]) -> None:
    running, _ = session
    assert running.error("evalute_image", {"brief": "A red square", "images": []}) == \
        "Unknown tool: evalute_image; did you mean 'evaluate_image'? (tools/list lists them)"


def test_an_unknown_tool_with_no_close_name_is_only_named(session: tuple[StdioSession, dict[str, str]]) -> None:
    running, _ = session
    assert running.error("frobnicate", {}) == "Unknown tool: frobnicate"


def test_a_misspelt_template_id_gets_the_closest_template(session: tuple[StdioSession, dict[str, str]]) -> None:
    running, _ = session
    assert running.error("create_agent", {"name": "Judge", "template_id": "brand_complaince"}) == (
        "Error executing tool create_agent: invalid input: template_id 'brand_complaince' is unknown; did you mean "
        "'brand_compliance'? choose one of: brand_compliance, composition, product_accuracy, technical_quality")


def test_a_misspelt_rubric_gets_the_closest_rubric(session: tuple[StdioSession, dict[str, str]]) -> None:
    running, _ = session
    assert running.error("score_text", {"text": "Paris.", "rubric": "corectness"}) == (
        "Error executing tool score_text: invalid input: rubric: unknown rubric 'corectness'; did you mean "
        "'correctness'? built-in rubrics are correctness, helpfulness, faithfulness, conciseness, safety "
        "(or pass criteria: [{name, description, weight, scale}])")


def test_a_misspelt_allowed_value_gets_the_closest_one(session: tuple[StdioSession, dict[str, str]]) -> None:
    running, _ = session
    assert running.error("calibrate_judge", {"judge": "score_txt", "dataset": "{}"}) == (
        "Error executing tool calibrate_judge: invalid input: judge must be one of 'pairwise_compare', "
        "'score_text' or 'viescore' (got \"score_txt\"); did you mean \"score_text\"?")


def test_a_far_off_allowed_value_keeps_its_example(session: tuple[StdioSession, dict[str, str]]) -> None:
    running, _ = session
    assert running.error("score_text", {"text": "Paris.", "rubric": "correctness", "method": "vibes"}) == (
        "Error executing tool score_text: invalid input: method must be one of 'direct' or 'g_eval' "
        "(got \"vibes\"), e.g. \"direct\".")


def test_a_misspelt_gate_gets_the_closest_gate(session: tuple[StdioSession, dict[str, str]]) -> None:
    running, names = session
    assert running.error("judge_code", {"spec": "add() adds", "root": names["project"], "gates": ["lnt"]}) == (
        "Error executing tool judge_code: invalid input: gate 'lnt' is unknown; did you mean 'lint'? "
        "use lint, types or tests")


def test_an_empty_guideline_file_is_named_by_its_path(session: tuple[StdioSession, dict[str, str]]) -> None:
    running, names = session
    path = str(Path(names["project"]) / "empty.pdf")
    assert running.error("upload_guideline", {"agent_id": names["agent"], "path": path}) == (
        f"Error executing tool upload_guideline: invalid input: path {path!r}: the file is empty (0 bytes); give a "
        "PDF, DOCX, TXT or Markdown file that has content")


def test_empty_guideline_text_names_the_text_argument(session: tuple[StdioSession, dict[str, str]]) -> None:
    running, names = session
    assert running.error("upload_guideline", {"agent_id": names["agent"], "text": "  \n"}) == (
        "Error executing tool upload_guideline: invalid input: text must not be empty, e.g. \"Use the brand blue "
        "#488EFF. The logo sits top left.\"")


def test_empty_base64_guideline_names_content_base64(session: tuple[StdioSession, dict[str, str]]) -> None:
    running, names = session
    arguments = {"agent_id": names["agent"], "content_base64": base64.b64encode(b"").decode(), "filename": "a.pdf"}
    assert running.error("upload_guideline", arguments) == (
        "Error executing tool upload_guideline: invalid input: content_base64 is empty; send the file's bytes "
        "encoded, e.g. 'JVBERi0xLjcK...' (a PDF)")


@pytest.mark.parametrize("port", ["99999", "0", "eighty"])
def test_a_port_outside_1_to_65535_stops_with_the_argument_named(tmp_path: Path, port: str) -> None:
    """It used to say "Uvicorn running on http://127.0.0.1:99999" and serve nothing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_MCP_")} | \
        {"JUDGE_MCP_HOME": str(tmp_path / "home")}
    done = subprocess.run([str(Path(sys.executable).with_name("judge-mcp")), "--transport", "http", "--port", port],
                          env=env, cwd="/", capture_output=True, text=True, timeout=60)
    shown = repr(port) if not port.isdigit() else port
    assert (done.returncode, done.stderr.splitlines()[-1]) == (
        2, f"judge-mcp: error: argument --port: {shown} is not a port number; use 1..65535, e.g. --port 8000")
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize(("argv", "said"), [
    (["chek"], "invalid choice: 'chek' (choose from 'check', 'config', 'tokens', 'eval'); did you mean 'check'?"),
    (["tokens", "craete"], "invalid choice: 'craete' (choose from 'create', 'list', 'revoke'); did you mean "
                           "'create'?"),
    (["--transport", "htp"], "invalid choice: 'htp' (choose from 'stdio', 'sse', 'http'); did you mean 'http'?"),
    (["zzzz"], "invalid choice: 'zzzz' (choose from 'check', 'config', 'tokens', 'eval')"),
])
def test_a_misspelt_command_or_choice_gets_the_closest_one(tmp_path: Path, argv: list[str], said: str) -> None:
    """`judge-mcp chek` said only "invalid choice"; a name near none gets no suggestion."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_MCP_")} | \
        {"JUDGE_MCP_HOME": str(tmp_path / "home")}
    done = subprocess.run([str(Path(sys.executable).with_name("judge-mcp")), *argv],
                          env=env, cwd="/", capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr.splitlines()[-1].split(": ", 3)[-1]) == (2, said)
