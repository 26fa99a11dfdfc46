"""Guideline tools on a real brand guide (the Zowe conformance brand guidelines, 8 pages)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from server.app import create_server
from tests.conftest import make_settings
from tests.mcp_helpers import call
from tests_corpora.conftest import corpus

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("on_engine")]  # on both engines


@pytest.fixture
async def gclient(tmp_path: Path) -> Any:
    async with Client(create_server(make_settings(tmp_path / "home"))) as c:
        yield c


async def new_agent(c: Any, **extra: Any) -> str:
    return (await call(c, "create_agent", name="Brand", system_prompt="judge", **extra))["id"]


async def test_zowe_pdf_colour_query_finds_the_hex_chunk(gclient: Any) -> None:
    agent = await new_agent(gclient)
    pdf = corpus("pdf", "zowe_conformance_brand_guidelines.pdf")
    data = base64.b64encode(pdf.read_bytes()).decode()
    doc = await call(gclient, "upload_guideline", agent_id=agent, content_base64=data, filename="zowe.pdf")
    assert doc["processing_status"] == "processed" and doc["metadata"]["pages"] == 8
    found = await call(gclient, "search_guidelines", agent_id=agent, query="What is the brand colour palette?")
    assert any("HEX#488EFF" in c["text"] for c in found["chunks"])
    assert all(c["page"] is not None for c in found["chunks"])


async def test_seed_threshold_of_0_7_leaves_only_word_matches_for_the_colour_query(gclient: Any) -> None:
    agent = await new_agent(gclient, rag_config={"top_k": 5, "similarity_threshold": 0.7})
    pdf = corpus("pdf", "zowe_conformance_brand_guidelines.pdf")
    await call(gclient, "upload_guideline", agent_id=agent, content_base64=base64.b64encode(pdf.read_bytes()).decode())
    found = await call(gclient, "search_guidelines", agent_id=agent, query="What is the brand colour palette?")
    # No chunk reaches 0.7 by meaning; the hybrid search still finds chunks by their words (BM25).
    assert found["chunks"] and all(c["similarity"] < 0.7 and c["bm25_score"] > 0 for c in found["chunks"])
