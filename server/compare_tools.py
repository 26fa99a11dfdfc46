"""pairwise_compare: A/B judging with position swap, and VIEScore."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from judges.pairwise.judge import CompareResult, compare
from judges.progress import Progress
from judges.reading.samples import check_samples
from judges.store.agents import ScoreScale

from .context import ClientRoots, ExpectedScore, JuryModels, Samples, UseCache, app_of, image_policy
from .errors import tool_errors
from .jobs import Background, or_job, run_or_background
from .startup import LISTED_AS, MIN_MAX

SCALE = "viescore: the prompt's scale; default {min: 0, max: 10}."


def register(mcp: MCPServer) -> None:
    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=False, open_world_hint=True))
    @tool_errors
    async def pairwise_compare(
        ctx: Context,
        instruction: Annotated[str, Field(description="The editing instruction (images) or the task (texts).")],
        candidates: Annotated[list[str], Field(description="Two for pairwise, one or two for viescore: images "
                                                           "(path, data: URI, base64) or texts.")],
        input_image: Annotated[str | None, Field(description="The source image, when there is one.")] = None,
        method: Literal["pairwise", "viescore"] = "pairwise",
        swap: Annotated[bool, Field(description="Ask both orders at once; check they agree.")] = True,
        prompt_id: Annotated[str | None, Field(description="A prompt asset, e.g. "
                                                           "vlm/assessment/visual_quality/viescore@v2.")] = None,
        prompt_version: str | None = None,
        candidate_type: Annotated[Literal["auto", "image", "text"], Field(
            description="auto: images if every candidate looks like one, else text.")] = "auto",
        score_scale: Annotated[ScoreScale | None, Field(description=SCALE, json_schema_extra={
            LISTED_AS: {**MIN_MAX, "description": SCALE}})] = None,
        cache: UseCache = True,
        samples: Samples = 1,
        models: JuryModels = None,
        expected_score: ExpectedScore = False,
        background: Background = False,
        client_roots: ClientRoots = None,
    ) -> Annotated[CallToolResult, or_job(CompareResult)]:
        """Which of two candidates (images or texts) is better, asked in both orders, or VIEScore scores for one or two
        images."""
        app = app_of(ctx)
        check_samples(samples, app.settings.max_samples)
        call = await app.judge_call(ctx, models, samples=samples, cache=cache, background=background)
        policy = image_policy(ctx, client_roots)

        async def work(progress: Progress) -> CompareResult:
            arguments = dict(instruction=instruction, candidates=candidates,
                             input_image=input_image, method=method, swap=swap, prompt_id=prompt_id,
                             prompt_version=prompt_version, candidate_type=candidate_type,
                             policy=policy, retries=app.settings.pairwise_retries,
                             score_scale=None if score_scale is None else (score_scale.min, score_scale.max),
                             logprobs=expected_score)
            return await compare(call, progress=progress, **arguments)  # type: ignore[arg-type]

        return await run_or_background(ctx, "pairwise_compare", call, work)
