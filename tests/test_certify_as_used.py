"""certify_judge and align_judge as hosts use them: a real `judge-mcp` process, the real MCP client, the loopback
fake model behind the real OpenAI SDK scripted as judges whose agreement with the labels is known."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from judges.calibration import stats
from judges.calibration.align import split
from tests.fake_model_server import FakeModelServer, Recorded, Scripted
from tests.mcp_helpers import call
from tests.test_calibration_as_used import wait_job
from tests.test_text_tools_as_used import judge_mcp

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
CRITERION = [{"name": "overall", "description": "Is the answer right?", "scale": {"min": 0, "max": 10}}]
WRITER = "You improve an LLM judge."


def labelled(passes: int, fails: int) -> list[dict[str, Any]]:
    """Items ITEM-0 … labelled pass (human_score 1) then fail (0)."""
    return [{"id": f"ITEM-{i}", "text": f"ITEM-{i} answer", "human_score": 1 if i < passes else 0}
            for i in range(passes + fails)]


def scorer(says_pass: Callable[[int, str], bool | None], top: float = 10) -> Callable[[Recorded], Scripted]:
    """Scores ITEM-n 0.9 × top (pass) or 0.1 × top (fail) as says_pass(n, the request's text) decides; None: an
    unreadable reply."""
    def respond(rec: Recorded) -> Scripted:
        text = rec.text()
        found = re.search(r"ITEM-(\d+) answer", text)
        verdict = says_pass(int(found.group(1)), text) if found else None
        if verdict is None:
            return Scripted(text="I cannot say.")
        return Scripted(text=json.dumps({"reasoning": "r", "score": 0.9 * top if verdict else 0.1 * top}))
    return respond


async def test_a_judge_right_on_every_labelled_item_is_certified(tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(scorer(lambda n, _: n < 20))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("certify_judge", {"judge": "score_text", "criteria": CRITERION,
                                                     "dataset": labelled(20, 20), "background": False})
    cert = result.structured_content
    assert not result.is_error and cert["certified"] is True
    assert (cert["n_positive"], cert["n_negative"], cert["ties"], cert["failed"]) == (20, 20, 0, 0)
    assert cert["tpr"] == cert["tnr"] == pytest.approx({"value": 1.0, "low": 20 / (20 + 1.959963984540054 ** 2),
                                                        "high": 1.0})
    assert cert["needed"] == {"positives": 0, "negatives": 0}
    assert cert["pinned"]["model"] == "openai:gpt-fake" and len(cert["fingerprint"]) == 64
    assert len(fake_server.requests) == 40


async def test_a_judge_that_misses_negatives_is_not_certified_and_gets_a_plan(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Passes ITEM-20 and ITEM-21 (labelled fail); gives no readable score for ITEM-39.
    fake_server.respond_with(scorer(lambda n, _: None if n == 39 else n < 22))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        started = await c.call_tool("certify_judge", {  # a background job, by default
            "judge": "score_text", "criteria": CRITERION, "dataset": labelled(20, 20),
            "verdicts": ["pass"] * 40 + ["fail"] * 60})
        job = await wait_job(c, started.structured_content["job_id"])
    cert = job["result"]
    assert job["status"] == "completed" and job["total"] == 40 and cert["certified"] is False
    assert (cert["n_positive"], cert["n_negative"], cert["failed"]) == (20, 19, 1)
    assert cert["tnr"]["value"] == pytest.approx(17 / 19)
    assert cert["needed"] == {"positives": 0, "negatives": stats.needed_for(17 / 19, 19, 0.8)}
    assert [r["id"] for r in cert["results"] if r["judge"] == "failed"] == ["ITEM-39"]
    expected = stats.rogan_gladen(40, 100, 1.0, 17 / 19, 20, 19)
    corrected = cert["corrected"]
    assert corrected["raw"]["value"] == 0.4 and corrected["covered"] is True
    assert (corrected["corrected"]["value"], corrected["corrected"]["low"], corrected["corrected"]["high"]) == \
        pytest.approx(expected)


async def test_a_certificate_with_an_unknown_verdict_is_refused_before_any_model_call(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("certify_judge", {"judge": "score_text", "criteria": CRITERION,
                                                     "dataset": labelled(2, 2), "verdicts": ["pass", "perhaps"]})
    assert result.is_error and "verdicts[1]: a verdict is pass or fail" in result.content[0].text
    assert fake_server.requests == []


ITEMS = labelled(20, 20)
TRAIN, TEST = split(["pass"] * 20 + ["fail"] * 20, 0, 0.3)  # type: ignore[arg-type]  # align_judge's default split
HARD = {n for n in range(40) if n % 3 == 0 or (n in TEST and n % 2 == 0)}  # the current judge gets these wrong


def current_judge(n: int) -> bool:
    return (n < 20) != (n in HARD)


async def align(tmp_path: Path, fake_server: FakeModelServer,
                revised_judge: Callable[[int], bool]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    def respond(rec: Recorded) -> Scripted:
        text = rec.text()
        if WRITER in text:
            return Scripted(text=json.dumps({"instructions": "REVISED: pass only right answers.\nExample: ITEM-x",
                                             "rationale": "sharper rules"}))
        return scorer(lambda n, t: revised_judge(n) if "REVISED" in t else current_judge(n), top=100)(rec)

    fake_server.respond_with(respond)
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        agent = (await c.call_tool("create_agent", {"name": "grader", "system_prompt": "CURRENT: pass right "
                                                                                       "answers."})).structured_content
        result = await c.call_tool("align_judge", {"agent_id": agent["id"], "dataset": ITEMS, "background": False})
        assert not result.is_error, result.content[0].text
        agents = (await c.call_tool("list_agents", {})).structured_content["agents"]
    return result.structured_content, agents


def assert_test_texts_only_judged(fake_server: FakeModelServer, test_texts: list[str],
                                  judged: Callable[[str], bool]) -> None:
    """No revision request shows a test text; each test text is asked once per request, by the judge (`judged`),
    after every revision was written and chosen."""
    texts = [r.text() for r in fake_server.requests]
    writers = [i for i, t in enumerate(texts) if WRITER in t]
    assert writers and all(not any(x in texts[i] for x in test_texts) for i in writers)
    with_test = [i for i, t in enumerate(texts) if any(x in t for x in test_texts)]
    assert min(with_test) > max(writers)  # judged only after every revision was written and chosen
    assert all(sum(x in texts[i] for x in test_texts) == 1 and judged(texts[i]) for i in with_test)


def assert_test_items_only_judged(fake_server: FakeModelServer) -> None:
    assert_test_texts_only_judged(fake_server, [f"ITEM-{n} answer" for n in TEST],
                                  lambda text: "Score the response below" in text)


async def test_a_revision_that_wins_on_train_but_not_on_test_is_rejected(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    report, agents = await align(tmp_path, fake_server, lambda n: current_judge(n) if n in TEST else n < 20)
    assert (report["kept"], report["new_agent_id"]) == (False, None)
    assert report["revised"]["train"]["value"] == 1.0 and report["current"]["train"]["value"] < 1.0
    assert report["revised"]["test"]["value"] == report["current"]["test"]["value"]
    assert report["p_value"] == 1.0 and report["conclusion"].startswith("no significant gain")
    assert report["keep_rule"] == "bootstrap" and "interval [0, 0], not above 0" in report["conclusion"]
    assert report["score_gain"] == pytest.approx({"measure": report["score_gain"]["measure"], "n": len(TEST),
                                                  "value": 0.0, "low": 0.0, "high": 0.0})
    assert report["test_ids"] == [f"ITEM-{n}" for n in TEST] and len(agents) == 1
    assert_test_items_only_judged(fake_server)


async def test_a_revision_that_wins_on_train_and_on_test_is_kept_as_a_new_agent(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    report, agents = await align(tmp_path, fake_server, lambda n: n < 20)
    wrong_on_test = sum(n in HARD for n in TEST)
    assert report["kept"] is True
    assert report["test_pairs"] == {"both_right": len(TEST) - wrong_on_test, "only_current": 0,
                                    "only_revised": wrong_on_test, "both_wrong": 0, "left_out": 0}
    assert report["p_value"] == pytest.approx(2 / 2 ** wrong_on_test)
    assert report["revised"]["test"]["value"] == 1.0
    gain = report["score_gain"]  # each item the current judge got wrong: error 0.9 → 0.1
    assert (gain["n"], gain["value"]) == (len(TEST), pytest.approx(0.8 * wrong_on_test / len(TEST)))
    assert 0 < gain["low"] < gain["value"] < gain["high"] <= 0.8
    assert "-CURRENT: pass right answers.\n+REVISED: pass only right answers.\n" in report["diff"]
    kept = [a for a in agents if a["id"] == report["new_agent_id"]]
    assert kept[0]["name"] == "grader (aligned)" and kept[0]["system_prompt"].startswith("REVISED")
    assert len(agents) == 2
    assert_test_items_only_judged(fake_server)


async def test_a_revision_scoring_closer_on_test_is_kept_on_its_bootstrap_interval_with_no_pass_fail_flip(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # The current judge is right on every test item's pass/fail, at 60–70 (pass) or 30–40 (fail); the revision
    # says the same at 90 or 10: McNemar has no discordant pair (p = 1), the scores are closer on every item.
    def score(n: int, text: str) -> float:
        if "REVISED" in text:
            return 90.0 if n < 20 else 10.0
        if n in TRAIN and n in HARD:
            return 10.0 if n < 20 else 90.0
        return (60.0 + 10 * (n % 2)) if n < 20 else (40.0 - 10 * (n % 2))

    def respond(rec: Recorded) -> Scripted:
        text = rec.text()
        if WRITER in text:
            return Scripted(text=json.dumps({"instructions": "REVISED: be decisive.", "rationale": "r"}))
        n = int(re.search(r"ITEM-(\d+) answer", text).group(1))  # type: ignore[union-attr]
        return Scripted(text=json.dumps({"reasoning": "r", "score": score(n, text)}))

    fake_server.respond_with(respond)
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        agent = (await c.call_tool("create_agent", {"name": "grader", "system_prompt": "CURRENT."})).structured_content
        report = await call(c, "align_judge", agent_id=agent["id"], dataset=ITEMS, background=False)
    current = [abs(score(n, "") / 100 - (n < 20)) for n in TEST]  # by hand: each item's error on 0–1
    revised = [abs(score(n, "REVISED") / 100 - (n < 20)) for n in TEST]
    value, low, high = stats.paired_bootstrap(current, revised, seed=0)  # type: ignore[misc]
    assert report["test_pairs"]["only_current"] == report["test_pairs"]["only_revised"] == 0
    assert report["p_value"] == 1.0 and (report["kept"], report["keep_rule"]) == (True, "bootstrap")
    assert value == pytest.approx(sum(c - r for c, r in zip(current, revised, strict=True)) / len(TEST))
    assert (report["score_gain"]["value"], report["score_gain"]["low"], report["score_gain"]["high"]) == \
        pytest.approx((value, low, high)) and low > 0
    assert report["conclusion"].startswith("kept: the revision scores closer to the people")
    assert report["new_agent_id"] is not None


async def test_a_score_revision_closer_on_only_two_test_items_is_not_kept(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # 8 items: 2 on test. The revision scores both closer (90/10 against 60/40): a bootstrap of two differences
    # never reaches 0, but two of two is no evidence (a sign test's p = 0.5): nothing may be kept.
    train, test = split(["pass"] * 4 + ["fail"] * 4, 0, 0.3)  # type: ignore[arg-type]

    def respond(rec: Recorded) -> Scripted:
        text = rec.text()
        if WRITER in text:
            return Scripted(text=json.dumps({"instructions": "REVISED: be decisive.", "rationale": "r"}))
        n = int(re.search(r"ITEM-(\d+) answer", text).group(1))  # type: ignore[union-attr]
        score = (90.0 if n < 4 else 10.0) if "REVISED" in text or n in train[1:] else (60.0 if n < 4 else 40.0)
        if n == train[0]:  # the one training item the current judge gets wrong
            score = 100 - score
        return Scripted(text=json.dumps({"reasoning": "r", "score": score}))

    fake_server.respond_with(respond)
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        agent = (await c.call_tool("create_agent", {"name": "grader", "system_prompt": "CURRENT."})).structured_content
        report = await call(c, "align_judge", agent_id=agent["id"], dataset=labelled(4, 4), background=False)
        agents = await call(c, "list_agents")
    assert len(test) == 2 and report["revised"]["test"]["value"] == 1.0
    assert (report["kept"], report["score_gain"], report["new_agent_id"]) == (False, None, None)
    assert report["conclusion"] == ("no significant gain: fewer than 6 test items scored by both judges (with "
                                    "fewer, even every one closer is not significant at 5%): nothing changed")
    assert len(agents["agents"]) == 1


async def test_a_pass_mark_off_the_judges_scale_is_refused_before_any_model_call(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("certify_judge", {"judge": "score_text", "criteria": CRITERION, "pass_at": 500,
                                                     "dataset": labelled(2, 2)})
    assert result.is_error and result.content[0].text.endswith(
        "pass_at: a score on the judge's scale 0–100 (score_text: its 0–100 total), e.g. 50 (got 500)")
    assert fake_server.requests == []


async def test_an_agent_without_guidelines_is_the_callers_error_not_an_incident(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        agent = (await c.call_tool("create_agent", {"name": "g", "system_prompt": "p"})).structured_content
        result = await c.call_tool("certify_judge", {"judge": "score_text", "rubric": "helpfulness",
                                                     "agent_id": agent["id"], "dataset": labelled(2, 2),
                                                     "background": False})
    assert result.is_error and "no guideline chunk matches the question" in result.content[0].text
    assert "incident" not in result.content[0].text and fake_server.requests == []


async def test_a_lone_surrogate_escape_in_a_dataset_is_the_callers_error_and_the_session_goes_on(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # JSONL text whose line 1 escapes half a surrogate pair: before, calibrate_judge failed as an incident and
    # certify_judge's reply could not be encoded, ending the client's session.
    lines = "\n".join(json.dumps(item) for item in labelled(2, 2)).replace("ITEM-0 answer", "ITEM-0 \\ud800answer")
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        for tool in ("calibrate_judge", "certify_judge"):
            result = await c.call_tool(tool, {"judge": "score_text", "criteria": CRITERION, "dataset": lines,
                                              "background": False})
            assert result.is_error and result.content[0].text.endswith(
                "line 1.text: holds a lone UTF-16 surrogate escape (\\ud800 without its pair, after 'ITEM-0 '): it is "
                "no character and cannot be stored or sent; remove it, or write the character itself")
        assert (await c.call_tool("list_jobs", {})).structured_content == {"jobs": []}
    assert fake_server.requests == []


async def test_a_certificate_where_the_judge_read_no_item_is_an_error_keeping_the_details(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Before, a plain result (certified: false, tpr and tnr null) an agent loop checking isError took as a verdict.
    fake_server.respond_with(scorer(lambda n, _: None))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("certify_judge", {"judge": "score_text", "criteria": CRITERION,
                                                     "dataset": labelled(3, 3), "background": False})
    assert result.is_error
    assert result.content[0].text == ("No usable result: the judge gave no verdict on any labelled item (6 failed). "
                                      "The details follow.")
    cert = result.structured_content
    assert (cert["tpr"], cert["tnr"], cert["failed"], cert["certified"]) == (None, None, 6, False)
    assert [r["judge"] for r in cert["results"]] == ["failed"] * 6


async def test_an_alignment_whose_current_judge_scored_no_training_item_is_an_error_saying_so(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Before: "no change: the current judge agrees with every training item it scored", not an error.
    fake_server.respond_with(scorer(lambda n, _: None))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        agent = (await c.call_tool("create_agent", {"name": "g", "system_prompt": "Judge it."})).structured_content
        result = await c.call_tool("align_judge", {"agent_id": agent["id"], "dataset": labelled(3, 3),
                                                   "background": False})
        assert len((await c.call_tool("list_agents", {})).structured_content["agents"]) == 1
    assert result.is_error
    assert result.content[0].text == ("No usable result: the current judge scored no training item; it failed on 6 "
                                      "items in all. The details follow.")
    aligned = result.structured_content
    assert aligned["conclusion"] == "no change: the current judge scored no training item (4 failed)"
    assert (aligned["kept"], aligned["current"], aligned["candidates"]) == (
        False, {"train": None, "test": None, "failed": 6}, [])
    assert not any(WRITER in r.text() for r in fake_server.requests)



async def test_a_text_labelled_twice_never_reaches_the_writer_when_one_copy_is_a_test_item(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Each text twice (ITEM-n and COPY-n): before, the split could put one copy on train, the other on test.
    items = labelled(5, 5) + [{**item, "id": item["id"].replace("ITEM", "COPY")} for item in labelled(5, 5)]

    def respond(rec: Recorded) -> Scripted:
        if WRITER in rec.text():
            return Scripted(text=json.dumps({"instructions": "REVISED: pass right answers.", "rationale": "r"}))
        return scorer(lambda n, _: (n < 5) != (n % 3 == 0), top=100)(rec)

    fake_server.respond_with(respond)
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        agent = (await c.call_tool("create_agent", {"name": "g", "system_prompt": "CURRENT."})).structured_content
        report = await call(c, "align_judge", agent_id=agent["id"], dataset=items, background=False)
    test = {i.split("-")[1] for i in report["test_ids"]}
    assert {i.split("-")[1] for i in report["train_ids"]}.isdisjoint(test) and len(report["test_ids"]) == 2 * len(test)
    writers = [r.text() for r in fake_server.requests if WRITER in r.text()]
    assert len(writers) == 2 and not any(f"ITEM-{n} answer" in w for n in test for w in writers)
