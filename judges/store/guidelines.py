"""Guideline documents per agent (seed 001): upload → parse (worker process) → chunk → embed → store,
with the record's status going pending → processed | failed; listing, deleting and search.

A pending record names its owner (boot id, pid and process start time): when the server starts,
records whose owner is gone (killed during an upload) become failed and lose their partial
chunks, while uploads of other live processes on the same data home are left alone. Deleting a
document or its agent during its upload cancels the upload and leaves no chunks.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import logging
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import anyio.to_thread
from pydantic import BaseModel, Field

from judges.errors import FailureKind, InputError, NotFoundError
from judges.inputs.paths import read_resolved, resolve_file
from judges.processes import pid_alive
from judges.progress import Progress
from judges.store.agents import TOP_K_MAX, AgentStore
from judges.store.database import Database, shown, timestamp
from rag.chunking import chunk_text
from rag.formats import DocumentError, Limits
from rag.store import GuidelineStore, Hit, StoreError
from rag.warmup import Warmup
from rag.worker import ParsePool

log = logging.getLogger(__name__)
MAX_QUERY_CHARS = 10_000  # of a search query; search_guidelines refuses longer ones, other callers are cut

Status = Literal["pending", "processed", "failed"]

SEARCH_READY = "search state"  # the warm-up step after which a search finds everything it needs loaded
INTERRUPTED = "interrupted (server stopped during processing); upload again"
CLEANUP = "interrupted"  # the owner of a failed record whose partial chunks are still to be removed


def process_token(pid: int | None = None) -> str:
    """Who owns a pending upload: boot id, pid and start time, so a reused pid is not taken for it."""
    pid = os.getpid() if pid is None else pid
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return f"pid:{pid}"
    started = stat.rsplit(")", 1)[1].split()[19]  # field 22, starttime in clock ticks after boot
    return f"{boot}/{pid}/{started}"


def owner_alive(owner: str | None) -> bool:
    if not owner:
        return False
    try:
        pid = int(owner.split("/")[1]) if "/" in owner else int(owner.removeprefix("pid:"))
    except (IndexError, ValueError):
        return False
    if "/" not in owner:  # no /proc: a live pid is taken as the owner
        return pid_alive(pid)
    return process_token(pid) == owner


class UploadCancelled(InputError):
    """The document or its agent was deleted while the document was being processed."""

    default_kind: ClassVar[FailureKind] = "cancelled"


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
    duplicate_of: str | None = Field(default=None, description=(
        "Set by upload_guideline when these exact bytes were already uploaded to this agent: the id of that "
        "document, whose record (with its own filename) this is; nothing was added."))
    note: str | None = Field(default=None, description="What happened, in words, when it is not a plain upload.")

    def no_result(self) -> str | None:
        """Why this document gives nothing to search (it failed to process), or None."""
        return f"the document could not be processed: {self.error}" if self.processing_status == "failed" else None


class GuidelineChunk(BaseModel):
    document_id: str
    filename: str
    chunk_index: int
    page: int | None = None
    text: str
    similarity: float = Field(description="1 − cosine distance, 0–1 (the dense part; the threshold applies to it).")
    bm25_score: float | None = Field(default=None, description="The chunk's BM25 score for the query "
                                     "(hybrid retrieval); a chunk can be found by its words alone.")

    @classmethod
    def of(cls, hit: Hit) -> GuidelineChunk:
        return cls(document_id=hit.document_id, filename=hit.filename, chunk_index=hit.chunk_index, page=hit.page,
                   text=hit.text, similarity=hit.similarity, bm25_score=hit.bm25)


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
    parse_workers: int = 2
    lease_s: float = 15.0  # a pending upload's lease (a shared database): judges/store/leases.py


MAX_FILENAME_CHARS = 255


def read_source(*, path: str | None, content_base64: str | None, text: str | None, filename: str | None,
                allowed_roots: Sequence[Path], max_bytes: int) -> tuple[bytes, str]:
    """The uploaded bytes and a filename, from exactly one of a path, base64 content or text."""
    given = [n for n, v in (("path", path), ("content_base64", content_base64), ("text", text)) if v is not None]
    if len(given) != 1:
        raise InputError(f"give exactly one of path, content_base64 or text (got {', '.join(given) or 'none'})")
    if filename is not None and len(filename) > MAX_FILENAME_CHARS:
        # Every chunk keeps its document's filename: a 200 KB name on a 0.1 MB text added 86 MB to the data home.
        raise InputError(f"filename is {len(filename):,} characters; at most {MAX_FILENAME_CHARS} (as file systems "
                         "allow), e.g. 'brand-guide.pdf'")
    too_big = f"more than the {max_bytes} bytes allowed (JUDGE_MCP_MAX_UPLOAD_BYTES)"
    if path is not None:
        real = resolve_file(path, allowed_roots)
        if real.stat().st_size > max_bytes:
            raise InputError(f"{path} is {real.stat().st_size} bytes, {too_big}")
        data = read_resolved(real, max_bytes, path)
        if not data:
            raise InputError(f"path {path!r}: the file is empty (0 bytes); give a PDF, DOCX, TXT or Markdown file "
                             "that has content")
        return data, filename or real.name
    if content_base64 is not None:
        payload = content_base64.split(",", 1)[1] if content_base64.startswith("data:") else content_base64
        payload = "".join(payload.split())
        if len(payload) * 3 // 4 - (len(payload) - len(payload.rstrip("="))) > max_bytes:  # '=' pads, decodes to nothing
            raise InputError(f"content_base64 decodes to {too_big}")
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise InputError("content_base64 is not valid base64; send the file's bytes encoded, e.g. "
                             "'JVBERi0xLjcK...' (a PDF), or use text= for plain text") from None
        if not data:
            raise InputError("content_base64 is empty; send the file's bytes encoded, e.g. 'JVBERi0xLjcK...' (a PDF)")
        return data, filename or "upload"
    assert text is not None
    if not text.strip():
        raise InputError('text must not be empty, e.g. "Use the brand blue #488EFF. The logo sits top left."')
    return text.encode("utf-8"), filename or "guideline.txt"



def duplicate(existing: GuidelineDocument, filename: str) -> GuidelineDocument:
    """The record an upload of bytes already stored returns: the existing document, saying so."""
    named = "under the same name" if existing.filename == filename else f"as {existing.filename!r}, not {filename!r}"
    return existing.model_copy(update={"duplicate_of": existing.id, "note": (
        f"duplicate: these exact bytes were already uploaded to this agent {named} (document {existing.id}, "
        f"{existing.created_at}); nothing was added and that record is returned. To keep this name instead, "
        "delete_guideline that document and upload again.")})


def _document(row: Any) -> GuidelineDocument:
    return GuidelineDocument(
        id=row["id"], agent_id=row["agent_id"], filename=row["filename"], mime_type=row["mime_type"],
        processing_status=row["processing_status"], chunk_count=row["chunk_count"], characters=row["characters"],
        metadata=DocumentMetadata(file_size=row["file_size"], sha256=row["sha256"], pages=row["pages"]),
        error=row["error"], created_at=row["created_at"], updated_at=row["updated_at"],
    )


class Guidelines:
    def __init__(self, db: Database, agents: AgentStore, store: GuidelineStore, settings: IngestSettings,
                 warmup: Warmup | None = None):
        self.db = db
        self.agents = agents
        self.store = store
        self.settings = settings
        # The process's one warm-up (embedder, store, interrupted uploads); requests wait for it.
        self.warmup = warmup or Warmup([("guideline store", self.prepare)])
        self.owner = process_token()
        # Warm parse processes, at most `parse_workers` at once; more uploads wait their turn.
        self.parser = ParsePool(settings.parse_workers, memory_mb=settings.parse_memory_mb)
        self._cancelled: set[str] = set()
        self.mark_interrupted()

    def prepare(self) -> None:
        """The warm-up's store step: open the store, then remove what interrupted uploads left in it."""
        self.store.open()
        self.clear_interrupted()

    def preload(self) -> None:
        """The warm-up's search step: what the first search after a start would otherwise pay. One query
        embedded (onnxruntime's first run allocates its buffers), then the search state (vectors, BM25 index)
        of the agents whose documents changed last, as many as the memory budget and ~3 s allow."""
        self.store.embedder.embed(["warm-up"])
        rows = self.db.query("SELECT agent_id, MAX(updated_at) AS last FROM documents "
                             "WHERE processing_status='processed' GROUP BY agent_id ORDER BY last DESC LIMIT 100")
        agents = [r["agent_id"] for r in rows]
        loaded = self.store.preload(agents)
        if loaded:  # one search run through (tokenizer, stemmer, BM25 scoring, numpy's first products: ~30 ms)
            self.store.search(agents[0], "warm up the guideline search", 1, 0.0)
        log.debug("warm-up: search state of %d agent(s) loaded", loaded)

    def close(self) -> None:
        self.parser.close()

    def mark_interrupted(self) -> list[str]:
        """Pending documents whose owner process is gone become failed (at start; SQLite only, fast).
        Their partial chunks are removed by `clear_interrupted`; search never returns them meanwhile."""
        marked = []
        for row in self.db.query("SELECT id, owner, heartbeat_at FROM documents WHERE processing_status='pending'"):
            if row["owner"] == self.owner or self._held(row):
                continue
            if self._interrupt(row["id"], row["owner"]):
                marked.append(row["id"])
        return marked

    def heartbeat(self, now: str) -> None:
        """Refresh the leases of the uploads this process is processing (judges/store/leases.py)."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE documents SET heartbeat_at=? WHERE processing_status='pending' AND owner=?",
                         (now, self.owner))

    def expire(self, before: str) -> list[str]:
        """Pending uploads of another process whose lease expired (heartbeat older than `before`) become
        interrupted, and their partial chunks are removed."""
        rows = self.db.query("SELECT id, owner FROM documents WHERE processing_status='pending' AND owner<>? "
                             "AND heartbeat_at<?", (self.owner, before))
        # One home (SQLite): a live owner process keeps its upload even when its heartbeat was late.
        marked = [r["id"] for r in rows if (self.db.kind != "sqlite" or not owner_alive(r["owner"]))
                  and self._interrupt(r["id"], r["owner"])]
        if marked and self.warmup.done:
            self.clear_interrupted()
        return marked

    def _interrupt(self, document_id: str, owner: str | None) -> bool:
        with self.db.transaction() as conn:
            done = conn.execute(
                "UPDATE documents SET processing_status='failed', error=?, chunk_count=0, owner=?, updated_at=? "
                "WHERE id=? AND processing_status='pending' AND owner IS NOT DISTINCT FROM ?",
                (INTERRUPTED, CLEANUP, timestamp(), document_id, owner)).rowcount
        if done:
            log.warning("guideline upload %s was interrupted by a stopped server: marked failed", document_id)
        return bool(done)

    def _held(self, row: Any) -> bool:
        """Whether a pending upload is still held by a live process: on SQLite its owner process is alive;
        with a shared database (replicas on other hosts) its lease is fresh."""
        if self.db.kind == "sqlite":
            return owner_alive(row["owner"])
        from judges.store.leases import cutoff

        return row["owner"] == self.owner or (row["heartbeat_at"] or "") >= cutoff(self.settings.lease_s)

    def clear_interrupted(self) -> int:
        """Remove the chunks of uploads marked interrupted; how many documents were cleared."""
        rows = self.db.query("SELECT id, agent_id FROM documents WHERE owner=?", (CLEANUP,))
        for row in rows:
            self.store.delete_document(row["agent_id"], row["id"])
            with self.db.transaction() as conn:
                conn.execute("UPDATE documents SET owner=NULL WHERE id=? AND owner=?", (row["id"], CLEANUP))
        return len(rows)

    async def ready(self, progress: Progress | None = None, until: str | None = None) -> None:
        """Wait (off the event loop) for the warm-up (or its steps up to `until`): nothing heavy is imported beside
        it. A caller that waits is told what it waits for (progress notifications, each second): the one-time
        model export above all."""
        if self.warmup.passed(until):
            return
        if progress is None:
            await anyio.to_thread.run_sync(lambda: self.warmup.wait(None, until))
            return
        said = None
        while not await anyio.to_thread.run_sync(lambda: self.warmup.wait(1.0, until)):
            message = self.waiting_for()
            if message != said:
                said = message
                step = self.warmup.step
                await progress(step[0] if step else 0, self.warmup.total, message)

    def waiting_for(self) -> str:
        """What the warm-up is doing now, in words for a person waiting on it."""
        step = self.warmup.step
        return f"waiting for the server's warm-up: {step[1] if step else 'starting'}"

    def _get(self, org: str, agent_id: str, document_id: str) -> GuidelineDocument:
        rows = self.db.query("SELECT * FROM documents WHERE id=? AND agent_id=? AND organization_id=?",
                             (document_id, agent_id, org))
        if not rows:
            raise NotFoundError(f"no document {document_id!r} for this agent (list_guidelines shows the ids)")
        return _document(rows[0])

    def _set(self, document_id: str, **fields: Any) -> None:
        cols = ", ".join(f"{k}=?" for k in fields)
        with self.db.transaction() as conn:
            values = [shown(v) if k == "error" else v for k, v in fields.items()]  # a parser's message may quote bytes
            conn.execute(f"UPDATE documents SET {cols}, updated_at=? WHERE id=?", (*values, timestamp(), document_id))

    async def _update(self, document_id: str, **fields: Any) -> None:
        """`_set` from async code (Database.run: off the event loop on PostgreSQL)."""
        await self.db.run(functools.partial(self._set, document_id, **fields))

    def _insert(self, values: tuple[object, ...]) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO documents (id, organization_id, agent_id, filename, mime_type, file_size, sha256, "
                "processing_status, created_at, updated_at, owner, heartbeat_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                values)

    def _delete(self, document_id: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM documents WHERE id=?", (document_id,))

    def documents(self, org: str, agent_id: str) -> list[GuidelineDocument]:
        self.agents.get(org, agent_id)
        rows = self.db.query("SELECT * FROM documents WHERE agent_id=? AND organization_id=? ORDER BY created_at, "
                             f"{self.db.insertion_order}",
                             (agent_id, org))
        return [_document(r) for r in rows]

    async def upload(self, org: str, agent_id: str, data: bytes, filename: str,
                     progress: Progress | None = None) -> GuidelineDocument:
        """Store one document for an agent; the same bytes again return the existing record (its own filename,
        `duplicate_of` and a note saying so), adding nothing."""
        await self.db.run(self.agents.get, org, agent_id)
        s = self.settings
        if len(data) > s.max_file_bytes:
            raise InputError(f"the file is {len(data)} bytes, more than the {s.max_file_bytes} allowed "
                             "(JUDGE_MCP_MAX_UPLOAD_BYTES)")
        if not data:
            raise InputError("the file is empty")
        digest = hashlib.sha256(data).hexdigest()
        rows = await self.db.run(self.db.query, "SELECT * FROM documents WHERE agent_id=? AND organization_id=? "
                                 "AND sha256=?", (agent_id, org, digest))
        if rows and rows[0]["processing_status"] == "processed":
            return duplicate(_document(rows[0]), filename)
        now = timestamp()
        await self.ready(progress)
        if rows:  # a failed or interrupted earlier upload of the same bytes: process it again in place
            document_id = rows[0]["id"]
            if rows[0]["processing_status"] == "pending" and self._held(rows[0]):
                raise InputError(f"{filename} is already being uploaded to this agent (document {document_id}); "
                                 "list_guidelines shows when it is processed")
            await self._update(document_id, processing_status="pending", error=None, filename=filename,
                               owner=self.owner, heartbeat_at=now)
            await anyio.to_thread.run_sync(lambda: self.store.delete_document(agent_id, document_id))
        else:
            document_id = str(uuid.uuid4())
            await self.db.run(self._insert, (document_id, org, agent_id, filename, None, len(data), digest, "pending",
                                             now, now, self.owner, now))
        try:
            return await self._process(org, agent_id, document_id, data, filename, progress)
        finally:
            self._cancelled.discard(document_id)

    def _still_wanted(self, org: str, agent_id: str, document_id: str) -> str | None:
        """Why the upload must stop (its document or agent was deleted meanwhile), else None."""
        if document_id in self._cancelled or not self.db.query("SELECT 1 FROM documents WHERE id=?", (document_id,)):
            return "the document was deleted while it was being processed"
        if not self.db.query("SELECT 1 FROM agents WHERE id=? AND organization_id=? AND deleted_at IS NULL",
                             (agent_id, org)):
            return "the agent was deleted while the document was being processed"
        return None

    async def _process(self, org: str, agent_id: str, document_id: str, data: bytes, filename: str,
                       progress: Progress | None) -> GuidelineDocument:
        s = self.settings

        async def report(done: float, total: float | None, message: str) -> None:
            if progress is not None:
                await progress(done, total, message)

        try:
            await report(0, None, f"parsing {filename}")
            parsed = await anyio.to_thread.run_sync(
                lambda: self.parser.parse(data, filename, s.limits, timeout_s=s.parse_timeout_s)
            )
            await self._update(document_id, mime_type=parsed.mime_type, pages=parsed.pages, characters=len(parsed.text))
            chunks = chunk_text(parsed.text, s.chunk_size, s.chunk_overlap, parsed.page_starts or None)
            # Embedded and stored batch by batch: the record's chunk_count shows the progress, a
            # delete stops the upload at the next batch, and memory stays flat for long files.
            for start in range(0, len(chunks), s.embed_batch):
                if (why := await self.db.run(self._still_wanted, org, agent_id, document_id)) is not None:
                    raise UploadCancelled(f"upload of {filename} cancelled: {why}")
                part = chunks[start : start + s.embed_batch]
                await report(start, len(chunks), f"embedding chunks {start + 1}–{start + len(part)} of {len(chunks)}")
                vectors = await anyio.to_thread.run_sync(self.store.embedder.embed, [c.text for c in part])
                await anyio.to_thread.run_sync(self.store.add, agent_id, document_id, filename, part, vectors)
                await self._update(document_id, chunk_count=start + len(part))
            await report(len(chunks), len(chunks), f"stored {len(chunks)} of {len(chunks)} chunks")
            # Added first, checked after: a delete that raced the last add is seen here and undone.
            if (why := await self.db.run(self._still_wanted, org, agent_id, document_id)) is not None:
                raise UploadCancelled(f"upload of {filename} cancelled: {why}")
            await self._update(document_id, processing_status="processed", chunk_count=len(chunks), owner=None)
        except DocumentError as exc:
            await self._update(document_id, processing_status="failed", error=str(exc), owner=None)
        except UploadCancelled as exc:
            await anyio.to_thread.run_sync(lambda: self.store.delete_document(agent_id, document_id))
            await self._update(document_id, processing_status="failed", error=str(exc), owner=None)
            raise
        except Exception as exc:
            log.exception("guideline upload failed")
            await self._update(document_id, processing_status="failed", error=f"{type(exc).__name__}: {exc}", owner=None)
            await anyio.to_thread.run_sync(lambda: self.store.delete_document(agent_id, document_id))
            if isinstance(exc, StoreError):
                raise
        except BaseException:  # the request was cancelled: no record stays pending, no chunks stay
            with anyio.CancelScope(shield=True):
                await self._update(document_id, processing_status="failed", error="the upload was cancelled; upload again",
                          owner=None)
                await anyio.to_thread.run_sync(lambda: self.store.delete_document(agent_id, document_id))
            raise
        return await self.db.run(self._get, org, agent_id, document_id)

    async def delete(self, org: str, agent_id: str, document_id: str) -> GuidelineDocument:
        await self.db.run(self.agents.get, org, agent_id)
        doc = await self.db.run(self._get, org, agent_id, document_id)
        await self.ready()
        if doc.processing_status == "pending":
            self._cancelled.add(document_id)  # an upload in this process stops at its next step
        await self.db.run(self._delete, document_id)
        # Record first, chunks after: an upload in flight (here or in another process) sees the
        # record gone once it has added its chunks, and removes them itself.
        await anyio.to_thread.run_sync(lambda: self.store.delete_document(agent_id, document_id))
        return doc

    async def search(self, org: str, agent_id: str, query: str, top_k: int | None = None,
                     threshold: float | None = None, progress: Progress | None = None) -> list[GuidelineChunk]:
        """Chunks of this agent's processed documents, best first; defaults from the agent's rag_config."""
        agent = await self.db.run(self.agents.get, org, agent_id)
        if not query.strip():
            raise InputError("query must not be empty")
        # The embedding reads the first 256 tokens; BM25 would tokenise and score every word of a
        # 200,000-character text (an answer or brief used as the query): only its beginning is searched.
        query = query[:MAX_QUERY_CHARS]
        k = top_k if top_k is not None else agent.rag_config.top_k
        if not 1 <= k <= TOP_K_MAX:
            raise InputError(f"top_k must be between 1 and {TOP_K_MAX} (got {k})")
        t = threshold if threshold is not None else agent.rag_config.similarity_threshold
        t = self.settings.default_threshold if t is None else t
        if not 0 <= t <= 1:
            raise InputError(f"similarity_threshold must be between 0 and 1 (got {t:g})")
        processed = [r["id"] for r in await self.db.run(
            self.db.query,
            "SELECT id FROM documents WHERE agent_id=? AND organization_id=? AND processing_status='processed'",
            (agent_id, org))]
        if not processed:
            return []
        # A search needs the model and the store, not the parse workers or the prompts the warm-up readies after.
        await self.ready(progress, until=SEARCH_READY if SEARCH_READY in self.warmup.names else None)
        hits = await anyio.to_thread.run_sync(lambda: self.store.search(agent_id, query, k, t, processed))
        return [GuidelineChunk.of(h) for h in hits]
