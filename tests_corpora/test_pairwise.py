"""pairwise_compare's readers on real judges' stored replies: VIEScore's records and unparseable outputs,
MT-Bench GPT-4 pair judgments with upstream's own labels."""

from __future__ import annotations

import json
from typing import Any

from judges.pairwise.judge import combine_orders, read_viescore, swap_back
from judges.reading.parsing import OutputError
from judges.reading.verdicts import VerdictError, read_pair
from tests_corpora.conftest import corpus


def _jsonl(name: str) -> list[dict[str, Any]]:
    path = corpus("judge_outputs", name)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_viescore_sample_records_of_every_shape_parse_to_the_stored_scores() -> None:
    records = _jsonl("viescore_parsed_records_sample.jsonl")
    for r in records:
        stored = r["stored_record"]["score"]
        expected = min(float(x) for x in stored) if isinstance(stored, list) else float(stored)
        assert read_viescore(json.dumps(r["stored_record"]), "visual_quality").score == expected
    assert len(records) == 78


def test_unparseable_viescore_outputs_invent_no_score() -> None:
    invented = 0
    for r in _jsonl("viescore_unparseable_raw_mllm_judge_outputs.jsonl"):
        for family in ("scalar", "instruction_following", "visual_quality", "other"):
            try:
                read_viescore(r["raw_output"], family)
                invented += 1
            except OutputError:
                pass
    assert invented == 0


def test_mtbench_pair_consistency_rate_matches_the_upstream_labels() -> None:
    """g1 shows the answers as (model_1, model_2), g2 swapped; upstream stored both winners mapped back."""
    label = {"A": "Image A", "B": "Image B", "tie": "Tie"}
    upstream = {"model_1": "Image A", "model_2": "Image B", "tie": "Tie"}
    ours_consistent = ours_both = up_consistent = up_both = 0
    for r in _jsonl("mtbench_gpt4_pair__Stefanstud_FastChat.jsonl"):
        verdicts = []
        for game, swapped in (("g1", False), ("g2", True)):
            try:
                v = label[read_pair(r[f"{game}_judgment"]).winner]
                verdicts.append(swap_back(v, "image") if swapped else v)
            except VerdictError:
                verdicts.append("Failed")
        _, consistent = combine_orders(*verdicts)
        if consistent is not None:
            ours_both += 1
            ours_consistent += consistent
        if "error" not in (r["g1_winner"], r["g2_winner"]):
            up_both += 1
            up_consistent += upstream[r["g1_winner"]] == upstream[r["g2_winner"]]
    assert (ours_consistent, ours_both) == (up_consistent, up_both) == (46, 73)
