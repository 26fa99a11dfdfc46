"""pairwise_compare: A/B judging with position swap, and VIEScore."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from judges.call import JudgeCall
from judges.pairwise.judge import CompareResult, check_compare, compare
from judges.store.agents import ScoreScale

from .context import ClientRoots, ExpectedScore, JuryModels, Samples, UseCache, app_of, image_policy
from .declare import TEXT, Judging, judge
from .jobs import Background
from .startup import LISTED_AS, MIN_MAX

SCALE = "viescore: the prompt's scale; default {min: 0, max: 10}."


class PairwiseCompareInput(BaseModel):
    instruction: Annotated[str, Field(description="The editing instruction (images) or the task (texts)."), TEXT]
    candidates: Annotated[list[str], Field(description="Two for pairwise, one or two for viescore: images "
                                                       "(path, data: URI, base64) or texts.")]
    input_image: Annotated[str | None, Field(description="The source image, if any.")] = None
    method: Literal["pairwise", "viescore"] = "pairwise"
    swap: Annotated[bool, Field(description="Ask both orders at once; check they agree.")] = True
    prompt_id: Annotated[str | None, Field(description="A prompt asset, e.g. "
                                                       "vlm/assessment/visual_quality/viescore@v2.")] = None
    prompt_version: str | None = None
    candidate_type: Annotated[Literal["auto", "image", "text"], Field(
        description="auto: images if all look like images, else text.")] = "auto"
    score_scale: Annotated[ScoreScale | None, Field(description=SCALE, json_schema_extra={
        LISTED_AS: {**MIN_MAX, "description": SCALE}})] = None
    cache: UseCache = True
    samples: Samples = 1
    models: JuryModels = None
    expected_score: ExpectedScore = False
    background: Background = False


@judge(toolset="compare")
async def pairwise_compare(ctx: Context, args: PairwiseCompareInput,
                           client_roots: ClientRoots = None) -> Judging[CompareResult]:
    """Which of two candidates (images or texts) is better, asked in both orders, or VIEScore scores for one or two
    images."""
    policy, scale = image_policy(ctx, client_roots), args.score_scale

    async def check(call: JudgeCall) -> None:
        check_compare(args.method, args.candidates, None if scale is None else (scale.min, scale.max),
                      args.expected_score)

    return Judging(lambda call, progress: compare(
        call, instruction=args.instruction, candidates=args.candidates, input_image=args.input_image,
        method=args.method, swap=args.swap, prompt_id=args.prompt_id, prompt_version=args.prompt_version,
        candidate_type=args.candidate_type, policy=policy, retries=app_of(ctx).settings.pairwise_retries,
        score_scale=None if scale is None else (scale.min, scale.max), logprobs=args.expected_score,
        progress=progress, sizes=app_of(ctx).settings.size_limits()), check=check)


TOOLS = (pairwise_compare,)
