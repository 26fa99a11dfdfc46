"""calibrate_judge's statistics on the VIEScore human raters' own files (three raters, 985 units)."""

from __future__ import annotations

import json

import pytest

from judges.calibration import stats
from judges.calibration.core import human_agreement
from judges.calibration.dataset import Item
from tests.test_calibration import alpha_by_pairs, overall
from tests_corpora.conftest import corpus

CORPUS = "judge_outputs", "viescore_human_ratings"


def corpus_ratings() -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(sample, model) -> each rater's [semantic consistency, perceptual quality]."""
    units: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for rater in (1, 2, 3):
        lines = corpus(*CORPUS, f"Text-To-Image_rater{rater}.tsv").read_text().splitlines()
        models = lines[0].split("\t")[1:]
        for line in lines[1:]:
            uid, *cells = line.split("\t")
            for model, cell in zip(models, cells, strict=True):
                sc, pq = json.loads(cell.replace(" ", ""))
                units.setdefault((uid, model), []).append((float(sc), float(pq)))
    return units


def test_viescore_raters_agreement_from_the_corpus_files() -> None:
    units = corpus_ratings()
    assert len(units) == 985 and {len(u) for u in units.values()} == {3}
    o = [[overall(sc, pq) for sc, pq in u] for u in units.values()]
    sc = [[r[0] for r in u] for u in units.values()]
    pq = [[r[1] for r in u] for u in units.values()]
    found = [stats.krippendorff_alpha(x, "interval") for x in (o, sc, pq)]
    assert [round(a, 6) for a in found if a is not None] == [0.526333, 0.586195, 0.337366]
    assert found == pytest.approx([alpha_by_pairs(x) for x in (o, sc, pq)], abs=1e-12)


def test_human_agreement_of_a_dataset_is_the_interval_alpha_of_its_raters() -> None:
    units = corpus_ratings()
    items = [Item(id=f"{k[0]}/{k[1]}", inputs={"text": "t"}, scores=[overall(*r) for r in u])
             for k, u in units.items()]
    found = human_agreement(items, pairwise=False)
    assert (found.raters, found.units, found.level) == (3, 985, "interval")
    assert round(found.krippendorff_alpha or 0, 6) == 0.526333
