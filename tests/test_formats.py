"""Document formats on PDFs and DOCX files the tests write (tests/documents.py), read by the real pypdf and
mammoth: the expected text, or the expected clean failure. The same on real-world files: tests_corpora/."""

from __future__ import annotations

import io
import zipfile

import pytest

from rag.formats import DOCX, MARKDOWN, PDF, TEXT, DocumentError, Limits, detect_mime, parse
from tests import documents

LIMITS = Limits()


BRAND = [["Brand guidelines (2026)", "The primary blue is HEX#488EFF; the accent is 3274F9."],
         ["Logo", "Keep clear space around the logo equal to its height."],
         ["Typography", "Headings use a geometric sans serif."]]


def test_pdf_text_is_the_lines_of_each_page() -> None:
    assert parse(documents.pdf(BRAND), "brand.pdf", LIMITS).text == (
        "Brand guidelines (2026)\nThe primary blue is HEX#488EFF; the accent is 3274F9.\n\n"
        "Logo\nKeep clear space around the logo equal to its height.\n\n"
        "Typography\nHeadings use a geometric sans serif.")


def test_pdf_pages_are_counted_and_offset() -> None:
    doc = parse(documents.pdf(BRAND), None, LIMITS)
    assert doc.pages == 3
    assert [doc.text[start : start + 12] for start in doc.page_starts] == ["Brand guidel", "Logo\nKeep cl", "Typography\nH"]


@pytest.mark.parametrize("algorithm", ["RC4-40", "RC4-128", "AES-256"])
def test_empty_password_pdfs_decrypt(algorithm: str) -> None:
    locked = documents.encrypted(documents.pdf([["pdf encryption test", "password: asdfzxcv"]]), "", algorithm)
    assert b"/Encrypt" in locked
    assert parse(locked, None, LIMITS).text == "pdf encryption test\npassword: asdfzxcv"


def test_pdf_with_a_real_password_fails_cleanly() -> None:
    locked = documents.encrypted(documents.pdf([["the secret plan"]]), "letmein")
    with pytest.raises(DocumentError, match=r"^the PDF is password-protected; remove the password and upload it again$"):
        parse(locked, None, LIMITS)


def test_malformed_xref_pdf_is_recovered() -> None:
    damaged = documents.pdf([["test example of a damaged file"]], xref_shift=7)
    table = damaged[damaged.index(b"\nxref\n") + 1 :].split(b"\n")
    first = int(table[3].split()[0])  # object 1's entry, after "xref", "0 7" and the free entry
    assert not damaged[first:].startswith(b"1 0 obj")  # the damage is real: the table points past object 1
    assert parse(damaged, None, LIMITS).text == "test example of a damaged file"


def test_image_only_pdf_has_no_extractable_text() -> None:
    with pytest.raises(DocumentError, match=r"^no extractable text \(scanned document\? OCR is not supported\)$"):
        parse(documents.pdf([[], []], image_only=True), None, LIMITS)


def test_uncompressed_pdf_is_read() -> None:
    assert parse(documents.pdf([["Plain (uncompressed) stream"]], compress=False), None, LIMITS).text == \
        "Plain (uncompressed) stream"


def test_docx_text_is_its_paragraphs_and_table_cells() -> None:
    data = documents.docx(["Brand rules", "Blue is HEX#488EFF & never <recoloured>.",
                           [["Colour", "Hex"], ["Blue", "#488EFF"]], "Keep clear space."], headings=[0])
    assert parse(data, "brand.docx", LIMITS).text == (
        "Brand rules\n\nBlue is HEX#488EFF & never <recoloured>.\n\nColour\n\nHex\n\nBlue\n\n#488EFF\n\n"
        "Keep clear space.")


def test_empty_docx_fails_as_having_no_text() -> None:
    with pytest.raises(DocumentError, match=r"^the document has no text$"):
        parse(documents.docx([]), "empty.docx", LIMITS)


def test_type_is_detected_by_content_not_extension() -> None:
    assert detect_mime(documents.pdf(BRAND), "notes.txt") == PDF
    assert detect_mime(documents.docx(["a"]), "x.pdf") == DOCX
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
    """A one-page PDF whose content stream inflates to about `inflated` bytes of text operators."""
    return documents.pdf([["A" * inflated]])
