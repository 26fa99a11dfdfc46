"""calibrate_judge and get_calibration: a judge checked against human labels (core: judges/calibration/)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ResourceLink, ToolAnnotations
from pydantic import BaseModel, Field

from judges.calibration.chart import calibration_chart
from judges.calibration.core import CalibrationReport, JudgeSpec, calibrate, check_spec
from judges.calibration.dataset import parse_dataset
from judges.calibration.store import CalibrationStore
from judges.errors import InputError
from judges.inputs.paths import read_resolved, resolve_file
from judges.progress import Progress
from judges.reading.samples import check_samples
from judges.store.agents import ScoreScale
from judges.text.rag import guideline_contexts
from judges.text.scoring import BUILTIN_RUBRICS, Criterion, resolve_criteria

from .context import ClientRoots, UseCache, app_of, image_policy, organization_of, roots_for
from .errors import tool_errors
from .jobs import or_job, run_or_background

MAX_DATASET_BYTES = 20 * 1024 * 1024


class HumanScale(BaseModel):
    min: float = Field(description="The lowest score the raters could give, e.g. 0.")
    max: float = Field(description="The highest, e.g. 1.")


def calibration_links(report: Any) -> list[ResourceLink]:
    if not isinstance(report, CalibrationReport) or not report.calibration_id:
        return []
    base = f"judge://calibrations/{report.calibration_id}"
    return [ResourceLink(type="resource_link", uri=base, name=f"calibration {report.calibration_id}",
                         mime_type="application/json", description="the calibration report"),
            ResourceLink(type="resource_link", uri=f"{base}/chart.png", name="calibration chart",
                         mime_type="image/png", description="judge against humans (scores) or the confusion matrix")]


def calibration_chart_png(report: CalibrationReport) -> bytes:
    return calibration_chart(report)


def register(mcp: MCPServer[Any]) -> None:
    @mcp.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False, open_world_hint=True))
    @tool_errors
    async def calibrate_judge(
        ctx: Context,
        judge: Annotated[Literal["pairwise_compare", "score_text", "viescore"], Field(description=(
            "The judge to check: pairwise_compare (two candidates, asked in both orders), score_text (a rubric "
            "or criteria; the total 0–100 is compared) or viescore (one image, pairwise_compare's VIEScore)."))],
        dataset: Annotated[str | dict[str, Any] | list[dict[str, Any]] | None, Field(description=(
            "JSONL, one item a line (or the items as a JSON list): the judge's inputs plus human_score / "
            "human_scores (a list, one per rater; null for a missing rating) or human_winner / human_winners "
            "(A, B or Tie); optional id. E.g. {\"text\": \"…\", \"instruction\": \"…\", "
            "\"human_scores\": [4, 5, 3]}."))] = None,
        dataset_path: Annotated[str | None, Field(description="A JSONL file inside the allowed roots, "
                                                              "instead of dataset.")] = None,
        agent_id: Annotated[str | None, Field(description=(
            "An agent: its model judges (unless model is given); for score_text its guidelines are searched "
            "for each item's context, as score_text does."))] = None,
        model: Annotated[str | None, Field(description="The model to check, e.g. openai:gpt-4o; default: the "
                                                       "agent's, else the server's.")] = None,
        prompt_id: Annotated[str | None, Field(description="pairwise_compare/viescore: the prompt asset, as "
                                                           "pairwise_compare takes it.")] = None,
        prompt_version: str | None = None,
        rubric: Annotated[str | list[str] | None, Field(description=(
            f"score_text: built-in rubric(s) {', '.join(BUILTIN_RUBRICS)}; or criteria."))] = None,
        criteria: Annotated[list[Criterion] | None, Field(description="score_text: custom criteria.")] = None,
        method: Annotated[Literal["direct", "g_eval"], Field(description="score_text's method.")] = "direct",
        candidate_type: Literal["auto", "image", "text"] = "auto",
        score_scale: Annotated[ScoreScale | None, Field(description="viescore: the prompt's scale, default "
                                                                    "{0, 10}.")] = None,
        human_scale: Annotated[HumanScale | None, Field(description=(
            "The humans' scale, to put their scores and the judge's on 0–1 for the disagreement ranking and the "
            "confusion matrix; default: the lowest and highest human score in the dataset."))] = None,
        samples: Annotated[int, Field(ge=1, description=(
            "pairwise_compare and viescore: samples per item (the majority verdict, or the mean score); "
            "at most JUDGE_MCP_MAX_SAMPLES. score_text: 1."))] = 1,
        background: Annotated[bool | None, Field(description=(
            "Run as a background job (returns {job_id}; poll get_job). Default: in the background, unless the "
            "model is the host's own (MCP sampling), which can only answer while the call is open."))] = None,
        cache: UseCache = True,
        client_roots: ClientRoots = None,
    ) -> Annotated[CallToolResult, or_job(CalibrationReport)]:
        """Run a judge over items people labelled and report how far to trust it: agreement with the humans
        (accuracy and Cohen's kappa for pairwise; Spearman, Kendall tau and Pearson for scores), the humans'
        own agreement as the ceiling (Krippendorff's alpha), position bias (verdicts that flip when the order
        is swapped), length bias, a confusion matrix, the largest disagreements and a chart
        (judge://calibrations/{id}/chart.png). Stored; get_calibration reads it back. Progress: per item."""
        app = app_of(ctx)
        org = organization_of(ctx)
        check_samples(samples, app.settings.max_samples)
        if (dataset is None) == (dataset_path is None):
            raise InputError("give the dataset inline (dataset: JSONL text) or as dataset_path (a .jsonl file in "
                             "the allowed roots), exactly one, e.g. dataset_path: \"labels/pairs.jsonl\"")
        if isinstance(dataset, dict | list):  # items as JSON (a one-line JSONL text arrives parsed, as a dict)
            dataset = "\n".join(json.dumps(item) for item in (dataset if isinstance(dataset, list) else [dataset]))
        if dataset_path is not None:
            real = resolve_file(dataset_path, roots_for(ctx, client_roots))
            raw = await anyio.to_thread.run_sync(read_resolved, real, MAX_DATASET_BYTES, f"dataset_path {dataset_path!r}")
            try:
                dataset = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(f"dataset_path {dataset_path!r} is not UTF-8 text (JSONL)") from None
        assert dataset is not None
        items = await anyio.to_thread.run_sync(parse_dataset, dataset, judge)  # up to 20 MB of JSON lines
        sizes = app.settings.size_limits()
        for item in items:  # each item is judged as a call of its tool would be: the same limits
            for key in ("text", "instruction", "reference"):
                sizes.text(f"dataset item {item.id!r} {key}", item.inputs.get(key) if isinstance(item.inputs.get(key), str)
                           else None)
            candidates = item.inputs.get("candidates")
            if isinstance(candidates, list):
                sizes.texts(f"dataset item {item.id!r} candidates", [c for c in candidates if isinstance(c, str)])
        found: list[Criterion] = resolve_criteria(rubric, criteria) if judge == "score_text" else []
        agent = await app.store(app.agents.get, org, agent_id) if agent_id is not None else None
        call = await app.judge_call(ctx, model=model or (agent.model if agent is not None else None), samples=samples,
                                    cache=cache, background=bool(background), resolve=False)
        if background is None:  # a dataset runs as a job unless its model is the host's own (it answers only now)
            call.background = app.jobs is not None and not call.on_host()
        await call.members()
        policy = image_policy(ctx, client_roots)
        spec = JudgeSpec(judge=judge, prompt_id=prompt_id, prompt_version=prompt_version, criteria=found,
                         method=method, candidate_type=candidate_type, samples=samples,
                         score_scale=None if score_scale is None else (score_scale.min, score_scale.max))
        check_spec(spec)  # refused now, not as a failed background job
        contexts = None
        if agent_id is not None and judge == "score_text":
            async def contexts(query: str) -> list[str]:
                return [c.text for c in await guideline_contexts(app.guidelines, org, agent_id, query)]
        scale = None if human_scale is None else (human_scale.min, human_scale.max)

        async def work(progress: Progress) -> CalibrationReport:
            report = await calibrate(call, spec, items, policy=policy, retries=app.settings.pairwise_retries,
                                     human_scale=scale, contexts=contexts, progress=progress)
            return await app.store(CalibrationStore(app.db).save, org, report)

        return await run_or_background(ctx, "calibrate_judge", call, work, links=calibration_links)

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False))
    @tool_errors
    async def get_calibration(ctx: Context, calibration_id: Annotated[str, Field(
            description="The calibration_id calibrate_judge returned.")]) -> CalibrationReport:
        """A stored calibration report, as calibrate_judge returned it."""
        app = app_of(ctx)
        return await app.store(CalibrationStore(app.db).get, organization_of(ctx), calibration_id)
