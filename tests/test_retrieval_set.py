"""The retrieval evaluation set (bench/data/retrieval, issue 31) is the one committed before tuning: its size,
its documents and its dev/test split. (That each answer is in its document: tests_corpora/.)"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "bench" / "data" / "retrieval"


def rows(name: str) -> list[dict[str, str]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


def test_questions_cover_163_questions_over_14_documents() -> None:
    questions = rows("questions.jsonl")
    assert (len(questions), len({q["document"] for q in questions})) == (163, 14)
    assert len({q["id"] for q in questions}) == 163


def test_question_split_is_the_committed_draw() -> None:
    assert Counter(q["split"] for q in rows("questions.jsonl")) == {"dev": 77, "test": 86}


def test_every_document_with_two_questions_has_both_splits() -> None:
    by_doc: dict[str, set[str]] = {}
    for q in rows("questions.jsonl"):
        by_doc.setdefault(q["document"], set()).add(q["split"])
    assert all(splits == {"dev", "test"} for splits in by_doc.values())


def test_briefs_are_24_split_in_halves() -> None:
    briefs = rows("briefs.jsonl")
    assert Counter(b["split"] for b in briefs) == {"dev": 12, "test": 12}
    assert all(b["brief"] and b["prompt"] and b["rule"] for b in briefs)
