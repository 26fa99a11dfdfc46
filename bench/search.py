"""search_guidelines latency over N chunks in one agent's collection: the store query alone
(embedding excluded) and the full search with the query embedding, p50/p95, plus the first
search (vectors read from Chroma in pages) and the process's peak RSS.

The chunks carry real embedded vectors of corpus text (200 embedded once, then reused with small
perturbations so each vector is distinct). Past the memory budget (JUDGE_MCP_SEARCH_CACHE_VECTORS,
100,000) the store searches through Chroma's own index, as the server does.
Usage: python bench/search.py                  (10k, 100k and 300k, each in its own process)
       python bench/search.py N [queries]      (one size, in this process)
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
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


def one(n: int, q: int) -> None:
    from rag.warmup import import_numpy

    import_numpy()  # as the server imports it (one BLAS thread)
    import numpy as np

    from bench.ingest import corpus_chunks
    from rag.chunking import Chunk
    from rag.embedding import OnnxInt8Embedder
    from rag.store import GuidelineStore

    embedder = OnnxInt8Embedder()
    base_texts = corpus_chunks(200)
    base = np.array(embedder.embed(base_texts), dtype=np.float32)
    rng = np.random.default_rng(0)
    budget = os.environ.get("JUDGE_MCP_SEARCH_CACHE_VECTORS")
    home = Path(tempfile.mkdtemp())
    store = GuidelineStore(embedder, path=home / "chroma",
                           cache_vectors=int(budget) if budget else None)
    t = time.perf_counter()
    step = 5000
    for start in range(0, n, step):
        size = min(n, start + step) - start
        vectors = base[np.arange(start, start + size) % len(base)] + rng.normal(0, 0.02, (size, base.shape[1]))
        vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
        chunks = [Chunk(i, base_texts[i % len(base_texts)], 0, 0) for i in range(start, start + size)]
        store.add("bench-agent", "doc", "bench.txt", chunks, vectors.tolist())
    index_s = time.perf_counter() - t
    queries = ["What is the brand colour palette?", "Siege of Vicksburg troops", "logo clear space rules",
               "table of contents", "Hello World in Japanese"]
    query_vectors = embedder.embed(queries)
    t = time.perf_counter()
    store.search_vector("bench-agent", query_vectors[0], 5, 0.0, ["doc"])  # opens the collection, reads vectors
    first_ms = (time.perf_counter() - t) * 1000
    mode = "exact, in memory" if store._matrices else "Chroma's index"
    plain, full = [], []
    for i in range(q):  # the store query alone, then (below) with the query embedding
        t = time.perf_counter()
        store.search_vector("bench-agent", query_vectors[i % len(queries)], 5, 0.3, ["doc"])
        plain.append((time.perf_counter() - t) * 1000)
    for i in range(q):
        t = time.perf_counter()
        store.search("bench-agent", queries[i % len(queries)], 5, 0.3, ["doc"])
        full.append((time.perf_counter() - t) * 1000)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{n} chunks ({mode}; indexed in {index_s:.0f} s; first search {first_ms:.0f} ms), {q} queries, top_k 5: "
          f"store query p50 {statistics.median(plain):.2f} ms, p95 {pct(plain, 95):.2f} ms; with the query "
          f"embedding p50 {statistics.median(full):.2f} ms, p95 {pct(full, 95):.2f} ms; peak RSS {rss_mb:.0f} MB",
          flush=True)
    shutil.rmtree(home, ignore_errors=True)  # 300k chunks take ~2.4 GB


def main() -> None:
    if len(sys.argv) > 1:
        one(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 200)
        return
    for n in (10_000, 100_000, 300_000):
        subprocess.run([sys.executable, __file__, str(n)], check=True)


if __name__ == "__main__":
    main()
