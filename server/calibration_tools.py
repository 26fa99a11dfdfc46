"""calibrate_judge, get_calibration, certify_judge and align_judge: a judge checked against human labels,
certified and improved (core: judges/calibration/)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, NamedTuple

import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ResourceLink, ToolAnnotations
from pydantic import BaseModel, Field, model_validator

from judges.analysis.judge import BUILTIN, load_category
from judges.calibration.align import (
    MAX_CANDIDATES,
    Alignment,
    agent_criterion,
    align,
    checked_alignment,
)
from judges.calibration.certify import (
    DEFAULT_THRESHOLD,
    Certificate,
    certify,
    check_pass_at,
    check_verdicts,
)
from judges.calibration.chart import calibration_chart
from judges.calibration.core import (
    CalibrationReport,
    Contexts,
    JudgeEnv,
    JudgeSpec,
    calibrate,
    check_human_scale,
    check_spec,
)
from judges.calibration.dataset import Item, parse_dataset
from judges.calibration.store import CalibrationStore
from judges.call import JudgeCall
from judges.errors import InputError
from judges.inputs.paths import read_resolved, resolve_file
from judges.progress import Progress
from judges.reading.samples import check_samples
from judges.store.agents import Agent, ScoreScale
from judges.store.prompt_versions import PromptVersions
from judges.text.rag import guideline_contexts
from judges.text.scoring import Criterion, resolve_criteria

from .code_tools import check_gates_may_run, gate_settings
from .context import ClientRoots, UseCache, app_of, image_policy, organization_of, roots_for
from .declare import JUDGES, READ_ONLY, tool
from .jobs import or_job, run_or_background
from .startup import LISTED_AS, MIN_MAX

MAX_DATASET_BYTES = 20 * 1024 * 1024


class HumanScale(BaseModel):
    min: float = Field(description="The lowest score the raters could give, e.g. 0.")
    max: float = Field(description="The highest, e.g. 1.")


Judge = Annotated[Literal["pairwise_compare", "score_text", "viescore"], Field(description=(
    "pairwise_compare (both orders), score_text (its 0–100 total) or viescore (one image)."))]
Dataset = Annotated[str | dict[str, Any] | list[dict[str, Any]] | None, Field(description=(
    "JSONL or a JSON list: each item the judge's inputs plus human_score(s) (null: missing) or "
    "human_winner(s) (A, B, Tie); optional id."))]
DatasetPath = Annotated[str | None, Field(description="Or a JSONL file in the allowed roots.")]
CertifyJudge = Annotated[Literal["pairwise_compare", "score_text", "viescore", "judge_code", "evaluate_analysis"],
                         Field(description="calibrate_judge's, judge_code (accept passes) or evaluate_analysis; items: "
                                                     "human_verdict.")]
AgentId = Annotated[str | None, Field(description=(
    "Its model judges; its prompt: pairwise rules, score_text's criterion (no rubric; else its guidelines)."))]
Model = Annotated[str | None, Field(description="Default: the agent's model, else the server's.")]
PromptId = Annotated[str | None, Field(description="pairwise_compare/viescore: the prompt asset.")]
Rubric = Annotated[str | list[str] | None, Field(description="score_text: its rubric(s).")]
Criteria = Annotated[list[Criterion] | None, Field(description="score_text: custom criteria.", json_schema_extra={
    LISTED_AS: {"type": "array", "items": {"type": "object"}, "description": "score_text: its criteria."}})]
Method = Annotated[Literal["direct", "g_eval"], Field(description="score_text's method.")]
CandidateType = Literal["auto", "image", "text"]
PromptScale = Annotated[ScoreScale | None, Field(description="viescore: the prompt's scale; default {0, 10}.",
                                                 json_schema_extra={LISTED_AS: {
                                                     **MIN_MAX, "description": "viescore: the prompt's scale; "
                                                                               "default {min: 0, max: 10}."}})]
Samples = Annotated[int, Field(ge=1, description=(
    "Per item (majority or mean); score_text: 1."))]
Background = Annotated[bool | None, Field(description=(
    "Default: true, unless the model is the host's (MCP sampling)."))]
PassAt = Annotated[float | None, Field(description=(
    "Scores: the judge's pass mark (score_text: on its 0–100 total); default the middle."))]
HumanPassAt = Annotated[float | None, Field(description=(
    "Scores: the humans' mean that passes; default the middle."))]


def _as_in(tool: str, **listed: Any) -> Any:
    """An argument listed in short, without its description: the tool's description says it is as in `tool`,
    of this toolset, which lists it in full (the server still validates it against the full schema)."""
    return Field(json_schema_extra={LISTED_AS: listed})


_OBJECT, _TEXT, _NUMBER, _LIST = {"type": "object"}, {"type": "string"}, {"type": "number"}, {"type": "array"}
_CALIBRATE = "calibrate_judge"
ListedDataset = Annotated[Dataset, _as_in(_CALIBRATE, type=["string", "object", "array"])]
ListedDatasetPath = Annotated[DatasetPath, _as_in(_CALIBRATE, **_TEXT)]
ListedAgentId = Annotated[AgentId, _as_in(_CALIBRATE, **_TEXT)]
ListedModel = Annotated[Model, _as_in(_CALIBRATE, **_TEXT)]
ListedPromptId = Annotated[PromptId, _as_in(_CALIBRATE, **_TEXT)]
ListedRubric = Annotated[Rubric, _as_in(_CALIBRATE, type=["string", "array"])]
ListedCriteria = Annotated[Criteria, _as_in(_CALIBRATE, **_LIST)]
ListedMethod = Annotated[Method, _as_in(_CALIBRATE, **_TEXT)]
ListedCandidateType = Annotated[CandidateType, _as_in(_CALIBRATE, **_TEXT)]
ListedScale = Annotated[PromptScale, _as_in(_CALIBRATE, **_OBJECT)]
ListedSamples = Annotated[Samples, _as_in(_CALIBRATE, type="integer")]
ListedBackground = Annotated[Background, _as_in(_CALIBRATE, type="boolean")]
ListedPassAt = Annotated[PassAt, _as_in("certify_judge", **_NUMBER)]
ListedHumanPassAt = Annotated[HumanPassAt, _as_in("certify_judge", **_NUMBER)]


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


class Prepared(NamedTuple):
    app: Any
    org: str
    items: list[Item]
    spec: JudgeSpec
    call: JudgeCall
    policy: Any
    contexts: Contexts | None
    agent: Agent | None
    env: JudgeEnv


async def _prepared(ctx: Context, args: CalibrateJudgeInput | CertifyJudgeInput | AlignJudgeInput,
                    client_roots: Any) -> Prepared:
    """What calibrate_judge, certify_judge and align_judge share: the dataset read and checked, the judge's
    spec, its JudgeCall (a dataset runs as a job unless `background` says otherwise or its model is the host's
    own, which answers only while the call is open) and the agent's guideline contexts. align_judge's input has
    no score_text or viescore options: their defaults."""
    judge, dataset, dataset_path, agent_id, background = (args.judge, args.dataset, args.dataset_path, args.agent_id,
                                                          args.background)
    prompt_id, prompt_version = args.prompt_id, getattr(args, "prompt_version", None)
    rubric, criteria = getattr(args, "rubric", None), getattr(args, "criteria", None)
    samples: int = getattr(args, "samples", 1)
    score_scale: ScoreScale | None = getattr(args, "score_scale", None)
    category: str | None = getattr(args, "category", None)
    run_gates: bool = getattr(args, "run_gates", False)
    app = app_of(ctx)
    org = organization_of(ctx)
    check_samples(samples, app.settings.max_samples)
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

    def check_sizes() -> None:  # each item is judged as a call of its tool would be: the same limits
        for item in items:
            for key in ("text", "instruction", "reference", "human_critique", "spec", "diff", "user_context"):
                sizes.text(f"dataset item {item.id!r} {key}", item.inputs.get(key)
                           if isinstance(item.inputs.get(key), str) else None)
            candidates = item.inputs.get("candidates")
            if isinstance(candidates, list):
                sizes.texts(f"dataset item {item.id!r} candidates", [c for c in candidates if isinstance(c, str)])
            if "analysis" in item.inputs:
                sizes.json(f"dataset item {item.id!r} analysis", item.inputs["analysis"])

    await anyio.to_thread.run_sync(check_sizes)
    env = JudgeEnv(categories=app.analysis_categories)
    category_spec = None
    if judge == "evaluate_analysis":
        if category is None:
            raise InputError(f"category: evaluate_analysis certifies one LLM category, e.g. category: "
                             f"\"{next(iter(BUILTIN))}\"; known: {', '.join(sorted({*BUILTIN, *app.analysis_categories}))}")
        found_category = load_category(category, app.analysis_categories)
        category_spec = {"builtin": category not in app.analysis_categories, **found_category.spec.model_dump()}
    if judge == "judge_code":
        settings = gate_settings(app.settings)
        if run_gates:
            check_gates_may_run(app.settings, settings)
        env = JudgeEnv(gate_settings=settings, allowed_roots=tuple(roots_for(ctx, client_roots)))
    agent = await app.store(app.agents.get, org, agent_id) if agent_id is not None else None
    found: list[Criterion] = []
    own = judge == "score_text" and agent is not None and rubric is None and criteria is None
    if own:  # the agent's own instructions judge
        assert agent is not None
        found = [agent_criterion(agent.system_prompt, (agent.score_scale.min, agent.score_scale.max))]
    elif judge == "score_text":
        found = resolve_criteria(rubric, criteria)
    call = await app.judge_call(ctx, model=args.model or (agent.model if agent is not None else None), samples=samples,
                                cache=args.cache, background=bool(background), resolve=False)
    rules = agent.system_prompt if judge == "pairwise_compare" and agent is not None else None
    if prompt_id is not None and judge in ("pairwise_compare", "viescore"):  # an organization's own version too
        prompt_id, rules = await call.prompt(prompt_id if "@" in prompt_id else f"{prompt_id}@{prompt_version or 'v1'}",
                                             rules)
        prompt_version = None
    if background is None:
        call.background = app.jobs is not None and not call.on_host()
    await call.members()
    policy = image_policy(ctx, client_roots)
    spec = JudgeSpec(judge=judge, prompt_id=prompt_id, prompt_version=prompt_version, criteria=found,
                     method=getattr(args, "method", "direct"), candidate_type=getattr(args, "candidate_type", "auto"),
                     samples=samples,
                     score_scale=None if score_scale is None else (score_scale.min, score_scale.max),
                     run_gates=run_gates, category=category, category_spec=category_spec,
                     rules=rules)
    check_spec(spec)  # refused now, not as a failed background job
    contexts = None
    if agent_id is not None and judge == "score_text" and not own:
        async def contexts(query: str) -> list[str]:
            return [c.text for c in await guideline_contexts(app.guidelines, org, agent_id, query)]
    return Prepared(app, org, items, spec, call, policy, contexts, agent, env)


# calibrate_judge and align_judge store what they make (a calibration report; a new agent or prompt version).
STORES = ToolAnnotations(read_only_hint=False, idempotent_hint=False, open_world_hint=True)


def _one_dataset(dataset: Any, dataset_path: str | None) -> None:
    if (dataset is None) == (dataset_path is None):
        raise InputError("give the dataset inline (dataset: JSONL text) or as dataset_path (a .jsonl file in "
                         "the allowed roots), exactly one, e.g. dataset_path: \"labels/pairs.jsonl\"")


class CalibrateJudgeInput(BaseModel):
    judge: Judge
    dataset: Dataset = None
    dataset_path: DatasetPath = None
    agent_id: AgentId = None
    model: Model = None
    prompt_id: PromptId = None
    prompt_version: str | None = None
    rubric: Rubric = None
    criteria: Criteria = None
    method: Method = "direct"
    candidate_type: CandidateType = "auto"
    score_scale: PromptScale = None
    human_scale: Annotated[HumanScale | None, Field(description=(
        "The humans' scale, to put their scores and the judge's on 0–1 for the disagreement ranking and the "
        "confusion matrix; default: the lowest and highest human score in the dataset."), json_schema_extra={
        LISTED_AS: {**MIN_MAX, "description": "The humans' {min, max}; default: their lowest and highest "
                                              "score."}})] = None
    samples: Samples = 1
    background: Background = None
    cache: UseCache = True

    @model_validator(mode="after")
    def _checked(self) -> CalibrateJudgeInput:
        _one_dataset(self.dataset, self.dataset_path)
        check_human_scale(self.scale)  # refused now, not as a failed background job
        return self

    @property
    def scale(self) -> tuple[float, float] | None:
        return None if self.human_scale is None else (self.human_scale.min, self.human_scale.max)


@tool(role="member", toolset="calibration", annotations=STORES)
async def calibrate_judge(ctx: Context, args: CalibrateJudgeInput, client_roots: ClientRoots = None
                          ) -> Annotated[CallToolResult, or_job(CalibrationReport)]:
    """Check how far to trust a judge, on human-labelled items: agreement (kappa; Spearman, Kendall), the humans' own as
    ceiling, position and length bias, confusion matrix, worst disagreements, chart. Stored."""
    app, org, items, spec, call, policy, contexts, _, _ = await _prepared(ctx, args, client_roots)

    async def work(progress: Progress) -> CalibrationReport:
        report = await calibrate(call, spec, items, policy=policy, retries=app.settings.pairwise_retries,
                                 human_scale=args.scale, contexts=contexts, progress=progress)
        return await app.store(CalibrationStore(app.db).save, org, report)

    return await run_or_background(ctx, "calibrate_judge", call, work, links=calibration_links)


class GetCalibrationInput(BaseModel):
    calibration_id: Annotated[str, Field(description="The calibration_id calibrate_judge returned.")]


@tool(role="member", toolset="calibration", annotations=READ_ONLY)
async def get_calibration(ctx: Context, args: GetCalibrationInput) -> CalibrationReport:
    """A stored calibration report, as calibrate_judge returned it."""
    app = app_of(ctx)
    return await app.store(CalibrationStore(app.db).get, organization_of(ctx), args.calibration_id)


class CertifyJudgeInput(BaseModel):
    judge: CertifyJudge
    dataset: ListedDataset = None
    dataset_path: ListedDatasetPath = None
    agent_id: ListedAgentId = None
    model: ListedModel = None
    prompt_id: ListedPromptId = None
    prompt_version: str | None = None
    rubric: ListedRubric = None
    criteria: ListedCriteria = None
    method: ListedMethod = "direct"
    candidate_type: ListedCandidateType = "auto"
    score_scale: ListedScale = None
    samples: ListedSamples = 1
    threshold: Annotated[float, Field(gt=0, lt=1, description=(
        "Both 95% lower bounds must reach it."))] = DEFAULT_THRESHOLD
    pass_at: PassAt = None
    human_pass_at: HumanPassAt = None
    category: Annotated[str | None, Field(description="evaluate_analysis: the category.")] = None
    run_gates: Annotated[bool, Field(description="judge_code: also run its gates.")] = False
    verdicts: Annotated[list[str | float | bool] | None, Field(max_length=1_000_000, description=(
        "An unlabelled run's verdicts: pass rate corrected."))] = None
    verdicts_fingerprint: Annotated[str | None, Field(description="Their judge's fingerprint.")] = None
    background: ListedBackground = None
    cache: UseCache = True

    @model_validator(mode="after")
    def _checked(self) -> CertifyJudgeInput:
        _one_dataset(self.dataset, self.dataset_path)
        if self.category is not None and self.judge != "evaluate_analysis":
            raise InputError("category: only for judge evaluate_analysis (the LLM category certified); leave it out")
        if self.run_gates and self.judge != "judge_code":
            raise InputError("run_gates: only for judge judge_code; leave it out")
        return self


@tool(role="member", toolset="calibration", annotations=JUDGES)
async def certify_judge(ctx: Context, args: CertifyJudgeInput, client_roots: ClientRoots = None
                        ) -> Annotated[CallToolResult, or_job(Certificate)]:
    """Certify a judge's pass/fail against human labels: TPR and TNR (pairwise: A passes; scores: >= pass_at) with
    95% Wilson bounds; certified when both reach threshold, else the labels needed. Other arguments
    as in calibrate_judge."""
    app, _org, items, spec, call, policy, contexts, _, env = await _prepared(ctx, args, client_roots)
    check_pass_at(spec, args.pass_at)  # refused now, not as a failed background job
    if args.verdicts is not None:  # read off the event loop: up to a million of them
        await anyio.to_thread.run_sync(check_verdicts, args.verdicts, spec)

    async def work(progress: Progress) -> Certificate:
        return await certify(call, spec, items, policy=policy, retries=app.settings.pairwise_retries,
                             threshold=args.threshold, pass_at=args.pass_at, human_pass_at=args.human_pass_at,
                             verdicts=args.verdicts, run_fingerprint=args.verdicts_fingerprint, contexts=contexts,
                             progress=progress, env=env)

    return await run_or_background(ctx, "certify_judge", call, work)


class AlignJudgeInput(BaseModel):
    agent_id: Annotated[str | None, Field(description="The agent whose prompt judges.")] = None
    judge: Literal["score_text", "pairwise_compare"] = "score_text"
    prompt_id: ListedPromptId = None
    dataset: ListedDataset = None
    dataset_path: ListedDatasetPath = None
    model: ListedModel = None
    pass_at: ListedPassAt = None
    human_pass_at: ListedHumanPassAt = None
    seed: Annotated[int, Field(description="The split's seed.")] = 0
    test_fraction: Annotated[float, Field(gt=0, lt=1, description="Held-out share.")] = 0.3
    candidates: Annotated[int, Field(ge=1, le=MAX_CANDIDATES, description=(
        "Revisions tried on train."))] = 2
    background: ListedBackground = None
    cache: UseCache = True

    @model_validator(mode="after")
    def _checked(self) -> AlignJudgeInput:
        if self.agent_id is None and (self.judge != "pairwise_compare" or self.prompt_id is None):
            raise InputError("agent_id: the agent to improve, e.g. agent_id: \"<id from list_agents>\"; or, for judge "
                             "pairwise_compare, the prompt asset's rules: prompt_id: \"text/assessment/pairwise\"")
        _one_dataset(self.dataset, self.dataset_path)
        if self.prompt_id is not None and self.judge != "pairwise_compare":
            raise InputError("prompt_id: only for judge pairwise_compare (the prompt its rules go before); leave it out")
        if self.human_pass_at is not None and self.judge == "pairwise_compare":
            raise InputError("human_pass_at: pairwise_compare's items name a winner (no pass mark); leave it out")
        return self


@tool(role="admin", toolset="calibration", annotations=STORES)  # admin: keeps its revision as a new agent
async def align_judge(ctx: Context, args: AlignJudgeInput, client_roots: ClientRoots = None
                      ) -> Annotated[CallToolResult, or_job(Alignment)]:
    """Improve a judge from labels (optional human_critique): an agent's prompt (score_text criterion, pairwise
    rules) or a pairwise prompt_id's rules; kept as a new agent or prompt version only if significantly better on
    held-out items. Other arguments as in certify_judge."""
    app, org, items, spec, call, policy, contexts, agent, _ = await _prepared(ctx, args, client_roots)
    judge_pass, human_pass = await anyio.to_thread.run_sync(lambda: checked_alignment(  # refused now, not as a job
        items, spec, pass_at=args.pass_at, human_pass_at=args.human_pass_at, seed=args.seed,
        test_fraction=args.test_fraction, candidates=args.candidates))
    given = None if args.prompt_id is None else args.prompt_id if "@" in args.prompt_id else f"{args.prompt_id}@v1"
    text, scale, judged_prompt = _judged(agent, spec, given)

    async def work(progress: Progress) -> Alignment:
        result = await align(call, text, scale, items, agent_id=args.agent_id, pass_at=judge_pass,
                             human_pass_at=human_pass, judge=args.judge, prompt_id=judged_prompt, seed=args.seed,
                             test_fraction=args.test_fraction, candidates=args.candidates, policy=policy,
                             retries=app.settings.pairwise_retries, contexts=contexts, progress=progress)
        return await _kept(app, org, agent, spec, given, result)

    return await run_or_background(ctx, "align_judge", call, work)


def _judged(agent: Agent | None, spec: JudgeSpec, given: str | None
            ) -> tuple[str, tuple[float, float], str | None]:
    """What align_judge revises, its scale and the prompt it judges with: an agent's prompt (an organization's prompt
    version keeps its rules first, in compare); a prompt asset: its rules (none for a shipped asset), before the
    shipped asset it builds on."""
    if agent is not None:
        return agent.system_prompt, (agent.score_scale.min, agent.score_scale.max), given
    return spec.rules or "", (0.0, 100.0), spec.prompt_id


async def _kept(app: Any, org: str, agent: Agent | None, spec: JudgeSpec, given: str | None,
                result: Alignment) -> Alignment:
    """The alignment, its revision kept when it won: a new prompt version of the asset, or a new agent like the one
    revised."""
    result.prompt_id = given
    if not result.kept or result.instructions is None:
        return result
    if agent is None:
        assert spec.prompt_id is not None
        version = await app.store(PromptVersions(app.db).save, org, spec.prompt_id, result.instructions)
        result.new_prompt_id = version.id
        return result
    kept = await app.store(app.agents.create, org, name=f"{agent.name} (aligned)"[:100],
                           system_prompt=result.instructions, evaluation_categories=agent.evaluation_categories,
                           scoring_weight=agent.scoring_weight, optimization_weight=agent.optimization_weight,
                           rag_config=agent.rag_config, model=agent.model, score_scale=agent.score_scale,
                           models=agent.models)
    result.new_agent_id = kept.id
    return result


TOOLS = (calibrate_judge, get_calibration, certify_judge, align_judge)
