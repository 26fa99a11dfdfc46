"""The one reading path as the tools use it: read_as, declared scales, typed failures, backend
errors that are not replies, and every request counted. Real OpenAI SDK, fake model server."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from server.app import create_server
from server.settings import Settings
from tests.conftest import make_settings
from tests.fake_model_server import FakeModelServer, Recorded, Scripted
from tests.mcp_helpers import call, error_of, outcome
from tests.test_analysis import GOOD, category_reply
from tests.test_image_tools import png, verdict

pytestmark = pytest.mark.anyio
IMAGE = base64.b64encode(png()).decode()


@pytest.fixture
async def c(model_settings: Settings) -> Any:
    async with Client(create_server(model_settings)) as client:
        yield client


async def judge(c: Any, name: str = "alpha", **extra: Any) -> str:
    created = await call(c, "create_agent", name=name, system_prompt=f"You are judge {name}.", **extra)
    return str(created["id"])


async def evaluate(c: Any) -> dict[str, Any]:
    """Each call asks the model (cache: false): these tests follow the requests a repeated call sends."""
    return await outcome(c, "evaluate_image", brief="a red square", images=[IMAGE], cache=False)


# --- declared scales -----------------------------------------------------------------------

async def test_a_1_to_10_agents_rating_is_mapped_to_0_100_keeping_raw_score_and_scale(
        c: Any, fake_server: FakeModelServer) -> None:
    await judge(c, score_scale={"min": 1, "max": 10})
    fake_server.respond_with(lambda rec: Scripted(text="Faithful to the brief.\n\nRating: [[7]]"))
    (e,) = (await evaluate(c))["evaluations"]
    assert (e["status"], e["raw_score"], e["score"]) == ("ok", 7, pytest.approx(66.6667, abs=1e-4))
    assert e["scale"] == {"min": 1, "max": 10} and e["read_as"] == "convention:fastchat"


async def test_a_json_reply_is_read_as_json(c: Any, fake_server: FakeModelServer) -> None:
    await judge(c)
    fake_server.respond_with(lambda rec: Scripted(text=verdict(80)))
    (e,) = (await evaluate(c))["evaluations"]
    assert (e["score"], e["raw_score"], e["read_as"]) == (80, 80, "json")


async def test_a_rating_above_the_declared_scale_is_out_of_range_not_clamped(c: Any, fake_server: FakeModelServer) -> None:
    await judge(c, score_scale={"min": 1, "max": 10})
    fake_server.respond_with(lambda rec: Scripted(text="Outstanding. Rating: [[11]]"))
    (e,) = (await evaluate(c))["evaluations"]
    assert (e["status"], e["score"], e["failure_kind"]) == ("failed", None, "out_of_range")
    assert len(fake_server.requests) == 1  # a reading off the scale is not asked again


async def test_a_json_score_above_100_on_the_default_scale_is_out_of_range(c: Any, fake_server: FakeModelServer) -> None:
    await judge(c)
    fake_server.respond_with(lambda rec: Scripted(text=verdict(150)))
    (e,) = (await evaluate(c))["evaluations"]
    assert (e["status"], e["failure_kind"]) == ("failed", "out_of_range") and "0–100" in e["error"]


async def test_a_score_out_of_another_maximum_is_out_of_range(c: Any, fake_server: FakeModelServer) -> None:
    await judge(c, score_scale={"min": 1, "max": 10})
    fake_server.respond_with(lambda rec: Scripted(text="Decent.\nScore: 4/5"))
    (e,) = (await evaluate(c))["evaluations"]
    assert e["failure_kind"] == "out_of_range" and "out of 5" in e["error"]


async def test_two_different_ratings_are_an_ambiguous_failure(c: Any, fake_server: FakeModelServer) -> None:
    await judge(c, score_scale={"min": 1, "max": 10})
    fake_server.respond_with(lambda rec: Scripted(text="A rating of [[9]]. Improved, it would earn [[10]]."))
    (e,) = (await evaluate(c))["evaluations"]
    assert (e["failure_kind"], e["raw_response"]) == ("ambiguous", "A rating of [[9]]. Improved, it would earn [[10]].")


async def test_a_scale_whose_min_is_not_below_max_is_refused(c: Any) -> None:
    message = await error_of(c, "create_agent", name="x", system_prompt="judge", score_scale={"min": 10, "max": 1})
    assert "score_scale: min must be below max" in message


async def test_update_agent_changes_the_scale(c: Any) -> None:
    agent_id = await judge(c)
    updated = await call(c, "update_agent", agent_id=agent_id, score_scale={"min": 0, "max": 10})
    assert updated["score_scale"] == {"min": 0, "max": 10}
    assert (await call(c, "get_agent", agent_id=agent_id))["score_scale"] == {"min": 0, "max": 10}


async def test_viescore_checks_its_0_to_10_scale(c: Any, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text='{"score": 12, "reasoning": "great"}'))
    result = await outcome(c, "pairwise_compare", instruction="make it red", candidates=[IMAGE], method="viescore")
    assert result["value"] == "Failed" and result["failures"][0]["kind"] == "out_of_range"


async def test_viescore_reads_a_rating_convention_for_the_scalar_prompt(c: Any, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text="The edit follows the instruction.\nScore: 8/10"))
    result = await outcome(c, "pairwise_compare", instruction="make it red", candidates=[IMAGE], method="viescore")
    assert (result["value"], result["read_as"]) == (8, ["convention:labelled"])


# --- pairwise through the reading path ------------------------------------------------------

async def test_arena_hard_verdict_gives_winner_and_margin_in_both_orders(c: Any, fake_server: FakeModelServer) -> None:
    def answer(rec: Recorded) -> Scripted:
        first_is_red = "<response_a>\nred" in rec.text()
        return Scripted(text="My final verdict is: " + ("[[A>>B]]" if first_is_red else "[[B>>A]]"))

    fake_server.respond_with(answer)
    result = await outcome(c, "pairwise_compare", instruction="say red", candidates=["red", "blue"], candidate_type="text")
    assert (result["value"], result["consistent"], result["margin"]) == ("Response A", True, "strong")
    assert result["read_as"] == ["convention:arena_hard", "convention:arena_hard"]


async def test_neither_is_a_failure_never_a_tie(c: Any, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text='{"winner": "neither"}'))
    result = await outcome(c, "pairwise_compare", instruction="x", candidates=["a", "b"], candidate_type="text", swap=False)
    assert result["value"] == "Failed" and result["failures"][0]["kind"] == "refusal"
    assert len(fake_server.requests) == 1


async def test_two_different_pair_verdicts_are_ambiguous(c: Any, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text="On style [[A]]; on facts [[B]]."))
    result = await outcome(c, "pairwise_compare", instruction="x", candidates=["a", "b"], candidate_type="text", swap=False)
    assert result["value"] == "Failed" and result["failures"][0]["kind"] == "ambiguous"


# --- backend errors are not replies ---------------------------------------------------------

async def test_a_rejected_key_is_one_request_and_a_typed_backend_error(c: Any, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(status=401, text="Incorrect API key provided"))
    result = await outcome(c, "pairwise_compare", instruction="x", candidates=["a", "b"], candidate_type="text")
    assert len(fake_server.requests) == 1
    assert result["value"] == "Failed" and {f["kind"] for f in result["failures"]} == {"backend_error"}
    assert all(f"the API key was rejected by {fake_server.openai_url}" in f["message"] for f in result["failures"])
    assert [o["raw_responses"] for o in result["meta"]["orders"]] == [[], []]


async def test_a_format_400_turns_structured_output_down_for_that_model_and_retries_the_call(
        c: Any, fake_server: FakeModelServer) -> None:
    await judge(c)
    fake_server.enqueue(Scripted(status=400, text="response_format json_schema is not supported by this model"),
                        verdict(70), verdict(75))
    first = (await evaluate(c))["evaluations"][0]
    second = (await evaluate(c))["evaluations"][0]
    formats = [r.body.get("response_format", {}).get("type") for r in fake_server.requests]
    assert formats == ["json_schema", "json_object", "json_object"]
    assert (first["score"], first["usage"]["requests"], second["score"]) == (70, 2, 75)


async def test_another_400_is_a_typed_failure_with_the_providers_message(c: Any, fake_server: FakeModelServer) -> None:
    await judge(c)
    fake_server.enqueue(Scripted(status=400, text="This model's maximum context length is 8192 tokens"), verdict(70))
    failed = (await evaluate(c))["evaluations"][0]
    later = (await evaluate(c))["evaluations"][0]
    assert failed["failure_kind"] == "backend_error" and "maximum context length is 8192 tokens" in failed["error"]
    formats = [r.body.get("response_format", {}).get("type") for r in fake_server.requests]
    assert formats == ["json_schema", "json_schema"] and later["score"] == 70


async def test_empty_choices_fail_one_judge_and_keep_the_others(c: Any, fake_server: FakeModelServer) -> None:
    await judge(c, "alpha")
    await judge(c, "beta")

    def respond(rec: Recorded) -> Scripted:
        if "beta" in rec.body["messages"][0]["content"]:
            return Scripted(empty_choices=True)
        return Scripted(text=verdict(60))

    fake_server.respond_with(respond)
    result = await evaluate(c)
    by_name = {e["agent_name"]: e for e in result["evaluations"]}
    assert (by_name["alpha"]["status"], by_name["alpha"]["score"]) == ("ok", 60)
    assert by_name["beta"]["failure_kind"] == "backend_error" and "no choices" in by_name["beta"]["error"]
    assert result["ranking"][0]["judges_scored"] == 1 and result["ranking"][0]["judges_failed"] == 1


# --- every request counted ------------------------------------------------------------------

async def test_a_repair_round_is_counted_in_evaluate_image_usage(c: Any, fake_server: FakeModelServer) -> None:
    await judge(c)
    fake_server.enqueue("Looks good to me.", verdict(64))
    (e,) = (await evaluate(c))["evaluations"]
    assert (e["score"], e["read_as"], e["usage"]["requests"]) == (64, "repair", 2)


async def test_evaluate_analysis_counts_repairs_and_retries_in_model_calls(tmp_path: Path,
                                                                         fake_server: FakeModelServer) -> None:
    settings = make_settings(tmp_path / "home", model="openai:gpt-fake", openai_api_key="sk-test",
                             openai_base_url=fake_server.openai_url, max_retry_wait_s=0.5)
    replies = iter([Scripted(status=503, text="overloaded"), Scripted(text="not json")])

    def respond(rec: Recorded) -> Scripted:
        if "general_quality" in json.dumps(rec.body) or "evidence_support" in rec.body["messages"][0]["content"]:
            following = next(replies, None)
            if following is not None:
                return following
        return category_reply(rec)

    fake_server.respond_with(respond)
    async with Client(create_server(settings)) as client:
        result = await call(client, "evaluate_analysis", analysis=json.dumps(GOOD), input_url="acme-robotics.com")
    assert len(fake_server.requests) == 4 and result["usage"]["model_calls"] == 4


async def test_viescore_takes_a_declared_scale_per_call(c: Any, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text='{"score": 4, "reasoning": "fine"}'))
    narrow = await outcome(c, "pairwise_compare", instruction="x", candidates=[IMAGE], method="viescore",
                        score_scale={"min": 1, "max": 5})
    off = await outcome(c, "pairwise_compare", instruction="x", candidates=[IMAGE], method="viescore",
                     score_scale={"min": 0, "max": 3})
    assert (narrow["value"], narrow["meta"]["scale"]) == (4, [1, 5])
    assert off["value"] == "Failed" and off["failures"][0]["kind"] == "out_of_range"


async def test_evaluate_analysis_says_how_each_category_was_read(c: Any, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(category_reply)
    result = await call(c, "evaluate_analysis", analysis=json.dumps(GOOD), input_url="acme-robotics.com")
    assert {name: r["read_as"] for name, r in result["categories"].items()} == {
        "general_quality": "json", "founder_resonance": "json"}
