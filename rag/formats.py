"""Guideline document formats: detect by content, extract text with limits. Runs inside the parse worker."""

from __future__ import annotations

import io
import zipfile
import zlib
from dataclasses import dataclass, field

PDF, DOCX, TEXT, MARKDOWN = "application/pdf", (
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
), "text/plain", "text/markdown"


class DocumentError(ValueError):
    """The document cannot be used; the message says why, in words for the person who uploaded it."""


@dataclass(frozen=True)
class Limits:
    max_pages: int = 2000
    max_docx_uncompressed: int = 100 * 1024 * 1024
    max_docx_ratio: float = 100.0
    max_characters: int = 5_000_000


@dataclass
class ParsedDocument:
    mime_type: str
    text: str
    page_starts: list[int] = field(default_factory=list)  # character offset where each PDF page begins
    pages: int | None = None


def detect_mime(data: bytes, filename: str | None) -> str:
    """The document type from its bytes (magic numbers), the filename only telling text from Markdown."""
    name = (filename or "").lower()
    if data.startswith(b"%PDF-") or b"%PDF-" in data[:1024]:
        return PDF
    if data.startswith(b"PK\x03\x04"):
        try:
            names = zipfile.ZipFile(io.BytesIO(data)).namelist()
        except zipfile.BadZipFile:
            raise DocumentError("the file looks like a ZIP archive but is damaged") from None
        if "word/document.xml" in names or any(n.startswith("word/") for n in names):
            return DOCX
        raise DocumentError("a ZIP archive that is not a Word document (.docx); upload PDF, DOCX, TXT or Markdown")
    if data.startswith(b"\xd0\xcf\x11\xe0"):
        raise DocumentError("legacy Word .doc files are not supported; save it as .docx or PDF")
    sample = data[:8192]
    if b"\x00" in sample:
        raise DocumentError("a binary file that is not PDF or DOCX; upload PDF, DOCX, TXT or Markdown")
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(sample) - 4:  # a cut multi-byte character at the end is fine
            raise DocumentError("text that is not UTF-8; convert it to UTF-8") from None
    return MARKDOWN if name.endswith((".md", ".markdown")) else TEXT


def parse(data: bytes, filename: str | None, limits: Limits) -> ParsedDocument:
    mime = detect_mime(data, filename)
    if mime == PDF:
        doc = _pdf(data, limits)
    elif mime == DOCX:
        doc = _docx(data, limits)
    else:
        text = data.decode("utf-8", errors="strict").lstrip("\ufeff")
        doc = ParsedDocument(mime_type=mime, text=text)
    doc.text = doc.text.replace("\r\n", "\n").replace("\x00", "")
    if len(doc.text) > limits.max_characters:
        raise DocumentError(f"the text is {len(doc.text)} characters, more than the {limits.max_characters} allowed")
    if sum(not c.isspace() for c in doc.text) < 1:
        if mime == PDF:
            raise DocumentError("no extractable text (scanned document? OCR is not supported)")
        raise DocumentError("the document has no text")
    return doc


def _pdf(data: bytes, limits: Limits) -> ParsedDocument:
    import logging

    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, LimitReachedError, PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # recovered damage is expected, not news
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentError("the PDF is password-protected; remove the password and upload it again")
        count = len(reader.pages)
        if count > limits.max_pages:
            raise DocumentError(f"the PDF has {count} pages, more than the {limits.max_pages} allowed")
        texts: list[str] = []
        starts: list[int] = []
        offset = 0
        for page in reader.pages:
            text = (page.extract_text() or "").strip("\n")
            starts.append(offset)
            texts.append(text)
            offset += len(text) + 2
    except DocumentError:
        raise
    except FileNotDecryptedError:
        raise DocumentError("the PDF is password-protected; remove the password and upload it again") from None
    except LimitReachedError:
        raise DocumentError("a compressed stream in the PDF inflates past the allowed size (a decompression bomb?)") from None
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DocumentError(f"the PDF could not be read: {exc}") from None
    return ParsedDocument(mime_type=PDF, text="\n\n".join(texts), page_starts=starts, pages=count)


def _docx(data: bytes, limits: Limits) -> ParsedDocument:
    archive = zipfile.ZipFile(io.BytesIO(data))
    total = sum(info.file_size for info in archive.infolist())
    if total > limits.max_docx_uncompressed:
        raise DocumentError(
            f"the DOCX unpacks to {total} bytes, more than the {limits.max_docx_uncompressed} allowed (zip bomb?)"
        )
    if total / max(1, len(data)) > limits.max_docx_ratio:
        raise DocumentError(f"the DOCX unpacks {total / len(data):.0f}× its size, more than allowed (zip bomb?)")
    for info in archive.infolist():
        if info.filename.endswith((".xml", ".rels")) and _declares_dtd(archive, info):
            # Entity expansion (a "billion laughs") lives in a DTD: expat stops it, but only after seconds of work.
            raise DocumentError(f"the DOCX's {info.filename} declares a DTD (<!DOCTYPE …>), which Word never writes "
                                "and Office Open XML forbids (entity bombs hide there); save the document again "
                                "from Word or LibreOffice and upload that")
    from mammoth import docx

    try:
        # Raw text only: no images are converted and no external file or link is followed.
        document = docx.read(io.BytesIO(data)).value
    except Exception as exc:  # mammoth raises many kinds on damaged files
        raise DocumentError(f"the DOCX could not be read: {exc}") from None
    return ParsedDocument(mime_type=DOCX, text=docx_text(document))


def _declares_dtd(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bool:
    """Whether the part holds `<!DOCTYPE` (read in pieces; within the size limits checked before)."""
    tail = b""
    try:
        with archive.open(info) as part:
            while chunk := part.read(1 << 16):
                if b"<!DOCTYPE" in tail + chunk:
                    return True
                tail = chunk[-8:]
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:  # damaged, encrypted
        raise DocumentError(f"the DOCX could not be read: {info.filename}: {exc}") from None
    return False


def docx_text(document: object) -> str:
    """A mammoth document's raw text (as `mammoth.extract_raw_text` gives it), then its footnotes and endnotes
    (which that drops), each section in the order the text refers to them: `Footnotes:` then `[1] text`."""
    from mammoth import documents
    from mammoth.raw_text import extract_raw_text_from_element

    notes: dict[str, list[str]] = {"footnote": [], "endnote": []}
    seen: set[tuple[str, str]] = set()

    def collect(element: object) -> None:
        # Iterative: a deeply nested document must not exhaust the stack here.
        stack = [element]
        while stack:
            node = stack.pop()
            if isinstance(node, documents.NoteReference):
                key = (node.note_type, node.note_id)
                if key in seen or node.note_type not in notes:
                    continue
                seen.add(key)
                try:
                    note = document.notes.resolve(node)  # type: ignore[attr-defined]
                except KeyError:  # a reference to a note the file lacks
                    continue
                body = "".join(extract_raw_text_from_element(p) for p in note.body).strip()
                if body:
                    notes[node.note_type].append(body)
            stack.extend(reversed(getattr(node, "children", None) or []))

    collect(document)
    text = extract_raw_text_from_element(document).strip("\n")
    for kind, found in notes.items():
        if found:
            listed = "\n\n".join(f"[{i}] {body}" for i, body in enumerate(found, 1))
            text += f"\n\n{kind.capitalize()}s:\n\n{listed}"
    return text.strip("\n")
