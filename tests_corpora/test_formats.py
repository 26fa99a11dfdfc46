"""Document formats on the shared corpora (pypdf's and mammoth's own test files): the upstream text, or the
expected clean failure."""

from __future__ import annotations

import json

import pytest

from rag.formats import DOCX, PDF, DocumentError, Limits, detect_mime, parse
from tests_corpora.conftest import CORPORA, corpus

LIMITS = Limits()


def pdf(name: str) -> bytes:
    return corpus("pdf", name).read_bytes()


def test_pdf_text_matches_upstream_crazyones() -> None:
    expected = corpus("pdf", "crazyones.txt").read_text(encoding="utf-8").replace("\r\n", "\n")
    assert parse(pdf("crazyones.pdf"), "c.pdf", LIMITS).text == expected.strip("\n")


def test_multilingual_pdf_keeps_every_script() -> None:
    text = parse(pdf("hello-world.pdf"), None, LIMITS).text
    for phrase in ("Hello World", "مرحبا بالعالم", "Привет, мир", "你好世界", "สวัสดีชาวโลก", "こんにちは世界"):
        assert phrase in text


def test_pdf_pages_are_counted_and_offset() -> None:
    doc = parse(pdf("pdflatex-outline.pdf"), None, LIMITS)
    assert doc.pages == 4
    # Each offset lands on the first words of its page (pdflatex-outline.pdf: contents, then pages 1-3).
    assert [doc.text[start : start + 24] for start in doc.page_starts] == [
        "Contents\n1 Foo 2\n2 Bar 2",
        "1 Foo\nHello, here is som",
        "written and an impressio",
        "gives you information ab",
    ]


@pytest.mark.parametrize("name", ["r2-empty-password.pdf", "r6-empty-password.pdf", "unencrypted.pdf"])
def test_empty_password_pdfs_decrypt(name: str) -> None:
    assert parse(pdf(name), None, LIMITS).text == "pdf encryption test\npassword: asdfzxcv"


def test_pdf_with_a_real_password_fails_cleanly() -> None:
    with pytest.raises(DocumentError, match="password-protected"):
        parse(pdf("libreoffice-writer-password.pdf"), None, LIMITS)


def test_malformed_xref_pdf_is_recovered() -> None:
    assert "test example" in parse(pdf("issue-297.pdf"), None, LIMITS).text


@pytest.mark.parametrize("name", ["git.pdf", "box.pdf"])
def test_image_only_pdf_has_no_extractable_text(name: str) -> None:
    with pytest.raises(DocumentError, match=r"no extractable text \(scanned document\? OCR is not supported\)"):
        parse(pdf(name), None, LIMITS)


def test_ocr_layer_pdf_is_read() -> None:
    assert len(parse(pdf("Seige_of_Vicksburg_Sample_OCR.pdf"), None, LIMITS).text) > 10000


def test_brand_colour_codes_survive_extraction() -> None:
    text = parse(pdf("zowe_conformance_brand_guidelines.pdf"), None, LIMITS).text
    assert "HEX#488EFF" in text and "3274F9" in text


def test_pdf_with_an_image_keeps_its_text() -> None:
    assert parse(pdf("jpeg.pdf"), None, LIMITS).text == "A PDF with a JPEG image."


def test_toy_pdf_has_the_upstream_layout_lines() -> None:
    """Upstream asserts layout mode; we extract plain text, so compare line by line, spacing aside."""
    expected = [line.strip() for line in corpus("pdf", "toy.layout.txt").read_text().splitlines() if line.strip()]
    assert parse(pdf("toy.pdf"), None, LIMITS).text.splitlines() == expected


def docx_expected() -> dict[str, dict]:
    return json.loads(corpus("docx", "EXPECTED.json").read_text())["files"]


def _docx_names() -> list[str]:
    expected = CORPORA / "docx" / "EXPECTED.json"
    if not expected.exists():  # the test below then fails on the missing file (never an empty, skipped set)
        return ["EXPECTED.json"]
    return sorted(n for n in json.loads(expected.read_text())["files"] if n != "empty.docx")


# mammoth's raw text drops notes; ours appends them (issue 29 item 8; tests/test_documents.py builds its own).
NOTES = {"footnotes.docx": "Footnotes", "endnotes.docx": "Endnotes"}


@pytest.mark.parametrize("name", _docx_names())
def test_docx_raw_text_matches_mammoth(name: str) -> None:
    expected = docx_expected()[name]["observed_mammoth_1.13.0_raw_text"].strip("\n")
    if name in NOTES:
        expected += f"\n\n{NOTES[name]}:\n\n[1] A tachyon walks into a bar.\n\n[2] Fin."
    assert parse(corpus("docx", name).read_bytes(), name, LIMITS).text == expected


def test_empty_docx_fails_as_having_no_text() -> None:
    with pytest.raises(DocumentError, match="no text"):
        parse(corpus("docx", "empty.docx").read_bytes(), "empty.docx", LIMITS)


def test_type_is_detected_by_content_not_extension() -> None:
    assert detect_mime(pdf("crazyones.pdf"), "notes.txt") == PDF
    assert detect_mime(corpus("docx", "tables.docx").read_bytes(), "x.pdf") == DOCX
