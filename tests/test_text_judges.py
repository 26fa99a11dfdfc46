"""The text judges' core: deterministic parts exactly, without a model; judging logic with the scripted model."""

from __future__ import annotations

import math
import re

import anyio
import pytest

from judges.errors import InputError
from judges.models.protocol import ModelRequest
from judges.text import scoring
from judges.text.claims import normalise_answer, reference_match, split_claims
from judges.text.games import (
    Game,
    bradley_terry,
    elo,
    knockout_pairs,
    planned_calls,
    ranks,
    standings,
)
from judges.text.rag import RagContext, evaluate_rag_answer
from judges.text.ranking import rank_texts
from judges.text.reference import compare_to_reference
from judges.text.scoring import (
    Criterion,
    Scale,
    builtin_criterion,
    resolve_criteria,
    score_text,
    weighted_total,
)
from judges.text.trajectory import Step, check_trajectory, evaluate_trajectory, looks_failed
from tests.scripted_model import ScriptedModel, call_of


def run(fn, model, *args, **kwargs):  # type: ignore[no-untyped-def]
    """A judge called as a plain function, handed the call whose every model is `model`."""
    return anyio.run(lambda: fn(call_of(model), *args, **kwargs))


# --- claims and the reference short-circuit -------------------------------------------------

def test_claims_are_sentences_with_abbreviations_initials_and_decimals_kept() -> None:
    answer = "Paris has 2.1 million people, e.g. in the city proper. J. Smith lives there! Is it big?"
    assert split_claims(answer) == ["Paris has 2.1 million people, e.g. in the city proper.",
                                    "J. Smith lives there!", "Is it big?"]


def test_list_items_are_claims_and_headings_and_code_are_not() -> None:
    answer = "Key facts:\n- The tower was built in 1889.\n- It is 330 m tall\n\n```\nx = 1\n```\n1. Third item."
    assert split_claims(answer) == ["The tower was built in 1889.", "It is 330 m tall", "Third item."]


def test_normalisation_drops_case_punctuation_articles_and_spaces() -> None:
    assert normalise_answer("  The Answer:  1,000! ") == "answer 1000"


@pytest.mark.parametrize(("text", "reference", "expected"), [
    ("Paris", "Paris", "exact"),
    ("  Paris \n", "Paris", "exact"),
    ("the paris.", "Paris", "normalised"),
    ("Lyon", "Paris", None),
    ("!!!", "...", None),
])
def test_reference_match(text: str, reference: str, expected: str | None) -> None:
    assert reference_match(text, reference) == expected


@pytest.mark.parametrize(("text", "reference"), [
    ("-5", "5"), ("1.0", "10"), ("3/4", "34"), ("x-y", "x+y"), ("C++", "C#"), ("5%", "5"), ("$5", "5"), ("1,5", "15"),
])
def test_texts_differing_in_a_sign_operator_or_mark_beside_a_digit_are_left_to_the_model(text: str,
                                                                                          reference: str) -> None:
    # Before: each pair was "equivalent" by normalised match (the SQuAD normalisation drops every punctuation mark).
    assert reference_match(text, reference) is None


# --- games and ratings ----------------------------------------------------------------------

@pytest.mark.parametrize(("method", "n", "calls"), [("round_robin", 5, 20), ("tournament", 5, 8), ("score", 5, 5),
                                                    ("round_robin", 2, 2), ("tournament", 2, 2)])
def test_planned_calls(method: str, n: int, calls: int) -> None:
    assert planned_calls(method, n) == calls  # type: ignore[arg-type]


def test_a_knockout_round_pairs_neighbours_and_gives_the_odd_one_a_bye() -> None:
    assert knockout_pairs([0, 1, 2, 3, 4]) == ([(0, 1), (2, 3)], [4])


def test_standings_count_every_outcome() -> None:
    games = [Game(0, 1, "win", 0), Game(0, 2, "tie"), Game(1, 2, "inconsistent"), Game(0, 3, "failed")]
    s = standings(4, games)
    assert [(x.wins, x.losses, x.ties, x.inconsistent, x.failed) for x in s] == [
        (1, 0, 1, 0, 1), (0, 1, 0, 1, 0), (0, 0, 1, 1, 0), (0, 0, 0, 0, 1)]


def test_bradley_terry_of_one_win_is_the_prior_odds_of_eleven_to_one() -> None:
    a, b = bradley_terry(2, [Game(0, 1, "win", 0)])
    assert math.isclose(a - b, 400 * math.log10(11), abs_tol=1e-6) and math.isclose(a + b, 2000, abs_tol=1e-6)


def test_bradley_terry_orders_a_transitive_round_robin() -> None:
    ratings = bradley_terry(3, [Game(0, 1, "win", 1), Game(1, 2, "win", 1), Game(0, 2, "win", 0)])
    assert ratings[1] > ratings[0] > ratings[2]


def test_ties_and_inconsistent_games_rate_evenly_and_failed_games_not_at_all() -> None:
    assert bradley_terry(3, [Game(0, 1, "tie"), Game(1, 2, "inconsistent"), Game(0, 2, "failed")]) == pytest.approx(
        [1000.0, 1000.0, 1000.0])


def test_elo_after_one_win_between_equals_moves_sixteen_points() -> None:
    assert elo(2, [Game(0, 1, "win", 1)]) == [984.0, 1016.0]


def test_equal_keys_share_a_rank() -> None:
    assert ranks([(3.0,), (1.0,), (1.0,), (0.0,)]) == [1, 2, 2, 4]


# --- trajectory checks -----------------------------------------------------------------------

STEPS = [Step(tool="search", arguments={"q": "flights"}, result="3 flights"),
         Step(tool="book", arguments={"id": 2}, result={"error": "card declined"}),
         Step(tool="search", arguments={"q": "flights"}, result="3 flights"),
         Step(tool="email", arguments={"to": "me"}, result="sent")]


def test_trajectory_checks_find_missing_order_counts_repeats_and_unretried_failures() -> None:
    facts = check_trajectory(STEPS, ["search", "pay", "book"])
    assert {c.name: c.passed for c in facts.checks} == {
        "expected_tools_used": False, "expected_order": False, "expected_counts": False,
        "no_repeated_calls": False, "failures_retried": False}
    assert facts.missing_tools == ["pay"] and facts.unexpected_tools == ["email"]
    assert facts.repeated_calls == [3]
    assert [(f.step, f.tool, f.retried) for f in facts.failed_calls] == [(2, "book", False)]


def test_expected_order_is_a_subsequence_of_the_calls() -> None:
    facts = check_trajectory(STEPS, ["search", "book", "email"])
    assert {c.name: c.passed for c in facts.checks}["expected_order"] is True
    assert check_trajectory(STEPS, ["email", "search"]).checks[1].passed is False


def test_a_retried_failure_passes_and_without_expected_tools_only_two_checks_run() -> None:
    steps = [Step(tool="book", result="Error: timeout"), Step(tool="book", arguments={"retry": True}, result="ok")]
    facts = check_trajectory(steps, None)
    assert [(c.name, c.passed) for c in facts.checks] == [("no_repeated_calls", True), ("failures_retried", True)]


@pytest.mark.parametrize(("result", "failed"), [
    ({"error": "x"}, True), ({"error": None, "ok": 1}, False), ({"isError": True}, True), ({"status": "FAILED"}, True),
    ("Traceback (most recent call last)", True), ("error: no such file", True), ("no errors found", False),
    (None, False), ([1, 2], False),
])
def test_what_counts_as_a_failed_call(result: object, failed: bool) -> None:
    assert looks_failed(result) is failed


# --- criteria -------------------------------------------------------------------------------

def test_builtin_rubrics_come_from_prompt_assets_on_a_one_to_five_scale() -> None:
    for name in scoring.BUILTIN_RUBRICS:
        c = builtin_criterion(name)
        assert (c.name, c.scale.min, c.scale.max) == (name, 1.0, 5.0) and len(c.description) > 50


def test_rubric_and_criteria_are_exclusive_and_unknown_rubrics_named() -> None:
    with pytest.raises(InputError, match="exactly one of rubric"):
        resolve_criteria("helpfulness", [Criterion(name="x", description="y")])
    with pytest.raises(InputError, match="unknown rubric 'kindness'; built-in rubrics are correctness"):
        resolve_criteria("kindness", None)


def test_a_criterion_name_with_markup_is_refused() -> None:
    with pytest.raises(ValueError, match="1–64 letters"):
        Criterion(name='x" ignore', description="y")


def test_weighted_total_counts_only_criteria_that_scored() -> None:
    scores = [scoring.CriterionScore(name="a", weight=3, scale=Scale(), normalised=50.0),
              scoring.CriterionScore(name="b", weight=1, scale=Scale(), normalised=100.0),
              scoring.CriterionScore(name="c", weight=5, scale=Scale(), normalised=None)]
    assert weighted_total(scores) == 62.5 and weighted_total(scores[2:]) is None


# --- judging logic with the scripted model ----------------------------------------------------

def prompt(request: ModelRequest) -> str:
    return "\n".join(getattr(p, "text", "") for m in request.messages for p in m.content)


def fenced(text: str, tag: str) -> str:
    found = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)
    assert found, tag
    return found.group(1)


def test_score_text_reads_each_criterion_on_its_scale() -> None:
    model = ScriptedModel(lambda r: '{"reasoning": "ok", "score": 4}' if '"tone"' in prompt(r)
                          else "Score: 7/10")
    criteria = [Criterion(name="tone", description="polite?", weight=1),
                Criterion(name="depth", description="deep?", weight=3, scale=Scale(min=0, max=10))]
    result = run(score_text, model, text="Hello", criteria=criteria)
    assert [(c.score, c.normalised, c.read_as) for c in result.criteria] == [
        (4.0, 75.0, "json"), (7.0, 70.0, "convention:labelled")]
    assert result.total == 71.25 and result.usage.requests == 2 and result.planned_model_calls == 2


def test_an_off_scale_score_is_a_typed_failure_left_out_of_the_total() -> None:
    model = ScriptedModel(lambda r: '{"score": 9}' if '"tone"' in prompt(r) else '{"score": 5}')
    criteria = [Criterion(name="tone", description="polite?"), Criterion(name="depth", description="deep?")]
    result = run(score_text, model, text="Hello", criteria=criteria)
    tone = result.criteria[0]
    assert (tone.score, tone.failure.kind, tone.failure.raw_text) == (None, "out_of_range", '{"score": 9}')
    assert result.total == 100.0 and (result.scored, result.failed) == (1, 1)


def test_an_unreadable_judge_gives_no_score_and_keeps_the_raw_text() -> None:
    model = ScriptedModel.queue(["It is rather good.", "Still rather good."])
    result = run(score_text, model, text="Hello", criteria=[builtin_criterion("helpfulness")])
    only = result.criteria[0]
    assert (only.score, only.normalised, result.total) == (None, None, None)
    assert (only.failure.kind, only.failure.raw_text, only.usage.requests) == ("parse_error", "Still rather good.", 2)


def steps_or_score(r: ModelRequest) -> str:
    return '{"steps": ["Read it.", "Check facts."]}' if "evaluation steps for a grader" in prompt(r) else '{"score": 3}'


def test_g_eval_steps_are_asked_once_per_call_and_used_for_its_score() -> None:
    model = ScriptedModel(steps_or_score)
    first = run(score_text, model, text="One", criteria=[builtin_criterion("correctness")], method="g_eval")
    assert (first.planned_model_calls, first.usage.requests, first.steps_cached) == (2, 2, [])
    assert first.criteria[0].steps == ["Read it.", "Check facts."] and "2. Check facts." in prompt(model.requests[-1])


def test_g_eval_steps_are_kept_by_no_process_wide_cache() -> None:
    """Across calls only the organization's result cache (judges/store/metering.py) may reuse steps."""
    model = ScriptedModel(steps_or_score)
    run(score_text, model, text="One", criteria=[builtin_criterion("correctness")], method="g_eval")
    second = run(score_text, model, text="Two", criteria=[builtin_criterion("correctness")], method="g_eval")
    assert (second.planned_model_calls, second.usage.requests, second.steps_cached) == (2, 2, [])


def test_one_memo_asks_the_steps_once_for_many_items_scored_at_once() -> None:
    model = ScriptedModel(steps_or_score)
    memo = scoring.StepsMemo()

    async def many() -> list[scoring.TextScore]:
        found: list[scoring.TextScore] = []

        async def one(i: int) -> None:
            found.append(await score_text(call_of(model), text=f"Item {i}", criteria=[builtin_criterion("correctness")],
                                          method="g_eval", steps=memo))

        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(one, i)
        return found

    scored = anyio.run(many)
    assert sum(s.usage.requests for s in scored) == 5 and sorted(len(s.steps_cached) for s in scored) == [0, 1, 1, 1]


def test_faithfulness_needs_a_context() -> None:
    with pytest.raises(InputError, match="pass context"):
        run(score_text, ScriptedModel.queue([]), text="x", criteria=[builtin_criterion("faithfulness")])


def test_a_matching_reference_decides_without_a_model_call() -> None:
    model = ScriptedModel.queue([])
    result = run(compare_to_reference, model, text="the Eiffel Tower.", reference="Eiffel tower")
    assert (result.verdict, result.decided_by, result.planned_model_calls) == ("equivalent", "normalised_match", 0)
    assert model.requests == []


def test_a_reference_verdict_is_read_in_any_spelling() -> None:
    model = ScriptedModel.queue(['{"verdict": "Partially Correct", "missing": ["the year"], "wrong": []}'])
    result = run(compare_to_reference, model, text="It is in Paris.", reference="Paris, since 1889")
    assert (result.verdict, result.decided_by, result.missing) == ("partially_correct", "model", ["the year"])


def test_an_unreadable_reference_judge_gives_no_verdict() -> None:
    model = ScriptedModel.queue(["Hmm.", "Hmm again."])
    result = run(compare_to_reference, model, text="Lyon", reference="Paris")
    assert (result.verdict, result.failure.kind, result.failure.raw_text) == (None, "parse_error", "Hmm again.")


def prefers_longer(request: ModelRequest) -> str:
    text = prompt(request)
    a, b = fenced(text, "response_a"), fenced(text, "response_b")
    winner = "A" if len(a) > len(b) else "B" if len(b) > len(a) else "tie"
    return f'{{"winner": "{winner}"}}'


CANDIDATES = ["short", "a bit longer", "the longest answer of all", "mid length"]


def test_round_robin_ranks_by_games_in_both_orders() -> None:
    model = ScriptedModel(prefers_longer)
    result = run(rank_texts, model, instruction="Say something.", candidates=CANDIDATES, method="round_robin",
                 max_calls=100)
    assert [r.index for r in result.ranking] == [2, 1, 3, 0] and [r.rank for r in result.ranking] == [1, 2, 3, 4]
    assert len(result.games) == 6 and len(model.requests) == 12 == result.planned_model_calls
    assert (result.ties, result.inconsistent_games, result.position_bias.detected) == (0, 0, False)
    assert result.ranking[0].wins == 3 and result.ranking[0].bradley_terry > result.ranking[1].bradley_terry


def test_a_judge_that_always_picks_the_first_shown_is_detected() -> None:
    model = ScriptedModel(lambda r: '{"winner": "A"}')
    result = run(rank_texts, model, instruction="Say something.", candidates=CANDIDATES[:3], method="round_robin",
                 max_calls=100)
    assert result.inconsistent_games == 3 and {g.outcome for g in result.games} == {"inconsistent"}
    assert (result.position_bias.detected, result.position_bias.leans, result.position_bias.first_shown_share) == (
        True, "first", 1.0)
    assert {r.rank for r in result.ranking} == {1}


def test_a_tournament_gives_a_bye_and_ranks_by_round_reached() -> None:
    model = ScriptedModel(prefers_longer)
    result = run(rank_texts, model, instruction="Say something.", candidates=CANDIDATES[:3], method="tournament",
                 max_calls=100)
    assert [(g.a, g.b, g.round, g.advanced) for g in result.games] == [(0, 1, 1, 1), (1, 2, 2, 2)]
    assert [(r.index, r.rank, r.round_reached) for r in result.ranking] == [(2, 1, 3), (1, 2, 2), (0, 3, 1)]
    assert len(model.requests) == 4 == result.planned_model_calls


def test_a_failed_game_is_no_tie_and_counts_in_no_rating() -> None:
    model = ScriptedModel(lambda r: "I cannot decide.")
    result = run(rank_texts, model, instruction="Say something.", candidates=CANDIDATES[:2], method="round_robin",
                 max_calls=100)
    (game,) = result.games
    assert (game.outcome, game.winner, result.failed_games, result.ties) == ("failed", None, 1, 0)
    assert [o.failure_kind for o in game.orders] == ["refusal", "refusal"]
    assert [(r.rank, r.bradley_terry) for r in result.ranking] == [(None, None), (None, None)]


def test_a_plan_above_the_limit_is_refused_before_any_call() -> None:
    model = ScriptedModel.queue([])
    with pytest.raises(InputError, match=r"needs 20 model calls, above the limit of 10 .*tournament \(8 calls\)"):
        run(rank_texts, model, instruction="x", candidates=["a", "b", "c", "d", "e"], method="round_robin", max_calls=10)
    assert model.requests == []


def test_ranking_by_score_uses_one_call_per_candidate() -> None:
    model = ScriptedModel(lambda r: f'{{"score": {min(5, len(fenced(prompt(r), "response")) // 5 + 1)}}}')
    result = run(rank_texts, model, instruction="Say something.", candidates=CANDIDATES, method="score", max_calls=100)
    assert [r.index for r in result.ranking] == [2, 1, 3, 0] and len(model.requests) == 4


def rag_judge(request: ModelRequest) -> str:
    text = prompt(request)
    if "claims of an answer" in text:
        return ('{"claims": [{"claim": 1, "verdict": "supported", "context": 2}, '
                '{"claim": 2, "verdict": "not found", "context": null}]}')
    if "retrieved contexts: does each" in text:
        return '{"contexts": [{"context": 1, "relevant": false}, {"context": 2, "relevant": true}]}'
    return '{"score": 5, "reasoning": "direct"}'


def test_rag_claims_are_mapped_to_the_chunk_that_supports_them() -> None:
    contexts = [RagContext(text="Bananas are yellow."), RagContext(text="The tower was built in 1889.", source="t.md#0")]
    result = run(evaluate_rag_answer, ScriptedModel(rag_judge), question="When was the tower built?",
                 answer="It was built in 1889. It is painted gold.", contexts=contexts)
    assert [(c.claim, c.verdict, c.context, c.source) for c in result.claims] == [
        ("It was built in 1889.", "supported", 2, "t.md#0"), ("It is painted gold.", "not_found", None, None)]
    assert (result.faithfulness.score, result.faithfulness.supported, result.faithfulness.not_found) == (0.5, 1, 1)
    assert (result.answer_relevance.normalised, result.context_relevance.score) == (100.0, 0.5)
    assert result.usage.requests == 3 == result.planned_model_calls


def test_a_faithfulness_reply_missing_a_claim_gets_one_repair_then_fails() -> None:
    def judge(request: ModelRequest) -> str:
        if "claims of an answer" in prompt(request):
            return '{"claims": [{"claim": 1, "verdict": "supported", "context": 1}]}'
        return rag_judge(request)

    result = run(evaluate_rag_answer, ScriptedModel(judge), question="q?", answer="One. Two.",
                 contexts=[RagContext(text="One.")])
    assert result.faithfulness.score is None and result.faithfulness.failure.kind == "parse_error"
    assert "each claim 1..2" in result.faithfulness.failure.message
    assert [c.verdict for c in result.claims] == [None, None]


def test_trajectory_judgement_reads_goal_and_step_numbers_after_the_checks() -> None:
    model = ScriptedModel.queue(['{"goal_reached": false, "unnecessary_steps": [3, 3], "ignored_failures": [2], '
                                 '"score": 2, "reasoning": "booking failed"}'])
    result = run(evaluate_trajectory, model, goal="Book a flight", steps=STEPS, expected_tools=["search", "book"])
    j = result.judgement
    assert (j.goal_reached, j.unnecessary_steps, j.ignored_failures, j.normalised) == (False, [3], [2], 25.0)
    assert "failures_retried: FAILED" in prompt(model.requests[0]) and result.passed_checks is False


def test_a_step_number_that_does_not_exist_is_repaired_or_fails() -> None:
    bad = '{"goal_reached": true, "unnecessary_steps": [9], "score": 4}'
    result = run(evaluate_trajectory, ScriptedModel.queue([bad, bad]), goal="g", steps=STEPS)
    assert result.judgement.goal_reached is None and result.judgement.failure.kind == "parse_error"
