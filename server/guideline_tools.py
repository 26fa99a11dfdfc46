"""Guideline document tools: upload, list, delete, search (per agent)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, ParamSpec, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ResourceLink, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from judges.errors import InputError
from judges.store.agents import TOP_K_MAX
from judges.store.guidelines import MAX_QUERY_CHARS, GuidelineChunk, GuidelineDocument, read_source

from .agent_tools import AgentId
from .context import ClientRoots, app_of, organization_of, roots_for
from .errors import tool_errors
from .jobs import as_result, report_to

P = ParamSpec("P")
R = TypeVar("R")


def store_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Kept so tools written with it still read the same: the store's failures (StoreError, UploadCancelled)
    are mapped with every other failure by `tool_errors` (server/errors.py)."""
    return fn


class DocumentList(BaseModel):
    documents: list[GuidelineDocument]


class DeletedDocument(BaseModel):
    deleted: bool
    id: str
    filename: str


class ChunkList(BaseModel):
    chunks: list[GuidelineChunk]


def register(mcp: MCPServer) -> None:
    @mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                          open_world_hint=False))
    @tool_errors
    @store_errors
    async def upload_guideline(
        ctx: Context,
        agent_id: AgentId,
        path: Annotated[str | None, Field(description="A PDF, DOCX, TXT or Markdown file in the allowed roots.")] = None,
        content_base64: Annotated[str | None, Field(description="The file's bytes in base64 (or a data: URI).")] = None,
        text: Annotated[str | None, Field(description="Plain text or Markdown.")] = None,
        filename: Annotated[str | None, Field(description="Name to show; also tells Markdown from text.")] = None,
        client_roots: ClientRoots = None,
    ) -> Annotated[CallToolResult, GuidelineDocument]:
        """Add a guideline document (PDF, DOCX, text) to an agent, for retrieval; the same bytes again return the
        existing record (duplicate_of)."""
        app = app_of(ctx)
        roots = roots_for(ctx, client_roots)
        # Decoding 20 MB of base64 (or reading the file) takes ~0.2 s: in a worker thread, off the event loop.
        data, name = await anyio.to_thread.run_sync(lambda: read_source(
            path=path, content_base64=content_base64, text=text, filename=filename, allowed_roots=roots,
            max_bytes=app.settings.max_upload_bytes))
        doc = await app.guidelines.upload(organization_of(ctx), agent_id, data, name, report_to(ctx))
        result = as_result(doc, [ResourceLink(
            type="resource_link", uri=f"judge://agents/{agent_id}/documents/{doc.id}", name=doc.filename,
            mime_type="application/json", description="the guideline document's record")])
        if doc.duplicate_of and doc.note:  # said first, before the record's JSON
            result.content.insert(0, TextContent(type="text", text=doc.note))
        return result

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False))
    @tool_errors
    @store_errors
    async def list_guidelines(ctx: Context, agent_id: AgentId) -> DocumentList:
        """An agent's guideline documents, oldest first, with their processing status."""
        app = app_of(ctx)
        return DocumentList(documents=await app.store(app.guidelines.documents, organization_of(ctx), agent_id))

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                                          open_world_hint=False))
    @tool_errors
    @store_errors
    async def delete_guideline(
        ctx: Context, agent_id: AgentId,
        document_id: Annotated[str, Field(description="From list_guidelines.")],
    ) -> DeletedDocument:
        """Delete a guideline document: its chunks and its record."""
        doc = await app_of(ctx).guidelines.delete(organization_of(ctx), agent_id, document_id)
        return DeletedDocument(deleted=True, id=doc.id, filename=doc.filename)

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False))
    @tool_errors
    @store_errors
    async def search_guidelines(
        ctx: Context, agent_id: AgentId,
        query: Annotated[str, Field(description="What to look for, e.g. the brief and the generation prompt.")],
        top_k: Annotated[int | None, Field(description=f"1–{TOP_K_MAX}; default: the agent's rag_config.top_k.")] = None,
        similarity_threshold: Annotated[float | None, Field(
            description="0–1; default: the agent's rag_config, else the server's.")] = None,
    ) -> ChunkList:
        """Search an agent's guidelines: the chunks most similar to the query, best first."""
        if len(query) > MAX_QUERY_CHARS:
            raise InputError(f"query is {len(query):,} characters; the limit is {MAX_QUERY_CHARS:,}. Search with the "
                             "words that matter, e.g. \"logo placement on dark backgrounds\"")
        chunks = await app_of(ctx).guidelines.search(organization_of(ctx), agent_id, query, top_k, similarity_threshold,
                                                     report_to(ctx))
        return ChunkList(chunks=chunks)
