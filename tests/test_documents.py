"""Guideline documents as a user meets them (issue 29 item 8): a DOCX's footnotes and endnotes are kept, and an
upload of bytes already stored says it is a duplicate, of which document. The DOCX files are written here
(the OOXML zip, as Word writes it) and parsed by the real mammoth, through a real `judge-mcp` over stdio."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator

import pytest

from rag.formats import Limits, parse
from tests.documents import docx_with_notes
from tests.mcp_helpers import StdioSession, server_env

BRAND_DOCX = docx_with_notes(
    ["Use the brand blue for every headline.{fn1}", "Keep the logo clear of other marks.{en1}{fn2}"],
    footnotes=["The brand blue is HEX#1F4E9A, never a tint of it.", "Clear space equals the height of the B."],
    endnotes=["Source: brand book 2026, page 12."])


def test_a_docx_keeps_its_footnotes_and_endnotes_after_its_text_in_reference_order() -> None:
    assert parse(BRAND_DOCX, "brand.docx", Limits()).text == (
        "Use the brand blue for every headline.\n\nKeep the logo clear of other marks.\n\n"
        "Footnotes:\n\n[1] The brand blue is HEX#1F4E9A, never a tint of it.\n\n"
        "[2] Clear space equals the height of the B.\n\n"
        "Endnotes:\n\n[1] Source: brand book 2026, page 12.")


def test_a_docx_without_notes_reads_as_mammoths_raw_text() -> None:
    import mammoth

    plain = docx_with_notes(["First paragraph.", "Second\tparagraph."])
    assert parse(plain, "plain.docx", Limits()).text == mammoth.extract_raw_text(io.BytesIO(plain)).value.strip("\n")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioSession]:
    home = tmp_path_factory.mktemp("home")
    running = StdioSession(server_env(home, JUDGE_MCP_MODEL="demo"))  # started from `/`
    yield running
    running.close()


def new_agent(server: StdioSession) -> str:
    made = server.call("create_agent", {"name": "Brand", "system_prompt": "judge"})
    return made.structured_content["id"]  # type: ignore[no-any-return]


def test_a_footnote_of_an_uploaded_docx_is_found_by_search(server: StdioSession) -> None:
    agent = new_agent(server)
    uploaded = server.call("upload_guideline", {"agent_id": agent, "filename": "brand.docx",
                                                "content_base64": base64.b64encode(BRAND_DOCX).decode()})
    assert not uploaded.is_error and uploaded.structured_content["processing_status"] == "processed"
    found = server.call("search_guidelines", {"agent_id": agent, "query": "which hex code is the brand blue?"})
    assert "[1] The brand blue is HEX#1F4E9A, never a tint of it." in found.structured_content["chunks"][0]["text"]


def test_uploading_the_same_bytes_under_another_name_says_it_is_a_duplicate_of_the_first(server: StdioSession) -> None:
    agent = new_agent(server)
    data = base64.b64encode(docx_with_notes(["Never stretch the logo."])).decode()
    first = server.call("upload_guideline", {"agent_id": agent, "filename": "logo.docx", "content_base64": data})
    again = server.call("upload_guideline", {"agent_id": agent, "filename": "logo-v2.docx", "content_base64": data})
    listed = server.call("list_guidelines", {"agent_id": agent}).structured_content["documents"]
    doc, dup = first.structured_content, again.structured_content
    assert doc["duplicate_of"] is None and doc["note"] is None
    assert (dup["id"], dup["filename"], dup["duplicate_of"]) == (doc["id"], "logo.docx", doc["id"])
    assert dup["note"] == (
        f"duplicate: these exact bytes were already uploaded to this agent as 'logo.docx', not 'logo-v2.docx' "
        f"(document {doc['id']}, {doc['created_at']}); nothing was added and that record is returned. To keep "
        "this name instead, delete_guideline that document and upload again.")
    assert again.content[0].text == dup["note"]  # said first, before the record
    assert [d["id"] for d in listed] == [doc["id"]]


def test_uploading_the_same_bytes_under_the_same_name_says_so_too(server: StdioSession) -> None:
    agent = new_agent(server)
    server.call("upload_guideline", {"agent_id": agent, "filename": "a.md", "text": "Keep margins wide."})
    again = server.call("upload_guideline", {"agent_id": agent, "filename": "a.md", "text": "Keep margins wide."})
    assert again.structured_content["note"].startswith(
        "duplicate: these exact bytes were already uploaded to this agent under the same name (document ")


def billion_laughs_docx() -> bytes:
    """A DOCX whose document.xml declares nine levels of entities, each ten of the one before (10^10 characters),
    and uses the last: 2 KB on disk."""
    import zipfile

    from tests.documents import docx, package

    plain = zipfile.ZipFile(io.BytesIO(docx(["LAUGH"])))
    parts = {name: plain.read(name).decode() for name in plain.namelist()}
    levels = '<!ENTITY a "aaaaaaaaaa">' + "".join(
        f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(9))
    head, _, body = parts["word/document.xml"].partition("?>")
    parts["word/document.xml"] = f"{head}?><!DOCTYPE w:document [{levels}]>{body.replace('LAUGH', '&j;')}"
    return package(parts)


def test_a_docx_declaring_entities_is_refused_before_parsing_naming_the_part(server: StdioSession) -> None:
    # Before: expat expanded the entities for ~6 s of a parse worker before its amplification limit stopped it.
    agent = new_agent(server)
    uploaded = server.call("upload_guideline", {"agent_id": agent, "filename": "laughs.docx", "content_base64":
                                                base64.b64encode(billion_laughs_docx()).decode()})
    assert uploaded.is_error and uploaded.structured_content["error"] == (
        "the DOCX's word/document.xml declares a DTD (<!DOCTYPE …>), which Word never writes and Office Open XML "
        "forbids (entity bombs hide there); save the document again from Word or LibreOffice and upload that")


def test_a_filename_longer_than_file_systems_allow_is_refused_and_nothing_is_stored(server: StdioSession) -> None:
    # Before: every chunk kept the name: a 200 KB filename on a 0.1 MB text added 86 MB to the data home.
    agent = new_agent(server)
    uploaded = server.call("upload_guideline", {"agent_id": agent, "filename": "f" * 253 + ".md",
                                                "text": "Keep the margins wide."})
    assert uploaded.is_error and uploaded.content[0].text.endswith(
        "filename is 256 characters; at most 255 (as file systems allow), e.g. 'brand-guide.pdf'")
    assert server.call("list_guidelines", {"agent_id": agent}).structured_content["documents"] == []
