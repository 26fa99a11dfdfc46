"""Samples, juries and expected_score on judge_code's verdict, evaluate_analysis' LLM categories and
evaluate_image's score: the logic with the scripted model, and each argument through a real `judge-mcp`
process (real MCP client, the loopback fake model server behind the real OpenAI SDK)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import prompts
from judges.analysis.judge import BUILTIN, RATING_VALUE, Category, judge_category
from judges.code.brief import ProjectBrief
from judges.code.gates import GateRun, Signals
from judges.code.judge import judge
from judges.errors import BackendError
from judges.models.protocol import ModelRequest, TokenLogprob, Usage
from judges.reading.expected import expected_ratings, expected_score, label_reader
from tests.fake_model_server import FakeModelServer, Recorded, Scripted
from tests.mcp_helpers import call, error_of
from tests.scripted_model import ScriptedModel, call_of
from tests.test_samples import by_model, first_asks, image_verdict, png
from tests.test_text_tools_as_used import judge_mcp


def code_verdict(verdict: str, tests_edge: float = 1.0) -> str:
    return json.dumps({"verdict": verdict, "scores": {
        "compilation": 1, "tests_functional": 1, "tests_edge": tests_edge, "types": 1, "style": 1, "security": 1},
        "explanations": {"root_cause": f"{verdict} because", "minimal_fix": "none"}, "fix_plan": []})


def by_sample(replies: dict[int, str]) -> Callable[[ModelRequest], str]:
    """Each sample (ModelRequest.sample) its own reply: which sample gets which is then fixed."""
    return lambda request: replies[request.sample]


BRIEF = ProjectBrief(naming={}, conventions={}, glossary=[], layers=[], imports={})


async def judged(model: ScriptedModel | None, *, samples: int = 1, runs: list[GateRun] | None = None,
                 signals: Signals | None = None, jury: list[tuple[str, Any]] | None = None) -> Any:
    call = call_of(model, samples=samples, jury=jury)
    asked = [] if model is None and not jury else await call.members()
    return await judge(call, asked, spec="sum two numbers", signals=signals or Signals(), runs=runs or [],
                       brief=BRIEF, diff=None, model_notes=None)


# --- judge_code's verdict, with the scripted model --------------------------------------------------


@pytest.mark.anyio
async def test_code_verdict_samples_vote_and_each_score_has_its_spread() -> None:
    model = ScriptedModel(by_sample({0: code_verdict("accept", 1.0), 1: code_verdict("revise", 0.5),
                                     2: code_verdict("accept", 0.0)}))
    result = await judged(model, samples=3)
    assert (result.verdict, result.status) == ("accept", "ok")
    assert (result.votes.counts, result.votes.majority, result.votes.consistent) == ({"accept": 2, "revise": 1},
                                                                                     "accept", True)
    edge = result.sample_stats["tests_edge"]
    assert (edge.values, edge.mean, edge.median, edge.sd, edge.min, edge.max) == ([1.0, 0.5, 0.0], 0.5, 0.5, 0.5,
                                                                                   0.0, 1.0)
    assert result.scores["tests_edge"] == 0.5 and result.explanations["root_cause"] == "accept because"
    assert sorted(r.sample for r in model.requests) == [0, 1, 2]


@pytest.mark.anyio
async def test_a_split_code_vote_with_a_failed_sample_is_a_tie_and_the_stricter_verdict() -> None:
    model = ScriptedModel(lambda request: {0: code_verdict("accept"), 1: "No verdict from me.",
                                           2: code_verdict("reject")}[request.sample]
                          if len(request.messages) == 1 else "Still none.")
    result = await judged(model, samples=3)
    assert result.votes.model_dump() == {"counts": {"accept": 1, "reject": 1}, "majority": "Tie",
                                         "consistent": False, "failed": 1}
    assert (result.verdict, result.sample_stats["compilation"].failed) == ("reject", 1)
    assert [s.verdict for s in result.samples] == ["accept", None, "reject"]
    assert result.samples[1].error is not None and result.samples[1].error.startswith("parse_error")


@pytest.mark.anyio
async def test_code_samples_keep_the_gates_overrides_in_every_sample() -> None:
    runs = [GateRun(name="lint", argv=["ruff"], exit_code=1, passed=False, duration_s=0.1)]
    model = ScriptedModel(lambda request: code_verdict("accept"))
    result = await judged(model, samples=2, runs=runs, signals=Signals(lintErrors=["x.py:1: F401"]))
    assert result.verdict == "revise" and [s.verdict for s in result.samples] == ["revise", "revise"]
    assert result.sample_stats["style"].values == [0.0, 0.0]
    assert result.overrides == ["style set to 0: 1 lint error(s)",
                                "verdict 'accept' overridden to 'revise': a gate failed"]


@pytest.mark.anyio
async def test_every_code_sample_failing_leaves_the_gates_verdict_and_counts_them() -> None:
    model = ScriptedModel(lambda request: "no.")
    result = await judged(model, samples=2)
    assert result.votes is not None
    assert (result.status, result.verdict, result.votes.majority, result.votes.failed) == ("model_failed", "accept",
                                                                                         "Failed", 2)
    assert result.sample_stats == {} and [s.verdict for s in result.samples] == [None, None]


@pytest.mark.anyio
async def test_a_code_jury_reports_each_models_verdict_and_leaves_a_failing_one_out() -> None:
    a = ScriptedModel(lambda request: code_verdict("revise", 0.0), name="m:a")
    b = ScriptedModel(lambda request: code_verdict("revise", 1.0), name="m:b")
    c = ScriptedModel(lambda request: BackendError("backend_error", "down"), name="m:c")
    result = await judged(a, jury=[("m:a", a), ("m:b", b), ("m:c", c)])
    jury = result.jury
    assert (result.verdict, jury.verdict, jury.scored, jury.failed) == ("revise", "revise", 2, 1)
    assert [(m.model, m.value) for m in jury.members] == [("m:a", "revise"), ("m:b", "revise"), ("m:c", None)]
    assert (jury.agreement.percent_agreement, result.scores["tests_edge"]) == (1.0, 0.5)
    assert jury.members[2].error is not None and "down" in jury.members[2].error


@pytest.mark.anyio
async def test_one_code_sample_keeps_the_single_verdicts_shape() -> None:
    result = await judged(ScriptedModel(lambda request: code_verdict("accept")))
    assert (result.samples, result.votes, result.sample_stats, result.jury) == (None, None, None, None)


# --- evaluate_analysis' categories, with the scripted model ----------------------------------------


def general_quality() -> Category:
    return Category("general_quality", BUILTIN["general_quality"], prompts.load("analysis/system/general_quality@v1"),
                    prompts.load("analysis/user/general_quality@v1"))


def ratings(*three: str) -> str:
    names = ("evidence_support", "context_handling", "content_distinctness")
    return json.dumps({n: {"rating": r, "rationale": f"{n}: {r}"} for n, r in zip(names, three, strict=True)})


VARIABLES = {"analysis": "{}", "user_context": "(none)", "context_type": "unspecified", "product_overview": "null"}


@pytest.mark.anyio
async def test_category_samples_report_the_spread_of_the_score_and_the_pass_vote() -> None:
    model = ScriptedModel(by_sample({0: ratings("sufficient", "sufficient", "sufficient"),
                                     1: ratings("impressive", "impressive", "sufficient"),
                                     2: ratings("poor", "sufficient", "sufficient")}))
    usage: list[Usage] = []
    result = await judge_category(call_of(model, samples=3), [(None, model)], general_quality(), VARIABLES, usage)
    stats = result.sample_stats
    assert stats is not None and result.votes is not None
    # scores: 3/3 = 1, 5/3, 2/3; mean 10/9, sd 0.5092 (sample)
    assert stats.values == [1.0, round(5 / 3, 6), round(2 / 3, 6)]
    assert (stats.mean, stats.median, stats.min, stats.max) == (round(10 / 9, 6), 1.0, round(2 / 3, 6), round(5 / 3, 6))
    assert stats.sd == round(math.sqrt(((1 - 10 / 9) ** 2 + (5 / 3 - 10 / 9) ** 2 + (2 / 3 - 10 / 9) ** 2) / 2), 6)
    assert (result.passed, result.votes.counts, result.score) == (True, {"pass": 2, "fail": 1}, round(10 / 9, 6))
    assert all(ch.passed for ch in result.checks.values()) and len(usage) == 3


@pytest.mark.anyio
async def test_a_failed_category_sample_is_counted_and_left_out() -> None:
    model = ScriptedModel(lambda request: {0: ratings("poor", "poor", "poor"), 1: "Looks fine overall.",
                                           2: ratings("poor", "sufficient", "poor")}[request.sample]
                          if len(request.messages) == 1 else "Still cannot.")
    result = await judge_category(call_of(model, samples=3), [(None, model)], general_quality(), VARIABLES, [])
    assert result.sample_stats is not None and result.votes is not None
    # the scores 0 and 1/3 (as 0.333333): mean 0.166666
    assert (result.sample_stats.scored, result.sample_stats.failed, result.sample_stats.mean) == (2, 1, 0.166666)
    assert [f.kind for f in result.sample_stats.failures] == ["parse_error"]
    assert (result.passed, result.votes.counts, result.votes.failed) == (False, {"fail": 2}, 1)
    assert result.samples is not None and result.samples[1].passed is None and result.samples[1].ratings == {}


@pytest.mark.anyio
async def test_a_category_jury_averages_each_criterion_and_reports_alpha() -> None:
    a = ScriptedModel(lambda request: ratings("poor", "sufficient", "impressive"), name="m:a")
    b = ScriptedModel(lambda request: ratings("sufficient", "sufficient", "impressive"), name="m:b")
    result = await judge_category(call_of(jury=[("m:a", a), ("m:b", b)]), [("m:a", a), ("m:b", b)], general_quality(),
                                  VARIABLES, [])
    assert result.jury is not None
    assert (result.jury.verdict, result.score, result.passed) == ([0.5, 1.0, 2.0], round(7 / 6, 6), False)
    assert result.votes is not None and result.votes.model_dump() == {
        "counts": {"fail": 1, "pass": 1}, "majority": "Tie", "consistent": False, "failed": 0}
    # units [0, 1], [1, 1], [2, 2]: D_o = (2/1)/6 = 1/3; D_e = 2·17/(6·5) = 17/15 (17: the squared differences
    # of all pairs of 0, 1, 1, 1, 2, 2); α = 1 - (1/3)/(17/15) = 12/17
    assert result.jury.agreement.krippendorff_alpha == round(12 / 17, 6)


# --- expected scores from log-probabilities ----------------------------------------------------------


def test_a_rating_token_is_read_by_the_label_it_starts() -> None:
    read = label_reader(RATING_VALUE)
    assert [read(t) for t in ("suff", ' "imp', "poor", "P", "x", "", "sufficiently")] == [1.0, 2.0, 0.0, 0.0, None,
                                                                                          None, 1.0]


def test_expected_ratings_weigh_each_criterions_rating_token() -> None:
    def tok(text: str, p: float = 1.0, **top: float) -> TokenLogprob:
        return TokenLogprob(token=text, logprob=math.log(p), top={k: math.log(v) for k, v in top.items()})

    tokens = [tok('{"a": {"rating": "'), tok("suff", 0.6, imp=0.3, poor=0.1), tok('icient"}, "b": {"rating": "'),
              tok("poor", 0.5, suff=0.5), tok('"}}')]
    assert expected_ratings(tokens, ["a", "b", "c"], RATING_VALUE) == {"a": 1.2, "b": 0.5, "c": None}


def test_expected_score_is_unchanged_by_the_shared_weighing() -> None:
    tokens = [TokenLogprob(token="5", logprob=math.log(0.5), top={"6": math.log(0.25), "4": math.log(0.25)})]
    assert expected_score(tokens, 5, 0, 10) == 5.0


# --- through a real server ---------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "home"


FILES = [{"path": "calc.py", "content": "def add(a: int, b: int) -> int:\n    return a + b\n"}]
# judge_code with three samples; THREE_VERDICTS answers them (first_asks: one verdict per sample's first ask).
THREE_SAMPLES: dict[str, Any] = {"spec": "add two numbers", "files": FILES, "run_gates": False, "samples": 3}
THREE_VERDICTS = [code_verdict("accept", 1.0), code_verdict("revise", 0.5), code_verdict("accept", 0.0)]


@pytest.mark.anyio
@pytest.mark.e2e
async def test_judge_code_with_three_samples_reports_the_vote_and_the_scores_spread(
        home: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(first_asks(THREE_VERDICTS))
    async with judge_mcp(home, fake_server) as c:
        result = await call(c, "judge_code", **THREE_SAMPLES)
    edge = result["sample_stats"]["tests_edge"]
    assert (result["verdict"], result["votes"]["counts"], result["votes"]["consistent"]) == (
        "accept", {"accept": 2, "revise": 1}, True)
    assert (edge["mean"], edge["sd"], edge["min"], edge["max"], sorted(edge["values"])) == (0.5, 0.5, 0.0, 1.0,
                                                                                           [0.0, 0.5, 1.0])
    assert len(result["samples"]) == 3 and result["usage"]["requests"] == 3


@pytest.mark.anyio
@pytest.mark.e2e
async def test_judge_code_split_vote_with_a_failed_sample_is_a_tie(home: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(first_asks([code_verdict("accept"), "I will not judge this.", code_verdict("reject")]))
    async with judge_mcp(home, fake_server) as c:
        result = await call(c, "judge_code", **THREE_SAMPLES)
    assert result["votes"] == {"counts": {"accept": 1, "reject": 1}, "majority": "Tie", "consistent": False,
                               "failed": 1}
    assert result["verdict"] == "reject"


@pytest.mark.anyio
@pytest.mark.e2e
async def test_judge_code_with_a_jury_reports_each_models_verdict(home: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(by_model({"gpt-a": lambda rec: Scripted(text=code_verdict("accept")),
                                       "gpt-b": lambda rec: Scripted(text=code_verdict("revise"))}))
    async with judge_mcp(home, fake_server) as c:
        result = await call(c, "judge_code", spec="add two numbers", files=FILES, run_gates=False,
                            models=["openai:gpt-a", "openai:gpt-b"])
    jury = result["jury"]
    assert [(m["model"], m["value"]) for m in jury["members"]] == [("openai:gpt-a", "accept"),
                                                                   ("openai:gpt-b", "revise")]
    assert (jury["verdict"], result["verdict"], jury["agreement"]["percent_agreement"]) == ("Tie", "revise", 0.0)


@pytest.mark.anyio
@pytest.mark.e2e
async def test_judge_code_refuses_too_many_samples_before_any_model_call(
        home: Path, fake_server: FakeModelServer) -> None:
    async with judge_mcp(home, fake_server, JUDGE_MCP_MAX_SAMPLES="2") as c:
        message = await error_of(c, "judge_code", spec="x", files=FILES, run_gates=False, samples=3)
    assert "samples must be a whole number from 1 to 2 (JUDGE_MCP_MAX_SAMPLES), e.g. 2; got 3" in message
    assert fake_server.requests == []


ANALYSIS = {"company_name": "Acme"}


def category_ratings(three: tuple[str, str, str]) -> Callable[[Recorded], Scripted]:
    """general_quality's three criteria rated as given (the only category asked in these tests)."""
    return lambda rec: Scripted(text=ratings(*three))


@pytest.mark.anyio
@pytest.mark.e2e
async def test_evaluate_analysis_with_three_samples_reports_each_categorys_spread(
        home: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(first_asks([ratings("sufficient", "sufficient", "sufficient"),
                                         "No.", ratings("impressive", "impressive", "impressive")],
                                        repair="Still no."))
    async with judge_mcp(home, fake_server) as c:
        result = await call(c, "evaluate_analysis", analysis=ANALYSIS, deterministic_checks=["D-1"],
                            llm_judges=["general_quality"], samples=3)
    category = result["categories"]["general_quality"]
    stats = category["sample_stats"]
    assert (stats["n"], stats["scored"], stats["failed"], stats["mean"], stats["min"], stats["max"]) == (
        3, 2, 1, 1.5, 1.0, 2.0)
    assert (category["passed"], category["votes"]["counts"], category["score"]) == (True, {"pass": 2}, 1.5)
    assert [f["kind"] for f in stats["failures"]] == ["parse_error"]


@pytest.mark.anyio
@pytest.mark.e2e
async def test_evaluate_analysis_with_a_jury_reports_each_models_ratings(
        home: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(by_model({"gpt-a": category_ratings(("poor", "sufficient", "impressive")),
                                       "gpt-b": category_ratings(("sufficient", "sufficient", "impressive"))}))
    async with judge_mcp(home, fake_server) as c:
        result = await call(c, "evaluate_analysis", analysis=ANALYSIS, deterministic_checks=["D-1"],
                            llm_judges=["general_quality"], models=["openai:gpt-a", "openai:gpt-b"])
    jury = result["categories"]["general_quality"]["jury"]
    assert [(m["model"], m["value"]) for m in jury["members"]] == [("openai:gpt-a", [0.0, 1.0, 2.0]),
                                                                   ("openai:gpt-b", [1.0, 1.0, 2.0])]
    assert (jury["verdict"], jury["agreement"]["krippendorff_alpha"]) == ([0.5, 1.0, 2.0], round(12 / 17, 6))
    assert result["passed"] is False and result["usage"]["model_calls"] == 2


def rating_tokens(first: tuple[str, float, dict[str, float]]) -> list[tuple[str, float, dict[str, float]]]:
    """general_quality's reply as tokens: evidence_support's rating token as given, the others certain."""
    return [('{"evidence_support": {"rating": "', 0.0, {}), first,
            ('", "rationale": "r"}, "context_handling": {"rating": "', 0.0, {}), ("sufficient", 0.0, {}),
            ('", "rationale": "r"}, "content_distinctness": {"rating": "', 0.0, {}), ("sufficient", 0.0, {}),
            ('", "rationale": "r"}}', 0.0, {})]


@pytest.mark.anyio
@pytest.mark.e2e
async def test_evaluate_analysis_reports_the_probability_weighted_category_score(
        home: Path, fake_server: FakeModelServer) -> None:
    tokens = rating_tokens(("sufficient", math.log(0.5), {"imp": math.log(0.3), "poor": math.log(0.2)}))
    fake_server.respond_with(lambda rec: Scripted(text="".join(t for t, _, _ in tokens), logprobs=tokens))
    async with judge_mcp(home, fake_server) as c:
        result = await call(c, "evaluate_analysis", analysis=ANALYSIS, deterministic_checks=["D-1"],
                            llm_judges=["general_quality"], expected_score=True)
    category = result["categories"]["general_quality"]
    # evidence_support: 0.5·1 + 0.3·2 + 0.2·0 = 1.1; the others 1: (1.1 + 1 + 1)/3
    assert (category["score"], category["expected_score"]) == (1.0, round(3.1 / 3, 6))
    assert fake_server.requests[0].body["logprobs"] is True


@pytest.mark.anyio
@pytest.mark.e2e
async def test_evaluate_image_reports_the_probability_weighted_score(home: Path, fake_server: FakeModelServer) -> None:
    text = image_verdict(7)
    head, tail = text.split("7", 1)
    tokens = [(head, 0.0, {}), ("7", math.log(0.5), {"8": math.log(0.5)}), (tail, 0.0, {})]
    fake_server.respond_with(lambda rec: Scripted(text=text, logprobs=tokens))
    async with judge_mcp(home, fake_server) as c:
        await call(c, "create_agent", name="alpha", system_prompt="You are judge alpha.",
                   score_scale={"min": 0, "max": 10})
        result = await call(c, "evaluate_image", brief="a red square", images=[png()], expected_score=True)
    (evaluation,) = result["evaluations"]
    assert (evaluation["score"], evaluation["expected_score"]) == (70.0, 75.0)  # 7.5 on 0–10
    assert fake_server.requests[0].body["logprobs"] is True


@pytest.mark.anyio
@pytest.mark.e2e
async def test_evaluate_image_without_expected_score_asks_for_no_logprobs(
        home: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(first_asks([image_verdict(7)]))
    async with judge_mcp(home, fake_server) as c:
        await call(c, "create_agent", name="alpha", system_prompt="You are judge alpha.",
                   score_scale={"min": 0, "max": 10})
        result = await call(c, "evaluate_image", brief="a red square", images=[png()])
    assert result["evaluations"][0]["expected_score"] is None and "logprobs" not in fake_server.requests[0].body


@pytest.mark.anyio
@pytest.mark.e2e
async def test_a_repeated_judge_code_with_samples_is_answered_per_sample_from_the_cache(
        home: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(first_asks(THREE_VERDICTS))
    async with judge_mcp(home, fake_server) as c:
        first = await call(c, "judge_code", **THREE_SAMPLES)
        again = await call(c, "judge_code", **THREE_SAMPLES)
    assert len(fake_server.requests) == 3 and (again["usage"]["cache_hits"], again["usage"]["cached"]) == (3, True)
    assert again["samples"] == first["samples"] and again["sample_stats"] == first["sample_stats"]


@pytest.mark.anyio
@pytest.mark.e2e
async def test_a_repeated_evaluate_analysis_with_samples_is_answered_per_sample_from_the_cache(
        home: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(first_asks([ratings("sufficient", "sufficient", "sufficient"),
                                         ratings("poor", "poor", "poor")]))
    async with judge_mcp(home, fake_server) as c:
        arguments: dict[str, Any] = dict(analysis=ANALYSIS, deterministic_checks=["D-1"],
                                         llm_judges=["general_quality"], samples=2)
        first = await call(c, "evaluate_analysis", **arguments)
        again = await call(c, "evaluate_analysis", **arguments)
    assert len(fake_server.requests) == 2 and (again["usage"]["cache_hits"], again["usage"]["cached"]) == (2, True)
    assert again["categories"] == first["categories"]
