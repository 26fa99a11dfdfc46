"""calibrate_judge as hosts use it: a real `judge-mcp` process, the real MCP client, the loopback fake model
behind the real OpenAI SDK scripted as a judge whose agreement with the humans is known."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.fake_model_server import FakeModelServer, Recorded, Scripted
from tests.test_calibration import alpha_by_pairs
from tests.test_text_tools_as_used import fenced, judge_mcp

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
NOISE = (-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5)  # added to 10 × the mean human rating, by item number (mod 7)


def scripted_score(i: int, mean: float) -> float:
    return round(min(10.0, max(0.0, 10 * mean + NOISE[i % len(NOISE)])), 2)


async def wait_job(c: Any, job_id: str) -> dict[str, Any]:
    with anyio.fail_after(120):
        while True:
            result = await c.call_tool("get_job", {"job_id": job_id})
            job = result.structured_content
            if job["status"] != "working":
                return job  # type: ignore[no-any-return]
            await anyio.sleep(0.1)


async def noisy_scorer_report(tmp_path: Path, fake_server: FakeModelServer,
                              rows: list[tuple[str, list[float]]]) -> tuple[dict[str, Any], dict[str, Any], list[float]]:
    """calibrate_judge (score_text) through a real `judge-mcp` on `rows` ((id, each rater's score in [0, 1])), the
    judge scripted as 10 × the humans' mean plus a known noise. Returns the job, the stored report read back and the
    humans' means."""
    means = [sum(scores) / len(scores) for _, scores in rows]
    fake_server.respond_with(lambda rec: Scripted(text=json.dumps({"score": scripted_score(
        int(m.group(1)), means[int(m.group(1))])}) if (m := re.search(r"ITEM (\d+) ", rec.text())) else "no item"))
    home = tmp_path / "home"
    home.mkdir()
    (home / "ratings.jsonl").write_text("\n".join(json.dumps({"id": item, "text": f"ITEM {i} {item}", "human_scores": scores})
                                                 for i, (item, scores) in enumerate(rows)))
    async with judge_mcp(home, fake_server) as c:
        started = await c.call_tool("calibrate_judge", {
            "judge": "score_text", "dataset_path": str(home / "ratings.jsonl"), "human_scale": {"min": 0, "max": 1},
            "criteria": [{"name": "overall", "description": "How well the image follows the prompt, and its "
                                                            "quality.", "scale": {"min": 0, "max": 10}}]})
        job = await wait_job(c, started.structured_content["job_id"])
        again = (await c.call_tool("get_calibration", {"calibration_id": job["result"]["calibration_id"]})).structured_content
    return job, again, means


def expected_scores(means: list[float]) -> Any:
    from scipy import stats

    judge = [scripted_score(i, m) for i, m in enumerate(means)]
    return pytest.approx((stats.spearmanr(means, judge).statistic, stats.kendalltau(means, judge).statistic,
                          stats.pearsonr(means, judge).statistic), abs=1e-12)


def three_raters(items: int) -> list[tuple[str, list[float]]]:
    """`items` images, each rated in [0, 1] by three raters who agree on the trend and differ by up to 0.1."""
    return [(f"image-{i}", [round(min(1.0, max(0.0, (i * 7 % 20) / 20 + 0.05 * ((i + r) % 3 - 1))), 2) for r in range(3)])
            for i in range(items)]


@pytest.mark.usefixtures("on_engine")  # the report is stored, and read back
async def test_a_noisy_scorer_on_three_raters_has_the_expected_correlations(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    rows = three_raters(60)
    job, again, means = await noisy_scorer_report(tmp_path, fake_server, rows)
    report = job["result"]
    assert job["status"] == "completed" and (report["items"], report["judged"], report["failed"]) == (60, 60, 0)
    assert (report["scores"]["spearman"], report["scores"]["kendall_tau"], report["scores"]["pearson"]) == \
        expected_scores(means)
    assert report["humans"]["raters"] == 3
    assert report["humans"]["krippendorff_alpha"] == pytest.approx(alpha_by_pairs([s for _, s in rows]), abs=1e-12)
    assert again == report and len(fake_server.requests) == 60


PAIRS = [("Pick the better answer.", "GOOD answer one", "bad", "A"),
         ("Pick the better answer.", "bad two", "GOOD answer two", "B"),
         ("Pick the better answer.", "GOOD three", "bad three", "A"),
         ("FIRST Pick the better answer.", "bad four", "GOOD four", "B")]


def biased_pair_judge(rec: Recorded) -> Scripted:
    """Right in both orders, except on the FIRST item, where it always picks the response shown first."""
    text = rec.text()
    first = "FIRST" in text or "GOOD" in fenced(text, "response_a")
    return Scripted(text='{"winner": "Response A"}' if first else '{"winner": "Response B"}')


@pytest.mark.usefixtures("on_engine")  # the report is stored, and read back
async def test_a_pairwise_judge_with_position_bias_is_caught(tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(biased_pair_judge)
    dataset = "\n".join(json.dumps({"instruction": i, "candidates": [a, b], "human_winners": [w, w]})
                        for i, a, b, w in PAIRS)
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("calibrate_judge", {"judge": "pairwise_compare", "dataset": dataset,
                                                       "background": False})
        report = result.structured_content
        chart = await c.read_resource(f"judge://calibrations/{report['calibration_id']}/chart.png")
    assert not result.is_error
    assert (report["pairwise"]["accuracy"], report["pairwise"]["cohen_kappa"]) == pytest.approx((0.75, 0.6))
    assert report["position_bias"] == {"both_orders": 4, "flipped": 1, "flip_rate": 0.25,
                                       "first_position_rate": 0.625}
    assert [(r["id"], r["judge"], r["orders"]) for r in report["largest_disagreements"]] == [("4", "Tie", ["A", "B"])]
    assert report["confusion"]["matrix"] == [[2, 0, 0], [0, 1, 1], [0, 0, 0]]
    assert report["chart"] == f"judge://calibrations/{report['calibration_id']}/chart.png"
    assert base64.b64decode(chart.contents[0].blob)[:8] == b"\x89PNG\r\n\x1a\n"


async def test_a_dataset_without_labels_names_the_line(tmp_path: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("calibrate_judge", {"judge": "score_text", "rubric": "helpfulness",
                                                       "dataset": '{"text": "a", "human_score": 3}\n{"text": "b"}'})
    assert result.is_error and "dataset line 2: no human label: give human_score (one rater) or human_scores" \
        in result.content[0].text
    assert fake_server.requests == []


async def test_an_item_with_more_human_labels_than_the_cap_is_refused_naming_the_line(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    """Raters per item are capped: 3,000,000 labels on one item kept a worker busy for many minutes (pairwise
    work over raters), sending nothing to the model."""
    from judges.calibration.dataset import MAX_RATERS

    dataset = [{"text": "a", "human_scores": [3, 4]}, {"text": "b", "human_scores": [3] * (MAX_RATERS + 1)}]
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("calibrate_judge", {"judge": "score_text", "rubric": "helpfulness",
                                                       "dataset": dataset, "background": False})
    assert result.is_error and result.content[0].text.endswith(
        f"invalid input: dataset line 2: at most {MAX_RATERS} human labels per item (got {MAX_RATERS + 1}); "
        'e.g. {"text": "Paris is the capital.", "instruction": "Capital of France?", "human_scores": [5, 4]}'
    ), result.content[0].text
    assert fake_server.requests == []


async def test_a_human_score_beyond_a_trillion_is_refused_naming_the_line(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    """Scores of ±1e308 are finite, but the scale's width overflowed to inf: calibrate_judge divided by zero and
    align_judge's score_gain was NaN (a result the client could not read)."""
    dataset = [{"text": "a", "human_score": 1e308}, {"text": "b", "human_score": -1e308}]
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        results = [await c.call_tool(tool, {"dataset": dataset, "background": False, **args}) for tool, args in (
            ("calibrate_judge", {"judge": "score_text", "rubric": "helpfulness"}),
            ("align_judge", {"agent_id": "any"}))]
    assert [r.is_error for r in results] == [True, True]
    for result in results:
        assert result.content[0].text.endswith(
            "invalid input: dataset line 1: a human score must lie within ±1e+12 (got 1e+308); "
            'e.g. {"text": "Paris is the capital.", "instruction": "Capital of France?", "human_scores": [5, 4]}'
        ), result.content[0].text
    assert fake_server.requests == []


async def test_a_human_scale_beyond_a_trillion_is_refused(tmp_path: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("calibrate_judge", {
            "judge": "score_text", "rubric": "helpfulness", "dataset": [{"text": "a", "human_score": 1}, {"text": "b", "human_score": 0}],
            "human_scale": {"min": -1e308, "max": 1e308}, "background": False})
    assert result.is_error and result.content[0].text.endswith(
        'invalid input: human_scale: min and max lie within ±1e+12, e.g. {"min": 0, "max": 1} (got (-1e+308, 1e+308))'
    ), result.content[0].text
    assert fake_server.requests == []


async def test_a_human_scale_upside_down_is_refused_at_once_not_as_a_failed_job(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("calibrate_judge", {
            "judge": "score_text", "rubric": "helpfulness", "dataset": [{"text": "a", "human_score": 1}, {"text": "b", "human_score": 0}],
            "human_scale": {"min": 5, "max": 1}})
        jobs = (await c.call_tool("list_jobs", {})).structured_content["jobs"]
    assert result.is_error and result.content[0].text == (
        'Error executing tool calibrate_judge: invalid input: human_scale: min must be below max, e.g. {"min": 0, '
        '"max": 1} (got (5.0, 1.0))')
    assert jobs == [] and fake_server.requests == []


async def test_a_pairwise_calibration_with_samples_asks_each_order_that_many_times(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(biased_pair_judge)
    dataset = "\n".join(json.dumps({"instruction": i, "candidates": [a, b], "human_winners": [w, w]})
                        for i, a, b, w in PAIRS)
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("calibrate_judge", {"judge": "pairwise_compare", "dataset": dataset,
                                                       "samples": 3, "background": False})
    assert not result.is_error, result.content[0].text
    assert len(fake_server.requests) == len(PAIRS) * 2 * 3
    # the scripted judge answers the same every time: the majority of three is the single verdict
    assert (result.structured_content["pairwise"]["accuracy"], result.structured_content["items"]) == (0.75, 4)


async def test_a_score_text_calibration_with_samples_says_score_text_takes_one(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("calibrate_judge", {"judge": "score_text", "rubric": "helpfulness", "samples": 2,
                                                       "dataset": [{"text": "a", "human_score": 3},
                                                                   {"text": "b", "human_score": 4}]})
    assert result.is_error and result.content[0].text.endswith(
        "samples: score_text takes one sample per item (samples: 1); pairwise_compare and viescore take more, "
        "e.g. samples: 3")
    assert fake_server.requests == []


async def test_a_calibration_whose_judge_gave_no_verdict_on_any_item_is_an_error_keeping_every_detail(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text="I would rather not say."))
    dataset = [{"id": f"t{i}", "text": f"ITEM {i} text", "human_score": i % 5} for i in range(4)]
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("calibrate_judge", {
            "judge": "score_text", "dataset": dataset, "background": False,
            "criteria": [{"name": "overall", "description": "Overall quality.", "scale": {"min": 0, "max": 4}}]})
    report = result.structured_content
    assert result.is_error and result.content[0].text.startswith(
        "No usable result: the judge gave no verdict on any item (4 failed)")
    assert (report["items"], report["judged"], report["failed"], len(report["results"])) == (4, 0, 4, 4)
