"""Guideline document tools: upload, list, delete, search (per agent)."""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ResourceLink, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, field_validator

from judges.errors import InputError
from judges.store.agents import TOP_K_MAX
from judges.store.guidelines import MAX_QUERY_CHARS, GuidelineChunk, GuidelineDocument, read_source

from .agent_tools import AgentId, AgentIdInput
from .context import ClientRoots, app_of, organization_of, roots_for
from .declare import READ_ONLY, tool
from .jobs import as_result, report_to

UPLOAD = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


class DocumentList(BaseModel):
    documents: list[GuidelineDocument]


class DeletedDocument(BaseModel):
    deleted: bool
    id: str
    filename: str


class ChunkList(BaseModel):
    chunks: list[GuidelineChunk]


class UploadGuidelineInput(BaseModel):
    agent_id: AgentId
    path: Annotated[str | None, Field(description="A PDF, DOCX, TXT or Markdown file in the allowed roots.")] = None
    content_base64: Annotated[str | None, Field(description="The file's bytes in base64 (or a data: URI).")] = None
    text: Annotated[str | None, Field(description="Plain text or Markdown.")] = None
    filename: Annotated[str | None, Field(description="Name to show; also tells Markdown from text.")] = None


@tool(role="admin", toolset="agents", annotations=UPLOAD)
async def upload_guideline(ctx: Context, args: UploadGuidelineInput,
                           client_roots: ClientRoots = None) -> Annotated[CallToolResult, GuidelineDocument]:
    """Add a guideline document (PDF, DOCX, text) to an agent, for retrieval; the same bytes again return the
    existing record."""
    app, roots = app_of(ctx), roots_for(ctx, client_roots)
    # Decoding 20 MB of base64 (or reading the file) takes ~0.2 s: in a worker thread, off the event loop.
    data, name = await anyio.to_thread.run_sync(lambda: read_source(
        path=args.path, content_base64=args.content_base64, text=args.text, filename=args.filename,
        allowed_roots=roots, max_bytes=app.settings.max_upload_bytes))
    doc = await app.guidelines.upload(organization_of(ctx), args.agent_id, data, name, report_to(ctx))
    result = as_result(doc, [ResourceLink(
        type="resource_link", uri=f"judge://agents/{args.agent_id}/documents/{doc.id}", name=doc.filename,
        mime_type="application/json", description="the guideline document's record")])
    if doc.duplicate_of and doc.note:  # said first, before the record's JSON
        result.content.insert(0, TextContent(type="text", text=doc.note))
    return result


@tool(role="member", toolset="agents", annotations=READ_ONLY)
async def list_guidelines(ctx: Context, args: AgentIdInput) -> DocumentList:
    """An agent's guideline documents, oldest first, with their processing status."""
    app = app_of(ctx)
    return DocumentList(documents=await app.store(app.guidelines.documents, organization_of(ctx), args.agent_id))


class DeleteGuidelineInput(BaseModel):
    agent_id: AgentId
    document_id: Annotated[str, Field(description="From list_guidelines.")]


@tool(role="admin", toolset="agents", annotations=DELETE)
async def delete_guideline(ctx: Context, args: DeleteGuidelineInput) -> DeletedDocument:
    """Delete a guideline document: its chunks and its record."""
    doc = await app_of(ctx).guidelines.delete(organization_of(ctx), args.agent_id, args.document_id)
    return DeletedDocument(deleted=True, id=doc.id, filename=doc.filename)


class SearchGuidelinesInput(BaseModel):
    agent_id: AgentId
    query: Annotated[str, Field(description="e.g. the brief and the generation prompt.")]
    top_k: Annotated[int | None, Field(ge=1, le=TOP_K_MAX, description=(
        "Default: the agent's rag_config.top_k."))] = None
    similarity_threshold: Annotated[float | None, Field(ge=0, le=1, description=(
        "Default: the agent's rag_config, else the server's."))] = None

    @field_validator("query")
    @classmethod
    def _short(cls, query: str) -> str:
        if len(query) > MAX_QUERY_CHARS:
            raise InputError(f"query is {len(query):,} characters; the limit is {MAX_QUERY_CHARS:,}. Search with the "
                             "words that matter, e.g. \"logo placement on dark backgrounds\"")
        return query


@tool(role="member", toolset="agents", annotations=READ_ONLY)
async def search_guidelines(ctx: Context, args: SearchGuidelinesInput) -> ChunkList:
    """Search an agent's guidelines: the chunks most similar to the query, best first."""
    return ChunkList(chunks=await app_of(ctx).guidelines.search(
        organization_of(ctx), args.agent_id, args.query, args.top_k, args.similarity_threshold, report_to(ctx)))


TOOLS = (upload_guideline, list_guidelines, delete_guideline, search_guidelines)
