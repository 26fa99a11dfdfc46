"""certify_judge as hosts use it, on the VIEScore human raters' own ratings (985 images, three raters): rater 1
replayed as the judge (through the fake model), the mean of raters 2 and 3 as the labels, pass = VIEScore's
overall score (the geometric mean of SC and PQ, 0–1) at 0.5 or more. How far one person can be certified
against two others: the ceiling a model judge is read against."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.fake_model_server import FakeModelServer, Recorded, Scripted
from tests.test_calibration import overall
from tests.test_certify import wilson_by_hand
from tests.test_text_tools_as_used import judge_mcp
from tests_corpora.test_calibration import corpus_ratings

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_one_viescore_rater_is_not_certified_against_the_other_two(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    units = list(corpus_ratings().items())
    first = [overall(*ratings[0]) for _, ratings in units]
    rest = [(overall(*ratings[1]) + overall(*ratings[2])) / 2 for _, ratings in units]

    def rater_one(rec: Recorded) -> Scripted:
        found = re.search(r"ITEM (\d+) ", rec.text())
        return Scripted(text=json.dumps({"score": first[int(found.group(1))]}) if found else "no item")

    fake_server.respond_with(rater_one)
    dataset = [{"id": f"{uid}/{model}", "text": f"ITEM {i} {uid}/{model}",
                "human_scores": [overall(*ratings[1]), overall(*ratings[2])]}
               for i, ((uid, model), ratings) in enumerate(units)]
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await c.call_tool("certify_judge", {
            "judge": "score_text", "dataset": dataset, "human_pass_at": 0.5, "pass_at": 50, "background": False,
            "criteria": [{"name": "overall", "description": "VIEScore overall", "scale": {"min": 0, "max": 1}}],
            "verdicts": [100 * x for x in first]})
    cert = result.structured_content
    positives = [f >= 0.5 for f, r in zip(first, rest, strict=True) if r >= 0.5]
    negatives = [f < 0.5 for f, r in zip(first, rest, strict=True) if r < 0.5]
    assert (cert["n_positive"], cert["n_negative"], cert["ties"], cert["failed"]) == (827, 158, 0, 0)
    assert (sum(positives), sum(negatives)) == (748, 94)
    assert (cert["tpr"]["value"], cert["tpr"]["low"]) == pytest.approx((748 / 827, wilson_by_hand(748, 827)[0]))
    assert (cert["tnr"]["value"], cert["tnr"]["low"]) == pytest.approx((94 / 158, wilson_by_hand(94, 158)[0]))
    assert cert["certified"] is False and cert["needed"] == {"positives": 0, "negatives": None}
    assert [round(cert["corrected"][k]["value"], 3) for k in ("raw", "corrected")] == [0.824, 0.840]
    assert len(fake_server.requests) == 985
