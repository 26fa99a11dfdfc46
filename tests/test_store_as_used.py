"""The guideline store as hosts use it: real `judge-mcp` stdio processes (the mcp SDK's stdio
client), default settings with the background warm-up on, the packaged int8 ONNX embedder, a
fresh data home; restarts, ten fresh starts, two processes on one home, kill -9 and delete
during an upload."""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests import documents
from tests.conftest import MODEL_CACHE
from tests.fake_model_server import FakeModelServer, Scripted
from tests.mcp_helpers import call

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

JUDGE_MCP = str(Path(sys.executable).with_name("judge-mcp"))
SENTENCE = "The primary brand blue is HEX#488EFF; never recolour the logo."
BROKEN = ("bad install", "partially initialized", "Traceback")
# A long text: a few hundred chunks, so an upload takes seconds and stores batch by batch.
LONG = "\n\n".join(f"Section {i}. The layout rule number {i} says that margins of {i % 17} units "
                   f"apply to panel {i * 7 % 31} in the {['red', 'blue', 'green'][i % 3]} theme. " * 4
                   for i in range(300))


def files_of(home: Path) -> Path:
    """The allowed root of a server on `home`: beside it."""
    return home.with_name(home.name + "-files")


def server_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment a host gives: only the data home, roots and the shared model cache set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    files = files_of(home)  # the one root, beside the data home (which may not lie inside a root)
    files.mkdir(parents=True, exist_ok=True)
    env.update({"JUDGE_MCP_HOME": str(home), "JUDGE_MCP_ALLOWED_ROOTS": str(files),
                "JUDGE_MCP_MODEL_CACHE": str(MODEL_CACHE), **extra})
    return env


class Running:
    def __init__(self, client: Any, pid: int, log: Path):
        self.client = client
        self.pid = pid
        self.log = log

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


@asynccontextmanager
async def judge_mcp(home: Path, name: str, **env: str) -> AsyncIterator[Running]:
    """A judge-mcp process as a host starts it (the shell only records its pid, then execs it)."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    home.mkdir(parents=True, exist_ok=True)
    pidfile = home / f"{name}.pid"
    log = home / f"{name}.stderr"
    params = StdioServerParameters(command="/bin/sh", args=["-c", f'echo $$ > "{pidfile}"; exec "$0"', JUDGE_MCP],
                                   env=server_env(home, **env))
    with log.open("a") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            yield Running(client, int(pidfile.read_text()), log)


def clean(stderr: str) -> bool:
    return not any(marker in stderr for marker in BROKEN)


def chunk_count(home: Path, agent_id: str, document_id: str) -> int:
    """Chunks in the store, read by this test process as one more process on the home (it takes the lock)."""
    from rag.embedding import OnnxInt8Embedder
    from rag.store import GuidelineStore

    return GuidelineStore(OnnxInt8Embedder(), path=home / "chroma").count(agent_id, document_id)


async def new_agent(c: Any, name: str = "Brand") -> str:
    agent = await call(c, "create_agent", name=name, system_prompt="You are the brand judge.",
                       rag_config={"top_k": 5, "similarity_threshold": 0.0})
    return str(agent["id"])


async def wait_for(c: Any, agent: str, test: Any, timeout_s: float = 60.0) -> dict[str, Any]:
    """The agent's first document once `test(document)` holds (polled through list_guidelines)."""
    with anyio.fail_after(timeout_s):
        while True:
            docs = (await call(c, "list_guidelines", agent_id=agent))["documents"]
            if docs and test(docs[0]):
                return dict(docs[0])
            await anyio.sleep(0.05)


@pytest.mark.usefixtures("on_engine")
async def test_guidelines_survive_a_restart(tmp_path: Path) -> None:
    home = tmp_path / "home"
    query = "What are the HEX codes of the brand color palette?"
    guide = files_of(home) / "guides" / "brand.pdf"
    guide.parent.mkdir(parents=True)
    guide.write_bytes(documents.pdf(documents.BRAND_GUIDE))
    async with judge_mcp(home, "first") as s:
        agent = await new_agent(s.client)
        doc = await call(s.client, "upload_guideline", agent_id=agent, path=str(guide))
        before = (await call(s.client, "search_guidelines", agent_id=agent, query=query))["chunks"]
    async with judge_mcp(home, "second") as s:
        after = (await call(s.client, "search_guidelines", agent_id=agent, query=query))["chunks"]
        deleted = await call(s.client, "delete_guideline", agent_id=agent, document_id=doc["id"])
        gone = (await call(s.client, "search_guidelines", agent_id=agent, query=query))["chunks"]
        listed = (await call(s.client, "list_guidelines", agent_id=agent))["documents"]
    assert doc["processing_status"] == "processed" and before
    assert [(c["document_id"], c["chunk_index"], c["similarity"]) for c in after] == \
        [(c["document_id"], c["chunk_index"], c["similarity"]) for c in before]
    assert deleted["deleted"] and gone == [] and listed == []
    assert clean((home / "first.stderr").read_text()) and clean((home / "second.stderr").read_text())


def png_b64() -> str:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (8, 8), "blue").save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


VERDICT = json.dumps({"score": 80, "TOP_ISSUE": {"problem": "p", "severity": "minor", "fix": "f"},
                      "whatWorked": ["colour"], "promptInstructions": [], "feedback": "ok"})


async def fresh_start(home: Path, fake: FakeModelServer) -> tuple[bool, str, list[float] | None]:
    """One fresh start: a judge call and an upload at once, racing the warm-up. (clean?, why, stored vector)"""
    async with judge_mcp(home, "server", JUDGE_MCP_MODEL="openai:gpt-fake", OPENAI_API_KEY="sk-test",
                         OPENAI_BASE_URL=fake.openai_url) as s:
        agent = await new_agent(s.client)
        results: dict[str, Any] = {}

        async def judge() -> None:
            results["judge"] = await call(s.client, "evaluate_image", brief="A blue square", images=[png_b64()],
                                          agent_ids=[agent])

        async def upload() -> None:
            results["upload"] = await call(s.client, "upload_guideline", agent_id=agent, text=SENTENCE)

        async with anyio.create_task_group() as tg:
            tg.start_soon(judge)
            tg.start_soon(upload)
        evaluation = results["judge"]["evaluations"][0]
        doc = results["upload"]
    stderr = (home / "server.stderr").read_text(errors="replace")
    if not clean(stderr):
        return False, stderr[-2000:], None
    if evaluation["status"] != "ok" or doc["processing_status"] != "processed":
        return False, f"evaluation {evaluation.get('error')}; upload {doc.get('error')}", None
    return True, "", stored_vector(home, agent)


def stored_vector(home: Path, agent_id: str) -> list[float]:
    """The one chunk's vector as the server stored it, read back by this process."""
    from rag.embedding import OnnxInt8Embedder
    from rag.store import GuidelineStore, collection_name

    store = GuidelineStore(OnnxInt8Embedder(), path=home / "chroma")
    with store._use() as client:
        got = client.get_collection(collection_name(agent_id), embedding_function=store._ef).get(include=["embeddings"])
    return [float(x) for x in got["embeddings"][0]]


async def test_ten_fresh_starts_are_clean_and_embed_alike(tmp_path: Path, fake_server: FakeModelServer) -> None:
    import numpy as np

    from rag.embedding import OnnxInt8Embedder

    fake_server.respond_with(lambda rec: Scripted(text=VERDICT))
    (reference,) = OnnxInt8Embedder().embed([SENTENCE])
    outcomes = [await fresh_start(tmp_path / f"home{i}", fake_server) for i in range(10)]
    broken = [why for ok, why, _ in outcomes if not ok]
    assert broken == []
    for _, _, vector in outcomes:
        assert vector is not None
        assert np.max(np.abs(np.asarray(vector) - np.asarray(reference))) <= 1e-4


@pytest.mark.usefixtures("on_engine")
async def test_two_processes_on_one_home_see_each_others_uploads(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with judge_mcp(home, "desktop") as a, judge_mcp(home, "ide") as b:
        agent = await new_agent(a.client)
        await call(a.client, "upload_guideline", agent_id=agent, text="Logos keep a clear space of one x-height.",
                   filename="logo.md")
        seen_by_b = (await call(b.client, "search_guidelines", agent_id=agent, query="logo clear space"))["chunks"]
        await call(b.client, "upload_guideline", agent_id=agent, text="Body text is set in Inter at 16 px.",
                   filename="type.md")
        seen_by_a = (await call(a.client, "search_guidelines", agent_id=agent, query="body text typeface"))["chunks"]
    assert [c["filename"] for c in seen_by_b][:1] == ["logo.md"]
    assert [c["filename"] for c in seen_by_a][:1] == ["type.md"]
    assert clean(a.stderr()) and clean(b.stderr())


async def test_an_upload_killed_midway_is_failed_after_restart_without_chunks(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with judge_mcp(home, "killed") as s:
        agent = await new_agent(s.client)
        async with anyio.create_task_group() as tg:
            async def upload() -> None:
                try:
                    await s.client.call_tool("upload_guideline", {"agent_id": agent, "text": LONG,
                                                                  "filename": "long.md"})
                except Exception:  # the server was killed under it
                    pass

            tg.start_soon(upload)
            doc = await wait_for(s.client, agent, lambda d: d["chunk_count"] > 0)
            os.kill(s.pid, signal.SIGKILL)
            tg.cancel_scope.cancel()
    async with judge_mcp(home, "restarted") as s:
        after_restart = (await call(s.client, "list_guidelines", agent_id=agent))["documents"][0]
        await call(s.client, "upload_guideline", agent_id=agent, text="A small rule.", filename="small.md")  # waits for the warm-up
        left = await anyio.to_thread.run_sync(chunk_count, home, agent, doc["id"])
        again = await call(s.client, "upload_guideline", agent_id=agent, text=LONG, filename="long.md")
    assert doc["processing_status"] == "pending"
    assert after_restart["processing_status"] == "failed"
    assert after_restart["error"] == "interrupted (server stopped during processing); upload again"
    assert left == 0
    assert again["id"] == doc["id"] and again["processing_status"] == "processed" and again["chunk_count"] > 150


@pytest.mark.parametrize(("deleted", "says"), [
    ("document", "cancelled: the document was deleted while it was being processed"),
    ("agent", "cancelled: the agent was deleted while the document was being processed"),
])
@pytest.mark.usefixtures("on_engine")
async def test_deleting_the_document_or_its_agent_during_the_upload_leaves_no_chunks(
        tmp_path: Path, deleted: str, says: str) -> None:
    home = tmp_path / "home"
    async with judge_mcp(home, "server") as s:
        agent = await new_agent(s.client)
        results: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:
            async def upload() -> None:
                results["upload"] = await s.client.call_tool("upload_guideline", {"agent_id": agent, "text": LONG})

            tg.start_soon(upload)
            doc = await wait_for(s.client, agent, lambda d: d["chunk_count"] > 0)
            if deleted == "document":
                await call(s.client, "delete_guideline", agent_id=agent, document_id=doc["id"])
            else:
                await call(s.client, "delete_agent", agent_id=agent)
        left = await anyio.to_thread.run_sync(chunk_count, home, agent, doc["id"])
        listed = (await call(s.client, "list_guidelines", agent_id=agent))["documents"] if deleted == "document" else []
    assert results["upload"].is_error
    assert says in results["upload"].content[0].text
    assert left == 0 and listed == []
