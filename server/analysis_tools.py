"""evaluate_analysis: deterministic checks D-1..D-5 first, then LLM rubric categories."""

from __future__ import annotations

from typing import Annotated, Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from judges.analysis.judge import BUILTIN, DETERMINISTIC, AnalysisResult, evaluate_analysis
from judges.errors import InputError
from judges.progress import Progress
from judges.reading.samples import check_samples

from .context import ExpectedScore, JuryModels, Samples, UseCache, app_of
from .errors import tool_errors
from .jobs import Background, or_job, run_or_background


def register(mcp: MCPServer) -> None:
    @mcp.tool(name="evaluate_analysis",
              annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=False, open_world_hint=True))
    @tool_errors
    async def evaluate_analysis_tool(
        ctx: Context,
        analysis: Annotated[str | dict[str, Any], Field(description="JSON text (a code fence is "
                                                                    "stripped) or a JSON object.")],
        input_url: Annotated[str | None, Field(description="The URL the analysis is about (D-5).")] = None,
        user_context: str | None = None,
        context_type: Annotated[str | None, Field(description="e.g. authoritative, background, irrelevant.")] = None,
        schema: Annotated[dict[str, Any] | None, Field(description="JSON Schema for D-2; default: the company "
                                                                   "analysis schema.")] = None,
        cardinality: Annotated[dict[str, list[int]] | None, Field(description="D-4: {dotted.path: [min, max]}.")] = None,
        insight_fields: Annotated[list[str] | None, Field(description="D-3: dotted paths of 'Key: Value' "
                                                                      "fields.")] = None,
        deterministic_checks: list[str] = list(DETERMINISTIC),  # noqa: B006 (a default the schema shows)
        llm_judges: list[str] = list(BUILTIN),  # noqa: B006
        cache: UseCache = True,
        samples: Samples = 1,
        models: JuryModels = None,
        expected_score: ExpectedScore = False,
        background: Background = False,
    ) -> Annotated[CallToolResult, or_job(AnalysisResult)]:
        """Evaluate a JSON analysis: checks D-1..D-5 (JSON, schema, format, cardinality, URLs), then a model call per
        LLM category; `passed` only if all pass."""
        app = app_of(ctx)
        check_samples(samples, app.settings.max_samples)
        sizes = app.settings.size_limits()
        await anyio.to_thread.run_sync(sizes.json, "analysis", analysis)  # measured off the loop: it may be large
        await anyio.to_thread.run_sync(sizes.json, "schema", schema)
        sizes.text("input_url", input_url)
        sizes.text("user_context", user_context)
        call = await app.judge_call(ctx, models, samples=samples, cache=cache, background=background, resolve=False)
        bounds = None
        if cardinality is not None:
            bounds = {}
            for path, pair in cardinality.items():
                if len(pair) != 2 or pair[0] > pair[1]:
                    raise InputError(f"cardinality[{path!r}] must be [min, max] with min <= max")
                bounds[path] = (pair[0], pair[1])

        async def work(progress: Progress) -> AnalysisResult:
            return await evaluate_analysis(
                call, analysis=analysis, input_url=input_url, user_context=user_context,
                context_type=context_type, schema=schema, cardinality=bounds, insight_fields=insight_fields,
                deterministic_checks=deterministic_checks, llm_judges=llm_judges,
                custom=app.analysis_categories, progress=progress, logprobs=expected_score,
            )

        return await run_or_background(ctx, "evaluate_analysis", call, work)
