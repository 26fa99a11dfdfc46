"""Guideline chunks in Chroma: one collection per agent, cosine space, our embedder always passed.

Embedded PersistentClient under the data directory by default, or a Chroma server by URL
(`chroma run`) when several processes share the store.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from .chunking import Chunk
from .embedding import Embedder, make_embedder
from .warmup import warm_in_background


class StoreError(RuntimeError):
    """The guideline store is unusable as configured (wrong space, another embedder, unreachable)."""


@dataclass(frozen=True)
class Hit:
    document_id: str
    filename: str
    chunk_index: int
    page: int | None
    text: str
    similarity: float


def collection_name(agent_id: str) -> str:
    """A valid Chroma name (3–512 of [a-zA-Z0-9._-], alphanumeric at both ends) for an agent id."""
    clean = re.sub(r"[^a-zA-Z0-9._-]", "-", agent_id).strip("._-")
    if not clean or len(clean) > 200 or clean != agent_id:
        clean = hashlib.sha256(agent_id.encode()).hexdigest()[:40]
    return f"agent-{clean}"


@functools.cache
def _embedding_function_class() -> Any:
    """Chroma's EmbeddingFunction over our embedder, defined on first use (chromadb imports slowly)."""
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings

    class JudgeEmbeddings(EmbeddingFunction[Documents]):
        """Our embedder, so Chroma never falls back to its default (which downloads a model)."""

        def __init__(self, embedder: Embedder) -> None:
            self.embedder = embedder

        def __call__(self, input: Documents) -> Embeddings:
            import numpy as np

            return [np.asarray(v, dtype=np.float32) for v in self.embedder.embed(list(input))]

        @staticmethod
        def name() -> str:
            return "judge-mcp"

        def get_config(self) -> dict[str, Any]:
            return {"embedder": self.embedder.id, **self.embedder.config}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> EmbeddingFunction[Documents]:
            embedder = make_embedder(config["backend"], config["model"], Path(config["cache_dir"]))
            return JudgeEmbeddings(embedder)

        def default_space(self) -> Any:
            return "cosine"

    return JudgeEmbeddings


@dataclass
class _Matrix:
    """One agent's vectors in memory, for exact search by one matrix product."""

    ids: list[str]
    document_ids: Any  # numpy array of str
    vectors: Any  # numpy float32 (n, dim), unit rows
    texts: list[str]
    metadatas: list[dict[str, Any]]
    documents: frozenset[str] = frozenset()


class GuidelineStore:
    # Vectors kept in memory across agents (384 floats each: 100k ≈ 150 MB).
    CACHE_VECTORS = 100_000

    def __init__(self, embedder: Embedder, *, path: Path | None = None, url: str | None = None):
        self.embedder = embedder
        self._path = path
        self._url = url
        self._client: Any = None
        self._ef: Any = None
        self._lock = threading.Lock()
        self._matrices: OrderedDict[str, _Matrix] = OrderedDict()
        self._collections: dict[str, Any] = {}  # checked handles; opening one costs ~4 ms
        self._matrix_lock = threading.Lock()

    def _chroma(self) -> Any:
        with self._lock:
            if self._client is None:
                import chromadb
                from chromadb.config import Settings as ChromaSettings

                settings = ChromaSettings(anonymized_telemetry=False)
                if self._url:
                    u = urlparse(self._url)
                    self._client = chromadb.HttpClient(host=u.hostname or "127.0.0.1", port=u.port or 8000,
                                                       ssl=u.scheme == "https", settings=settings)
                else:
                    assert self._path is not None
                    self._path.mkdir(parents=True, exist_ok=True)
                    self._client = chromadb.PersistentClient(path=str(self._path), settings=settings)
                self._ef = _embedding_function_class()(self.embedder)
        return self._client

    def warm(self, delay_s: float = 0.0) -> threading.Thread:
        """Import chromadb and open the client in the background (~2 s otherwise paid by the first upload)."""
        return warm_in_background("guideline store", self._chroma, delay_s)

    def _collection(self, agent_id: str, create: bool) -> Any:
        known = self._collections.get(agent_id)
        if known is not None:
            return known
        client = self._chroma()
        name = collection_name(agent_id)
        if not create:
            try:
                coll = client.get_collection(name, embedding_function=self._ef)
            except Exception:  # chroma raises NotFoundError / ValueError depending on the client
                return None
        else:
            coll = client.get_or_create_collection(
                name, embedding_function=self._ef, configuration={"hnsw": {"space": "cosine"}},
                metadata={"embedder": self.embedder.id, "agent_id": agent_id},
            )
        space = ((coll.configuration or {}).get("hnsw") or {}).get("space")
        if space not in (None, "cosine"):
            raise StoreError(f"collection {name} uses the {space!r} space, not cosine; delete and re-upload")
        made_by = (coll.metadata or {}).get("embedder")
        if made_by and made_by != self.embedder.id:
            raise StoreError(
                f"this agent's guidelines were embedded with {made_by}, but the server now uses "
                f"{self.embedder.id}; switch JUDGE_MCP_EMBEDDING_BACKEND back, or delete and re-upload them"
            )
        self._collections[agent_id] = coll
        return coll

    def _forget(self, agent_id: str) -> None:
        with self._matrix_lock:
            self._matrices.pop(agent_id, None)

    def _matrix(self, agent_id: str, coll: Any) -> _Matrix | None:
        """The agent's vectors in memory: embedded store only (a shared server has other writers)."""
        if self._url:
            return None
        with self._matrix_lock:
            found = self._matrices.get(agent_id)
            if found is not None:
                self._matrices.move_to_end(agent_id)
                return found
            import numpy as np

            got = coll.get(include=["embeddings", "metadatas", "documents"])
            if not got["ids"] or len(got["ids"]) > self.CACHE_VECTORS:
                return None
            matrix = _Matrix(list(got["ids"]), np.array([m["document_id"] for m in got["metadatas"]]),
                             np.asarray(got["embeddings"], dtype=np.float32), list(got["documents"]),
                             list(got["metadatas"]), frozenset(m["document_id"] for m in got["metadatas"]))
            self._matrices[agent_id] = matrix
            while sum(len(m.ids) for m in self._matrices.values()) > self.CACHE_VECTORS:
                self._matrices.popitem(last=False)
            return matrix

    def add(self, agent_id: str, document_id: str, filename: str, chunks: Sequence[Chunk],
            vectors: Sequence[Sequence[float]]) -> None:
        self._forget(agent_id)
        coll = self._collection(agent_id, create=True)
        if not chunks:
            return
        coll.upsert(
            ids=[f"{document_id}:{c.index}" for c in chunks],
            embeddings=[list(v) for v in vectors],
            documents=[c.text for c in chunks],
            metadatas=[{"document_id": document_id, "filename": filename, "chunk_index": c.index,
                        "start": c.start, "end": c.end, **({"page": c.page} if c.page is not None else {})}
                       for c in chunks],
        )

    def delete_document(self, agent_id: str, document_id: str) -> None:
        self._forget(agent_id)
        coll = self._collection(agent_id, create=False)
        if coll is not None:
            coll.delete(where={"document_id": document_id})

    def count(self, agent_id: str, document_id: str | None = None) -> int:
        coll = self._collection(agent_id, create=False)
        if coll is None:
            return 0
        if document_id is None:
            return int(coll.count())
        return len(coll.get(where={"document_id": document_id}, include=[])["ids"])

    def search_vector(self, agent_id: str, vector: Sequence[float], top_k: int, threshold: float,
                      document_ids: Sequence[str] | None = None) -> list[Hit]:
        """Best first; similarity = 1 − cosine distance; only chunks at or above the threshold,
        and (when given) only of `document_ids`."""
        coll = self._collection(agent_id, create=False)
        if coll is None or (document_ids is not None and not document_ids):
            return []
        allowed = set(document_ids) if document_ids is not None else None
        matrix = self._matrix(agent_id, coll)
        if matrix is not None:
            return self._exact(matrix, vector, top_k, threshold, allowed)
        # A metadata filter makes Chroma scan SQLite (~90 ms at 10k chunks); chunks outside
        # `allowed` are rare (an upload in flight), so filter afterwards and only fall back
        # to Chroma's filter when that leaves too few.
        hits = self._query(coll, vector, top_k * 2, threshold, None)
        kept = [h for h in hits if allowed is None or h.document_id in allowed]
        if allowed is not None and len(kept) < top_k and len(kept) < len(hits):
            kept = self._query(coll, vector, top_k, threshold, {"document_id": {"$in": sorted(allowed)}})
        return kept[:top_k]

    @staticmethod
    def _exact(m: _Matrix, vector: Sequence[float], top_k: int, threshold: float,
               allowed: set[str] | None) -> list[Hit]:
        """Exact cosine top-k over the agent's vectors (unit rows: cosine = dot product)."""
        import numpy as np

        sims = m.vectors @ np.asarray(vector, dtype=np.float32)
        keep = sims >= threshold
        if allowed is not None and not allowed.issuperset(m.documents):
            keep &= np.isin(m.document_ids, list(allowed))
        candidates = np.flatnonzero(keep)
        if len(candidates) > top_k:
            candidates = candidates[np.argpartition(-sims[candidates], top_k - 1)[:top_k]]
        hits = []
        for i in candidates[np.argsort(-sims[candidates], kind="stable")]:
            meta = m.metadatas[i]
            hits.append(Hit(str(meta["document_id"]), str(meta["filename"]), int(meta["chunk_index"]),
                            int(meta["page"]) if "page" in meta else None, m.texts[i], round(float(sims[i]), 4)))
        return hits

    @staticmethod
    def _query(coll: Any, vector: Sequence[float], n: int, threshold: float, where: Any) -> list[Hit]:
        res = coll.query(query_embeddings=[list(vector)], n_results=n, where=where,
                         include=["documents", "metadatas", "distances"])
        hits = []
        for text, meta, dist in zip(res["documents"][0], res["metadatas"][0], res["distances"][0], strict=True):
            similarity = 1.0 - float(dist)
            if similarity >= threshold:
                hits.append(Hit(str(meta["document_id"]), str(meta["filename"]), int(meta["chunk_index"]),
                                int(meta["page"]) if "page" in meta else None, text, round(similarity, 4)))
        return hits

    def search(self, agent_id: str, query: str, top_k: int, threshold: float,
               document_ids: Sequence[str] | None = None) -> list[Hit]:
        (vector,) = self.embedder.embed([query])
        return self.search_vector(agent_id, vector, top_k, threshold, document_ids)
