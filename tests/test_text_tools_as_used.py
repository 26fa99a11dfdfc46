"""The five text tools as hosts use them: a real `judge-mcp` process over stdio, the real MCP client, and
the loopback fake model server behind the real OpenAI SDK."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.fake_model_server import FakeModelServer, Recorded, Scripted
from tests.mcp_helpers import JUDGE_MCP, call, error_of, no_result, server_env

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@asynccontextmanager
async def judge_mcp(home: Path, fake: FakeModelServer, **env: str) -> AsyncIterator[Any]:
    from mcp import Client, StdioServerParameters

    home.mkdir(parents=True, exist_ok=True)
    params = StdioServerParameters(command=JUDGE_MCP, args=[], env=server_env(
        home, JUDGE_MCP_MODEL="openai:gpt-fake", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake.openai_url,
        JUDGE_MCP_WARM_EMBEDDINGS="false", **env))
    with (home / "stderr.log").open("a") as err:
        from mcp.client.stdio import stdio_client

        async with Client(stdio_client(params, errlog=err)) as client:
            yield client


def answer(fn: Callable[[str], str]) -> Callable[[Recorded], Scripted]:
    return lambda rec: Scripted(text=fn(rec.text()))


def fenced(text: str, tag: str) -> str:
    found = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)
    assert found, tag
    return found.group(1)


async def test_score_text_scores_each_builtin_rubric(tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(answer(lambda t: '{"reasoning": "fine", "score": 4}' if "Correctness:" in t
                                    else '{"reasoning": "padded", "score": 2}'))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await call(c, "score_text", text="Paris is the capital of France.",
                            rubric=["correctness", "conciseness"], instruction="What is the capital of France?")
    assert [(x["name"], x["score"], x["normalised"]) for x in result["criteria"]] == [
        ("correctness", 4.0, 75.0), ("conciseness", 2.0, 25.0)]
    assert result["total"] == 50.0 and result["usage"]["requests"] == 2 and len(fake_server.requests) == 2


async def test_score_text_with_an_unreadable_judge_is_a_typed_failure(tmp_path: Path,
                                                                      fake_server: FakeModelServer) -> None:
    fake_server.respond_with(answer(lambda t: "I think it is quite good overall."))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        said, result = await no_result(c, "score_text", text="Hello", rubric="helpfulness")
    assert said == "No usable result: no criterion was scored (1 failed). The details follow."
    (only,) = result["criteria"]
    assert (only["score"], only["normalised"], result["total"]) == (None, None, None)
    assert only["failure"]["kind"] == "parse_error"
    assert only["failure"]["raw"] == "I think it is quite good overall."


async def test_a_judge_reply_escaping_half_a_surrogate_pair_is_read_and_the_server_keeps_serving(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Before, the reply's lone surrogate reached the tool result, which could not be encoded: the stdio server died.
    fake_server.respond_with(answer(lambda t: '{"reasoning": "fine \\ud800 enough", "score": 4}'))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await call(c, "score_text", text="Hello", rubric="helpfulness")
        assert (await c.call_tool("list_jobs", {})).structured_content == {"jobs": []}
    (only,) = result["criteria"]
    assert (only["score"], only["reasoning"]) == (4.0, "fine \ufffd enough")


async def test_a_judge_reply_text_holding_a_lone_surrogate_keeps_its_raw_text_and_the_server_keeps_serving(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # The API's JSON body escapes it (json.dumps), so the SDK's reply text holds a lone surrogate itself.
    fake_server.respond_with(lambda rec: Scripted(text="I cannot \udfff say."))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        said, result = await no_result(c, "score_text", text="Hello", rubric="helpfulness")
        assert (await c.call_tool("list_jobs", {})).structured_content == {"jobs": []}
    assert said == "No usable result: no criterion was scored (1 failed). The details follow."
    assert result["criteria"][0]["failure"]["raw"] == "I cannot \ufffd say."


async def test_score_text_with_an_agent_scores_faithfulness_against_its_guidelines(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    guideline = "Customers may return unused products within 30 days of delivery."
    fake_server.respond_with(answer(lambda t: '{"score": 5}' if guideline in fenced(t, "context_1") else '{"score": 1}'))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        agent = await call(c, "create_agent", name="Support", system_prompt="You judge support replies.",
                           rag_config={"top_k": 2, "similarity_threshold": 0.0})
        await call(c, "upload_guideline", agent_id=agent["id"], text=guideline, filename="returns.md")
        result = await call(c, "score_text", text="You can return it within 30 days.", rubric="faithfulness",
                            instruction="How long do I have to return a product?", agent_id=agent["id"])
    assert (result["criteria"][0]["score"], result["total"]) == (5.0, 100.0)


async def test_compare_to_reference_through_the_model_and_without_it(tmp_path: Path,
                                                                     fake_server: FakeModelServer) -> None:
    fake_server.respond_with(answer(lambda t: '{"verdict": "incorrect", "missing": [], "wrong": ["the city"]}'))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        same = await call(c, "compare_to_reference", text="The Eiffel Tower!", reference="eiffel tower")
        calls_after_match = len(fake_server.requests)
        judged = await call(c, "compare_to_reference", text="Lyon", reference="Paris",
                            instruction="What is the capital of France?")
    assert (same["verdict"], same["decided_by"], calls_after_match) == ("equivalent", "normalised_match", 0)
    assert (judged["verdict"], judged["wrong"], judged["usage"]["requests"]) == ("incorrect", ["the city"], 1)


async def test_compare_to_reference_asks_the_model_when_only_a_sign_differs(tmp_path: Path,
                                                                            fake_server: FakeModelServer) -> None:
    # Before: "-5" against "5" was "equivalent" by normalised match, without a model call.
    fake_server.respond_with(answer(lambda t: '{"verdict": "incorrect", "missing": [], "wrong": ["the sign"]}'))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        judged = await call(c, "compare_to_reference", text="-5", reference="5", instruction="What is 2 + 3?")
    assert (judged["verdict"], judged["decided_by"], len(fake_server.requests)) == ("incorrect", "model", 1)


async def test_compare_to_reference_with_an_unreadable_judge_gives_no_verdict(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(answer(lambda t: "Close enough, I suppose."))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        said, result = await no_result(c, "compare_to_reference", text="Lyon", reference="Paris")
    assert said.startswith("No usable result: the judge's verdict could not be read (parse_error: ")
    assert (result["verdict"], result["failure"]["kind"], result["failure"]["raw"]) == (
        None, "parse_error", "Close enough, I suppose.")


def longer_wins(text: str) -> str:
    a, b = fenced(text, "response_a"), fenced(text, "response_b")
    return '{"winner": "Response A"}' if len(a) > len(b) else '{"winner": "Response B"}'


async def test_rank_texts_round_robin_states_its_calls_first_and_ranks(tmp_path: Path,
                                                                       fake_server: FakeModelServer) -> None:
    fake_server.respond_with(answer(longer_wins))
    seen: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("rank_texts", {"instruction": "Describe autumn.", "candidates": [
            "Leaves.", "Leaves fall and the air cools.", "Red leaves."]}, progress_callback=on_progress)
    assert not result.is_error
    ranked = result.structured_content
    assert [r["index"] for r in ranked["ranking"]] == [1, 2, 0] and ranked["planned_model_calls"] == 6
    assert len(fake_server.requests) == 6 and ranked["usage"]["requests"] == 6
    assert seen[0] == "round_robin: 3 games in both orders, 6 model calls planned" and len(seen) == 4


async def test_rank_texts_reports_a_judge_with_position_bias(tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(answer(lambda t: '{"winner": "Response A"}'))  # always the one shown first
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await call(c, "rank_texts", instruction="Describe autumn.", candidates=["One.", "Two.", "Three."])
    assert result["inconsistent_games"] == 3 and result["ties"] == 0
    assert result["position_bias"] == {"first_shown_wins": 6, "second_shown_wins": 0, "ties": 0,
                                       "inconsistent_games": 3, "first_shown_share": 1.0, "detected": True,
                                       "leans": "first"}
    assert {g["consistent"] for g in result["games"]} == {False}


async def test_rank_texts_with_an_unreadable_judge_reports_failed_games_not_ties(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(answer(lambda t: "Both have merits."))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        said, result = await no_result(c, "rank_texts", instruction="Describe autumn.",
                                       candidates=["One.", "Two."], method="tournament")
    assert said == "No usable result: every game failed (1). The details follow."
    (game,) = result["games"]
    assert (game["outcome"], result["failed_games"], result["ties"], game["decided_by_judge"]) == (
        "failed", 1, 0, False)
    assert [o["raw_responses"][-1] for o in game["orders"]] == ["Both have merits.", "Both have merits."]


async def test_rank_texts_refuses_a_plan_above_the_setting(tmp_path: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake_server, JUDGE_MCP_RANK_MAX_CALLS="4") as c:
        message = await error_of(c, "rank_texts", instruction="x", candidates=["a", "b", "c"])
    assert "needs 6 model calls, above the limit of 4 (setting JUDGE_MCP_RANK_MAX_CALLS)" in message
    assert fake_server.requests == []


def rag_judge(text: str) -> str:
    if "claims of an answer" in text:
        return ('{"claims": [{"claim": 1, "verdict": "supported", "context": 1}, '
                '{"claim": 2, "verdict": "contradicted", "context": 1}]}')
    if "retrieved contexts: does each" in text:
        return '{"contexts": [{"context": 1, "relevant": true}]}'
    return '{"score": 4}'


async def test_evaluate_rag_answer_with_contexts_from_an_agents_guidelines(tmp_path: Path,
                                                                           fake_server: FakeModelServer) -> None:
    fake_server.respond_with(answer(rag_judge))
    guideline = "The brand blue is HEX#488EFF. The logo is never recoloured."
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        agent = await call(c, "create_agent", name="Brand", system_prompt="You judge brand use.",
                           rag_config={"top_k": 3, "similarity_threshold": 0.0})
        await call(c, "upload_guideline", agent_id=agent["id"], text=guideline, filename="brand.md")
        result = await call(c, "evaluate_rag_answer", question="What is the brand blue?",
                            answer="The brand blue is HEX#488EFF. The logo may be recoloured.", agent_id=agent["id"])
    assert [(x["verdict"], x["chunk"], x["source"]) for x in result["claims"]] == [
        ("supported", guideline, "brand.md#0"), ("contradicted", guideline, "brand.md#0")]
    assert (result["faithfulness"]["score"], result["answer_relevance"]["score"],
            result["context_relevance"]["score"]) == (0.5, 4.0, 1.0)
    assert all(guideline in r.text() for r in fake_server.requests if "Context 1:" in r.text())


async def test_evaluate_rag_answer_with_an_unreadable_judge_scores_nothing(tmp_path: Path,
                                                                           fake_server: FakeModelServer) -> None:
    fake_server.respond_with(answer(lambda t: "Mostly fine."))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        said, result = await no_result(c, "evaluate_rag_answer", question="q?", answer="It is blue.",
                                       contexts=["It is red."])
    assert said == "No usable result: no judgement could be read (parse_error; parse_error; parse_error). " \
                   "The details follow."
    parts = (result["faithfulness"], result["answer_relevance"], result["context_relevance"])
    assert [(p["score"], p["failure"]["kind"], p["failure"]["raw"]) for p in parts] == [
        (None, "parse_error", "Mostly fine.")] * 3
    assert [c["verdict"] for c in result["claims"]] == [None]


STEPS = [{"tool": "search", "arguments": {"q": "flights"}, "result": "2 flights"},
         {"tool": "book", "arguments": {"id": 1}, "result": {"error": "card declined"}},
         {"tool": "email", "arguments": {"to": "user"}, "result": "sent: booked!"}]


async def test_evaluate_trajectory_checks_first_then_judges(tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(answer(lambda t: '{"goal_reached": false, "unnecessary_steps": [], '
                                              '"ignored_failures": [2], "score": 1, "reasoning": "told the user '
                                              'it was booked"}'))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await call(c, "evaluate_trajectory", goal="Book a flight", steps=STEPS,
                            expected_tools=["search", "pay", "book"])
    checks = {x["name"]: x["passed"] for x in result["checks"]["checks"]}
    assert checks == {"expected_tools_used": False, "expected_order": False, "expected_counts": False,
                      "no_repeated_calls": True, "failures_retried": False}
    assert (result["judgement"]["goal_reached"], result["judgement"]["ignored_failures"]) == (False, [2])
    assert "expected_tools_used: FAILED (never called: pay)" in fake_server.requests[0].text()


async def test_evaluate_trajectory_cuts_a_steps_huge_arguments_in_the_prompt_like_its_result(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Before: a step's 1 MB of arguments reached the model's prompt whole (only results were cut at 4,000).
    fake_server.respond_with(answer(lambda t: '{"goal_reached": true, "unnecessary_steps": [], '
                                              '"ignored_failures": [], "score": 5, "reasoning": "done"}'))
    steps = [{"tool": "search", "arguments": {"q": "x" * 1_000_000}, "result": "found"}]
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        await call(c, "evaluate_trajectory", goal="Find it", steps=steps)
    sent = fake_server.requests[0].text()
    assert '{"q": "' + "x" * 3993 + "… [996009 more characters]" in sent and "x" * 4000 not in sent


async def test_evaluate_trajectory_with_an_unreadable_judge_keeps_the_checks(tmp_path: Path,
                                                                             fake_server: FakeModelServer) -> None:
    fake_server.respond_with(answer(lambda t: json.dumps({"goal": "maybe"})))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await call(c, "evaluate_trajectory", goal="Book a flight", steps=STEPS)
    assert result["judgement"]["goal_reached"] is None and result["judgement"]["failure"]["kind"] == "parse_error"
    assert result["passed_checks"] is False and len(fake_server.requests) == 2


async def test_evaluate_image_with_no_judge_scoring_any_image_is_an_error_keeping_every_evaluation(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    from tests.test_pairwise import RED

    fake_server.respond_with(answer(lambda t: "A lovely picture."))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        agent = await call(c, "create_agent", name="Brand", system_prompt="Score it.")
        said, result = await no_result(c, "evaluate_image", brief="A red square", images=[RED],
                                       agent_ids=[agent["id"]])
    assert said == "No usable result: no judge scored any image (1 evaluations failed). The details follow."
    (only,) = result["evaluations"]
    assert (only["status"], result["winner_index"]) == ("failed", None)


async def test_evaluate_image_with_one_judge_of_two_failing_is_a_result_counting_the_failure(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    from tests.test_pairwise import RED

    fake_server.respond_with(answer(lambda t: '{"score": 80, "feedback": "ok"}' if "Judge Good" in t
                                    else "A lovely picture."))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        good = await call(c, "create_agent", name="Good", system_prompt="You are Judge Good. Score it.")
        bad = await call(c, "create_agent", name="Bad", system_prompt="You are Judge Bad. Score it.")
        result = await call(c, "evaluate_image", brief="A red square", images=[RED],
                            agent_ids=[good["id"], bad["id"]])
    assert [(r["judges_scored"], r["judges_failed"]) for r in result["ranking"]] == [(1, 1)]


async def test_score_text_refuses_more_criteria_than_one_call_scores_before_any_request(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Before, 300 criteria sent 300 model requests from one call (rank_texts' plan is bounded; this was not).
    fake_server.respond_with(answer(lambda t: '{"reasoning": "ok", "score": 3}'))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        said = await error_of(c, "score_text", text="Hi", criteria=[
            {"name": f"c{i}", "description": "Is it clear?"} for i in range(21)])
    assert said.endswith("criteria: 21 criteria; one call scores at most 20 (each is a model call). Split them "
                         "over several calls, e.g. the first 20, then the rest")
    assert fake_server.requests == []


async def test_score_text_refuses_a_scale_whose_width_would_overflow(tmp_path: Path,
                                                                      fake_server: FakeModelServer) -> None:
    # Before, a score of 3 on the scale -1e308..1e308 was normalised to 0.0 (the width overflowed to inf).
    fake_server.respond_with(answer(lambda t: '{"reasoning": "ok", "score": 3}'))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        said = await error_of(c, "score_text", text="Hi", criteria=[
            {"name": "tone", "description": "Is it polite?", "scale": {"min": -1e308, "max": 1e308}}])
    assert said.endswith('criteria[tone].scale: min and max lie within ±1e+12 (got -1e+308–1e+308), '
                         'e.g. {"min": 1, "max": 5}')
    assert fake_server.requests == []


async def test_score_text_refuses_weights_whose_sum_would_overflow(tmp_path: Path,
                                                                    fake_server: FakeModelServer) -> None:
    # Before, two criteria weighted 1e308 both scored and the total came back null (NaN), as if none had.
    fake_server.respond_with(answer(lambda t: '{"reasoning": "ok", "score": 3}'))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        said = await error_of(c, "score_text", text="Hi", criteria=[
            {"name": "tone", "description": "Is it polite?", "weight": 1e308},
            {"name": "clarity", "description": "Is it clear?", "weight": 1e308}])
    assert said.endswith("criteria[tone].weight: at most 1e+12 (got 1e+308); weights count relative to each "
                         "other, e.g. 1 and 2")
    assert fake_server.requests == []


async def test_score_text_refuses_a_criterion_description_past_the_text_limit_before_any_request(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Before, a criterion's description had no limit (every other text of score_text has JUDGE_MCP_MAX_TEXT_CHARS).
    fake_server.respond_with(answer(lambda t: '{"reasoning": "ok", "score": 3}'))
    async with judge_mcp(tmp_path / "home", fake_server, JUDGE_MCP_MAX_TEXT_CHARS="100") as c:
        said = await error_of(c, "score_text", text="Hi", criteria=[
            {"name": "tone", "description": "Is it polite? " * 10}])
    assert said.endswith("criteria[tone].description is 140 characters; the limit is 100 (JUDGE_MCP_MAX_TEXT_CHARS). "
                         "Shorten it or judge it in parts, e.g. one section per call")
    assert fake_server.requests == []


async def test_pairwise_compare_refuses_an_instruction_past_the_text_limit_before_any_request(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Before, pairwise_compare's instruction had no size limit (every other judge's texts have one): it reached
    # the model whole.
    fake_server.respond_with(answer(lambda t: '{"winner": "A"}'))
    async with judge_mcp(tmp_path / "home", fake_server, JUDGE_MCP_MAX_TEXT_CHARS="100") as c:
        said = await error_of(c, "pairwise_compare", instruction="Say hello. " * 11, candidates=["hi", "hello"],
                              candidate_type="text")
    assert said.endswith("instruction is 121 characters; the limit is 100 (JUDGE_MCP_MAX_TEXT_CHARS). "
                         "Shorten it or judge it in parts, e.g. one section per call")
    assert fake_server.requests == []


async def test_pairwise_compare_refuses_a_text_candidate_past_the_text_limit_before_any_request(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(answer(lambda t: '{"winner": "A"}'))
    async with judge_mcp(tmp_path / "home", fake_server, JUDGE_MCP_MAX_TEXT_CHARS="100") as c:
        said = await error_of(c, "pairwise_compare", instruction="Say hello", candidates=["hi", "h" * 101],
                              candidate_type="text")
    assert said.endswith("candidates[1] is 101 characters; the limit is 100 (JUDGE_MCP_MAX_TEXT_CHARS). "
                         "Shorten it or judge it in parts, e.g. one section per call")
    assert fake_server.requests == []


async def test_pairwise_compare_takes_an_instruction_exactly_at_the_text_limit(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(answer(lambda t: '{"winner": "A"}'))
    async with judge_mcp(tmp_path / "home", fake_server, JUDGE_MCP_MAX_TEXT_CHARS="100") as c:
        result = await call(c, "pairwise_compare", instruction="é" * 100, candidates=["hi", "hello"],
                            candidate_type="text", swap=False)
    assert result["value"] == "Response A" and len(fake_server.requests) == 1


@pytest.mark.parametrize(("candidates", "said"), [
    (["a"], "candidates: give at least two texts to rank (got 1)"),
    (["a", " "], "candidates[1] is empty; every candidate is a non-empty text")])
async def test_rank_texts_in_the_background_refuses_what_the_foreground_refuses_without_a_job(
        tmp_path: Path, fake_server: FakeModelServer, candidates: list[str], said: str) -> None:
    # Before, background: true started a job that failed with the same message.
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        text = await error_of(c, "rank_texts", instruction="Say hi", candidates=candidates, background=True)
        assert await call(c, "list_jobs") == {"jobs": []}
    assert text.endswith(said)
    assert fake_server.requests == []


@pytest.mark.parametrize(("tool", "args", "said"), [
    ("score_text", {"text": " ", "rubric": ["correctness"]}, "text must not be empty, e.g. \"Paris is the capital "
                                                             "of France.\""),
    ("evaluate_trajectory", {"goal": "g", "steps": []}, "steps: give at least one step, e.g. [{\"tool\": \"search\", "
                                                        "\"arguments\": {\"q\": \"x\"}, \"result\": \"...\"}]"),
    ("evaluate_rag_answer", {"question": "q", "answer": "a"}, "contexts: give at least one non-empty passage, e.g. "
                                                              "[\"The tower was built 1887–1889.\"], or agent_id"),
    ("compare_to_reference", {"text": "Paris", "reference": " "}, "reference must not be empty, e.g. \"Paris\""),
    ("pairwise_compare", {"instruction": "x", "candidates": ["a", "b", "c"]},
     "method pairwise compares exactly two candidates (got 3), e.g. [\"/home/me/project/a.png\", "
     "\"/home/me/project/b.png\"]; method viescore scores one or two")])
async def test_a_text_judge_in_the_background_refuses_what_the_foreground_refuses_without_a_job(
        tmp_path: Path, fake_server: FakeModelServer, tool: str, args: dict[str, Any], said: str) -> None:
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        text = await error_of(c, tool, **args, background=True)
        assert await call(c, "list_jobs") == {"jobs": []}
    assert text.endswith(said)
    assert fake_server.requests == []
