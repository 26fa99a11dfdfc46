"""calibrate_judge as hosts use it, on the VIEScore human raters' own ratings (985 images, three raters)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fake_model_server import FakeModelServer
from tests.test_calibration import overall
from tests.test_calibration_as_used import expected_scores, noisy_scorer_report
from tests_corpora.test_calibration import corpus_ratings

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.mark.usefixtures("on_engine")  # the report is stored, and read back
async def test_a_noisy_scorer_on_the_viescore_ratings_has_the_expected_correlations(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    rows = [(f"{uid}/{model}", [overall(*r) for r in ratings]) for (uid, model), ratings in corpus_ratings().items()]
    job, again, means = await noisy_scorer_report(tmp_path, fake_server, rows)
    report = job["result"]
    assert job["status"] == "completed" and (report["items"], report["judged"], report["failed"]) == (985, 985, 0)
    assert (report["scores"]["spearman"], report["scores"]["kendall_tau"], report["scores"]["pearson"]) == \
        expected_scores(means)
    assert round(report["humans"]["krippendorff_alpha"], 6) == 0.526333 and report["humans"]["raters"] == 3
    assert again == report and len(fake_server.requests) == 985
