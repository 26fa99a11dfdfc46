"""align_judge on pairwise_compare datasets as hosts use it: a real `judge-mcp` process, the real MCP client, the
loopback fake model behind the real OpenAI SDK scripted as pairwise judges whose agreement with the people's
winners is known. The agent's prompt is the judge's rules, put before the pairwise prompt asset."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from judges.calibration.align import split
from tests.fake_model_server import FakeModelServer, Recorded, Scripted
from tests.test_certify_as_used import assert_test_texts_only_judged
from tests.test_text_tools_as_used import judge_mcp

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
WRITER = "You improve an LLM judge."
RULES = "Judging rules (they come first):\n"
# PAIR-0 … PAIR-19 won by A (the first candidate), PAIR-20 … PAIR-39 by B; one pair the people tie on.
PAIRS = [{"id": f"PAIR-{n}", "instruction": f"Question {n}?", "candidates": [f"PAIR-{n} first", f"PAIR-{n} second"],
          "human_winner": "A" if n < 20 else "B"} for n in range(40)]
TIED = {"id": "TIED", "instruction": "Question tied?", "candidates": ["TIED first", "TIED second"],
        "human_winner": "Tie"}
TRAIN, TEST = split(["pass"] * 20 + ["fail"] * 20, 0, 0.3)  # type: ignore[arg-type]  # align_judge's default split
HARD = {n for n in range(40) if n % 3 == 0 or (n in TEST and n % 2 == 0)}  # the current judge gets these wrong


def current_judge(n: int) -> bool:
    return n not in HARD


def pair_judge(right: Callable[[int, str], bool]) -> Callable[[Recorded], Scripted]:
    """Names the candidate the people chose for PAIR-n when right(n, the request's text), else the other one, in
    whichever order it is shown."""
    def respond(rec: Recorded) -> Scripted:
        text = rec.text()
        shown_a = re.search(r"<response_a>\n(PAIR-(\d+) (first|second))", text)
        assert shown_a is not None, text
        n = int(shown_a.group(2))
        people = "first" if n < 20 else "second"
        chosen = people if right(n, text) else {"first": "second", "second": "first"}[people]
        winner = "Response A" if shown_a.group(3) == chosen else "Response B"
        return Scripted(text=json.dumps({"winner": winner, "reasoning": "r"}))
    return respond


async def align_pairs(tmp_path: Path, fake_server: FakeModelServer, revised_judge: Callable[[int], bool]
                      ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    def respond(rec: Recorded) -> Scripted:
        if WRITER in rec.text():
            return Scripted(text=json.dumps({"instructions": "REVISED: the right answer wins.", "rationale": "r"}))
        return pair_judge(lambda n, t: revised_judge(n) if "REVISED" in t else current_judge(n))(rec)

    fake_server.respond_with(respond)
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        agent = (await c.call_tool("create_agent", {"name": "referee", "system_prompt": "CURRENT: the better "
                                                                                        "answer wins."})).structured_content
        result = await c.call_tool("align_judge", {"agent_id": agent["id"], "judge": "pairwise_compare",
                                                   "dataset": [*PAIRS, TIED], "background": False})
        assert not result.is_error, result.content[0].text
        agents = (await c.call_tool("list_agents", {})).structured_content["agents"]
    return result.structured_content, agents


def assert_test_pairs_only_judged(fake_server: FakeModelServer, starts: tuple[str, ...] = (RULES,)) -> None:
    assert_test_texts_only_judged(fake_server, [f"PAIR-{n} first" for n in TEST],
                                  lambda text: text.startswith(starts))
    # the people's tie is left out: never judged, never shown
    assert not any("TIED" in r.text() for r in fake_server.requests)


async def test_a_pairwise_revision_that_wins_on_train_and_on_test_is_kept_as_a_new_agent(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    report, agents = await align_pairs(tmp_path, fake_server, lambda n: True)
    wrong_on_test = sum(n in HARD for n in TEST)
    assert (report["kept"], report["judge"], report["pass_at"], report["human_ties"]) == (
        True, "pairwise_compare", None, 1)
    assert report["test_pairs"] == {"both_right": len(TEST) - wrong_on_test, "only_current": 0,
                                    "only_revised": wrong_on_test, "both_wrong": 0, "left_out": 0}
    assert report["p_value"] == pytest.approx(2 / 2 ** wrong_on_test) and report["score_gain"] is None
    assert report["current"]["test"]["value"] == pytest.approx(1 - wrong_on_test / len(TEST))
    assert report["revised"]["test"]["value"] == 1.0
    assert "-CURRENT: the better answer wins.\n+REVISED: the right answer wins.\n" in report["diff"]
    kept = [a for a in agents if a["id"] == report["new_agent_id"]]
    assert kept[0]["name"] == "referee (aligned)" and kept[0]["system_prompt"] == "REVISED: the right answer wins."
    assert_test_pairs_only_judged(fake_server)


async def test_a_pairwise_revision_that_wins_on_train_but_not_on_test_is_rejected(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    report, agents = await align_pairs(tmp_path, fake_server, lambda n: current_judge(n) if n in TEST else True)
    assert (report["kept"], report["new_agent_id"], report["p_value"]) == (False, None, 1.0)
    assert report["revised"]["train"]["value"] == 1.0 and report["current"]["train"]["value"] < 1.0
    assert report["revised"]["test"]["value"] == report["current"]["test"]["value"]
    assert report["conclusion"].startswith("no significant gain") and len(agents) == 1
    assert_test_pairs_only_judged(fake_server)


async def test_certify_judge_on_pairs_with_an_agent_judges_by_its_prompt_and_pins_it(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(pair_judge(lambda n, _: True))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        agent = (await c.call_tool("create_agent", {"name": "referee", "system_prompt": "OWN {{ 7*7 }} RULES."})
                 ).structured_content
        result = await c.call_tool("certify_judge", {"judge": "pairwise_compare", "agent_id": agent["id"],
                                                     "dataset": PAIRS[:4], "background": False})
    assert not result.is_error and result.structured_content["tpr"]["value"] == 1.0
    assert len(result.structured_content["pinned"]["rules"]) == 64
    # the agent's text as it was written (never rendered as a template), before the pairwise prompt
    assert [r.text().startswith(f"{RULES}OWN {{{{ 7*7 }}}} RULES.\n\nYou compare two responses")
            for r in fake_server.requests] == [True] * 8


async def test_a_pass_mark_or_a_score_prompt_for_a_pairwise_alignment_is_refused_before_any_model_call(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        agent = (await c.call_tool("create_agent", {"name": "r", "system_prompt": "R."})).structured_content
        marked = await c.call_tool("align_judge", {"agent_id": agent["id"], "judge": "pairwise_compare",
                                                   "dataset": PAIRS, "human_pass_at": 0.5})
        prompted = await c.call_tool("align_judge", {"agent_id": agent["id"], "prompt_id": "text/assessment/pairwise",
                                                     "dataset": [{"text": "t", "human_score": 1}] * 4})
    assert marked.is_error and "human_pass_at: pairwise_compare's items name a winner" in marked.content[0].text
    assert prompted.is_error and "prompt_id: only for judge pairwise_compare" in prompted.content[0].text
    assert fake_server.requests == []


async def test_an_unknown_prompt_asset_is_refused_naming_the_closest_before_any_job(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        agent = (await c.call_tool("create_agent", {"name": "r", "system_prompt": "R."})).structured_content
        result = await c.call_tool("align_judge", {"agent_id": agent["id"], "judge": "pairwise_compare",
                                                   "prompt_id": "text/assessment/pairwize", "dataset": PAIRS})
        jobs = (await c.call_tool("list_jobs", {})).structured_content["jobs"]
    assert result.is_error and "no prompt asset 'text/assessment/pairwize@v1'; the closest: " \
        "text/assessment/pairwise@v1" in result.content[0].text
    assert (jobs, fake_server.requests) == ([], [])


async def test_pairs_the_people_tie_on_throughout_are_refused_before_any_job(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        agent = (await c.call_tool("create_agent", {"name": "r", "system_prompt": "R."})).structured_content
        result = await c.call_tool("align_judge", {"agent_id": agent["id"], "judge": "pairwise_compare",
                                                   "dataset": [{**p, "human_winner": "Tie"} for p in PAIRS]})
        jobs = (await c.call_tool("list_jobs", {})).structured_content["jobs"]
    assert result.is_error and "the split left no training or no test items" in result.content[0].text
    assert (jobs, fake_server.requests) == ([], [])


async def test_a_pair_labelled_again_in_the_other_order_falls_on_the_same_side_and_never_reaches_the_writer_from_test(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    swapped = [{**p, "id": f"SWAP-{n}", "candidates": p["candidates"][::-1],
                "human_winner": {"A": "B", "B": "A"}[p["human_winner"]]} for n, p in enumerate(PAIRS)]

    def respond(rec: Recorded) -> Scripted:
        if WRITER in rec.text():
            return Scripted(text=json.dumps({"instructions": "REVISED: the right answer wins.", "rationale": "r"}))
        return pair_judge(lambda n, t: "REVISED" in t or current_judge(n))(rec)

    fake_server.respond_with(respond)
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        report = await c.call_tool("align_judge", {"judge": "pairwise_compare", "prompt_id": "text/assessment/pairwise",
                                                   "dataset": [*PAIRS, *swapped], "background": False})
    test_ids = set(report.structured_content["test_ids"])
    assert [f"PAIR-{n}" in test_ids for n in range(40)] == [f"SWAP-{n}" in test_ids for n in range(40)]
    test_texts = [f"PAIR-{n.split('-')[1]} first" for n in test_ids]
    writers = [r.text() for r in fake_server.requests if WRITER in r.text()]
    assert writers and not any(x in t for t in writers for x in test_texts)


async def test_a_prompt_asset_for_a_score_text_alignment_is_refused_before_its_agent_is_looked_up(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("align_judge", {"agent_id": "no-such-agent", "prompt_id": "text/assessment/pairwise",
                                                   "dataset": [{"text": "t", "human_score": 1}] * 4})
    assert result.is_error and result.content[0].text == (
        "Error executing tool align_judge: invalid input: prompt_id: only for judge pairwise_compare (the prompt its "
        "rules go before); leave it out")
