"""Search through a real Chroma server (`chroma run`), as JUDGE_MCP_CHROMA_URL selects."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from server.app import create_server
from tests.conftest import make_settings
from tests.mcp_helpers import call, free_port, wait_for_port
from tests.test_guideline_tools import BRAND, new_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.usefixtures("on_engine")]  # on both engines

CHROMA = Path(sys.executable).with_name("chroma")



@pytest.fixture
def chroma_url(tmp_path: Path) -> Iterator[str]:
    if not CHROMA.exists() and not shutil.which("chroma"):
        pytest.skip("the chroma command is not installed")
    port = free_port()
    proc = subprocess.Popen([str(CHROMA), "run", "--path", str(tmp_path / "chroma-server"), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not wait_for_port(port, 60):
        proc.kill()
        pytest.fail("chroma run did not start within 60 s")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=20)


async def test_upload_and_search_through_a_chroma_server(tmp_path: Path, chroma_url: str) -> None:
    settings = make_settings(tmp_path / "home", chroma_url=chroma_url)
    async with Client(create_server(settings)) as c:
        agent = await new_agent(c)
        doc: dict[str, Any] = await call(c, "upload_guideline", agent_id=agent, text=BRAND * 10)
        found = await call(c, "search_guidelines", agent_id=agent, query="brand colour", top_k=50,
                           similarity_threshold=0)
    assert doc["processing_status"] == "processed"
    assert len(found["chunks"]) == doc["chunk_count"]
    assert not (tmp_path / "home" / "chroma").exists()  # nothing went to the embedded store
