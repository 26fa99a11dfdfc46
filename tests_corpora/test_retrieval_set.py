"""Every answer and rule of the retrieval evaluation set (bench/data/retrieval) is a passage of its document as
the server reads it (whitespace collapsed), so bench/retrieval.py can find it in a chunk."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from rag.formats import Limits, parse
from tests_corpora.conftest import corpus

DATA = Path(__file__).resolve().parents[1] / "bench" / "data" / "retrieval"


def rows(name: str) -> list[dict[str, str]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


@functools.cache
def text_of(document: str) -> str:
    return " ".join(parse(corpus("retrieval", document).read_bytes(), document, Limits()).text.split())


def test_every_answer_is_a_passage_of_its_document() -> None:
    missing = [q["id"] for q in rows("questions.jsonl") if " ".join(q["answer"].split()) not in text_of(q["document"])]
    assert missing == []


def test_every_rule_is_a_passage_of_its_document() -> None:
    missing = [b["id"] for b in rows("briefs.jsonl") if " ".join(b["rule"].split()) not in text_of(b["document"])]
    assert missing == []


def test_every_answer_lies_whole_in_one_chunk_of_the_default_size() -> None:
    # The hit rule (a chunk of the document holding the whole answer) loses no answer to a chunk boundary.
    from rag.chunking import chunk_text

    def chunks(document: str) -> list[str]:
        doc = parse(corpus("retrieval", document).read_bytes(), document, Limits())
        return [" ".join(c.text.split()) for c in chunk_text(doc.text, 1000, 200, doc.page_starts or None)]

    held = functools.cache(chunks)
    missing = [q["id"] for q in rows("questions.jsonl")
               if not any(" ".join(q["answer"].split()) in c for c in held(q["document"]))]
    assert missing == []
