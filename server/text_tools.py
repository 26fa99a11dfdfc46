"""The text judges: score_text, compare_to_reference, rank_texts, evaluate_rag_answer, evaluate_trajectory."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from judges.progress import Progress
from judges.text.rag import RagContext, RagEvaluation, evaluate_rag_answer, guideline_contexts
from judges.text.ranking import Ranking, rank_texts
from judges.text.reference import ReferenceComparison, compare_to_reference
from judges.text.scoring import BUILTIN_RUBRICS, Criterion, TextScore, resolve_criteria, score_text
from judges.text.trajectory import Step, TrajectoryEvaluation, evaluate_trajectory

from .context import UseCache, app_of, organization_of
from .errors import tool_errors
from .jobs import Background, or_job, run_or_background
from .startup import LISTED_AS, MIN_MAX

JUDGE = ToolAnnotations(read_only_hint=True, idempotent_hint=False, open_world_hint=True)
OptionalAgent = Annotated[str | None, Field(description="An agent whose guidelines give the context.")]


async def _agent_contexts(ctx: Context, agent_id: str | None, query: str) -> list[RagContext]:
    if agent_id is None:
        return []
    return await guideline_contexts(app_of(ctx).guidelines, organization_of(ctx), agent_id, query)


def register(mcp: MCPServer[Any]) -> None:
    @mcp.tool(name="score_text", annotations=JUDGE)
    @tool_errors
    async def score_text_tool(
        ctx: Context,
        text: str,
        rubric: Annotated[str | list[str] | None, Field(description=(
            f"Built-in: {', '.join(BUILTIN_RUBRICS)} (each 1–5); or criteria."))] = None,
        criteria: Annotated[list[Criterion] | None, Field(description="Custom criteria.", json_schema_extra={
            LISTED_AS: {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "description": {"type": "string"}, "weight": {"type": "number"},
                "scale": MIN_MAX}, "required": ["name", "description"]}, "description": (
                "Custom criteria: description says what low and high mean; weight (default 1; 0: not totalled); "
                "scale {min, max}, default {1, 5}.")}})] = None,
        instruction: Annotated[str | None, Field(description="What the text answers.")] = None,
        reference: Annotated[str | None, Field(description="A known-correct answer.")] = None,
        context: Annotated[list[str] | None, Field(description="Passages it should rely on.")] = None,
        agent_id: OptionalAgent = None,
        method: Annotated[Literal["direct", "g_eval"], Field(description=(
            "g_eval: the model first writes evaluation steps per rubric (cached), then scores by them."
        ))] = "direct",
        cache: UseCache = True,
        background: Background = False,
    ) -> Annotated[CallToolResult, or_job(TextScore)]:
        """Score a text on a rubric or criteria: each on its scale (and 0–100), and a weighted total."""
        sizes = app_of(ctx).settings.size_limits()
        sizes.text("text", text)
        sizes.text("instruction", instruction)
        sizes.text("reference", reference)
        sizes.texts("context", context)
        found = resolve_criteria(rubric, criteria)
        passages = [*(context or []), *(c.text for c in await _agent_contexts(ctx, agent_id, instruction or text))]

        call = await app_of(ctx).judge_call(ctx, cache=cache, background=background)

        async def work(progress: Progress) -> TextScore:
            return await score_text(call, text=text, criteria=found, instruction=instruction,
                                    reference=reference, context=passages, method=method, progress=progress)

        return await run_or_background(ctx, "score_text", call, work)

    @mcp.tool(name="compare_to_reference", annotations=JUDGE)
    @tool_errors
    async def compare_to_reference_tool(
        ctx: Context,
        text: Annotated[str, Field(description="The answer to check.")],
        reference: str,
        instruction: Annotated[str | None, Field(description="The question both answer.")] = None,
        cache: UseCache = True,
        background: Background = False,
    ) -> Annotated[CallToolResult, or_job(ReferenceComparison)]:
        """Check an answer against a known-correct one: equivalent / partially_correct / incorrect, with what is missing
        or wrong."""
        sizes = app_of(ctx).settings.size_limits()
        sizes.text("text", text)
        sizes.text("reference", reference)
        sizes.text("instruction", instruction)

        call = await app_of(ctx).judge_call(ctx, cache=cache, background=background)

        async def work(progress: Progress) -> ReferenceComparison:
            return await compare_to_reference(call, text=text, reference=reference,
                                              instruction=instruction, progress=progress)

        return await run_or_background(ctx, "compare_to_reference", call, work)

    @mcp.tool(name="rank_texts", annotations=JUDGE)
    @tool_errors
    async def rank_texts_tool(
        ctx: Context,
        instruction: Annotated[str, Field(description="The task every candidate answers.")],
        candidates: Annotated[list[str], Field(description="Two or more.")],
        method: Annotated[Literal["tournament", "round_robin", "score"], Field(description=(
            "round_robin: all pairs both ways, n(n−1) calls, Bradley–Terry/Elo; tournament: knockout, 2(n−1); "
            "score: n scores."))] = "round_robin",
        cache: UseCache = True,
        background: Background = False,
    ) -> Annotated[CallToolResult, or_job(Ranking)]:
        """Rank texts answering one task by games asked in both orders; ties, position-biased and failed games reported."""
        app = app_of(ctx)
        sizes = app.settings.size_limits()
        sizes.text("instruction", instruction)
        sizes.texts("candidates", candidates)

        call = await app.judge_call(ctx, cache=cache, background=background)

        async def work(progress: Progress) -> Ranking:
            return await rank_texts(call, instruction=instruction, candidates=candidates, method=method,
                                    max_calls=app.settings.rank_max_calls, retries=app.settings.pairwise_retries,
                                    progress=progress)

        return await run_or_background(ctx, "rank_texts", call, work)

    @mcp.tool(name="evaluate_rag_answer", annotations=JUDGE)
    @tool_errors
    async def evaluate_rag_answer_tool(
        ctx: Context,
        question: str,
        answer: str,
        contexts: Annotated[list[str] | None, Field(description="The retrieved passages; or agent_id.")] = None,
        agent_id: Annotated[str | None, Field(description="Search this agent's guidelines for the contexts.")] = None,
        cache: UseCache = True,
        background: Background = False,
    ) -> Annotated[CallToolResult, or_job(RagEvaluation)]:
        """Judge a RAG answer: faithfulness (each claim supported, contradicted or not found), answer and context
        relevance."""
        sizes = app_of(ctx).settings.size_limits()
        sizes.text("question", question)
        sizes.text("answer", answer)
        sizes.texts("contexts", contexts)
        found = [RagContext(text=c) for c in contexts or []]
        found += await _agent_contexts(ctx, agent_id, question)

        call = await app_of(ctx).judge_call(ctx, cache=cache, background=background)

        async def work(progress: Progress) -> RagEvaluation:
            return await evaluate_rag_answer(call, question=question, answer=answer,
                                             contexts=found, progress=progress)

        return await run_or_background(ctx, "evaluate_rag_answer", call, work)

    @mcp.tool(name="evaluate_trajectory", annotations=JUDGE)
    @tool_errors
    async def evaluate_trajectory_tool(
        ctx: Context,
        goal: Annotated[str, Field(description="What the agent was asked to do.")],
        steps: Annotated[list[Step], Field(description="The agent's tool calls in order.", json_schema_extra={
            LISTED_AS: {"type": "array", "items": {"type": "object", "properties": {
                "tool": {"type": "string"}, "arguments": {"type": "object"}, "result": {}}, "required": ["tool"]},
                "description": "The agent's tool calls in order; result: text or JSON."}})],
        expected_tools: Annotated[list[str] | None, Field(description="Tools it should call, in order (twice "
                                                                      "listed: at least twice).")] = None,
        cache: UseCache = True,
        background: Background = False,
    ) -> Annotated[CallToolResult, or_job(TrajectoryEvaluation)]:
        """Judge an agent's tool-call trajectory: checks (expected tools, order, counts, repeats, retries), then a model
        call on the goal, needless steps, ignored failures."""
        sizes = app_of(ctx).settings.size_limits()
        sizes.text("goal", goal)
        sizes.items("steps", steps, "e.g. judge the trajectory in parts, or leave out steps that repeat")
        sizes.items("expected_tools", expected_tools, "e.g. each tool once per expected call")

        call = await app_of(ctx).judge_call(ctx, cache=cache, background=background)

        async def work(progress: Progress) -> TrajectoryEvaluation:
            return await evaluate_trajectory(call, goal=goal, steps=steps,
                                             expected_tools=expected_tools, progress=progress)

        return await run_or_background(ctx, "evaluate_trajectory", call, work)
