"""The text judges: score_text, compare_to_reference, rank_texts, evaluate_rag_answer, evaluate_trajectory."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from judges.call import JudgeCall
from judges.progress import Progress
from judges.text import rag, ranking, reference, scoring, trajectory
from judges.text.rag import RagContext, RagEvaluation, guideline_contexts
from judges.text.ranking import Ranking
from judges.text.reference import ReferenceComparison
from judges.text.scoring import BUILTIN_RUBRICS, Criterion, TextScore, resolve_criteria
from judges.text.trajectory import Step, TrajectoryEvaluation

from .context import UseCache, app_of, organization_of
from .declare import TEXT, TEXTS, Judging, items, judge
from .jobs import Background
from .startup import LISTED_AS, MIN_MAX

OptionalAgent = Annotated[str | None, Field(description="An agent whose guidelines give the context.")]


async def _agent_contexts(ctx: Context, agent_id: str | None, query: str) -> list[RagContext]:
    if agent_id is None:
        return []
    return await guideline_contexts(app_of(ctx).guidelines, organization_of(ctx), agent_id, query)


class ScoreTextInput(BaseModel):
    text: Annotated[str, TEXT]
    rubric: Annotated[str | list[str] | None, Field(description=(
        f"Built-in: {', '.join(BUILTIN_RUBRICS)} (each 1–5); or criteria."))] = None
    criteria: Annotated[list[Criterion] | None, Field(description="Custom criteria.", json_schema_extra={
        LISTED_AS: {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "description": {"type": "string"}, "weight": {"type": "number"},
            "scale": MIN_MAX}, "required": ["name", "description"]}, "description": (
            "Custom criteria: description says what low and high mean; weight (default 1; 0: not totalled); "
            "scale {min, max}, default {1, 5}.")}})] = None
    instruction: Annotated[str | None, Field(description="What the text answers."), TEXT] = None
    reference: Annotated[str | None, Field(description="A known-correct answer."), TEXT] = None
    context: Annotated[list[str] | None, Field(description="Passages it should rely on."), TEXTS] = None
    agent_id: OptionalAgent = None
    method: Annotated[Literal["direct", "g_eval"], Field(description=(
        "g_eval: the model first writes evaluation steps per rubric (cached), then scores by them."
    ))] = "direct"
    cache: UseCache = True
    background: Background = False


@judge(toolset="text")
async def score_text(ctx: Context, args: ScoreTextInput) -> Judging[TextScore]:
    """Score a text on a rubric or criteria: each on its scale (and 0–100), and a weighted total."""
    found = resolve_criteria(args.rubric, args.criteria)
    sizes = app_of(ctx).settings.size_limits()
    for criterion in args.criteria or []:
        sizes.text(f"criteria[{criterion.name}].description", criterion.description)
    passages = [*(args.context or []),
                *(c.text for c in await _agent_contexts(ctx, args.agent_id, args.instruction or args.text))]

    async def work(call: JudgeCall, progress: Progress) -> TextScore:
        return await scoring.score_text(call, text=args.text, criteria=found, instruction=args.instruction,
                                        reference=args.reference, context=passages, method=args.method,
                                        progress=progress)

    async def check(call: JudgeCall) -> None:
        scoring.check_text_inputs(args.text, found, passages)

    return Judging(work, check=check)


class CompareToReferenceInput(BaseModel):
    text: Annotated[str, Field(description="The answer to check."), TEXT]
    reference: Annotated[str, TEXT]
    instruction: Annotated[str | None, Field(description="The question both answer."), TEXT] = None
    cache: UseCache = True
    background: Background = False


@judge(toolset="text")
async def compare_to_reference(ctx: Context, args: CompareToReferenceInput) -> Judging[ReferenceComparison]:
    """Check an answer against a known-correct one: equivalent / partially_correct / incorrect, with what is missing
    or wrong."""

    async def check(call: JudgeCall) -> None:
        reference.check_reference(args.reference)

    return Judging(lambda call, progress: reference.compare_to_reference(
        call, text=args.text, reference=args.reference, instruction=args.instruction, progress=progress),
        check=check)


class RankTextsInput(BaseModel):
    instruction: Annotated[str, Field(description="The task every candidate answers."), TEXT]
    candidates: Annotated[list[str], Field(description="Two or more."), TEXTS]
    method: Annotated[Literal["tournament", "round_robin", "score"], Field(description=(
        "round_robin: all pairs both ways, n(n−1) calls, Bradley–Terry/Elo; tournament: knockout, 2(n−1); "
        "score: n scores."))] = "round_robin"
    cache: UseCache = True
    background: Background = False


@judge(toolset="text")
async def rank_texts(ctx: Context, args: RankTextsInput) -> Judging[Ranking]:
    """Rank texts answering one task by games asked in both orders; ties, position-biased and failed games reported."""
    settings = app_of(ctx).settings

    async def check(call: JudgeCall) -> None:
        ranking.check_ranking(args.instruction, args.candidates, args.method, settings.rank_max_calls)

    return Judging(lambda call, progress: ranking.rank_texts(
        call, instruction=args.instruction, candidates=args.candidates, method=args.method,
        max_calls=settings.rank_max_calls, retries=settings.pairwise_retries, progress=progress), check=check)


class EvaluateRagAnswerInput(BaseModel):
    question: Annotated[str, TEXT]
    answer: Annotated[str, TEXT]
    contexts: Annotated[list[str] | None, Field(description="The retrieved passages; or agent_id."), TEXTS] = None
    agent_id: Annotated[str | None, Field(description="Search this agent's guidelines for the contexts.")] = None
    cache: UseCache = True
    background: Background = False


@judge(toolset="text")
async def evaluate_rag_answer(ctx: Context, args: EvaluateRagAnswerInput) -> Judging[RagEvaluation]:
    """Judge a RAG answer: faithfulness (each claim supported, contradicted or not found), answer and context
    relevance."""
    found = [RagContext(text=c) for c in args.contexts or []]
    found += await _agent_contexts(ctx, args.agent_id, args.question)

    async def check(call: JudgeCall) -> None:
        rag.check_rag_inputs(args.question, args.answer, found)

    return Judging(lambda call, progress: rag.evaluate_rag_answer(
        call, question=args.question, answer=args.answer, contexts=found, progress=progress), check=check)


class EvaluateTrajectoryInput(BaseModel):
    goal: Annotated[str, Field(description="What the agent was asked to do."), TEXT]
    steps: Annotated[list[Step], Field(description="The agent's tool calls in order.", json_schema_extra={
        LISTED_AS: {"type": "array", "items": {"type": "object", "properties": {
            "tool": {"type": "string"}, "arguments": {"type": "object"}, "result": {}}, "required": ["tool"]},
            "description": "The agent's tool calls in order; result: text or JSON."}}),
        items("e.g. judge the trajectory in parts, or leave out steps that repeat")]
    expected_tools: Annotated[list[str] | None, Field(description="Tools it should call, in order (twice "
                                                                  "listed: at least twice)."),
                              items("e.g. each tool once per expected call")] = None
    cache: UseCache = True
    background: Background = False


@judge(toolset="text")
async def evaluate_trajectory(ctx: Context, args: EvaluateTrajectoryInput) -> Judging[TrajectoryEvaluation]:
    """Judge an agent's tool-call trajectory: checks (expected tools, order, counts, repeats, retries), then a model
    call on the goal, needless steps, ignored failures."""

    async def check(call: JudgeCall) -> None:
        trajectory.check_trajectory_inputs(args.goal, args.steps)

    return Judging(lambda call, progress: trajectory.evaluate_trajectory(
        call, goal=args.goal, steps=args.steps, expected_tools=args.expected_tools, progress=progress), check=check)


TOOLS = (score_text, compare_to_reference, rank_texts, evaluate_rag_answer, evaluate_trajectory)
