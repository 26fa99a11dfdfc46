"""Document formats on the shared corpora: the expected text, or the expected clean failure."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from rag.formats import DOCX, MARKDOWN, PDF, TEXT, DocumentError, Limits, detect_mime, parse
from tests.conftest import CORPORA, corpus

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


def docx_expected() -> dict[str, dict]:
    return json.loads(corpus("docx", "EXPECTED.json").read_text())["files"]


def _docx_names() -> list[str]:
    expected = CORPORA / "docx" / "EXPECTED.json"
    if not expected.exists():
        return []
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
    assert detect_mime(b"# Title\n", "brand.md") == MARKDOWN
    assert detect_mime(b"plain", "brand.txt") == TEXT


def test_binary_that_is_no_document_is_refused() -> None:
    with pytest.raises(DocumentError, match="binary file"):
        detect_mime(b"\x89PNG\r\n\x1a\n\x00\x00", "logo.pdf")


def docx_bomb(size: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("word/document.xml", b"<w:document>" + b"A" * size + b"</w:document>")
    return buf.getvalue()


def test_docx_zip_bomb_is_refused_before_parsing() -> None:
    with pytest.raises(DocumentError, match="zip bomb"):
        parse(docx_bomb(200 * 1024 * 1024), "bomb.docx", LIMITS)


def flate_bomb_pdf(inflated: int) -> bytes:
    """A one-page PDF whose content stream inflates to `inflated` bytes of text operators."""
    import zlib

    body = zlib.compress(b"BT /F1 12 Tf 10 10 Td (" + b"A" * inflated + b") Tj ET", 9)
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(body) + body + b"\nendstream",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for i, obj in enumerate(objs, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % i + obj + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref))
    return out.getvalue()


def test_pdf_with_an_image_keeps_its_text() -> None:
    assert parse(pdf("jpeg.pdf"), None, LIMITS).text == "A PDF with a JPEG image."


def test_toy_pdf_has_the_upstream_layout_lines() -> None:
    """Upstream asserts layout mode; we extract plain text, so compare line by line, spacing aside."""
    expected = [line.strip() for line in corpus("pdf", "toy.layout.txt").read_text().splitlines() if line.strip()]
    assert parse(pdf("toy.pdf"), None, LIMITS).text.splitlines() == expected
