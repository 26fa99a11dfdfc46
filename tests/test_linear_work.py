"""Issue 28 item 3: no input makes a judge's deterministic work quadratic or holds the event loop.

Through a real HTTP server with two organizations: while one organization's big call runs, the other's
call is answered within 200 ms. In process: each core function's time at n, 2n and 4n grows at most
linearly. Through a real stdio server: arguments over the size limits are refused, naming the argument,
the limit and its setting."""

from __future__ import annotations

import gc
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from judges.analysis import judge as analysis
from judges.text.rag import RagContext, evaluate_rag_answer
from judges.text.trajectory import Step, evaluate_trajectory
from tests.fake_model_server import FakeModelServer, Scripted
from tests.mcp_helpers import JUDGE_MCP, StdioSession, server_env
from tests.scripted_model import ScriptedModel, call_of
from tests.test_hostile import http_client, raw_call, stall_while

# What "stalls no one" means here: the other organization's list_agents (a few ms alone) answers within this
# while the attack runs. Before the fix each of these attacks held the event loop for 6–12 s.
STALL_LIMIT_S = 0.2

# The issue's inputs: a 21 KB string in a deterministic check, a 23 KB answer, a 9,000-step trajectory.
HOSTILE_STRING = "a." * 10_500
LONG_ANSWER = "Ok. " * 5_750
MANY_STEPS = [{"tool": f"tool_{i}", "arguments": {"i": i}, "result": "Error: failed"} for i in range(9_000)]


# --- the event loop stays free: a real HTTP server, two organizations ---------------------------

@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory, fake_server_session: FakeModelServer) -> Iterator[str]:
    from tests.mcp_helpers import free_port, wait_for_port

    home = tmp_path_factory.mktemp("linear-home")
    port = free_port()
    with (home / "stderr.log").open("w") as log:
        proc = subprocess.Popen([JUDGE_MCP, "--transport", "http", "--port", str(port)], env=server_env(
            home, JUDGE_MCP_TOKENS="tok-attacker=org-a:member,tok-probe=org-b:member", JUDGE_MCP_MODEL="openai:gpt-fake",
            OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_server_session.openai_url,
            JUDGE_MCP_WARM_EMBEDDINGS="false"), stdout=subprocess.DEVNULL, stderr=log)
        assert wait_for_port(port, 30), "the HTTP server did not start within 30 s"
        yield f"http://127.0.0.1:{port}/mcp"
        proc.terminate()
        proc.wait(timeout=10)


def answer_of(reply: str) -> dict[str, Any]:
    """The tools/call result in a raw HTTP reply (JSON, or server-sent events)."""
    for payload in [reply, *(line[6:] for line in reply.splitlines() if line.startswith("data: "))]:
        try:
            message = json.loads(payload)
        except ValueError:
            continue
        if message.get("id") == 2:
            return message["result"]  # type: ignore[no-any-return]
    raise AssertionError(f"no tools/call answer in {reply[:300]!r}")


async def attack_with_probe(url: str, tmp_path: Path, tool: str, args: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """`tool` called by org-a from another process (so this process's event loop only times the probe, not
    the attacker's client reading its big answer) while org-b's list_agents is timed; both member tokens.
    Returns (org-a's result, org-b's slowest answer)."""
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                "params": {"name": tool, "arguments": args}}))
    await raw_call(url, "tok-attacker", body)  # once before timing: the first call's imports are not the figure
    async with http_client(url, "tok-probe") as prober:

        async def probe() -> None:
            got = await prober.call_tool("list_agents", {})
            assert not got.is_error

        reply, stall = await stall_while(lambda: raw_call(url, "tok-attacker", body), probe)
    return answer_of(reply), stall


@pytest.mark.anyio
@pytest.mark.e2e
async def test_a_21_kb_string_in_the_deterministic_checks_stalls_no_other_organization(http_server: str,
                                                                                       tmp_path: Path) -> None:
    result, stall = await attack_with_probe(http_server, tmp_path, "evaluate_analysis", {
        "analysis": {"company_name": "Acme", "notes": HOSTILE_STRING}, "input_url": "https://acme.io",
        "deterministic_checks": ["D-1", "D-5"], "llm_judges": []})
    print(f"\n21 KB string in D-5: the other organization's slowest answer {stall * 1000:.0f} ms")
    assert not result.get("isError"), result["content"][0]["text"]
    assert [(c["check_name"], c["pass"]) for c in result["structuredContent"]["checks"]] == [
        ("json_validation", True), ("url_preservation", False)]
    assert stall < STALL_LIMIT_S


@pytest.mark.anyio
@pytest.mark.e2e
async def test_a_23_kb_answer_split_into_claims_stalls_no_other_organization(
        http_server: str, tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text='{"score": 4, "contexts": [{"context": 1, "relevant": true}]}'))
    result, stall = await attack_with_probe(http_server, tmp_path, "evaluate_rag_answer", {
        "question": "What?", "answer": LONG_ANSWER, "contexts": ["A passage."]})
    print(f"\n23 KB answer: the other organization's slowest answer {stall * 1000:.0f} ms")
    assert not result.get("isError"), result["content"][0]["text"]
    assert len(result["structuredContent"]["claims"]) == 5_750
    assert stall < STALL_LIMIT_S


@pytest.mark.anyio
@pytest.mark.e2e
async def test_a_9000_step_trajectory_stalls_no_other_organization(http_server: str, tmp_path: Path,
                                                                    fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text='{"goal_reached": false, "score": 1}'))
    result, stall = await attack_with_probe(http_server, tmp_path, "evaluate_trajectory",
                                            {"goal": "Do it.", "steps": MANY_STEPS})
    print(f"\n9,000 steps: the other organization's slowest answer {stall * 1000:.0f} ms")
    assert not result.get("isError"), result["content"][0]["text"]
    facts = result["structuredContent"]["checks"]
    assert len(facts["failed_calls"]) == 9_000 and not any(f["retried"] for f in facts["failed_calls"])
    assert stall < STALL_LIMIT_S


# --- time grows at most linearly: the core functions in process --------------------------------

def growth(make: Callable[[int], Callable[[], Any]], n: int, runs: int = 7) -> tuple[list[float], float]:
    """CPU seconds of this process (its worker threads included; other processes' load is not counted) at n,
    2n and 4n, each the best of `runs` (an async run timed inside its own event loop; the sizes interleaved,
    so a burst of load on the machine falls on all three), and t(4n)/t(n). The garbage collector is paused
    while a run is timed: its full collections, over every object alive in the test process, are noise
    here, not the judge's algorithm."""
    runners = [make(k * n) for k in (1, 2, 4)]

    async def timed(run: Callable[[], Any]) -> float:
        gc.collect()
        gc.disable()
        try:
            started = time.process_time()
            result = run()
            if result is not None:
                await result
            return time.process_time() - started
        finally:
            gc.enable()

    samples = [[anyio.run(timed, run) for run in runners] for _ in range(runs)]
    times = [min(column) for column in zip(*samples, strict=True)]
    print(f"\n  n, 2n, 4n: {', '.join(f'{t * 1000:.0f} ms' for t in times)}; ratio {times[2] / times[0]:.1f}")
    return times, times[2] / times[0]


# Linear work quadruples; quadratic work grows 16× (before the fix: 13.5, 12.0 and 24.7, bench/linear_work.py).
MAX_RATIO = 5.0


def test_the_deterministic_checks_grow_linearly_with_a_long_string() -> None:
    def make(n: int) -> Callable[[], None]:
        data = {"company_name": "Acme", "notes": "a." * (n // 2)}

        def run() -> None:
            analysis.d1_json_validation(data)
            analysis.d2_schema_compliance(data, analysis.DEFAULT_SCHEMA)
            analysis.d3_format_compliance(data, analysis.DEFAULT_INSIGHT_FIELDS)
            analysis.d5_url_preservation(data, "https://acme.io")
        return run

    _, ratio = growth(make, 210_000)  # ten times the issue's 21 KB: long enough to time
    assert ratio <= MAX_RATIO


def test_claim_splitting_and_the_faithfulness_prompt_grow_linearly_with_the_answer() -> None:
    def make(n: int) -> Callable[[], Any]:
        answer = "Ok. " * (n // 4)

        async def run() -> None:
            await evaluate_rag_answer(call_of(ScriptedModel(lambda request: '{"score": 3}')), question="What?",
                                      answer=answer, contexts=[RagContext(text="A passage.")])
        return run

    _, ratio = growth(make, 23_000)
    assert ratio <= MAX_RATIO


def test_evaluate_trajectory_grows_linearly_with_the_steps() -> None:
    def make(n: int) -> Callable[[], Any]:
        steps = [Step(tool=f"tool_{i}", arguments={"i": i}, result="Error: failed") for i in range(n)]

        async def run() -> None:
            await evaluate_trajectory(call_of(ScriptedModel(lambda request: '{"goal_reached": false, "score": 1}')),
                                      goal="Do it.", steps=steps)
        return run

    _, ratio = growth(make, 9_000)
    assert ratio <= MAX_RATIO


# --- size limits: refused before any work, through a real stdio server --------------------------

@pytest.fixture(scope="module")
def small_limits(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioSession]:
    home = tmp_path_factory.mktemp("limits-home")
    session = StdioSession(server_env(home, JUDGE_MCP_MODEL="demo", JUDGE_MCP_MAX_TEXT_CHARS="1000",
                                      JUDGE_MCP_MAX_LIST_ITEMS="50", JUDGE_MCP_MAX_ANALYSIS_CHARS="2000",
                                      JUDGE_MCP_WARM_EMBEDDINGS="false"))
    yield session
    session.close()


def error_text(session: StdioSession, tool: str, arguments: dict[str, Any]) -> str:
    result = session.call(tool, arguments)
    assert result.is_error
    return str(result.content[0].text)


@pytest.mark.e2e
def test_an_answer_over_the_text_limit_is_refused_naming_it_the_limit_and_the_setting(
        small_limits: StdioSession) -> None:
    message = error_text(small_limits, "evaluate_rag_answer", {"question": "What?", "answer": "x. " * 400,
                                                                "contexts": ["A passage."]})
    assert ("answer is 1,200 characters; the limit is 1,000 (JUDGE_MCP_MAX_TEXT_CHARS). Shorten it or judge it in "
            "parts, e.g. one section per call") in message


@pytest.mark.e2e
def test_a_trajectory_over_the_step_limit_is_refused_naming_it_the_limit_and_the_setting(
        small_limits: StdioSession) -> None:
    message = error_text(small_limits, "evaluate_trajectory", {"goal": "Do it.", "steps": MANY_STEPS[:51]})
    assert ("steps has 51 entries; the limit is 50 (JUDGE_MCP_MAX_LIST_ITEMS). Give fewer, e.g. judge the "
            "trajectory in parts, or leave out steps that repeat") in message


@pytest.mark.e2e
def test_a_context_over_the_text_limit_is_refused_naming_its_index(small_limits: StdioSession) -> None:
    message = error_text(small_limits, "evaluate_rag_answer", {"question": "What?", "answer": "It is.",
                                                                "contexts": ["A passage.", "y" * 1001]})
    assert "contexts[1] is 1,001 characters; the limit is 1,000 (JUDGE_MCP_MAX_TEXT_CHARS)" in message


@pytest.mark.e2e
def test_an_analysis_over_the_size_limit_is_refused_before_any_check(small_limits: StdioSession) -> None:
    message = error_text(small_limits, "evaluate_analysis", {"analysis": {"notes": "a" * 2000}, "llm_judges": []})
    assert ("analysis is 2,012 characters as JSON; the limit is 2,000 (JUDGE_MCP_MAX_ANALYSIS_CHARS). Leave out "
            "what no check reads, e.g. raw page text or long quotes") in message


@pytest.mark.e2e
def test_an_analysis_under_the_size_limit_is_checked(small_limits: StdioSession) -> None:
    result = small_limits.call("evaluate_analysis", {"analysis": {"notes": "a" * 1900}, "llm_judges": [],
                                                     "deterministic_checks": ["D-1"]})
    assert not result.is_error, result.content[0].text
    assert result.structured_content["passed"] is True


@pytest.mark.e2e
def test_a_search_query_over_the_limit_is_refused_naming_the_limit(small_limits: StdioSession) -> None:
    agent = small_limits.call("create_agent", {"name": "a", "system_prompt": "p"}).structured_content
    message = error_text(small_limits, "search_guidelines", {"agent_id": agent["id"], "query": "logo " * 2001})
    assert "query is 10,005 characters; the limit is 10,000. Search with the words that matter" in message


@pytest.mark.e2e
def test_a_code_spec_over_the_text_limit_is_refused_before_any_gate(small_limits: StdioSession) -> None:
    message = error_text(small_limits, "judge_code", {"spec": "s" * 1001, "files": [{"path": "a.py",
                                                                                     "content": "x = 1\n"}]})
    assert message == ("Error executing tool judge_code: invalid input: spec is 1,001 characters; the limit is 1,000 "
                       "(JUDGE_MCP_MAX_TEXT_CHARS). Shorten it or judge it in parts, e.g. one section per call")


@pytest.mark.e2e
def test_diagnostics_over_the_text_limit_are_refused_naming_them(small_limits: StdioSession) -> None:
    message = error_text(small_limits, "propose_patch", {"spec": "Fix it.", "diagnostics": "E" * 1001,
                                                         "files": [{"path": "a.py", "content": "x = 1\n"}]})
    assert "diagnostics is 1,001 characters; the limit is 1,000 (JUDGE_MCP_MAX_TEXT_CHARS)" in message


# --- the rest of the class: each was quadratic (or worse) on text a caller controls -----------------

def cpu_seconds(fn: Callable[[], Any]) -> float:
    started = time.process_time()
    fn()
    return time.process_time() - started


def test_a_diff_of_a_thousand_repeated_lines_is_exact_and_quick() -> None:
    from judges.patches.linediff import unified_diff
    from tests.test_linediff import apply_unified

    before = ["\n"] * 1000  # no unique line to anchor on: difflib alone took 72 s
    after = ["\n" if i % 2 else "x\n" for i in range(1000)]
    diff: list[str] = []
    assert cpu_seconds(lambda: diff.extend(unified_diff(before, after, "a/f", "b/f"))) < 1.0
    assert apply_unified(before, "".join(diff)) == after


def test_a_reply_of_twenty_thousand_unclosed_braces_is_read_quickly() -> None:
    from judges.reading.parsing import json_candidates

    found: list[Any] = []
    assert cpu_seconds(lambda: found.extend(json_candidates("{" * 20_000 + '{"score": 4}'))) < 1.0  # was 35 s


def test_a_reply_nested_past_the_recursion_limit_is_no_json_not_a_crash() -> None:
    from judges.reading.parsing import json_candidates

    assert json_candidates('{"a": ' * 5_000) == []  # was RecursionError: an internal error


def test_a_rating_label_followed_by_a_long_run_of_spaces_is_read_quickly() -> None:
    from judges.reading.verdicts import VerdictError, read_rating

    def read() -> None:
        with pytest.raises(VerdictError):
            read_rating("score" + " " * 20_000 + "x")

    assert cpu_seconds(read) < 1.0  # the label's side-by-side \s* took 12 s


def test_a_fence_neutralises_its_own_tag_in_any_case_and_leaves_others() -> None:
    from prompts.loader import fence

    assert fence("a </STEP_1 > b </ſtep_1> c </step_10> d", "step_1") == (
        "<step_1>\na &lt;/STEP_1 > b &lt;/ſtep_1> c </step_10> d\n</step_1>")


def test_nine_thousand_fences_are_written_quickly() -> None:
    from prompts.loader import fence

    assert cpu_seconds(lambda: [fence("a </x> b", f"step_{i}") for i in range(9_000)]) < 0.5  # was ~1 s of compiles


def test_unique_items_over_twenty_thousand_objects_are_checked_quickly() -> None:
    schema = {"type": "object", "properties": {"rows": {"type": "array", "uniqueItems": True}}}
    rows = [{"id": i} for i in range(20_000)]
    checks: list[Any] = []
    assert cpu_seconds(lambda: checks.append(analysis.d2_schema_compliance({"rows": [*rows, {"id": 7.0}]}, schema))) < 2.0
    assert "rows: the array has non-unique elements (item 20000 repeats item 7)" in checks[0].rationale


def test_a_schema_that_refers_to_itself_without_descending_is_an_input_error() -> None:
    from judges.errors import InputError

    with pytest.raises(InputError, match="references loop without descending into the data"):
        analysis.d2_schema_compliance({"a": 1}, {"anyOf": [{"$ref": "#"}]})


def test_text_that_only_looks_like_a_url_does_not_fail_d5() -> None:
    check = analysis.d5_url_preservation({"notes": "see acme.io:99999 and https://acme.io/"}, "https://acme.io")
    assert check.passed


def test_an_input_url_urllib_cannot_split_is_an_input_error_naming_it() -> None:
    from judges.errors import InputError

    with pytest.raises(InputError, match=r"input_url 'https://acme.io:99999' is not a URL \(Port out of range"):
        analysis.d5_url_preservation({"notes": "x"}, "https://acme.io:99999")


def test_file_names_in_long_diagnostics_are_found_quickly() -> None:
    from judges.code.judge import _python_paths

    assert cpu_seconds(lambda: _python_paths("a" * 200_000)) < 0.5
    assert _python_paths("E1 src/app.py:3: bad; see tests/test_app.py.") == ["src/app.py", "tests/test_app.py"]


@pytest.mark.anyio
async def test_an_answer_of_more_claims_than_one_judgement_takes_is_refused_before_any_model_call() -> None:
    from judges.errors import InputError
    from judges.text.rag import MAX_CLAIMS, RagContext, evaluate_rag_answer

    class NoModel:
        name = "none"

        async def complete(self, request: object) -> object:
            raise AssertionError("no model call may be made")

    with pytest.raises(InputError) as refused:
        await evaluate_rag_answer(call_of(NoModel()), question="q?", answer="It is so. " * (MAX_CLAIMS + 1),
                                  contexts=[RagContext(text="It is so.")])
    assert str(refused.value).startswith(f"answer splits into {MAX_CLAIMS + 1:,} claims; the limit is {MAX_CLAIMS:,}")
