"""certify_judge on the binary judgements beside pairwise and scores: judge_code's accept/reject and one
evaluate_analysis category's pass/fail, through a real `judge-mcp` process and the real MCP client, with the
loopback fake model scripted as judges whose agreement with the labels is known."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from judges.calibration import stats
from tests.fake_model_server import FakeModelServer, Recorded, Scripted
from tests.test_text_tools_as_used import judge_mcp

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
Z = 1.959963984540054
CRITERIA = ("evidence_support", "context_handling", "content_distinctness")  # general_quality's


def code_items(accepts: int, rejects: int) -> list[dict[str, Any]]:
    return [{"id": f"ITEM-{i}", "spec": f"ITEM-{i}: add(a, b) returns a + b",
             "files": [{"path": "m.py", "content": "def add(a, b):\n    return a + b\n"}],
             "human_verdict": "accept" if i < accepts else "reject"} for i in range(accepts + rejects)]


def analysis_items(passes: int, fails: int) -> list[dict[str, Any]]:
    return [{"id": f"ITEM-{i}", "analysis": {"product_overview": f"ITEM-{i} overview"},
             "human_verdict": "pass" if i < passes else "fail"} for i in range(passes + fails)]


def scripted(reply: Callable[[int], str | None]) -> Callable[[Recorded], Scripted]:
    """The reply for ITEM-n (the first ITEM-n in the request); None: an unreadable reply."""
    def respond(rec: Recorded) -> Scripted:
        found = re.search(r"ITEM-(\d+)", rec.text())
        text = reply(int(found.group(1))) if found else None
        return Scripted(text="I cannot say." if text is None else text)
    return respond


def code_verdict(verdict: str) -> str:
    return json.dumps({"verdict": verdict, "scores": {d: 1.0 for d in (
        "compilation", "tests_functional", "tests_edge", "types", "style", "security")},
        "explanations": {"root_cause": "r", "minimal_fix": "m"}, "fix_plan": []})


def category_reply(passes: bool) -> str:
    return json.dumps({c: {"rating": "sufficient" if passes else "poor", "rationale": "r"} for c in CRITERIA})


async def test_judge_code_accepting_exactly_the_accepted_items_is_certified(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(scripted(lambda n: code_verdict("accept" if n < 20 else "reject")))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("certify_judge", {"judge": "judge_code", "dataset": code_items(20, 20),
                                                     "background": False})
    cert = result.structured_content
    assert not result.is_error, result.content[0].text
    assert cert["certified"] is True and (cert["n_positive"], cert["n_negative"]) == (20, 20)
    assert cert["tpr"] == cert["tnr"] == pytest.approx({"value": 1.0, "low": 20 / (20 + Z ** 2), "high": 1.0})
    assert cert["pinned"]["prompts"].keys() == {"code/judge@v1"} and cert["pinned"]["settings"]["run_gates"] is False
    assert len(fake_server.requests) == 40


async def test_judge_code_revise_is_negative_and_a_failed_verdict_is_counted(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # ITEM-0..2 (accepted by people) get "revise"; ITEM-19 gets no readable verdict (not the gates' stand-in).
    fake_server.respond_with(scripted(lambda n: None if n == 19 else code_verdict(
        "revise" if n < 3 else "accept" if n < 10 else "reject")))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("certify_judge", {"judge": "judge_code", "dataset": code_items(10, 10),
                                                     "background": False, "verdicts": ["accept", "reject", "revise"]})
    cert = result.structured_content
    assert cert["certified"] is False and (cert["n_positive"], cert["n_negative"], cert["failed"]) == (10, 9, 1)
    assert cert["tpr"]["value"] == 0.7 and cert["needed"]["positives"] is None  # at or below the bar: no number
    failed = [r for r in cert["results"] if r["judge"] == "failed"]
    assert [r["id"] for r in failed] == ["ITEM-19"] and failed[0]["failure"].startswith("model_failed")
    assert cert["corrected"]["raw"]["value"] == pytest.approx(1 / 3)


async def test_an_analysis_category_is_certified_on_its_own_pass_or_fail(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Passes ITEM-10 and ITEM-11 (people said fail): TNR 8/10.
    fake_server.respond_with(scripted(lambda n: category_reply(n < 12)))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("certify_judge", {"judge": "evaluate_analysis", "category": "general_quality",
                                                     "dataset": analysis_items(10, 10), "background": False})
    cert = result.structured_content
    assert not result.is_error, result.content[0].text
    assert (cert["n_positive"], cert["n_negative"], cert["ties"], cert["failed"]) == (10, 10, 0, 0)
    low, high = stats.wilson(8, 10)  # type: ignore[misc]
    assert cert["tnr"] == pytest.approx({"value": 0.8, "low": low, "high": high}) and cert["certified"] is False
    assert set(cert["pinned"]["prompts"]) == {"analysis/system/general_quality@v1", "analysis/user/general_quality@v1"}
    assert cert["pinned"]["settings"]["category"] == "general_quality"
    assert len(fake_server.requests) == 20


async def test_humans_split_evenly_on_an_item_make_it_a_tie(tmp_path: Path, fake_server: FakeModelServer) -> None:
    items = analysis_items(3, 3)
    items[0] = {**items[0], "human_verdict": None, "human_verdicts": ["pass", "fail"]}
    del items[0]["human_verdict"]
    fake_server.respond_with(scripted(lambda n: category_reply(n < 3)))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("certify_judge", {"judge": "evaluate_analysis", "category": "general_quality",
                                                     "dataset": items, "background": False})
    cert = result.structured_content
    assert (cert["n_positive"], cert["n_negative"], cert["ties"]) == (2, 3, 1)
    assert [r["human"] for r in cert["results"]] == ["tie", "pass", "pass", "fail", "fail", "fail"]


async def test_an_unknown_category_is_refused_with_the_known_ones_before_any_model_call(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("certify_judge", {"judge": "evaluate_analysis", "category": "general_qualty",
                                                     "dataset": analysis_items(2, 2)})
    assert result.is_error and "unknown LLM judge category 'general_qualty'; known: founder_resonance, " \
                                "general_quality" in result.content[0].text
    assert fake_server.requests == []


async def test_a_judge_code_label_other_than_accept_or_reject_is_refused_with_its_line(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    items = code_items(2, 2)
    items[2]["human_verdict"] = "pass"
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("certify_judge", {"judge": "judge_code", "dataset": items})
    assert result.is_error and "dataset line 3: a human verdict is accept or reject (got 'pass')" in \
        result.content[0].text
    assert fake_server.requests == []


async def test_a_judge_code_file_path_leaving_its_sandbox_is_the_callers_error(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    items = code_items(2, 2)
    items[1]["files"] = [{"path": "../../escaped.py", "content": "x = 1\n"}]
    fake_server.respond_with(scripted(lambda n: code_verdict("accept")))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("certify_judge", {"judge": "judge_code", "dataset": items, "background": False})
    assert result.is_error and "../../escaped.py" in result.content[0].text
    assert "incident" not in result.content[0].text
    assert not list(Path("/tmp").glob("escaped.py")) and not (tmp_path / "escaped.py").exists()


async def test_a_category_for_another_judge_is_refused(tmp_path: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("certify_judge", {"judge": "judge_code", "category": "general_quality",
                                                     "dataset": code_items(2, 2)})
    assert result.is_error and result.content[0].text.endswith(
        "category: only for judge evaluate_analysis (the LLM category certified); leave it out")
    assert fake_server.requests == []


async def test_a_category_for_another_judge_is_refused_before_its_dataset_is_read(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    """The check is the input model's own: it answers before the dataset (scores, not judge_code's verdicts) is
    parsed, with its own message, unchanged by the adapter."""
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("certify_judge", {"judge": "judge_code", "category": "general_quality",
                                                     "dataset": [{"text": "t", "human_score": 1}] * 4})
    assert result.is_error and result.content[0].text == (
        "Error executing tool certify_judge: invalid input: category: only for judge evaluate_analysis (the LLM "
        "category certified); leave it out")
