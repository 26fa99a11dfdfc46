"""Embedding throughput on ~1,000-character chunks: plain sentence-transformers fp32 (batch 32)
vs ours (int8 ONNX on onnxruntime), same run, same chunks; and the end-to-end upload of the zowe
brand-guideline PDF through the MCP tool (worker-process parse + chunk + embed + store).

Usage: python bench/ingest.py [chunks]   (default 1000)
       python bench/ingest.py stdio      (only the upload over stdio)
"""

from __future__ import annotations

import base64
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
CORPORA = ROOT.parent / "shared" / "corpora"
CACHE = Path(tempfile.gettempdir()) / "judge-mcp-test-models"


def corpus_chunks(n: int) -> list[str]:
    from rag.chunking import chunk_text
    from rag.formats import Limits, parse

    texts = []
    for name in ("Seige_of_Vicksburg_Sample_OCR.pdf", "pdflatex-outline.pdf", "zowe_conformance_brand_guidelines.pdf",
                 "crazyones.pdf", "hello-world.pdf"):
        texts.append(parse((CORPORA / "pdf" / name).read_bytes(), name, Limits()).text)
    chunks = [c.text for t in texts for c in chunk_text(t, 1000, 200)]
    # Cycle the real chunks, each made unique so nothing can be cached.
    return [f"{chunks[i % len(chunks)]} [{i}]" for i in range(n)]


def embed_rates(chunks: list[str]) -> None:
    from rag.embedding import OnnxInt8Embedder, SentenceTransformerEmbedder

    plain = SentenceTransformerEmbedder(batch_size=32)
    ours = OnnxInt8Embedder()
    plain.embed(chunks[:32])  # load and warm both before timing
    ours.embed(chunks[:32])
    t = time.perf_counter()
    a = plain.embed(chunks)
    plain_s = time.perf_counter() - t
    t = time.perf_counter()
    b = ours.embed(chunks)
    ours_s = time.perf_counter() - t
    import numpy as np

    cos = np.sum(np.array(a) * np.array(b), axis=1)
    print(f"embedding {len(chunks)} chunks (~1,000 chars): sentence-transformers fp32 batch 32 "
          f"{len(chunks) / plain_s:.1f} chunks/s, ours (int8 ONNX) {len(chunks) / ours_s:.1f} chunks/s, "
          f"ratio {plain_s / ours_s:.2f}x; cosine to fp32 vectors mean {cos.mean():.4f}, min {cos.min():.4f}")


async def upload_zowe() -> None:
    from mcp import Client

    from server.app import create_server
    from server.settings import Settings

    home = Path(tempfile.mkdtemp())
    settings = Settings(home=home, model_cache=CACHE, warm_embeddings=False, log_level="WARNING")
    data = base64.b64encode((CORPORA / "pdf" / "zowe_conformance_brand_guidelines.pdf").read_bytes()).decode()
    async with Client(create_server(settings)) as c:
        agent = (await c.call_tool("create_agent", {"name": "bench", "system_prompt": "p"})).structured_content["id"]
        # As after the start-up warm-up: a first small upload loads the model and opens the store.
        t = time.perf_counter()
        await c.call_tool("upload_guideline", {"agent_id": agent, "text": "warm up", "filename": "w.txt"})
        print(f"first upload of a one-line text (model and store cold): {(time.perf_counter() - t) * 1000:.0f} ms")
        t = time.perf_counter()
        doc = (await c.call_tool("upload_guideline", {"agent_id": agent, "content_base64": data,
                                                       "filename": "zowe.pdf"})).structured_content
        took = time.perf_counter() - t
    print(f"upload_guideline zowe_conformance_brand_guidelines.pdf ({doc['metadata']['pages']} pages, "
          f"{doc['chunk_count']} chunks, {doc['processing_status']}): {took * 1000:.0f} ms end to end")


async def upload_zowe_stdio(runs: int = 5) -> None:
    """As a host sees it: a judge-mcp process over stdio (default settings, warm-up on); after the
    warm-up, the zowe PDF uploaded to fresh agents (the same bytes to one agent would be a no-op)."""
    from mcp import Client, StdioServerParameters

    home = Path(tempfile.mkdtemp())
    pdf = CORPORA / "pdf" / "zowe_conformance_brand_guidelines.pdf"
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_MCP_")}
    env.update({"JUDGE_MCP_HOME": str(home), "JUDGE_MCP_MODEL_CACHE": str(CACHE), "JUDGE_MCP_LOG_LEVEL": "WARNING",
                "JUDGE_MCP_ALLOWED_ROOTS": str(pdf.parent)})
    params = StdioServerParameters(command=str(Path(sys.executable).with_name("judge-mcp")), env=env)
    times = []
    async with Client(params) as c:
        for i in range(runs + 1):
            agent = (await c.call_tool("create_agent", {"name": f"bench{i}", "system_prompt": "p"})
                     ).structured_content["id"]
            t = time.perf_counter()
            doc = (await c.call_tool("upload_guideline", {"agent_id": agent, "path": str(pdf)})).structured_content
            times.append(time.perf_counter() - t)
            assert doc["processing_status"] == "processed", doc
    first, warm = times[0], sorted(times[1:])
    print(f"upload_guideline zowe PDF over stdio ({doc['chunk_count']} chunks): first {first * 1000:.0f} ms "
          f"(waits for the warm-up), warm median {warm[len(warm) // 2] * 1000:.0f} ms, "
          f"best {warm[0] * 1000:.0f} ms, worst {warm[-1] * 1000:.0f} ms ({runs} runs)")


def main() -> None:
    if sys.argv[1:] == ["stdio"]:
        anyio.run(upload_zowe_stdio)
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    embed_rates(corpus_chunks(n))
    anyio.run(upload_zowe)
    anyio.run(upload_zowe_stdio)


if __name__ == "__main__":
    main()
