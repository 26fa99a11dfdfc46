"""Chunking: 1000/200 by default, boundaries preferred, offsets and pages kept."""

from __future__ import annotations

import itertools

import pytest

from rag.chunking import chunk_text


def test_short_text_is_one_chunk() -> None:
    (c,) = chunk_text("Use the blue logo.")
    assert (c.index, c.text, c.start, c.end) == (0, "Use the blue logo.", 0, 18)


def test_chunks_respect_size_and_overlap() -> None:
    text = " ".join(f"word{i}" for i in range(2000))
    chunks = chunk_text(text, 1000, 200)
    assert all(len(c.text) <= 1000 for c in chunks)
    for a, b in itertools.pairwise(chunks):
        assert b.start < a.end  # overlapping
        assert a.end - b.start <= 200 + 10


def test_offsets_point_at_the_chunk_text() -> None:
    text = "Para one.\n\n" * 300
    for c in chunk_text(text, 500, 100):
        assert text[c.start : c.end] == c.text


def test_paragraph_boundary_is_preferred() -> None:
    text = ("a" * 600) + "\n\n" + ("b" * 600)
    first = chunk_text(text, 1000, 200)[0]
    assert first.text == "a" * 600


def test_sentence_boundary_is_preferred_over_a_word() -> None:
    text = ("Word " * 120) + "End of sentence. " + ("more " * 200)
    first = chunk_text(text, 1000, 200)[0]
    assert first.text.endswith("End of sentence.")


def test_pdf_pages_are_attached_to_chunks() -> None:
    page1, page2 = "x " * 400, "y " * 400
    text = page1 + "\n\n" + page2
    chunks = chunk_text(text, 500, 100, page_starts=[0, len(page1) + 2])
    assert chunks[0].page == 1 and chunks[-1].page == 2


def test_overlap_must_be_smaller_than_size() -> None:
    with pytest.raises(ValueError, match="overlap"):
        chunk_text("abc", 100, 100)
