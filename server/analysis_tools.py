"""evaluate_analysis: deterministic checks D-1..D-5 first, then LLM rubric categories."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field, field_validator

from judges.analysis.judge import BUILTIN, DETERMINISTIC, AnalysisResult, evaluate_analysis, load_category
from judges.call import JudgeCall

from .context import ExpectedScore, JuryModels, Samples, UseCache, app_of
from .declare import JSON_VALUE, TEXT, Judging, judge
from .jobs import Background

Check = Literal["D-1", "D-2", "D-3", "D-4", "D-5"]
assert set(Check.__args__) == set(DETERMINISTIC)  # type: ignore[attr-defined]  # the one list, in the schema


class EvaluateAnalysisInput(BaseModel):
    analysis: Annotated[str | dict[str, Any], Field(description="JSON text (a code fence is stripped) or a JSON "
                                                                "object."), JSON_VALUE]
    input_url: Annotated[str | None, Field(description="The URL the analysis is about (D-5)."), TEXT] = None
    user_context: Annotated[str | None, TEXT] = None
    context_type: Annotated[str | None, Field(description="e.g. authoritative, background, irrelevant.")] = None
    schema_: Annotated[dict[str, Any] | None, Field(alias="schema", description=(
        "JSON Schema for D-2; default: the company analysis schema.")), JSON_VALUE] = None
    cardinality: Annotated[dict[str, list[int]] | None, Field(description="D-4: {dotted.path: [min, max]}.")] = None
    insight_fields: Annotated[list[str] | None, Field(description="D-3: dotted paths of 'Key: Value' "
                                                                  "fields.")] = None
    deterministic_checks: list[Check] = list(DETERMINISTIC)  # type: ignore[arg-type]
    llm_judges: list[str] = list(BUILTIN)
    cache: UseCache = True
    samples: Samples = 1
    models: JuryModels = None
    expected_score: ExpectedScore = False
    background: Background = False

    @field_validator("cardinality")
    @classmethod
    def _pairs(cls, cardinality: dict[str, list[int]] | None) -> dict[str, list[int]] | None:
        for path, pair in (cardinality or {}).items():
            if len(pair) != 2 or pair[0] > pair[1]:
                # the adapter names the argument: "cardinality entry 'a' must be …, e.g. {"insights": [3, 5]}."
                raise ValueError(f"entry {path!r} must be [min, max] with min <= max")
        return cardinality


@judge(toolset="analysis")
async def evaluate_analysis_tool(ctx: Context, args: EvaluateAnalysisInput) -> Judging[AnalysisResult]:
    """Evaluate a JSON analysis: checks D-1..D-5 (JSON, schema, format, cardinality, URLs), then a model call per
    LLM category; `passed` only if all pass."""
    custom = app_of(ctx).analysis_categories
    bounds = None if args.cardinality is None else {path: (low, high) for path, (low, high) in args.cardinality.items()}

    async def check(call: JudgeCall) -> None:  # the categories' prompt assets are files: off the loop
        await anyio.to_thread.run_sync(lambda: [load_category(name, custom) for name in args.llm_judges])

    return Judging(lambda call, progress: evaluate_analysis(
        call, analysis=args.analysis, input_url=args.input_url, user_context=args.user_context,
        context_type=args.context_type, schema=args.schema_, cardinality=bounds, insight_fields=args.insight_fields,
        deterministic_checks=args.deterministic_checks, llm_judges=args.llm_judges, custom=custom,
        progress=progress, logprobs=args.expected_score), resolve=False, check=check)


TOOLS = (evaluate_analysis_tool,)
