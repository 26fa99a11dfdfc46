"""Real PDF and DOCX files written by the tests, so no test needs a document from outside the clone.

`pdf` writes a PDF by hand (objects, cross-reference table, trailer) with text drawn in Helvetica, one
list of lines per page; `encrypted` re-writes one with pypdf's own encryption; `docx` writes an OOXML
package (the zip Word writes: content types, relationships, word/document.xml) with paragraphs and
tables; `BRAND_GUIDE` is the pages of a small brand guide. The product reads them with the real pypdf
and mammoth, as it reads a user's files. (Real-world files: tests_corpora/, `make test-corpora`.)
"""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Sequence
from xml.sax.saxutils import escape

Page = Sequence[str]  # the lines of text on one page, top to bottom
Table = Sequence[Sequence[str]]  # rows of cells


def _pdf_string(text: str) -> bytes:
    """A PDF literal string in Helvetica's standard (Latin-1 range) encoding, its delimiters escaped."""
    raw = text.encode("latin-1")
    return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def _text_stream(lines: Page) -> bytes:
    ops = [b"BT /F1 12 Tf 14 TL 72 720 Td"]
    for i, line in enumerate(lines):
        ops.append((b"T* " if i else b"") + _pdf_string(line) + b" Tj")
    ops.append(b"ET")
    return b"\n".join(ops)


IMAGE = b"q 144 0 0 144 72 576 cm /Im1 Do Q"  # draws the page's 2x2 image: a page with no text at all


def pdf(pages: Sequence[Page], *, image_only: bool = False, compress: bool = True, xref_shift: int = 0) -> bytes:
    """A PDF with one page per entry of `pages` (each a list of text lines). `image_only`: every page draws
    only an image (a scan without OCR). `xref_shift` moves every cross-reference offset by that many bytes,
    the damage a careless writer leaves (readers recover by scanning for the objects)."""
    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
    image = (b"<< /Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceRGB /BitsPerComponent 8 "
             b"/Length 12 >>\nstream\n" + bytes([200, 30, 30, 30, 200, 30, 30, 30, 200, 220, 220, 220]) + b"\nendstream")
    objects: list[bytes] = [b"", b"", font, image]  # 1 catalog, 2 page tree, 3 font, 4 image
    kids = []
    for lines in pages:
        content = IMAGE if image_only else _text_stream(lines)
        head = b"<< /Length %d" % len(zlib.compress(content) if compress else content)
        body = zlib.compress(content) if compress else content
        objects.append(head + (b" /Filter /FlateDecode" if compress else b"") + b" >>\nstream\n" + body
                       + b"\nendstream")
        contents = len(objects)
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                       b"/Resources << /Font << /F1 3 0 R >> /XObject << /Im1 4 0 R >> >> >>" % contents)
        kids.append(b"%d 0 R" % len(objects))
    objects[0] = b"<< /Type /Catalog /Pages 2 0 R >>"
    objects[1] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % len(kids)
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, obj in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + obj + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % (offset + xref_shift))
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def encrypted(data: bytes, user_password: str, algorithm: str = "RC4-128") -> bytes:
    """`data` (a PDF) encrypted by pypdf: opening it needs `user_password` ("" opens without asking)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user_password, owner_password="owner-secret", algorithm=algorithm)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def guide_page(title: str, *facts: str) -> list[str]:
    """A page of a brand guide: its title, more than a chunk (1000 characters) of its own rules, then its facts:
    every chunk that holds the facts starts on this page."""
    return [title, *(f"{title} rule {n}: apply it the same way in print, on screen and on signs." for n in range(1, 16)),
            *facts]


# A four-page brand guide; its colour palette (HEX#488EFF, HEX#3274F9) is on page 3.
BRAND_GUIDE = [guide_page("Brand guidelines", "How to use the brand: logo, colour, type."),
               guide_page("Logo", "Never stretch, rotate or recolour the logo.", "Keep clear space equal to the logo height."),
               guide_page("Colour palette", "The brand colour palette: primary blue HEX#488EFF,", "dark blue HEX#3274F9."),
               guide_page("Typography", "Headings use a geometric sans serif; body text a humanist sans.")]


W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
    "</Types>")
PACKAGE_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
    'Target="word/document.xml"/></Relationships>')
DOCUMENT_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"></Relationships>')


def _paragraph(text: str, style: str | None = None) -> str:
    props = f'<w:pPr><w:pStyle w:val="{escape(style)}"/></w:pPr>' if style else ""
    return f'<w:p>{props}<w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r></w:p>'


def _table(rows: Table) -> str:
    cells = "".join("<w:tr>" + "".join(f"<w:tc>{_paragraph(cell)}</w:tc>" for cell in row) + "</w:tr>" for row in rows)
    return f"<w:tbl>{cells}</w:tbl>"


def docx(blocks: Sequence[str | Table], *, headings: Sequence[int] = ()) -> bytes:
    """A Word document: each block a paragraph (a string) or a table (rows of cell strings); the blocks at the
    indices in `headings` are styled Heading1. An empty `blocks` is a document with an empty body."""
    body = "".join(_table(b) if not isinstance(b, str) else _paragraph(b, "Heading1" if i in headings else None)
                   for i, b in enumerate(blocks))
    document = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document xmlns:w="{W}">'
                f"<w:body>{body}<w:sectPr/></w:body></w:document>")
    return package({"[Content_Types].xml": CONTENT_TYPES, "_rels/.rels": PACKAGE_RELS, "word/document.xml": document,
                    "word/_rels/document.xml.rels": DOCUMENT_RELS})


def package(parts: dict[str, str]) -> bytes:
    """An OOXML package: the zip of `parts` (path in the package -> its XML)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, xml in parts.items():
            z.writestr(name, xml)
    return out.getvalue()


# --- DOCX with notes (issue 29 item 8) ------------------------------------------------------------

REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
PKG = "http://schemas.openxmlformats.org/package/2006/relationships"


def _run(text: str) -> str:
    return f'<w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r>'


def _note_xml(kind: str, notes: list[str]) -> str:
    """footnotes.xml / endnotes.xml with Word's separator notes (ids -1 and 0) first, then the notes from id 1."""
    parts = [f'<w:{kind} w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:{kind}>',
             f'<w:{kind} w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p>'
             f'</w:{kind}>']
    for i, text in enumerate(notes, 1):
        parts.append(f'<w:{kind} w:id="{i}"><w:p><w:r><w:{kind}Ref/></w:r>{_run(" " + text)}</w:p></w:{kind}>')
    return f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:{kind}s xmlns:w="{W}">{"".join(parts)}</w:{kind}s>'


def docx_with_notes(paragraphs: Sequence[str], footnotes: Sequence[str] = (), endnotes: Sequence[str] = ()) -> bytes:
    """A Word document with footnotes and endnotes: each paragraph's `{fn1}` / `{en1}` marks a reference to footnote / endnote 1."""
    body = []
    for text in paragraphs:
        runs = []
        for piece in text.replace("}", "{").split("{"):
            if piece[:2] in ("fn", "en") and piece[2:].isdigit():
                kind = "footnote" if piece[:2] == "fn" else "endnote"
                runs.append(f'<w:r><w:{kind}Reference w:id="{piece[2:]}"/></w:r>')
            elif piece:
                runs.append(_run(piece))
        body.append(f"<w:p>{''.join(runs)}</w:p>")
    document = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="{W}" xmlns:r="{REL}">'
                f"<w:body>{''.join(body)}</w:body></w:document>")
    types = ('<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
             'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
             'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
             '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.'
             'wordprocessingml.document.main+xml"/>'
             '<Override PartName="/word/footnotes.xml" ContentType="application/vnd.openxmlformats-officedocument.'
             'wordprocessingml.footnotes+xml"/>'
             '<Override PartName="/word/endnotes.xml" ContentType="application/vnd.openxmlformats-officedocument.'
             'wordprocessingml.endnotes+xml"/></Types>')
    package_rels = (f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{PKG}"><Relationship Id="rId1" '
                    f'Type="{REL}/officeDocument" Target="word/document.xml"/></Relationships>')
    document_rels = (f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{PKG}">'
                     f'<Relationship Id="rId1" Type="{REL}/footnotes" Target="footnotes.xml"/>'
                     f'<Relationship Id="rId2" Type="{REL}/endnotes" Target="endnotes.xml"/></Relationships>')
    return package({"[Content_Types].xml": types, "_rels/.rels": package_rels, "word/document.xml": document,
                    "word/_rels/document.xml.rels": document_rels,
                    "word/footnotes.xml": _note_xml("footnote", list(footnotes)),
                    "word/endnotes.xml": _note_xml("endnote", list(endnotes))})
