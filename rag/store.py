"""Guideline chunks in Chroma: one collection per agent, cosine space, our embedder always passed.

Embedded PersistentClient under the data directory by default, or a Chroma server by URL
(`chroma run`). Several server processes may share one embedded directory: see `_HomeSync`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

from .chunking import Chunk
from .embedding import Embedder
from .warmup import HEAVY, import_numpy, warm_in_background

log = logging.getLogger(__name__)
R = TypeVar("R")


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
    bm25: float | None = None  # the chunk's BM25 score for the query (hybrid and bm25 modes)


Mode = str  # "hybrid" | "dense" | "bm25" | "hybrid-maxsim"
MODES = ("hybrid", "dense", "bm25", "hybrid-maxsim")
# hybrid-maxsim (opt-in): the hybrid ranking's first RERANK_DEPTH chunks read again by late
# interaction: the query's and each chunk's token vectors from the same MiniLM, a chunk's MaxSim the mean over
# query tokens of the best cosine against its tokens; the order is the reciprocal-rank fusion of the hybrid rank
# and the MaxSim rank. Chosen on the dev questions of bench/data/retrieval (bench/retrieval_variants.py).
RERANK_DEPTH = 20
RRF_K = 60  # reciprocal rank fusion: score = Σ weight / (RRF_K + rank)
# The dense ranking counts a little less than the lexical one, so that at equal ranks the chunk holding the
# query's exact words wins: the small embedding model misses codes, names and numbers. (Chosen on 41 queries
# that were not held out; on the held-out dev questions of bench/data/retrieval, weights 0.5-1.5 and RRF_K
# 5-60 all land within two questions of each other: bench/retrieval_variants.py.)
DENSE_WEIGHT = 0.8


def _stem(word: str) -> str:
    """A light English suffix stripper, so "operators" meets "operator" and "rotating" meets "rotated"."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 4 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _stem_words(words: list[str]) -> list[str]:
    return [_stem(w) for w in words]


def _tokenize(texts: list[str], return_ids: bool) -> Any:
    import bm25s

    return bm25s.tokenize(texts, stopwords="en", stemmer=_stem_words, return_ids=return_ids, show_progress=False)


def _tokens(text: str) -> list[str]:
    tokenized: list[list[str]] = _tokenize([text], return_ids=False)
    return tokenized[0]


def collection_name(agent_id: str) -> str:
    """A valid Chroma name (3–512 of [a-zA-Z0-9._-], alphanumeric at both ends) for an agent id."""
    clean = re.sub(r"[^a-zA-Z0-9._-]", "-", agent_id).strip("._-")
    if not clean or len(clean) > 200 or clean != agent_id:
        clean = hashlib.sha256(agent_id.encode()).hexdigest()[:40]
    return f"agent-{clean}"


class _Recorded:
    """The embedder a reopened collection names in its configuration. We always pass vectors
    ourselves, so Chroma never embeds with it; it exists so the configuration can be read back."""

    def __init__(self, config: dict[str, Any]):
        self.config = {str(k): str(v) for k, v in config.items()}

    @property
    def id(self) -> str:
        return self.config.get("embedder", "unknown")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise StoreError(f"the collection's recorded embedder {self.id} is not loaded here; "
                         "the store is given vectors, never texts to embed")


@functools.cache
def _embedding_function_class() -> Any:
    """Chroma's EmbeddingFunction over our embedder, defined on first use (chromadb imports slowly),
    and registered with Chroma's registry so a collection reopened in a new process can be read."""
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
    from chromadb.utils.embedding_functions import register_embedding_function

    class JudgeEmbeddings(EmbeddingFunction[Documents]):
        """Our embedder, so Chroma never falls back to its default (which downloads a model)."""

        def __init__(self, embedder: Embedder | _Recorded) -> None:
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
            # Cheap and never failing: which embedder wrote a collection is checked by the store
            # itself (its metadata), with an error that says what to do.
            return JudgeEmbeddings(_Recorded(config))

        def default_space(self) -> Any:
            return "cosine"

    register_embedding_function(JudgeEmbeddings)
    return JudgeEmbeddings


class _HomeSync:
    """Several server processes on one embedded store directory (Claude Desktop and an IDE each
    start their own): a file lock and a generation counter, both in the directory.

    - Every Chroma operation holds `judge-mcp.lock` (flock): shared to read, exclusive to write,
      so no process reads index files another is rewriting and writers never overlap.
    - Every write bumps a counter (per agent and overall) in `judge-mcp-generations.sqlite3`
      before it releases the lock. A process whose Chroma client was opened at an older overall
      generation reopens it (Chroma's embedded client keeps its vector index in memory), and a
      cached agent matrix of an older agent generation is reloaded: each process sees the
      others' writes by its next call.
    """

    LOCK_WAIT_S = 120.0

    def __init__(self, directory: Path):
        import fcntl
        import sqlite3

        self._fcntl = fcntl
        directory.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(directory / "judge-mcp.lock", os.O_RDWR | os.O_CREAT, 0o600)
        self._db = sqlite3.connect(directory / "judge-mcp-generations.sqlite3", check_same_thread=False,
                                   isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS generations (scope TEXT PRIMARY KEY, generation INTEGER NOT NULL)")
        self._db_lock = threading.Lock()
        self.mutex = threading.RLock()  # one Chroma operation at a time in this process
        self._depth = 0
        self._exclusive = False

    @contextmanager
    def locked(self, exclusive: bool) -> Iterator[None]:
        with self.mutex:
            if self._depth == 0:
                mode = self._fcntl.LOCK_EX if exclusive else self._fcntl.LOCK_SH
                deadline = time.monotonic() + self.LOCK_WAIT_S
                while True:
                    try:
                        self._fcntl.flock(self._fd, mode | self._fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() > deadline:
                            raise StoreError(f"the guideline store has been locked by another judge-mcp process "
                                             f"for more than {self.LOCK_WAIT_S:g} s") from None
                        time.sleep(0.005)
                self._exclusive = exclusive
            elif exclusive and not self._exclusive:
                raise RuntimeError("a write inside a read of the guideline store")
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._fcntl.flock(self._fd, self._fcntl.LOCK_UN)

    def generation(self, scope: str) -> int:
        with self._db_lock:
            row = self._db.execute("SELECT generation FROM generations WHERE scope=?", (scope,)).fetchone()
        return int(row[0]) if row else 0

    def bump(self, agent_id: str) -> int:
        """After a write (exclusive lock held): the new overall generation."""
        with self._db_lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for scope in (f"agent:{agent_id}", "*"):
                    self._db.execute("INSERT INTO generations VALUES (?, 1) ON CONFLICT (scope) "
                                     "DO UPDATE SET generation = generation + 1", (scope,))
                row = self._db.execute("SELECT generation FROM generations WHERE scope='*'").fetchone()
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        return int(row[0])


class DatabaseGenerations:
    """The write counters of a guideline store on a Chroma server, kept in the state database
    (`store_generations`), so replicas sharing the server and the database know when their in-memory
    matrices and BM25 indexes are stale: the same counters as `_HomeSync`, without its file lock (the
    server orders its writers itself)."""

    def __init__(self, db: Any):
        self.db = db

    def generation(self, scope: str) -> int:
        rows = self.db.query("SELECT generation FROM store_generations WHERE scope=?", (scope,))
        return int(rows[0]["generation"]) if rows else 0

    def bump(self, agent_id: str) -> int:
        with self.db.transaction() as conn:
            for scope in (f"agent:{agent_id}", "*"):
                conn.execute("INSERT INTO store_generations (scope, generation) VALUES (?, 1) ON CONFLICT (scope) "
                             "DO UPDATE SET generation = store_generations.generation + 1", (scope,))
        return self.generation("*")


@dataclass
class _Matrix:
    """One agent's vectors in memory, for exact search by one matrix product."""

    generation: int
    ids: list[str]
    document_ids: Any  # numpy array of str
    vectors: Any  # numpy float32 (n, dim), unit rows
    texts: list[str]
    metadatas: list[dict[str, Any]]
    documents: frozenset[str] = frozenset()
    lexical: Any = None  # bm25s.BM25 over `texts`, built (or loaded) on first use


def _store_errors(fn: Callable[..., R]) -> Callable[..., R]:
    """Whatever fails inside Chroma (or the lock, or SQLite) leaves as a StoreError that says so."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> R:
        try:
            return fn(*args, **kwargs)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"the guideline store failed: {type(exc).__name__}: {exc}") from exc

    return wrapper


class GuidelineStore:
    # Vectors kept in memory across agents (384 floats each: 100k ≈ 150 MB).
    CACHE_VECTORS = 100_000
    # An agent with more chunks than this (or than the budget) is searched through Chroma's own
    # index: a scan costs ~0.06 ms per 1,000 vectors on 2 cores, so past ~25k Chroma's HNSW
    # (p95 ≈ 9 ms at 100k) is faster (bench/search.py).
    EXACT_MAX = 25_000
    # Rows per read: SQLite allows 32,766 variables in one statement.
    PAGE = 5_000

    def __init__(self, embedder: Embedder, *, path: Path | None = None, url: str | None = None,
                 cache_vectors: int | None = None, mode: Mode = "hybrid",
                 generations: DatabaseGenerations | None = None):
        if mode not in MODES:
            raise ValueError(f"unknown retrieval mode {mode!r}: use one of {', '.join(MODES)}")
        if mode == "hybrid-maxsim" and not hasattr(embedder, "token_vectors"):
            raise ValueError(f"retrieval mode hybrid-maxsim needs the packaged MiniLM embedder (it reads its token "
                             f"vectors); {embedder.id} has none: use hybrid")
        self.embedder = embedder
        self.mode = mode
        self._path = path
        self._url = url
        if cache_vectors is not None:
            self.CACHE_VECTORS = cache_vectors
        self._client: Any = None
        self._client_generation = -1
        self._ef: Any = None
        self._sync: _HomeSync | None = None
        # Write counters: the home's (embedded) or the database's (a Chroma server shared by replicas).
        # Without either (a server and no database), searches go to Chroma's index, dense only.
        self._generations: _HomeSync | DatabaseGenerations | None = generations if url else None
        self._open_lock = threading.Lock()
        self._server_lock = threading.RLock()
        self._matrices: OrderedDict[str, _Matrix] = OrderedDict()
        self._collections: dict[str, Any] = {}  # checked handles; opening one costs ~4 ms
        self._matrix_lock = threading.Lock()

    def _import(self) -> None:
        """chromadb imported and our embedding function registered (once, under the heavy-import lock)."""
        if self._ef is not None:
            return
        with HEAVY, self._open_lock:
            if self._ef is None:
                import_numpy()
                import chromadb  # noqa: F401

                if self.mode != "dense":
                    import bm25s  # noqa: F401

                if self._url is None:
                    assert self._path is not None
                    self._sync = self._generations = _HomeSync(self._path)
                self._ef = _embedding_function_class()(self.embedder)

    def _new_client(self) -> Any:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        settings = ChromaSettings(anonymized_telemetry=False)
        if self._url:
            u = urlparse(self._url)
            return chromadb.HttpClient(host=u.hostname or "127.0.0.1", port=u.port or 8000,
                                       ssl=u.scheme == "https", settings=settings)
        assert self._path is not None
        return chromadb.PersistentClient(path=str(self._path), settings=settings)

    @contextmanager
    def _use(self, exclusive: bool = False) -> Iterator[Any]:
        """The Chroma client, current with every process's writes, under the home lock."""
        self._import()
        if self._sync is None:  # a Chroma server orders its writers itself
            with self._server_lock:
                if self._client is None:
                    self._client = self._new_client()
                yield self._client
            return
        with self._sync.locked(exclusive):
            generation = self._sync.generation("*")
            if self._client is None or generation != self._client_generation:
                if self._client is not None:
                    log.info("the guideline store changed in another process: reopening it")
                    self._collections.clear()
                    try:
                        self._client.close()
                    except Exception as exc:  # a failed close must not stop the reopen
                        log.warning("closing the old store client failed: %s", exc)
                self._client = self._new_client()
                self._client_generation = generation
            yield self._client

    def _written(self, agent_id: str) -> None:
        """After a write under the exclusive lock: others will reopen; this process is current."""
        self._forget(agent_id)
        if self._sync is not None:
            self._client_generation = self._sync.bump(agent_id)
        elif self._generations is not None:
            self._generations.bump(agent_id)

    @_store_errors
    def open(self) -> None:
        """Import chromadb and open the client (the warm-up's step; else paid by the first call)."""
        with self._use():
            pass

    @_store_errors
    def preload(self, agent_ids: Sequence[str], budget_s: float = 3.0) -> int:
        """Load these agents' search state (collection, vectors, BM25 index), in this order, while it fits the
        memory budget and `budget_s`: what the first search of each after a start would pay (~0.1-0.5 s).
        Returns how many were loaded."""
        import time

        deadline = time.monotonic() + budget_s
        loaded = 0
        if self._generations is None:
            return 0
        for agent_id in agent_ids:
            if time.monotonic() > deadline:
                break
            with self._use() as client:
                coll = self._collection(client, agent_id, create=False, check=False)
                if coll is None:
                    continue
                matrix = self._load_matrix(agent_id, coll, self._generations.generation(f"agent:{agent_id}"))
            if matrix is None:  # past the budget: searched through Chroma's index
                break
            if self.mode != "dense":
                self._lexical(agent_id, matrix)
            loaded += 1
            with self._matrix_lock:
                if sum(len(m.ids) for m in self._matrices.values()) >= self.CACHE_VECTORS:
                    break
        return loaded

    def warm(self, delay_s: float = 0.0) -> threading.Thread:
        """Open the store in the background (~2 s otherwise paid by the first upload)."""
        return warm_in_background("guideline store", self.open, delay_s)

    def _collection(self, client: Any, agent_id: str, create: bool, *, check: bool = True,
                    dimension: int | None = None) -> Any:
        known = self._collections.get(agent_id)
        if known is None:
            name = collection_name(agent_id)
            if not create:
                try:
                    known = client.get_collection(name, embedding_function=self._ef)
                except Exception as exc:  # NotFoundError / ValueError, depending on the client
                    if "does not exist" in str(exc) or type(exc).__name__ == "NotFoundError":
                        return None
                    raise
            else:
                known = client.get_or_create_collection(
                    name, embedding_function=self._ef, configuration={"hnsw": {"space": "cosine"}},
                    metadata={"embedder": self.embedder.id, "agent_id": agent_id,
                              **({"dimension": dimension} if dimension else {})},
                )
            space = ((known.configuration or {}).get("hnsw") or {}).get("space")
            if space not in (None, "cosine"):
                raise StoreError(f"collection {name} uses the {space!r} space, not cosine; "
                                 "delete this agent's documents and upload them again")
            self._collections[agent_id] = known
        if check:
            self._check_embedder(known, agent_id, dimension)
        return known

    def _check_embedder(self, coll: Any, agent_id: str, dimension: int | None) -> None:
        meta = coll.metadata or {}
        made_by = meta.get("embedder")
        recorded = meta.get("dimension")
        if (made_by and made_by != self.embedder.id) or (recorded and dimension and int(recorded) != dimension):
            theirs = f"{made_by or 'an unknown embedder'}" + (f" ({recorded} dimensions)" if recorded else "")
            ours = f"{self.embedder.id}" + (f" ({dimension} dimensions)" if dimension else "")
            raise StoreError(
                f"agent {agent_id}'s guidelines were embedded with {theirs}, but this server embeds with {ours}. "
                "Set JUDGE_MCP_EMBEDDING_BACKEND / JUDGE_MCP_EMBEDDING_MODEL back to the embedder that wrote them, "
                "or re-index: delete_guideline each of the agent's documents and upload them again"
            )

    def _forget(self, agent_id: str) -> None:
        with self._matrix_lock:
            self._matrices.pop(agent_id, None)

    def _cached(self, agent_id: str, generation: int) -> _Matrix | None:
        with self._matrix_lock:
            found = self._matrices.get(agent_id)
            if found is not None and found.generation == generation:
                self._matrices.move_to_end(agent_id)
                return found
        return None

    def _load_matrix(self, agent_id: str, coll: Any, generation: int) -> _Matrix | None:
        """The agent's vectors read in pages (under the lock); None when they exceed the memory budget."""
        import numpy as np

        total = int(coll.count())
        if not total or total > min(self.CACHE_VECTORS, self.EXACT_MAX):
            return None
        ids: list[str] = []
        texts: list[str] = []
        metas: list[dict[str, Any]] = []
        vectors = None
        for offset in range(0, total, self.PAGE):
            got = coll.get(include=["embeddings", "metadatas", "documents"], limit=self.PAGE, offset=offset)
            if not got["ids"]:
                break
            page = np.asarray(got["embeddings"], dtype=np.float32)
            if vectors is None:
                vectors = np.empty((total, page.shape[1]), dtype=np.float32)
            vectors[len(ids) : len(ids) + len(page)] = page
            ids += got["ids"]
            texts += got["documents"]
            metas += got["metadatas"]
        if vectors is None:
            return None
        matrix = _Matrix(generation, ids, np.array([m["document_id"] for m in metas]), vectors[: len(ids)],
                         texts, metas, frozenset(m["document_id"] for m in metas))
        with self._matrix_lock:
            self._matrices[agent_id] = matrix
            while sum(len(m.ids) for m in self._matrices.values()) > self.CACHE_VECTORS and len(self._matrices) > 1:
                self._matrices.popitem(last=False)
        return matrix

    @_store_errors
    def add(self, agent_id: str, document_id: str, filename: str, chunks: Sequence[Chunk],
            vectors: Sequence[Sequence[float]]) -> None:
        dimension = len(vectors[0]) if len(vectors) else None
        with self._use(exclusive=True) as client:
            try:
                coll = self._collection(client, agent_id, create=True, dimension=dimension)
                for start in range(0, len(chunks), self.PAGE):
                    part = chunks[start : start + self.PAGE]
                    coll.upsert(
                        ids=[f"{document_id}:{c.index}" for c in part],
                        embeddings=[list(v) for v in vectors[start : start + len(part)]],
                        documents=[c.text for c in part],
                        metadatas=[{"document_id": document_id, "filename": filename, "chunk_index": c.index,
                                    "start": c.start, "end": c.end, **({"page": c.page} if c.page is not None else {})}
                                   for c in part],
                    )
            finally:
                self._written(agent_id)

    @_store_errors
    def delete_document(self, agent_id: str, document_id: str) -> None:
        """Remove a document's chunks (whichever embedder wrote them); an emptied collection goes too."""
        with self._use(exclusive=True) as client:
            coll = self._collection(client, agent_id, create=False, check=False)
            if coll is None:
                return
            try:
                coll.delete(where={"document_id": document_id})
                if int(coll.count()) == 0:
                    client.delete_collection(collection_name(agent_id))
                    self._collections.pop(agent_id, None)
            finally:
                self._written(agent_id)

    @_store_errors
    def count(self, agent_id: str, document_id: str | None = None) -> int:
        with self._use() as client:
            coll = self._collection(client, agent_id, create=False, check=False)
            if coll is None:
                return 0
            if document_id is None:
                return int(coll.count())
            return len(coll.get(where={"document_id": document_id}, include=[])["ids"])

    @_store_errors
    def search_vector(self, agent_id: str, vector: Sequence[float], top_k: int, threshold: float,
                      document_ids: Sequence[str] | None = None) -> list[Hit]:
        """Dense only, best first; similarity = 1 − cosine distance; only chunks at or above the
        threshold, and (when given) only of `document_ids`."""
        return self._search(agent_id, vector, None, top_k, threshold, document_ids, "dense")

    @_store_errors
    def search(self, agent_id: str, query: str, top_k: int, threshold: float,
               document_ids: Sequence[str] | None = None, mode: Mode | None = None) -> list[Hit]:
        """Hybrid by default: the dense ranking (chunks at or above the similarity threshold) and the
        BM25 ranking (chunks sharing a query term) fused by reciprocal rank, best first."""
        mode = mode or self.mode
        vector = None if mode == "bm25" else self.embedder.embed([query])[0]
        return self._search(agent_id, vector, query, top_k, threshold, document_ids, mode)

    def _search(self, agent_id: str, vector: Sequence[float] | None, query: str | None, top_k: int,
                threshold: float, document_ids: Sequence[str] | None, mode: Mode) -> list[Hit]:
        if document_ids is not None and not document_ids:
            return []
        allowed = set(document_ids) if document_ids is not None else None
        dimension = len(vector) if vector is not None else None
        self._import()
        if self._generations is not None:
            generation = self._generations.generation(f"agent:{agent_id}")
            matrix = self._cached(agent_id, generation)
            if matrix is not None and dimension in (None, matrix.vectors.shape[1]):
                return self._rank(agent_id, matrix, vector, query, top_k, threshold, allowed, mode)
        with self._use() as client:
            coll = self._collection(client, agent_id, create=False, dimension=dimension)
            if coll is None:
                return []
            if self._generations is not None:
                matrix = self._load_matrix(agent_id, coll, self._generations.generation(f"agent:{agent_id}"))
                if matrix is not None:
                    return self._rank(agent_id, matrix, vector, query, top_k, threshold, allowed, mode)
            # Past the in-memory limit (or on a Chroma server): Chroma's index, dense only.
            if vector is None:
                assert query is not None
                vector = self.embedder.embed([query])[0]
            # A metadata filter makes Chroma scan SQLite (~90 ms at 10k chunks); chunks outside
            # `allowed` are rare (an upload in flight), so filter afterwards and only fall back
            # to Chroma's filter when that leaves too few.
            hits = self._query(coll, vector, top_k * 2, threshold, None)
            kept = [h for h in hits if allowed is None or h.document_id in allowed]
            if allowed is not None and len(kept) < top_k and len(kept) < len(hits):
                kept = self._query(coll, vector, top_k, threshold, {"document_id": {"$in": sorted(allowed)}})
            return kept[:top_k]

    def _lexical(self, agent_id: str, m: _Matrix) -> Any:
        """The agent's BM25 index: loaded from disk when saved at this generation, else built and saved."""
        if m.lexical is not None:
            return m.lexical
        import bm25s

        folder = None
        if self._path is not None and self._url is None:  # on a Chroma server: rebuilt from its chunks
            folder = self._path / "judge-mcp-bm25" / collection_name(agent_id)
            saved = folder / f"g{m.generation}"
            if saved.is_dir():
                try:
                    m.lexical = bm25s.BM25.load(str(saved))
                    return m.lexical
                except Exception as exc:  # a damaged file is rebuilt
                    log.warning("rebuilding the BM25 index of %s: %s", agent_id, exc)
        index = bm25s.BM25()
        index.index(_tokenize(m.texts, return_ids=True), show_progress=False)
        m.lexical = index
        if folder is not None:
            try:
                folder.mkdir(parents=True, exist_ok=True)
                tmp = folder / f"tmp-{os.getpid()}-{threading.get_ident()}"
                index.save(str(tmp))
                try:
                    os.rename(tmp, folder / f"g{m.generation}")
                except OSError:  # another process saved this generation first
                    shutil.rmtree(tmp, ignore_errors=True)
                for old in folder.iterdir():
                    if old.name != f"g{m.generation}" and not old.name.startswith("tmp-"):
                        shutil.rmtree(old, ignore_errors=True)
            except OSError as exc:
                log.warning("could not save the BM25 index of %s: %s", agent_id, exc)
        return index

    def _rank(self, agent_id: str, m: _Matrix, vector: Sequence[float] | None, query: str | None, top_k: int,
              threshold: float, allowed: set[str] | None, mode: Mode) -> list[Hit]:
        """Dense: exact cosine top-k. BM25: chunks sharing a query term, by BM25 score. Hybrid: both
        rankings (each up to max(50, 4·top_k) deep) fused by reciprocal rank, the dense one weighted
        DENSE_WEIGHT; ties go to the higher similarity. `similarity` is always the dense cosine."""
        import numpy as np

        if mode == "dense":
            assert vector is not None
            return self._exact(m, vector, top_k, threshold, allowed)
        assert query is not None
        wanted = max(top_k, RERANK_DEPTH) if mode == "hybrid-maxsim" else top_k
        depth = max(50, 4 * wanted)
        mask = None if allowed is None or allowed.issuperset(m.documents) else np.isin(m.document_ids, list(allowed))
        sims = m.vectors @ np.asarray(vector, dtype=np.float32) if vector is not None else None
        fused: dict[int, float] = {}
        if sims is not None:
            keep = sims >= threshold if mask is None else (sims >= threshold) & mask
            for rank, i in enumerate(self._top(sims, keep, depth)):
                fused[i] = fused.get(i, 0.0) + DENSE_WEIGHT / (RRF_K + rank + 1)
        tokens = _tokens(query)
        scores = np.asarray(self._lexical(agent_id, m).get_scores(tokens), dtype=np.float32) if tokens else None
        if scores is not None:
            keep = scores > 0 if mask is None else (scores > 0) & mask
            for rank, i in enumerate(self._top(scores, keep, depth)):
                fused[i] = fused.get(i, 0.0) + 1.0 / (RRF_K + rank + 1)
        order = sorted(fused, key=lambda i: (-fused[i], -(float(sims[i]) if sims is not None else 0.0), i))[:wanted]
        if mode == "hybrid-maxsim" and len(order) > 1:  # the first RERANK_DEPTH only: a bounded cost per search
            head = order[:RERANK_DEPTH]
            order = self._maxsim(query, [m.texts[i] for i in head], head) + order[RERANK_DEPTH:]
        order = order[:top_k]
        hits = []
        for i in order:
            meta = m.metadatas[i]
            hits.append(Hit(str(meta["document_id"]), str(meta["filename"]), int(meta["chunk_index"]),
                            int(meta["page"]) if "page" in meta else None, m.texts[i],
                            round(float(sims[i]), 4) if sims is not None else 0.0,
                            round(float(scores[i]), 4) if scores is not None else None))
        return hits

    def _maxsim(self, query: str, texts: list[str], order: list[int]) -> list[int]:
        """`order` (best first) fused by reciprocal rank with its order by MaxSim against the query."""
        tokens = self.embedder.token_vectors([query, *texts])  # type: ignore[attr-defined]
        q = tokens[0]
        score = [float((q @ t.T).max(axis=1).mean()) if len(q) and len(t) else 0.0 for t in tokens[1:]]
        by_maxsim = sorted(range(len(order)), key=lambda n: (-score[n], n))
        fused = {order[n]: 1.0 / (RRF_K + n + 1) for n in range(len(order))}
        for rank, n in enumerate(by_maxsim):
            fused[order[n]] += 1.0 / (RRF_K + rank + 1)
        return sorted(order, key=lambda i: (-fused[i], order.index(i)))

    @staticmethod
    def _top(values: Any, keep: Any, n: int) -> list[int]:
        """Indices of the `n` largest kept values, largest first (stable)."""
        import numpy as np

        candidates = np.flatnonzero(keep)
        if len(candidates) > n:
            candidates = candidates[np.argpartition(-values[candidates], n - 1)[:n]]
        return [int(i) for i in candidates[np.argsort(-values[candidates], kind="stable")]]

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
