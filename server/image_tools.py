"""Image judging tools: evaluate_image, list_runs, get_run (with a PNG chart), optimize_prompt."""

from __future__ import annotations

import base64
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ImageContent, ResourceLink, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from judges.call import JudgeCall
from judges.errors import InputError
from judges.image.chart import run_chart
from judges.image.judge import Evaluation
from judges.image.optimizer import OptimizedPrompt
from judges.image.runs import RunSummary
from judges.image.service import ImageEvaluation, RunReport, check_optimize
from judges.progress import Progress

from .context import (
    ClientRoots,
    ExpectedScore,
    JuryModels,
    Samples,
    UseCache,
    app_of,
    image_policy,
    organization_of,
)
from .declare import READ_ONLY, TEXT, Judging, items, judge, tool
from .jobs import Background, resource_updated

Images = Annotated[list[str], Field(description="Paths (in the allowed roots), data: URIs or base64: PNG, JPEG, "
                                                "WebP, GIF.")]
RunId = Annotated[str, Field(description="From evaluate_image.")]
JUDGE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)


class RunList(BaseModel):
    runs: list[RunSummary]


def run_links(run_id: str) -> list[ResourceLink]:
    """Resource links to a run and its chart (resources/read judge://runs/{id} and …/chart.png)."""
    return [ResourceLink(type="resource_link", uri=f"judge://runs/{run_id}", name=f"run {run_id}",
                         mime_type="application/json", description="the run's iterations and plateau"),
            ResourceLink(type="resource_link", uri=f"judge://runs/{run_id}/chart.png", name=f"run {run_id} chart",
                         mime_type="image/png", description="best and mean aggregate per iteration")]


def run_chart_png(report: RunReport) -> bytes:
    best = [it["best"] for it in report.iterations]
    mean = [it["mean"] for it in report.iterations]
    return run_chart(best, mean, report.plateau.detected_at)  # type: ignore[arg-type]


def given_evaluations(evaluations: list[dict[str, Any]] | None) -> list[Evaluation] | None:
    """optimize_prompt's evaluations, read as evaluate_image's (its listing shows a small schema, not theirs)."""
    if evaluations is None:
        return None
    try:
        return TypeAdapter(list[Evaluation]).validate_python(evaluations)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = "evaluations" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
        raise InputError(f"{where}: {error['msg']}; pass the evaluations evaluate_image returned, unchanged "
                         "(or run_id)") from None


class EvaluateImageInput(BaseModel):
    brief: Annotated[str, Field(description="What the image should show."), TEXT]
    images: Images
    prompt: Annotated[str | None, Field(description="The images' generation prompt."), TEXT] = None
    agent_ids: Annotated[list[str] | None, Field(description="Default: all agents."),
                         items("e.g. the agents this brief needs")] = None
    run_id: Annotated[str | None, Field(description="Continue this run (its next iteration).")] = None
    max_iterations: Annotated[int | None, Field(description="The run's budget; default 10.")] = None
    cache: UseCache = True
    samples: Samples = 1
    models: JuryModels = None
    expected_score: ExpectedScore = False
    background: Background = False


@judge(toolset="images", annotations=JUDGE)
async def evaluate_image(ctx: Context, args: EvaluateImageInput,
                         client_roots: ClientRoots = None) -> Judging[ImageEvaluation]:
    """Score generated images against a brief with the judge agents (weighted), rank them, track the run's plateau;
    run_id continues a run."""
    app = app_of(ctx)
    org, policy = organization_of(ctx), image_policy(ctx, client_roots)

    async def work(call: JudgeCall, progress: Progress) -> ImageEvaluation:
        result = await app.images.evaluate_image(
            call, org, brief=args.brief, images=args.images, prompt=args.prompt, agent_ids=args.agent_ids,
            run_id=args.run_id, max_iterations=args.max_iterations, policy=policy, progress=progress,
            logprobs=args.expected_score)
        await resource_updated(ctx, f"judge://runs/{result.run_id}", f"judge://runs/{result.run_id}/chart.png")
        return result

    return Judging(work, agents=lambda: app.images.panel(org, args.agent_ids, args.run_id), resolve=False,
                   links=lambda result: run_links(result.run_id), check=lambda call: app.images.planned(
                       call, org, brief=args.brief, images=args.images, agent_ids=args.agent_ids,
                       run_id=args.run_id, max_iterations=args.max_iterations))


class ListRunsInput(BaseModel):
    pass


@tool(role="member", toolset="images", annotations=READ_ONLY)
async def list_runs(ctx: Context, args: ListRunsInput) -> RunList:
    """This organization's evaluate_image runs, newest first (at most 50)."""
    app = app_of(ctx)
    return RunList(runs=await app.store(app.images.runs.summaries, organization_of(ctx)))


class GetRunInput(BaseModel):
    run_id: RunId


@tool(role="member", toolset="images", annotations=READ_ONLY)
async def get_run(ctx: Context, args: GetRunInput) -> Annotated[CallToolResult, RunReport]:
    """A run's iterations and plateau, with a chart."""
    app = app_of(ctx)
    report = await app.store(app.images.report, organization_of(ctx), args.run_id)
    png = run_chart_png(report)
    return CallToolResult(
        content=[TextContent(type="text", text=report.model_dump_json(indent=2)),
                 ImageContent(type="image", data=base64.b64encode(png).decode(), mime_type="image/png"),
                 *run_links(args.run_id)],
        structured_content=report.model_dump(mode="json"),
    )


class OptimizePromptInput(BaseModel):
    brief: Annotated[str, TEXT]
    prompt: Annotated[str, Field(description="The current generation prompt."), TEXT]
    run_id: Annotated[str | None, Field(description="Or the winner's evaluations from this run's last "
                                                    "iteration.")] = None
    evaluations: Annotated[list[dict[str, Any]] | None, Field(description=(
        "Or evaluations as evaluate_image returned them.")), items("e.g. the winning image's")] = None
    cache: UseCache = True
    background: Background = False


@judge(toolset="images", annotations=JUDGE)
async def optimize_prompt(ctx: Context, args: OptimizePromptInput) -> Judging[OptimizedPrompt]:
    """Write the next generation prompt from evaluate_image's evaluations: top issues fixed, what worked kept, every
    promptInstruction verbatim."""
    app, org, given = app_of(ctx), organization_of(ctx), given_evaluations(args.evaluations)

    async def check(call: JudgeCall) -> None:
        check_optimize(args.run_id, given)

    return Judging(lambda call, progress: app.images.optimize(
        org, brief=args.brief, prompt=args.prompt, run_id=args.run_id, evaluations=given, call=call,
        progress=progress), check=check)


TOOLS = (evaluate_image, list_runs, get_run, optimize_prompt)
