"""search_guidelines latency over 10,000 chunks in one agent's collection: the store query alone
(embedding excluded) and the full search with the query embedding, p50/p95.

The 10,000 chunks carry real embedded vectors of corpus text (embedded once, then reused with
small perturbations so each vector is distinct).
Usage: python bench/search.py [chunks] [queries]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
CACHE = Path(tempfile.gettempdir()) / "judge-mcp-test-models"


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def main() -> None:
    import numpy as np

    from bench.ingest import corpus_chunks
    from rag.chunking import Chunk
    from rag.embedding import OnnxInt8Embedder
    from rag.store import GuidelineStore

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    q = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    embedder = OnnxInt8Embedder(CACHE)
    base_texts = corpus_chunks(200)
    base = np.array(embedder.embed(base_texts), dtype=np.float32)
    rng = np.random.default_rng(0)
    vectors = base[np.arange(n) % len(base)] + rng.normal(0, 0.02, (n, base.shape[1])).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = GuidelineStore(embedder, path=Path(tempfile.mkdtemp()) / "chroma")
    t = time.perf_counter()
    for start in range(0, n, 2000):
        chunks = [Chunk(i, base_texts[i % len(base_texts)], 0, 0) for i in range(start, min(n, start + 2000))]
        store.add("bench-agent", "doc", "bench.txt", chunks, vectors[start : start + len(chunks)].tolist())
    print(f"indexed {n} chunks in {time.perf_counter() - t:.1f} s")
    queries = ["What is the brand colour palette?", "Siege of Vicksburg troops", "logo clear space rules",
               "table of contents", "Hello World in Japanese"]
    query_vectors = embedder.embed(queries)
    store.search_vector("bench-agent", query_vectors[0], 5, 0.0)  # open the collection
    plain, full = [], []
    for i in range(q):
        t = time.perf_counter()
        store.search_vector("bench-agent", query_vectors[i % len(queries)], 5, 0.3, ["doc"])
        plain.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        store.search("bench-agent", queries[i % len(queries)], 5, 0.3, ["doc"])
        full.append((time.perf_counter() - t) * 1000)
    print(f"search over {n} chunks, {q} queries, top_k 5: store query p50 {statistics.median(plain):.2f} ms, "
          f"p95 {pct(plain, 95):.2f} ms; with the query embedding p50 {statistics.median(full):.2f} ms, "
          f"p95 {pct(full, 95):.2f} ms")


if __name__ == "__main__":
    main()
