"""Daily budgets and caches against two organizations as a team deploys them: a real `judge-mcp` HTTP process with
member tokens of two organizations, model replies from the loopback fake model server (which reports input tokens
from each request's size, so every cost is known exactly from what it received), on both engines.

Every model request reserves its estimated cost before it is sent: samples × jury, rank_texts, 20 concurrent calls
and a background calibration each stop at the budget, never past it, and say what was not judged."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.fake_model_server import FakeModelServer, Recorded, Scripted
from tests.mcp_helpers import JUDGE_MCP, free_port, server_env, wait_for_port

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.usefixtures("on_engine")]  # on both engines

BUDGET = 0.05
PRICE = {"input": 2.0, "output": 10.0}  # USD per million tokens
PRICES = json.dumps({"gpt-fake": PRICE, "gpt-fake-b": PRICE, "gpt-x": PRICE})
OUTPUT_TOKENS = 300
REFUSED = re.compile(r"\$([\d.]+) of \$[\d.]+ spent today \(UTC day [\d-]+\) and this request may cost up to "
                     r"\$([\d.]+); it was not sent")


def input_tokens(rec: Recorded) -> int:
    return len(rec.text().encode()) // 4


def reply(rec: Recorded) -> Scripted:
    """A verdict for whatever was asked; 300 output tokens and input tokens that grow with the request."""
    text = rec.text()
    if "evaluation steps for a grader" in text:
        verdict = '{"steps": ["Read the text.", "Check each claim."]}'
    elif "response_a" in text:
        verdict = '{"winner": "Response A"}'
    else:
        verdict = '{"score": 4, "reasoning": "fine"}'
    return Scripted(text=verdict, input_tokens=input_tokens(rec), output_tokens=OUTPUT_TOKENS, delay_s=0.02)


def cost_of_requests(requests: list[Recorded]) -> float:
    """What the fake server's requests cost at PRICE, from the token counts it reported."""
    return round(sum(round((input_tokens(r) * PRICE["input"] + OUTPUT_TOKENS * PRICE["output"]) / 1e6, 8)
                     for r in requests), 8)


@pytest.fixture
def fake(fake_server: FakeModelServer) -> FakeModelServer:
    fake_server.respond_with(reply)
    return fake_server


@contextmanager
def http_server(home: Path, fake: FakeModelServer, **env: str) -> Iterator[str]:
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    settings = {"JUDGE_MCP_TOKENS": "tok-a=org-a:member,tok-b=org-b:member", "JUDGE_MCP_MODEL": "openai:gpt-fake",
                "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": fake.openai_url,
                "JUDGE_MCP_WARM_EMBEDDINGS": "false", "JUDGE_MCP_PRICES": PRICES, **env}
    with (home / "stderr.log").open("w") as log:
        proc = subprocess.Popen([JUDGE_MCP, "--transport", "http", "--port", str(port)],
                                env=server_env(home, **settings), stdout=subprocess.DEVNULL, stderr=log)
        try:
            assert wait_for_port(port, 30), "the HTTP server did not start within 30 s"
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def budgeted(home: Path, fake: FakeModelServer) -> Any:
    return http_server(home, fake, JUDGE_MCP_DAILY_BUDGET_USD=str(BUDGET))


def http_client(url: str, token: str) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=120)))


async def tool(url: str, token: str, name: str, **args: Any) -> tuple[bool, Any]:
    """(is_error, structured result or error text) of one call on its own connection."""
    async with http_client(url, token) as c:
        result = await c.call_tool(name, args)
    if result.is_error and result.structured_content is not None:  # no usable result: its details are kept
        return True, result.structured_content
    return bool(result.is_error), result.content[0].text if result.is_error else result.structured_content


async def spent_today(url: str, token: str = "tok-a") -> float:
    error, usage = await tool(url, token, "get_usage", days=1)
    assert not error, usage
    return float(usage["today_cost_usd"])


def assert_stopped_at_the_budget(spent: float, requests: list[Recorded], results: Any) -> None:
    """The spend is exactly what the fake server's requests cost, within the budget; and each request refused
    (its message, anywhere in `results`) would indeed have passed it: the stop was not early."""
    assert spent == pytest.approx(cost_of_requests(requests), abs=1e-8)
    assert spent <= BUDGET
    refused = REFUSED.findall(json.dumps(results))
    assert refused and all(float(before) + float(estimate) > BUDGET for before, estimate in refused)


# --- item 5: every request reserves its estimate before it is sent ------------------------------------------

async def test_a_jury_with_samples_stops_at_the_daily_budget(tmp_path: Path, fake: FakeModelServer) -> None:
    with budgeted(tmp_path / "home", fake) as url:
        error, result = await tool(url, "tok-a", "pairwise_compare", instruction="Pick the better answer.",
                                   candidates=["Rayleigh scattering makes the sky blue.", "Blue."],
                                   candidate_type="text", samples=8, models=["openai:gpt-fake", "openai:gpt-fake-b"])
        spent = await spent_today(url)
    assert not error, result
    assert_stopped_at_the_budget(spent, fake.requests, result)
    assert result["usage"]["budget_exceeded"] is True
    assert result["usage"]["requests"] + result["usage"]["refused_requests"] == 2 * 8 * 2
    assert result["usage"]["requests"] == len(fake.requests) < 32  # before: all 32 sent, 2.14× the budget


async def test_rank_texts_over_eleven_candidates_stops_at_the_daily_budget(tmp_path: Path,
                                                                          fake: FakeModelServer) -> None:
    with budgeted(tmp_path / "home", fake) as url:
        error, ranking = await tool(url, "tok-a", "rank_texts", instruction="Describe autumn.",
                                    candidates=[f"Autumn, answer {i}: " + "leaves " * i for i in range(11)])
        spent = await spent_today(url)
    assert not error, ranking
    unplayed = [g for g in ranking["games"] if g["outcome"] == "failed"]
    assert_stopped_at_the_budget(spent, fake.requests, unplayed)
    assert ranking["usage"]["budget_exceeded"] is True and len(ranking["games"]) == 55
    assert ranking["failed_games"] == len(unplayed) > 40  # before: 110 requests sent, 7.4× the budget
    assert ranking["usage"]["requests"] == len(fake.requests)


async def test_a_knockout_stops_at_the_round_the_budget_ran_out_and_sends_no_one_through_by_default(
        tmp_path: Path, fake: FakeModelServer) -> None:
    with budgeted(tmp_path / "home", fake) as url:
        error, ranking = await tool(url, "tok-a", "rank_texts", instruction="Describe autumn.", method="tournament",
                                    candidates=[f"Autumn, answer {i}: " + "leaves " * i for i in range(11)])
    assert not error, ranking
    last = max(g["round"] for g in ranking["games"])
    unpaid = [g for g in ranking["games"] if any(o["failure_kind"] == "budget_exceeded" for o in g["orders"])]
    assert unpaid and all(g["round"] == last and g["advanced"] is None for g in unpaid)
    assert all(r["round_reached"] <= last + 1 for r in ranking["ranking"])
    assert sum(r["round_reached"] == 5 for r in ranking["ranking"]) == 0  # no champion nobody judged


async def test_twenty_concurrent_calls_stop_together_at_the_daily_budget(tmp_path: Path,
                                                                         fake: FakeModelServer) -> None:
    results: list[Any] = [None] * 20

    async def one(i: int) -> None:
        results[i] = await tool(url, "tok-a", "pairwise_compare", instruction=f"Pick the better answer ({i}).",
                                candidates=["Yes, it is.", "No."], candidate_type="text", cache=False)

    with budgeted(tmp_path / "home", fake) as url:
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(one, i)
        spent = await spent_today(url)
        error_b, from_b = await tool(url, "tok-b", "pairwise_compare", instruction="Pick the better answer.",
                                     candidates=["Yes, it is.", "No."], candidate_type="text")
    # A call whose every request the budget refused has no verdict: an error result keeping its details.
    assert all(not error or (r["value"] == "Failed" and r["usage"]["budget_exceeded"]) for error, r in results)
    assert_stopped_at_the_budget(spent, fake.requests[:-2], results)  # the last two requests are B's
    assert sum(r["usage"]["requests"] for _, r in results) + 2 == len(fake.requests) < 40  # before: 40, 2.66×
    assert not error_b and from_b["usage"]["requests"] == 2 and from_b["failures"] == []  # B's own budget


async def test_a_background_calibration_stops_at_the_daily_budget(tmp_path: Path, fake: FakeModelServer) -> None:
    dataset = "\n".join(json.dumps({"instruction": f"Question {i}?", "candidates": [f"good {i}", "bad"],
                                    "human_winner": "A"}) for i in range(40))
    with budgeted(tmp_path / "home", fake) as url:
        error, started = await tool(url, "tok-a", "calibrate_judge", judge="pairwise_compare", dataset=dataset,
                                    background=True)
        assert not error, started
        with anyio.fail_after(120):
            while True:
                _, job = await tool(url, "tok-a", "get_job", job_id=started["job_id"])
                if job["status"] != "working":
                    break
                await anyio.sleep(0.1)
        spent = await spent_today(url)
    report = job["result"]
    assert job["status"] == "completed" and report["usage"]["budget_exceeded"] is True
    assert_stopped_at_the_budget(spent, fake.requests, report["results"])
    assert report["judged"] + report["failed"] == 40 and report["failed"] > 30  # before: 80 requests, 5.3×
    assert all(r["judge"] is None for r in report["results"] if r["failure"])  # nothing guessed for them


async def test_align_judge_on_a_prompt_asset_stops_at_the_daily_budget_and_keeps_no_version(
        tmp_path: Path, fake: FakeModelServer) -> None:
    from tests.test_align_pairwise_as_used import PAIRS, WRITER, current_judge, pair_judge

    def respond(rec: Recorded) -> Scripted:
        if WRITER in rec.text():
            answer = Scripted(text=json.dumps({"instructions": "REVISED: the right answer wins.", "rationale": "r"}))
        else:
            answer = pair_judge(lambda n, t: "REVISED" in t or current_judge(n))(rec)
        return Scripted(text=answer.text, input_tokens=input_tokens(rec), output_tokens=OUTPUT_TOKENS)

    fake.respond_with(respond)
    with http_server(tmp_path / "home", fake, JUDGE_MCP_TOKENS="tok-a=org-a",
                     JUDGE_MCP_DAILY_BUDGET_USD=str(BUDGET)) as url:
        error, report = await tool(url, "tok-a", "align_judge", judge="pairwise_compare",
                                   prompt_id="text/assessment/pairwise", dataset=PAIRS, background=False)
        spent = await spent_today(url)
        _, compared = await tool(url, "tok-a", "pairwise_compare", instruction="Question 1?",
                                 candidates=["PAIR-1 first", "PAIR-1 second"],
                                 prompt_id="text/assessment/pairwise@v2")
    assert not error, report
    assert (report["kept"], report["new_prompt_id"], report["usage"]["budget_exceeded"]) == (False, None, True)
    assert report["conclusion"] == "no change: no candidate revision could be read (budget_exceeded)"
    assert_stopped_at_the_budget(spent, fake.requests, report["candidates"])
    assert report["usage"]["cost_usd"] == pytest.approx(spent, abs=1e-8)
    assert "no prompt asset 'text/assessment/pairwise@v2'" in compared


def byte_level_reply(rec: Recorded) -> Scripted:
    """reply(), with input tokens counted as a byte-level BPE counts characters its vocabulary lacks (emoji,
    hieroglyphs): one token a byte of each non-ASCII character, English at 4 characters a token."""
    data = rec.text().encode()
    other = sum(b >= 0x80 for b in data)
    return dataclasses.replace(reply(rec), input_tokens=other + (len(data) - other) // 4)


async def test_a_text_of_characters_split_into_bytes_is_not_sent_past_the_daily_budget(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Before: 12,000 hieroglyphs (48 KB) were estimated at 3 bytes a token ($0.044, within $0.05) and billed at a
    # token a byte: one request spent $0.1, twice the budget.
    fake_server.respond_with(byte_level_reply)
    with budgeted(tmp_path / "home", fake_server) as url:
        error, result = await tool(url, "tok-a", "score_text", text="\U00013000" * 12_000,
                                   criteria=[{"name": "clarity", "description": "Is it clear?"}])
        spent = await spent_today(url)
    assert (spent, len(fake_server.requests)) == (0.0, 0)
    assert error and result["criteria"][0]["failure"]["kind"] == "budget_exceeded"


GPT_4O_MINI_IMAGE = 2_833 + 8 * 5_667  # what gpt-4o-mini bills a 2048 × 768 image at high detail (8 tiles)


def images_of(rec: Recorded) -> int:
    return sum(1 for m in rec.body.get("messages", []) if isinstance(m.get("content"), list)
               for part in m["content"] if isinstance(part, dict) and part.get("type") == "image_url")


def image_billing_reply(rec: Recorded) -> Scripted:
    """reply(), with each image counted as gpt-4o-mini's API counts one of 2048 × 768 px."""
    return dataclasses.replace(reply(rec), input_tokens=input_tokens(rec) + images_of(rec) * GPT_4O_MINI_IMAGE)


async def test_an_image_request_to_gpt_4o_mini_is_reserved_at_what_it_bills_an_image(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Before: each image was estimated at 1,600 tokens ($0.0012 for the request, within $0.005); gpt-4o-mini
    # bills 48,169 tokens an image: the request spent $0.0149, three times the budget.
    import base64
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (2048, 768), "navy").save(out, "PNG")
    image = "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()
    fake_server.respond_with(image_billing_reply)
    with http_server(tmp_path / "home", fake_server, JUDGE_MCP_DAILY_BUDGET_USD="0.005",
                     JUDGE_MCP_MODEL="openai:gpt-4o-mini") as url:
        error, result = await tool(url, "tok-a", "pairwise_compare", instruction="Pick the calmer poster.",
                                   candidates=[image, image], candidate_type="image", swap=False)
        spent = await spent_today(url)
    assert (spent, len(fake_server.requests)) == (0.0, 0)
    assert error and "the daily budget of organization 'org-a' cannot cover another request" in json.dumps(result)


async def test_an_unpriced_model_is_refused_while_a_budget_is_set(tmp_path: Path, fake: FakeModelServer) -> None:
    with budgeted(tmp_path / "home", fake) as url:
        error, message = await tool(url, "tok-a", "pairwise_compare", instruction="Pick one.", candidates=["a", "b"],
                                    candidate_type="text", models=["openai:gpt-fake", "openai:gpt-free"])
    assert error and message == (
        "Error executing tool pairwise_compare: server configuration: model 'openai:gpt-free' has no known price, "
        "and organization 'org-a' has a daily budget ($0.05): its requests could not be counted against the "
        "budget, so none is sent (name a model with a price, or set its price (USD per million tokens) in "
        'JUDGE_MCP_PRICES, e.g. {"gpt-free": {"input": 0.4, "output": 1.6}})')
    assert fake.requests == []


async def test_a_model_is_not_priced_by_a_name_it_starts_with(tmp_path: Path, fake: FakeModelServer) -> None:
    """gpt-x has a price; gpt-x-2 is another model, and has none."""
    with budgeted(tmp_path / "home", fake) as url:
        error, message = await tool(url, "tok-a", "pairwise_compare", instruction="Pick one.", candidates=["a", "b"],
                                    candidate_type="text", models=["openai:gpt-x", "openai:gpt-x-2"])
    assert error and "model 'openai:gpt-x-2' has no known price" in message and fake.requests == []


async def test_the_unpriced_models_cost_is_null_without_a_budget(tmp_path: Path, fake: FakeModelServer) -> None:
    with http_server(tmp_path / "home", fake) as url:
        error, result = await tool(url, "tok-a", "pairwise_compare", instruction="Pick one.", candidates=["a", "b"],
                                   candidate_type="text", models=["openai:gpt-x", "openai:gpt-x-2"])
    assert not error and result["usage"]["cost_usd"] is None and len(fake.requests) == 4


# --- item 8: caches are per organization and honour cache: false ---------------------------------------------

CRITERION = [{"name": "secret-rubric", "description": "Does it mention the Zanzibar merger terms?"}]


def steps_asked(fake: FakeModelServer) -> int:
    return sum("evaluation steps for a grader" in r.text() for r in fake.requests)


async def test_another_organization_gets_no_g_eval_steps_from_the_first_ones(tmp_path: Path,
                                                                            fake: FakeModelServer) -> None:
    with http_server(tmp_path / "home", fake) as url:
        _, from_a = await tool(url, "tok-a", "score_text", text="One.", criteria=CRITERION, method="g_eval")
        _, from_b = await tool(url, "tok-b", "score_text", text="Two.", criteria=CRITERION, method="g_eval")
        _, again_a = await tool(url, "tok-a", "score_text", text="Three.", criteria=CRITERION, method="g_eval")
    assert (from_a["steps_cached"], from_b["steps_cached"], again_a["steps_cached"]) == ([], [], ["secret-rubric"])
    assert steps_asked(fake) == 2  # A's, then B's own; A's second call from A's cache


async def test_cache_false_asks_for_the_g_eval_steps_again(tmp_path: Path, fake: FakeModelServer) -> None:
    with http_server(tmp_path / "home", fake) as url:
        await tool(url, "tok-a", "score_text", text="One.", criteria=CRITERION, method="g_eval")
        _, fresh = await tool(url, "tok-a", "score_text", text="Two.", criteria=CRITERION, method="g_eval",
                              cache=False)
    assert fresh["steps_cached"] == [] and fresh["usage"]["requests"] == 2 and steps_asked(fake) == 2


async def test_cache_false_asks_a_calibrations_judge_again(tmp_path: Path, fake: FakeModelServer) -> None:
    dataset = "\n".join(json.dumps({"instruction": f"Question {i}?", "candidates": [f"good {i}", "bad"],
                                    "human_winner": "A"}) for i in range(2))
    with http_server(tmp_path / "home", fake) as url:
        for cache in (True, True, False):
            error, report = await tool(url, "tok-a", "calibrate_judge", judge="pairwise_compare", dataset=dataset,
                                       background=False, cache=cache)
            assert not error, report
    assert len(fake.requests) == 4 + 0 + 4  # the second from A's cache; cache: false asks both orders again
