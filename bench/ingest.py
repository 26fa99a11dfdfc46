"""Embedding throughput on ~1,000-character chunks: plain sentence-transformers fp32 (batch 32)
vs ours (int8 ONNX on onnxruntime), same run, same chunks; and the end-to-end upload of the zowe
brand-guideline PDF through the MCP tool (worker-process parse + chunk + embed + store).

Usage: python bench/ingest.py [chunks]   (default 1000)
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
    ours = OnnxInt8Embedder(CACHE)
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


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    embed_rates(corpus_chunks(n))
    anyio.run(upload_zowe)


if __name__ == "__main__":
    main()
