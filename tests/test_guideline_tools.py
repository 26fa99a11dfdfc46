"""Guideline tools through the MCP client: upload, list, search, delete, isolation, restart."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from server.app import create_server
from tests import documents
from tests.conftest import make_settings
from tests.mcp_helpers import call, error_of, no_result

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("on_engine")]  # on both engines

BRAND = "Our brand blue is HEX#488EFF. Never stretch the logo. Keep clear space around it equal to the logo height."




@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
async def gclient(home: Path) -> Any:
    async with Client(create_server(make_settings(home))) as c:
        yield c


async def new_agent(c: Any, **extra: Any) -> str:
    return (await call(c, "create_agent", name="Brand", system_prompt="judge", **extra))["id"]


async def test_upload_text_is_processed_and_searchable(gclient: Any) -> None:
    agent = await new_agent(gclient)
    doc = await call(gclient, "upload_guideline", agent_id=agent, text=BRAND, filename="brand.md")
    assert (doc["processing_status"], doc["chunk_count"], doc["mime_type"]) == ("processed", 1, "text/markdown")
    assert doc["characters"] == len(BRAND) and doc["metadata"]["file_size"] == len(BRAND)
    found = await call(gclient, "search_guidelines", agent_id=agent, query="what is the brand colour")
    (chunk,) = found["chunks"]
    assert chunk["document_id"] == doc["id"] and chunk["filename"] == "brand.md" and chunk["chunk_index"] == 0
    assert 0 < chunk["similarity"] <= 1


async def test_pdf_colour_query_finds_the_hex_chunk_with_its_page(gclient: Any) -> None:
    agent = await new_agent(gclient)
    data = base64.b64encode(documents.pdf(documents.BRAND_GUIDE)).decode()
    doc = await call(gclient, "upload_guideline", agent_id=agent, content_base64=data, filename="guide.pdf")
    assert (doc["processing_status"], doc["mime_type"], doc["metadata"]["pages"]) == ("processed", "application/pdf", 4)
    found = await call(gclient, "search_guidelines", agent_id=agent, query="What is the brand colour palette?")
    hex_chunks = [c for c in found["chunks"] if "HEX#488EFF" in c["text"]]
    assert hex_chunks and {c["page"] for c in hex_chunks} == {3}
    assert all(c["page"] is not None for c in found["chunks"])


async def test_upload_by_path_inside_allowed_roots(gclient: Any, home: Path) -> None:
    agent = await new_agent(gclient)
    target = home / "docs" / "brand.docx"
    target.parent.mkdir(parents=True)
    target.write_bytes(documents.docx(["Brand rules", [["Colour", "Hex"], ["Blue", "#488EFF"]]]))
    doc = await call(gclient, "upload_guideline", agent_id=agent, path=str(target))
    assert doc["filename"] == "brand.docx" and doc["processing_status"] == "processed"


async def test_path_outside_allowed_roots_is_refused(gclient: Any, tmp_path: Path) -> None:
    agent = await new_agent(gclient)
    outside = tmp_path / "secret.txt"
    outside.write_text("x")
    assert "outside the allowed roots" in await error_of(gclient, "upload_guideline", agent_id=agent, path=str(outside))


async def test_symlink_out_of_the_allowed_roots_is_refused(gclient: Any, tmp_path: Path, home: Path) -> None:
    agent = await new_agent(gclient)
    (tmp_path / "secret.txt").write_text("x")
    home.mkdir(exist_ok=True)
    (home / "link.txt").symlink_to(tmp_path / "secret.txt")
    assert "outside the allowed roots" in await error_of(gclient, "upload_guideline", agent_id=agent,
                                                         path=str(home / "link.txt"))


async def test_exactly_one_source_is_required(gclient: Any) -> None:
    agent = await new_agent(gclient)
    text = await error_of(gclient, "upload_guideline", agent_id=agent, text="a", content_base64="YQ==")
    assert "give exactly one of path, content_base64 or text (got content_base64, text)" in text


async def test_bad_base64_is_refused(gclient: Any) -> None:
    agent = await new_agent(gclient)
    assert "not valid base64" in await error_of(gclient, "upload_guideline", agent_id=agent, content_base64="***")


async def test_image_only_pdf_ends_failed_with_the_reason(gclient: Any) -> None:
    agent = await new_agent(gclient)
    data = base64.b64encode(documents.pdf([[], []], image_only=True)).decode()
    said, doc = await no_result(gclient, "upload_guideline", agent_id=agent, content_base64=data, filename="scan.pdf")
    assert said == ("No usable result: the document could not be processed: no extractable text (scanned "
                    "document? OCR is not supported). The details follow.")
    assert doc["processing_status"] == "failed" and doc["chunk_count"] == 0
    assert doc["error"] == "no extractable text (scanned document? OCR is not supported)"
    listed = await call(gclient, "list_guidelines", agent_id=agent)
    assert [d["processing_status"] for d in listed["documents"]] == ["failed"]


async def test_reupload_of_identical_content_adds_nothing(gclient: Any) -> None:
    agent = await new_agent(gclient)
    first = await call(gclient, "upload_guideline", agent_id=agent, text=BRAND * 20, filename="a.txt")
    again = await call(gclient, "upload_guideline", agent_id=agent, text=BRAND * 20, filename="b.txt")
    assert again["id"] == first["id"]
    assert len((await call(gclient, "list_guidelines", agent_id=agent))["documents"]) == 1
    found = await call(gclient, "search_guidelines", agent_id=agent, query="brand blue", top_k=50, similarity_threshold=0)
    assert len(found["chunks"]) == first["chunk_count"]


async def test_delete_removes_chunks_and_record(gclient: Any) -> None:
    agent = await new_agent(gclient)
    doc = await call(gclient, "upload_guideline", agent_id=agent, text=BRAND)
    deleted = await call(gclient, "delete_guideline", agent_id=agent, document_id=doc["id"])
    assert deleted == {"deleted": True, "id": doc["id"], "filename": "guideline.txt"}
    assert (await call(gclient, "list_guidelines", agent_id=agent))["documents"] == []
    found = await call(gclient, "search_guidelines", agent_id=agent, query="brand", similarity_threshold=0)
    assert found["chunks"] == []


async def test_deleted_agent_hides_its_documents(gclient: Any) -> None:
    agent = await new_agent(gclient)
    await call(gclient, "upload_guideline", agent_id=agent, text=BRAND)
    await call(gclient, "delete_agent", agent_id=agent)
    for tool, extra in (("list_guidelines", {}), ("search_guidelines", {"query": "brand"})):
        assert "no agent" in await error_of(gclient, tool, agent_id=agent, **extra)


async def test_another_organizations_agent_documents_are_not_found(home: Path) -> None:
    async with Client(create_server(make_settings(home, org="a"))) as a:
        agent = await new_agent(a)
        await call(a, "upload_guideline", agent_id=agent, text=BRAND)
    async with Client(create_server(make_settings(home, org="b"))) as b:
        assert "no agent" in await error_of(b, "search_guidelines", agent_id=agent, query="brand")
        assert "no agent" in await error_of(b, "upload_guideline", agent_id=agent, text="x")


async def test_chunks_survive_a_restart_and_reupload_adds_nothing(home: Path) -> None:
    async with Client(create_server(make_settings(home))) as c:
        agent = await new_agent(c)
        doc = await call(c, "upload_guideline", agent_id=agent, text=BRAND * 30)
    async with Client(create_server(make_settings(home))) as c:
        found = await call(c, "search_guidelines", agent_id=agent, query="brand blue", top_k=50, similarity_threshold=0)
        assert len(found["chunks"]) == doc["chunk_count"] > 1
        again = await call(c, "upload_guideline", agent_id=agent, text=BRAND * 30)
        assert again["id"] == doc["id"]
        found = await call(c, "search_guidelines", agent_id=agent, query="brand blue", top_k=50, similarity_threshold=0)
        assert len(found["chunks"]) == doc["chunk_count"]


async def test_upload_reports_progress(gclient: Any) -> None:
    agent = await new_agent(gclient)
    seen: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    result = await gclient.call_tool("upload_guideline", {"agent_id": agent, "text": BRAND},
                                     progress_callback=on_progress)
    assert not result.is_error
    assert seen[0].startswith("parsing") and any(m.startswith("embedding chunks 1–1 of 1") for m in seen)
    assert seen[-1] == "stored 1 of 1 chunks"


async def test_server_keeps_answering_while_a_hostile_file_is_parsed(gclient: Any) -> None:
    from tests.test_formats import docx_bomb

    agent = await new_agent(gclient)
    bomb = base64.b64encode(docx_bomb(150 * 1024 * 1024)).decode()
    latencies: list[float] = []
    outcome: dict[str, Any] = {}

    async def upload() -> None:
        said, record = await no_result(gclient, "upload_guideline", agent_id=agent, content_base64=bomb,
                                       filename="b.docx")
        outcome.update(record, said=said)

    async def ping() -> None:
        for _ in range(5):
            t = time.monotonic()
            await call(gclient, "get_agent", agent_id=agent)
            latencies.append(time.monotonic() - t)
            await anyio.sleep(0.05)

    async with anyio.create_task_group() as tg:
        tg.start_soon(upload)
        tg.start_soon(ping)
    assert outcome["processing_status"] == "failed" and "zip bomb" in outcome["error"]
    assert outcome["said"].startswith("No usable result: the document could not be processed: ")
    assert len(latencies) == 5


async def test_a_store_failure_is_a_tool_error_that_says_so(gclient: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from rag.store import GuidelineStore, StoreError

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("agent x's guidelines were embedded with tiny, but this server embeds with other")

    agent = await new_agent(gclient)
    await call(gclient, "upload_guideline", agent_id=agent, text=BRAND)
    monkeypatch.setattr(GuidelineStore, "search", broken)
    text = await error_of(gclient, "search_guidelines", agent_id=agent, query="blue")
    assert text.endswith("guideline store: agent x's guidelines were embedded with tiny, but this server embeds "
                         "with other")
