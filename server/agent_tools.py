"""Judge-agent tools: create, list, get, update, delete (soft)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ResourceLink, ToolAnnotations
from pydantic import BaseModel, Field

from judges.store.agents import TEMPLATES, Agent, RagConfig, ScoreScale

from .context import app_of, organization_of
from .declare import READ_ONLY, TEXT, tool
from .jobs import as_result
from .startup import LISTED_AS, MIN_MAX

AgentId = str  # from create_agent or list_agents: its name says it
Weight = Annotated[float | None, Field(ge=0, le=100)]  # bounds in the schema: a model sees them
# update_agent lists these as create_agent does (toolset agents lists both); the server validates them in full.
AS_CREATED: dict[str, Any] = {LISTED_AS: {"type": "object", "description": "As in create_agent."}}
SCALE_HELP = "The {min, max} its prompt scores on; default {0, 100}; readings outside fail as out_of_range."
JURY_HELP = "A jury of 2–8 models for evaluate_image; the score is their mean."
RAG_HELP = ("top_k: chunks per evaluation (1–50, default 5); similarity_threshold: least cosine similarity "
            "0–1 (null: server's).")

WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
UPDATE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False)


def agent_link(agent: Agent) -> ResourceLink:
    return ResourceLink(type="resource_link", uri=f"judge://agents/{agent.id}", name=agent.name,
                        mime_type="application/json", description="the judge agent")


class AgentList(BaseModel):
    agents: list[Agent]


class DeletedAgent(BaseModel):
    id: str
    deleted_at: str


class CreateAgentInput(BaseModel):
    name: Annotated[str, Field(description="e.g. 'Brand Compliance Judge'."), TEXT]
    system_prompt: Annotated[str | None, Field(description="How the agent judges; optional with template_id."),
                             TEXT] = None
    evaluation_categories: Annotated[str | None, Field(description="Categories the agent scores."), TEXT] = None
    scoring_weight: Weight = None
    optimization_weight: Weight = None
    rag_config: Annotated[RagConfig | None, Field(description="{top_k, similarity_threshold}", json_schema_extra={
        LISTED_AS: {"type": "object", "properties": {"top_k": {"type": "integer"}, "similarity_threshold": {
            "type": ["number", "null"]}}, "description": RAG_HELP}})] = None
    template_id: Annotated[str | None, Field(description=f"Built-in: {', '.join(TEMPLATES)}.")] = None
    model: Annotated[str | None, Field(description="Model override, e.g. 'anthropic:<model>'.")] = None
    score_scale: Annotated[ScoreScale | None, Field(description=SCALE_HELP, json_schema_extra={
        LISTED_AS: {**MIN_MAX, "description": SCALE_HELP}})] = None
    models: Annotated[list[str] | None, Field(description=JURY_HELP)] = None


@tool(role="admin", toolset="agents", annotations=WRITE)
async def create_agent(ctx: Context, args: CreateAgentInput) -> Annotated[CallToolResult, Agent]:
    """Create a judge agent (instructions, model, guidelines) for evaluate_image and the judges' agent_id; weights
    default to 50 (or the template's)."""
    app = app_of(ctx)
    agent = await app.store(app.agents.create, organization_of(ctx), **dict(args))
    return as_result(agent, [agent_link(agent)])


class ListAgentsInput(BaseModel):
    query: Annotated[str | None, Field(description="Text in the name or system prompt, any case.")] = None
    sort_by: Literal["name", "created_at", "updated_at"] = "created_at"
    order: Literal["asc", "desc"] = "desc"


@tool(role="member", toolset="agents", annotations=READ_ONLY)
async def list_agents(ctx: Context, args: ListAgentsInput) -> AgentList:
    """List this organization's judge agents (deleted ones excluded)."""
    app = app_of(ctx)
    return AgentList(agents=await app.store(app.agents.list, organization_of(ctx), **dict(args)))


class AgentIdInput(BaseModel):
    agent_id: AgentId


@tool(role="member", toolset="agents", annotations=READ_ONLY)
async def get_agent(ctx: Context, args: AgentIdInput) -> Agent:
    """One judge agent by id."""
    app = app_of(ctx)
    return await app.store(app.agents.get, organization_of(ctx), args.agent_id)


class UpdateAgentInput(BaseModel):
    agent_id: AgentId
    name: Annotated[str | None, TEXT] = None
    system_prompt: Annotated[str | None, TEXT] = None
    evaluation_categories: Annotated[str | None, TEXT] = None
    scoring_weight: Weight = None
    optimization_weight: Weight = None
    rag_config: Annotated[RagConfig | None, Field(json_schema_extra=AS_CREATED)] = None
    template_id: str | None = None
    model: Annotated[str | None, Field(description="Model override; '' clears it.")] = None
    score_scale: Annotated[ScoreScale | None, Field(description=SCALE_HELP, json_schema_extra=AS_CREATED)] = None
    models: Annotated[list[str] | None, Field(description=JURY_HELP + " [] clears it.", json_schema_extra={
        LISTED_AS: {"type": "array", "items": {"type": "string"},
                    "description": "As in create_agent; [] clears it."}})] = None


@tool(role="admin", toolset="agents", annotations=UPDATE)
async def update_agent(ctx: Context, args: UpdateAgentInput) -> Agent:
    """Change a judge agent's given fields; the rest keep their values."""
    changes = {name: value for name, value in args if name != "agent_id"}
    app = app_of(ctx)
    return await app.store(app.agents.update, organization_of(ctx), args.agent_id, changes)


@tool(role="admin", toolset="agents", annotations=DELETE)
async def delete_agent(ctx: Context, args: AgentIdInput) -> DeletedAgent:
    """Soft-delete a judge agent: it disappears from every tool, its data is kept."""
    app = app_of(ctx)
    agent = await app.store(app.agents.delete, organization_of(ctx), args.agent_id)
    assert agent.deleted_at is not None
    return DeletedAgent(id=agent.id, deleted_at=agent.deleted_at)


TOOLS = (create_agent, list_agents, get_agent, update_agent, delete_agent)
