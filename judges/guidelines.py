"""Guideline documents per agent (seed 001): upload → parse (worker process) → chunk → embed → store,
with the record's status going pending → processed | failed; listing, deleting and search."""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import anyio.to_thread
from pydantic import BaseModel, Field

from rag.chunking import chunk_text
from rag.formats import DocumentError, Limits
from rag.store import GuidelineStore, Hit
from rag.worker import parse_in_worker

from .agents import AgentStore
from .database import Database
from .errors import InputError, NotFoundError
from .paths import read_resolved, resolve_file

log = logging.getLogger(__name__)

Progress = Callable[[float, float | None, str], Awaitable[None]]
Status = Literal["pending", "processed", "failed"]


class DocumentMetadata(BaseModel):
    file_size: int
    sha256: str
    pages: int | None = None


class GuidelineDocument(BaseModel):
    id: str
    agent_id: str
    filename: str
    mime_type: str | None
    processing_status: Status
    chunk_count: int
    characters: int
    metadata: DocumentMetadata
    error: str | None = None
    created_at: str
    updated_at: str


class GuidelineChunk(BaseModel):
    document_id: str
    filename: str
    chunk_index: int
    page: int | None = None
    text: str
    similarity: float = Field(description="1 − cosine distance, 0–1.")

    @classmethod
    def of(cls, hit: Hit) -> GuidelineChunk:
        return cls(document_id=hit.document_id, filename=hit.filename, chunk_index=hit.chunk_index, page=hit.page,
                   text=hit.text, similarity=hit.similarity)


@dataclass(frozen=True)
class IngestSettings:
    max_file_bytes: int = 20 * 1024 * 1024
    chunk_size: int = 1000
    chunk_overlap: int = 200
    parse_timeout_s: float = 60.0
    parse_memory_mb: int = 1024
    limits: Limits = field(default_factory=Limits)
    default_threshold: float = 0.3
    embed_batch: int = 64


def read_source(*, path: str | None, content_base64: str | None, text: str | None, filename: str | None,
                allowed_roots: Sequence[Path], max_bytes: int) -> tuple[bytes, str]:
    """The uploaded bytes and a filename, from exactly one of a path, base64 content or text."""
    given = [n for n, v in (("path", path), ("content_base64", content_base64), ("text", text)) if v is not None]
    if len(given) != 1:
        raise InputError(f"give exactly one of path, content_base64 or text (got {', '.join(given) or 'none'})")
    too_big = f"more than the {max_bytes} bytes allowed (JUDGE_MCP_MAX_UPLOAD_BYTES)"
    if path is not None:
        real = resolve_file(path, allowed_roots)
        if real.stat().st_size > max_bytes:
            raise InputError(f"{path} is {real.stat().st_size} bytes, {too_big}")
        return read_resolved(real, max_bytes, path), filename or real.name
    if content_base64 is not None:
        payload = content_base64.split(",", 1)[1] if content_base64.startswith("data:") else content_base64
        payload = "".join(payload.split())
        if len(payload) * 3 // 4 > max_bytes:
            raise InputError(f"content_base64 decodes to {too_big}")
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise InputError("content_base64 is not valid base64") from None
        return data, filename or "upload"
    assert text is not None
    return text.encode("utf-8"), filename or "guideline.txt"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _document(row: Any) -> GuidelineDocument:
    return GuidelineDocument(
        id=row["id"], agent_id=row["agent_id"], filename=row["filename"], mime_type=row["mime_type"],
        processing_status=row["processing_status"], chunk_count=row["chunk_count"], characters=row["characters"],
        metadata=DocumentMetadata(file_size=row["file_size"], sha256=row["sha256"], pages=row["pages"]),
        error=row["error"], created_at=row["created_at"], updated_at=row["updated_at"],
    )


class Guidelines:
    def __init__(self, db: Database, agents: AgentStore, store: GuidelineStore, settings: IngestSettings):
        self.db = db
        self.agents = agents
        self.store = store
        self.settings = settings

    def _get(self, org: str, agent_id: str, document_id: str) -> GuidelineDocument:
        rows = self.db.query("SELECT * FROM documents WHERE id=? AND agent_id=? AND organization_id=?",
                             (document_id, agent_id, org))
        if not rows:
            raise NotFoundError(f"no document {document_id!r} for this agent (list_guidelines shows the ids)")
        return _document(rows[0])

    def _set(self, document_id: str, **fields: Any) -> None:
        cols = ", ".join(f"{k}=?" for k in fields)
        with self.db.transaction() as conn:
            conn.execute(f"UPDATE documents SET {cols}, updated_at=? WHERE id=?", (*fields.values(), _now(), document_id))

    def documents(self, org: str, agent_id: str) -> list[GuidelineDocument]:
        self.agents.get(org, agent_id)
        rows = self.db.query("SELECT * FROM documents WHERE agent_id=? AND organization_id=? ORDER BY created_at, rowid",
                             (agent_id, org))
        return [_document(r) for r in rows]

    async def upload(self, org: str, agent_id: str, data: bytes, filename: str,
                     progress: Progress | None = None) -> GuidelineDocument:
        """Store one document for an agent; the same bytes again return the existing record, adding nothing."""
        self.agents.get(org, agent_id)
        s = self.settings
        if len(data) > s.max_file_bytes:
            raise InputError(f"the file is {len(data)} bytes, more than the {s.max_file_bytes} allowed "
                             "(JUDGE_MCP_MAX_UPLOAD_BYTES)")
        if not data:
            raise InputError("the file is empty")
        digest = hashlib.sha256(data).hexdigest()
        rows = self.db.query("SELECT * FROM documents WHERE agent_id=? AND organization_id=? AND sha256=?",
                             (agent_id, org, digest))
        if rows and rows[0]["processing_status"] == "processed":
            return _document(rows[0])
        now = _now()
        if rows:  # a failed or interrupted earlier upload of the same bytes: process it again in place
            document_id = rows[0]["id"]
            self._set(document_id, processing_status="pending", error=None, filename=filename)
        else:
            document_id = str(uuid.uuid4())
            with self.db.transaction() as conn:
                conn.execute(
                    "INSERT INTO documents (id, organization_id, agent_id, filename, mime_type, file_size, sha256, "
                    "processing_status, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (document_id, org, agent_id, filename, None, len(data), digest, "pending", now, now),
                )

        async def report(done: float, total: float | None, message: str) -> None:
            if progress is not None:
                await progress(done, total, message)

        try:
            await report(0, None, f"parsing {filename}")
            parsed = await anyio.to_thread.run_sync(
                lambda: parse_in_worker(data, filename, s.limits, timeout_s=s.parse_timeout_s,
                                        memory_mb=s.parse_memory_mb)
            )
            self._set(document_id, mime_type=parsed.mime_type, pages=parsed.pages, characters=len(parsed.text))
            chunks = chunk_text(parsed.text, s.chunk_size, s.chunk_overlap, parsed.page_starts or None)
            vectors: list[list[float]] = []
            for start in range(0, len(chunks), s.embed_batch):
                await report(start, len(chunks), f"embedding chunks {start + 1}–{min(len(chunks), start + s.embed_batch)} "
                                                 f"of {len(chunks)}")
                batch = [c.text for c in chunks[start : start + s.embed_batch]]
                vectors += await anyio.to_thread.run_sync(self.store.embedder.embed, batch)
            await report(len(chunks), len(chunks), "storing chunks")
            await anyio.to_thread.run_sync(lambda: self.store.add(agent_id, document_id, filename, chunks, vectors))
            self._set(document_id, processing_status="processed", chunk_count=len(chunks))
        except DocumentError as exc:
            self._set(document_id, processing_status="failed", error=str(exc))
        except Exception as exc:
            log.exception("guideline upload failed")
            self._set(document_id, processing_status="failed", error=f"{type(exc).__name__}: {exc}")
            await anyio.to_thread.run_sync(lambda: self.store.delete_document(agent_id, document_id))
        return self._get(org, agent_id, document_id)

    async def delete(self, org: str, agent_id: str, document_id: str) -> GuidelineDocument:
        self.agents.get(org, agent_id)
        doc = self._get(org, agent_id, document_id)
        await anyio.to_thread.run_sync(lambda: self.store.delete_document(agent_id, document_id))
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM documents WHERE id=?", (document_id,))
        return doc

    async def search(self, org: str, agent_id: str, query: str, top_k: int | None = None,
                     threshold: float | None = None) -> list[GuidelineChunk]:
        """Chunks of this agent's processed documents, best first; defaults from the agent's rag_config."""
        agent = self.agents.get(org, agent_id)
        if not query.strip():
            raise InputError("query must not be empty")
        k = top_k if top_k is not None else agent.rag_config.top_k
        if not 1 <= k <= 50:
            raise InputError(f"top_k must be between 1 and 50 (got {k})")
        t = threshold if threshold is not None else agent.rag_config.similarity_threshold
        t = self.settings.default_threshold if t is None else t
        if not 0 <= t <= 1:
            raise InputError(f"similarity_threshold must be between 0 and 1 (got {t:g})")
        processed = [r["id"] for r in self.db.query(
            "SELECT id FROM documents WHERE agent_id=? AND organization_id=? AND processing_status='processed'",
            (agent_id, org))]
        if not processed:
            return []
        hits = await anyio.to_thread.run_sync(lambda: self.store.search(agent_id, query, k, t, processed))
        return [GuidelineChunk.of(h) for h in hits]
