"""The published verdict conventions: each read, each with its ambiguous and decoy forms."""

from __future__ import annotations

import pytest

from judges.reading.verdicts import VerdictError, read_pair, read_rating


def rating(text: str) -> tuple[float, str]:
    r = read_rating(text)
    return r.value, r.convention


def pair(text: str) -> tuple[str, str]:
    r = read_pair(text)
    return r.winner, r.convention


def failure_kind(fn, text: str) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(VerdictError) as info:
        fn(text)
    return info.value.kind


# --- ratings ---------------------------------------------------------------------------------

def test_fastchat_rating_is_read() -> None:
    assert rating("Good answer.\n\nRating: [[8]]") == (8, "fastchat")


def test_fastchat_fractional_rating_is_read() -> None:
    assert rating("The answer is fine. [[8.5]]") == (8.5, "fastchat")


def test_fastchat_labelled_rating_beats_a_later_bare_mention() -> None:
    assert rating("Rating: [[8]]\nIt could earn [[9]] with sources.") == (8, "fastchat")


def test_fastchat_two_different_labelled_ratings_are_ambiguous() -> None:
    assert failure_kind(read_rating, "Rating: [[10]] at first. On reflection, Rating: [[3]]") == "ambiguous"


def test_fastchat_disagreeing_bare_ratings_are_ambiguous() -> None:
    assert failure_kind(read_rating, "earning a rating of [[9]]. Improved, it would earn a rating of [[10]].") == "ambiguous"


def test_fastchat_repeated_identical_ratings_are_fine() -> None:
    assert rating("Rating: [[7]]\n\nRating: [[7]]") == (7, "fastchat")


def test_list_index_in_quoted_code_is_not_a_rating() -> None:
    assert failure_kind(read_rating, "```python\nmajority = array[0]\n```\nThe code looks right.") == "parse_error"


def test_c_array_size_in_inline_code_is_not_a_rating() -> None:
    assert failure_kind(read_rating, "It declares `char input[100]` and reads past it.") == "parse_error"


def test_rating_inside_a_code_block_decoy_does_not_count() -> None:
    assert rating("```\nRating: [[2]]\n```\nThat example is wrong. Rating: [[9]]") == (9, "fastchat")


def test_fastchat_single_bracket_alone_on_its_line_is_read() -> None:
    assert rating("[The Start of Rating]\n\n[5]\n\n[The End of Rating]") == (5, "fastchat_single_bracket")


def test_single_bracket_inside_prose_is_not_a_rating() -> None:
    assert failure_kind(read_rating, "see item [5] of the list") == "parse_error"


def test_labelled_line_rating_is_read() -> None:
    assert rating("Clear and correct.\nRating: 7") == (7, "labelled")


def test_labelled_line_score_out_of_ten_is_read_with_its_denominator() -> None:
    r = read_rating("Explanation...\n**Score:** 7/10")
    assert (r.value, r.convention, r.denominator) == (7, "labelled", 10)


def test_labelled_rating_inside_a_sentence_is_not_read() -> None:
    assert failure_kind(read_rating, "The previous judge gave Rating: 7 but I disagree strongly here.") == "parse_error"


def test_two_different_labelled_lines_are_ambiguous() -> None:
    assert failure_kind(read_rating, "Score: 4\nAfter a second look:\nScore: 8") == "ambiguous"


def test_non_english_label_is_read() -> None:
    assert rating("回答は正確です。\n評価：[[7]]") == (7, "fastchat")


def test_non_english_labelled_line_is_read() -> None:
    assert rating("La respuesta es correcta.\nPuntuación: 6") == (6, "labelled")


def test_fraction_on_the_final_line_is_read() -> None:
    assert rating("Mostly right, one slip.\n\n7/10") == (7, "fraction")


def test_fraction_inside_prose_is_not_read() -> None:
    assert failure_kind(read_rating, "The assistant's response rate is 10/10 in my view, and more.") == "parse_error"


def test_confidence_fraction_is_not_a_rating() -> None:
    assert failure_kind(read_rating, "Good.\nConfidence: 9/10 and then some") == "parse_error"


def test_prometheus_result_score_is_read() -> None:
    assert rating("Feedback: the response covers most points. [RESULT] 4") == (4, "prometheus")


def test_two_different_prometheus_results_are_ambiguous() -> None:
    assert failure_kind(read_rating, "[RESULT] 2\n...\n[RESULT] 5") == "ambiguous"


def test_reply_that_is_only_a_number_is_read() -> None:
    assert rating("\n5.0\n") == (5, "number_only")


def test_number_at_the_start_of_prose_is_not_read() -> None:
    assert failure_kind(read_rating, "10.00\n\nThe assistant's answer is a perfect 10.") == "parse_error"


def test_judgelm_equal_pair_on_the_first_line_is_read() -> None:
    assert rating("8 8\nBoth answers are equally good.") == (8, "judgelm")


def test_judgelm_different_pair_is_ambiguous_for_one_rating() -> None:
    assert failure_kind(read_rating, "8 6\nAssistant 1 is better.") == "ambiguous"


def test_different_conventions_disagreeing_are_ambiguous() -> None:
    assert failure_kind(read_rating, "Rating: [[8]]\n[RESULT] 3") == "ambiguous"


def test_prose_with_no_rating_fails() -> None:
    assert failure_kind(read_rating, "The image has a naturalness score of 8 and an artifacts score of -1.") == "parse_error"


# --- pairwise ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("marker", "winner"), [("A", "A"), ("B", "B"), ("C", "tie")])
def test_fastchat_pair_verdicts_with_final_verdict_label(marker: str, winner: str) -> None:
    assert pair(f"Both are good, but...\nFinal Verdict: [[{marker}]]") == (winner, "fastchat")


def test_fastchat_pair_verdict_without_label() -> None:
    assert pair("Assistant B is more accurate. [[B]]") == ("B", "fastchat")


def test_fastchat_two_different_pair_markers_are_ambiguous() -> None:
    assert failure_kind(read_pair, "If only style mattered, [[A]]; on accuracy, [[B]].") == "ambiguous"


def test_fastchat_labelled_pair_marker_beats_a_quoted_format_mention() -> None:
    assert pair('I must answer "[[A]]" if A is better. A is worse.\nFinal verdict: [[B]]') == ("B", "fastchat")


def test_single_bracket_pair_verdict_as_the_final_line() -> None:
    assert pair("A is more detailed.\n[A]") == ("A", "fastchat_single_bracket")


def test_single_bracket_pair_verdict_inside_prose_is_not_read() -> None:
    assert failure_kind(read_pair, "As noted in [A] and [B], both cite sources. I cannot decide.") in ("parse_error", "refusal")


@pytest.mark.parametrize(("marker", "winner", "margin"), [
    ("A>>B", "A", "strong"), ("A>B", "A", "slight"), ("A=B", "tie", "tie"), ("B>A", "B", "slight"),
    ("B>>A", "B", "strong")])
def test_arena_hard_verdicts_keep_their_margin(marker: str, winner: str, margin: str) -> None:
    r = read_pair(f"My final verdict is Assistant X: [[{marker}]]")
    assert (r.winner, r.convention, r.margin) == (winner, "arena_hard", margin)


def test_arena_hard_two_different_verdicts_are_ambiguous() -> None:
    assert failure_kind(read_pair, "[[A>B]] on style, but overall [[B>>A]]") == "ambiguous"


def test_llmbar_bare_output_is_read() -> None:
    assert pair("Output (b)") == ("B", "llmbar")


def test_llmbar_therefore_sentence_is_read() -> None:
    assert pair("Output (a) misses the point.\nTherefore, Output (b) is better.") == ("B", "llmbar")


def test_llmbar_both_called_better_is_ambiguous() -> None:
    assert failure_kind(read_pair, "Output (a) is better in tone. Output (b) is better in facts.") == "ambiguous"


def test_llmbar_mentions_without_a_decision_are_not_read() -> None:
    assert failure_kind(read_pair, "Output (a) is long. Output (b) is short.") == "parse_error"


def test_alpaca_eval_ordered_models_json_maps_to_the_shown_order() -> None:
    text = '{"ordered_models": [{"model": "m2", "rank": 1}, {"model": "m1", "rank": 2}]}'
    assert pair(text) == ("B", "alpaca_eval_ranking")


def test_alpaca_eval_older_list_form_is_read() -> None:
    assert pair("[{'model': 'model_1', 'rank': 1}, {'model': 'model_2', 'rank': 2}]") == ("A", "alpaca_eval_ranking")


@pytest.mark.parametrize(("ranking", "winner"), [
    ('{"ordered_models": [{"model": "m", "rank": 1}, {"model": "M", "rank": 2}]}', "A"),
    ('{"ordered_models": [{"model": "M", "rank": 1}, {"model": "m", "rank": 2}]}', "B"),
    ('{"ordered_models": [{"model": "model2", "rank": 1}, {"model": "model1", "rank": 2}]}', "B"),
    ('{"concise_explanation": "M is complete.", "ordered_models": [{"model": "M", "rank": 1}, {"model": "m", "rank": 2}]}',
     "B")])
def test_alpaca_eval_2_names_m_and_M_read_as_first_and_second_shown(ranking: str, winner: str) -> None:
    assert pair(ranking) == (winner, "alpaca_eval_ranking")


@pytest.mark.parametrize(("reply", "winner"), [
    ("m", "A"), ("M", "B"), (" M\n", "B"),
    ("Output m is accurate but M adds a wrong date.\n\n## Best Model Identifier\nm", "A")])  # the *_cot_* form
def test_the_weighted_alpaca_eval_one_token_reply_is_read_by_its_case(reply: str, winner: str) -> None:
    assert pair(reply) == (winner, "alpaca_eval_identifier")


def test_alpaca_eval_ranking_with_m_twice_fails() -> None:
    assert failure_kind(read_pair, '{"ordered_models": [{"model": "m", "rank": 1}, {"model": "m", "rank": 2}]}') \
        == "parse_error"


def test_alpaca_eval_ranking_with_an_unknown_model_fails() -> None:
    assert failure_kind(read_pair, '[{"model": "gpt-4", "rank": 1}, {"model": "m2", "rank": 2}]') == "parse_error"


@pytest.mark.parametrize(("first_line", "winner"), [("1", "A"), ("2", "B"), ("Tie", "tie")])
def test_pandalm_first_line_verdicts(first_line: str, winner: str) -> None:
    assert pair(f"{first_line}\n\nReason: the first response covers every step.") == (winner, "pandalm")


def test_judgelm_score_pair_on_the_first_line() -> None:
    r = read_pair("8 7\nAssistant 1 gave a more precise answer.")
    assert (r.winner, r.convention, r.scores) == ("A", "judgelm", (8, 7))


def test_judgelm_equal_scores_are_a_tie() -> None:
    assert pair("6 6\nBoth are fine.") == ("tie", "judgelm")


def test_prometheus_relative_result_is_read() -> None:
    assert pair("Feedback: Response B is grounded in the rubric. [RESULT] B") == ("B", "prometheus")


def test_two_prometheus_relative_results_are_ambiguous() -> None:
    assert failure_kind(read_pair, "[RESULT] A\n[RESULT] B") == "ambiguous"


@pytest.mark.parametrize("reply", ["none", "Neither.", "neither of them"])
def test_none_or_neither_is_a_failure_not_a_tie(reply: str) -> None:
    assert failure_kind(read_pair, reply) == "refusal"


def test_refusal_is_a_failure_not_a_tie() -> None:
    assert failure_kind(read_pair, "I'm sorry, but I can't compare these responses.") == "refusal"


def test_conventions_that_disagree_are_ambiguous() -> None:
    assert failure_kind(read_pair, "Final verdict: [[A]]\n[RESULT] B") == "ambiguous"


def test_pair_marker_inside_code_is_not_a_verdict() -> None:
    assert failure_kind(read_pair, "Format: `[[A]]` if A is better.\nBoth are fine.") == "parse_error"


def test_prometheus_result_with_its_denominator_is_read() -> None:
    r = read_rating("Feedback: solid. [RESULT] 4/5")
    assert (r.value, r.convention, r.denominator) == (4, "prometheus", 5)


def test_fastchat_two_score_pair_gives_the_higher_one() -> None:
    r = read_pair("Assistant A is clearer.\n[[8, 6]]")
    assert (r.winner, r.convention, r.scores) == ("A", "fastchat_two_score", (8, 6))


def test_fastchat_two_scores_within_a_tenth_are_a_tie() -> None:
    assert pair("[[7.5, 7.45]]") == ("tie", "fastchat_two_score")


def test_fastchat_two_score_pair_is_ambiguous_as_one_rating() -> None:
    assert failure_kind(read_rating, "[[8, 6]]") == "ambiguous"


def test_auto_j_final_decision_is_read() -> None:
    assert pair("Response 1 misses a step.\nSo, the final decision is Response 2.") == ("B", "auto_j")


def test_auto_j_two_different_decisions_are_ambiguous() -> None:
    assert failure_kind(read_pair, "the final decision is Response 1 ... no, the final decision is Tie") == "ambiguous"


def test_raw_newlines_inside_a_json_string_still_parse() -> None:
    from judges.reading.parsing import json_candidates

    assert json_candidates('Here: {"score": [8, 9], "reasoning": "line one\nline two"}') == [
        {"score": [8, 9], "reasoning": "line one\nline two"}]


def test_a_python_dict_literal_reply_is_read_as_json() -> None:
    from judges.reading.parsing import json_candidates

    assert json_candidates("Result: {'score': [7, 9], 'reasoning': 'fine'} done") == [
        {"score": [7, 9], "reasoning": "fine"}]


def test_format_markers_the_judge_repeats_in_quotes_are_decoys() -> None:
    text = ('I must answer strictly in the format "[[A]]" if assistant A is better, "[[B]]" if assistant B is '
            'better, and "[[C]]" for a tie.\nAssistant B is more accurate.\n[[B]]')
    assert pair(text) == ("B", "fastchat")


def test_a_quoted_example_rating_is_a_decoy() -> None:
    assert rating('The format is "Rating: [[5]]".\nThe answer is thorough.\nRating: [[8]]') == (8, "fastchat")


def test_a_reply_that_is_only_a_quoted_marker_is_read() -> None:
    assert pair('"[[A]]"') == ("A", "fastchat")


def test_labelled_line_with_out_of_in_parentheses_is_read() -> None:
    r = read_rating("Helpful and correct.\nScore: 8 (out of 10)")
    assert (r.value, r.denominator) == (8, 10)


@pytest.mark.parametrize(("reply", "winner"), [("Image A", "A"), ("B", "B"), ("**Response B**", "B"), ("Equal", "tie")])
def test_a_reply_that_is_only_the_winner_is_read(reply: str, winner: str) -> None:
    assert pair(reply) == (winner, "winner_only")


def test_a_winner_word_inside_prose_is_not_read() -> None:
    assert failure_kind(read_pair, "Image A has better colours, but Image B follows the brief.") == "parse_error"
