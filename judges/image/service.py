"""evaluate_image and optimize_prompt as one service: agents, retrieval, runs, plateau."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio.to_thread
from pydantic import BaseModel, Field

from judges.call import JudgeCall
from judges.errors import InputError
from judges.image.judge import (
    Evaluation,
    GuidelineUse,
    RankedImage,
    aggregate_scores,
    evaluate,
    iteration_context,
)
from judges.image.optimizer import AgentContext, OptimizedPrompt, optimize_prompt
from judges.image.runs import Plateau, Run, RunStore, detect_plateau
from judges.inputs.images import ImagePolicy, load_image
from judges.models.protocol import ImagePart, Usage
from judges.progress import Progress, no_progress
from judges.reading.agreement import krippendorff_alpha_interval
from judges.reading.jury import Agreement
from judges.store.agents import Agent, AgentStore
from judges.store.guidelines import Guidelines

T = TypeVar("T")


@dataclass(frozen=True)
class ImageSettings:
    policy: ImagePolicy
    max_images: int = 16
    max_calls: int = 400  # model calls one evaluate_image call may plan: images × each agent's models × samples
    max_iterations: int = 10
    plateau_window: int = 3
    plateau_threshold: float = 0.02
    fallback_score: float | None = None


class ImageEvaluation(BaseModel):
    run_id: str
    iteration: int
    evaluations: list[Evaluation]
    ranking: list[RankedImage]
    winner_index: int | None = Field(description="The best-ranked image; null when no judge scored any image.")
    plateau: Plateau
    usage: Usage = Field(default_factory=Usage, description="This call's model use: tokens, cost_usd, and cached "
                                                            "(true when every judgement came from the result cache).")
    run_usage: Usage = Field(default_factory=Usage, description="The run's model use so far, every iteration.")
    jury_agreement: Agreement | None = Field(
        default=None, description="models given: Krippendorff's alpha (interval) of the jury's 0–100 scores over "
                                  "every judge × image (the models as raters).")

    def no_result(self) -> str | None:
        """Why this evaluation holds no score (no judge scored any image), or None."""
        if self.winner_index is not None or not self.evaluations:
            return None
        return f"no judge scored any image ({len(self.evaluations)} evaluations failed)"


def jury_agreement(evaluations: Sequence[Evaluation]) -> Agreement:
    models = list(dict.fromkeys(m.model for e in evaluations for m in (e.jury.members if e.jury else [])))
    units = []
    for e in evaluations:
        scores = {m.model: m.value for m in (e.jury.members if e.jury else [])}
        units.append([v if isinstance(v := scores.get(name), float) else None for name in models])
    alpha = krippendorff_alpha_interval(units)
    return Agreement(krippendorff_alpha=None if alpha is None else round(alpha, 6))


class RunReport(BaseModel):
    run_id: str
    brief: str
    iterations: list[dict[str, object]]
    plateau: Plateau
    panel: list[str] = Field(default=[], description="The run's judges (agent ids); a continued run keeps them.")
    created_at: str = ""
    updated_at: str = ""
    usage: Usage = Field(default_factory=Usage, description="The run's model use and cost, every iteration.")


def check_optimize(run_id: str | None, evaluations: Sequence[Any] | None) -> None:
    """What optimize_prompt refuses before anything (also before a background call's job starts)."""
    if (run_id is None) == (evaluations is None):
        raise InputError("give exactly one of run_id (the run's last iteration is used) or evaluations")


class ImageJudging:
    def __init__(self, agents: AgentStore, runs: RunStore, guidelines: Guidelines, settings: ImageSettings):
        self.agents = agents
        self.runs = runs
        self.guidelines = guidelines
        self.settings = settings

    async def _store(self, fn: Callable[..., T], *args: Any) -> T:
        """Store work from async code: off the event loop on PostgreSQL (Database.run)."""
        return await self.runs.db.run(fn, *args)

    def check_count(self, refs: Sequence[str]) -> None:
        if not refs:
            raise InputError("images must hold at least one image (a path, a data: URI or base64)")
        if len(refs) > self.settings.max_images:
            raise InputError(f"at most {self.settings.max_images} images per call (got {len(refs)})")

    def load_images(self, refs: Sequence[str], policy: ImagePolicy | None = None) -> list[ImagePart]:
        self.check_count(refs)
        loaded = []
        for i, ref in enumerate(refs):
            try:
                loaded.append(load_image(ref, policy or self.settings.policy))
            except InputError as exc:
                raise InputError(f"images[{i}]: {exc}") from None
        return loaded

    def judges(self, org: str, agent_ids: Sequence[str] | None) -> list[Agent]:
        agents = [self.agents.get(org, a) for a in agent_ids] if agent_ids else self.agents.list(org)
        if not agents:
            raise InputError("no judge agents: create some with create_agent (e.g. template_id='brand_compliance')")
        return agents

    def _live(self, org: str, agent_id: str) -> bool:
        """Whether a panel's judge still exists (a deleted one leaves the panel of a continued run)."""
        try:
            self.agents.get(org, agent_id)
        except InputError:
            return False
        return True

    def plateau(self, run: Run) -> Plateau:
        return detect_plateau([it.best for it in run.iterations], self.settings.plateau_window,
                              self.settings.plateau_threshold, run.max_iterations)

    async def panel(self, org: str, agent_ids: Sequence[str] | None, run_id: str | None) -> list[Agent]:
        """The agents that judge: those named, else a continued run's panel (its judges that still exist), else
        every agent of the organization."""
        if run_id is not None and not agent_ids:
            panel = (await self._store(self.runs.get, org, run_id)).panel
            agent_ids = [a for a in panel if await self._store(self._live, org, a)] or None
        return await self._store(self.judges, org, agent_ids)

    async def evaluate_image(self, call: JudgeCall, org: str, *, brief: str, images: Sequence[str], prompt: str | None,
                             agent_ids: Sequence[str] | None, run_id: str | None, max_iterations: int | None,
                             policy: ImagePolicy | None = None, progress: Progress = no_progress,
                             logprobs: bool = False) -> ImageEvaluation:
        """One iteration of a run. A continued run keeps its panel of judges unless agent_ids is given. Each
        agent judges by the call's models (call.members: the call's jury, else the agent's own `models`, else
        one model), resolved once per agent before the run is touched: a missing backend or a spent budget
        refuses the call there."""
        agents = await self.planned(call, org, brief=brief, images=images, agent_ids=agent_ids, run_id=run_id,
                                    max_iterations=max_iterations)
        parts = await anyio.to_thread.run_sync(self.load_images, images, policy)  # decoding stays off the loop
        for agent in agents:  # a missing backend fails here, before the run is touched (after the images' own errors)
            await call.members(agent)
        if run_id is None:
            run_id = await self._store(self.runs.create, org, brief, max_iterations or self.settings.max_iterations,
                                       [a.id for a in agents])
        else:
            await self._store(self.runs.get, org, run_id)
            await self._store(self.runs.set_panel, org, run_id, [a.id for a in agents])
            if max_iterations is not None:
                await self._store(self.runs.set_max_iterations, org, run_id, max_iterations)
        run = await self._store(self.runs.get, org, run_id)
        number = len(run.iterations) + 1
        if number > run.max_iterations:
            raise InputError(f"run {run_id} has reached max_iterations={run.max_iterations}; "
                             "start a new run or pass a larger max_iterations")
        previous = [it.best for it in run.iterations if it.best is not None]
        context = iteration_context(number, run.max_iterations, [round(p) for p in previous])

        async def retrieve(agent: Agent) -> list[tuple[str, GuidelineUse]]:
            chunks = await self.guidelines.search(org, agent.id, f"{brief}\n{prompt or ''}".strip())
            return [(c.text, GuidelineUse(document_id=c.document_id, chunk_index=c.chunk_index,
                                          similarity=c.similarity)) for c in chunks]

        evaluations = await evaluate(call, agents, parts, brief=brief, prompt=prompt or "", context=context,
                                     retrieve=retrieve, fallback_score=self.settings.fallback_score, progress=progress,
                                     logprobs=logprobs)
        ranking = aggregate_scores(evaluations, {a.id: a.scoring_weight for a in agents}, len(parts))
        it = await self._store(self.runs.record, run_id, prompt or "", ranking, evaluations)
        run = await self._store(self.runs.get, org, run_id)
        return ImageEvaluation(run_id=run_id, iteration=it.iteration, evaluations=evaluations, ranking=ranking,
                               winner_index=it.winner_index, plateau=self.plateau(run), usage=it.usage,
                               run_usage=sum((i.usage for i in run.iterations), Usage()),
                               jury_agreement=jury_agreement(evaluations) if any(call.is_jury(a) for a in agents) else None)

    async def planned(self, call: JudgeCall, org: str, *, brief: str, images: Sequence[str],
                      agent_ids: Sequence[str] | None, run_id: str | None, max_iterations: int | None) -> list[Agent]:
        """What evaluate_image refuses before anything runs (also before a background call's job starts: the
        tool's Judging.check): an empty brief, no image or too many, max_iterations out of bounds, an unknown agent
        or run, a plan above `max_calls`. Returns the panel that judges."""
        self.check_count(images)
        if not brief.strip():
            raise InputError("brief must not be empty")
        if max_iterations is not None and not 1 <= max_iterations <= 100:
            raise InputError(f"max_iterations must be between 1 and 100 (got {max_iterations})")
        agents = await self.panel(org, agent_ids, run_id)
        models = sum(len(call.jury_names(agent)) or 1 for agent in agents)  # call.members' count, unresolved
        self.check_plan(len(images), len(agents), models, call.samples)
        return agents

    def check_plan(self, images: int, agents: int, models: int, samples: int) -> None:
        """The model calls one call plans (each image by each agent's models, each `samples` times) within
        `max_calls`, else an InputError before any call saying what to cut: a jury of 8 with 10 samples over 16
        images planned 1,280 calls per agent."""
        planned = images * models * samples
        if planned > self.settings.max_calls:
            raise InputError(
                f"evaluate_image over {images} image(s), {agents} agent(s) judging by {models} model(s) in all, "
                f"{samples} sample(s) each, plans {planned:,} model calls, above the limit of "
                f"{self.settings.max_calls:,} (setting JUDGE_MCP_IMAGE_MAX_CALLS); judge with fewer images, agents "
                "(agent_ids), jury models or samples")

    def report(self, org: str, run_id: str) -> RunReport:
        run = self.runs.get(org, run_id)
        return RunReport(run_id=run.run_id, brief=run.brief,
                         iterations=[it.model_dump(mode="json") for it in run.iterations], plateau=self.plateau(run),
                         panel=run.panel, created_at=run.created_at, updated_at=run.updated_at,
                         usage=sum((i.usage for i in run.iterations), Usage()))

    async def optimize(self, org: str, *, brief: str, prompt: str, run_id: str | None,
                       evaluations: Sequence[Evaluation] | None, call: JudgeCall,
                       progress: Progress = no_progress) -> OptimizedPrompt:
        """The next prompt, in three stages the progress callback hears of: the evaluations, the guidelines,
        the model's rewrite."""
        check_optimize(run_id, evaluations)
        await progress(0, 3, "reading the evaluations")
        if run_id is not None:
            number, evals = await self._store(self.runs.evaluations, org, run_id)
            run = await self._store(self.runs.get, org, run_id)
            winner = run.iterations[number - 1].winner_index
            evaluations = [e for e in evals if winner is None or e.image_index == winner]
        assert evaluations is not None
        agents: dict[str, Agent] = {}
        contexts = []
        used: dict[str, list[GuidelineUse]] = {}
        errors: dict[str, str] = {}
        await progress(1, 3, "retrieving guideline chunks for each judge")
        for agent_id in dict.fromkeys(e.agent_id for e in evaluations):
            try:
                agent = await self._store(self.agents.get, org, agent_id)
            except InputError:
                continue  # a deleted agent's feedback still counts, with the default weight
            agents[agent_id] = agent
            try:
                chunks = await self.guidelines.search(org, agent_id, f"{brief}\n{prompt}")
            except Exception as exc:  # an aid: the optimizer goes on without them, and says so
                errors[agent_id] = f"guideline retrieval failed: {exc}"
                chunks = []
            used[agent_id] = [GuidelineUse(document_id=c.document_id, chunk_index=c.chunk_index,
                                           similarity=c.similarity) for c in chunks]
            contexts.append(AgentContext(agent_name=agent.name, chunks=[c.text for c in chunks]))
        await progress(2, 3, "asking the model for the next prompt")
        result = await optimize_prompt(call, brief=brief, prompt=prompt, evaluations=evaluations, agents=agents,
                                       contexts=contexts)
        await progress(3, 3, f"next prompt ready ({len(result.addressed)} issue(s) addressed)")
        return result.model_copy(update={"guidelines_used": used, "guidelines_errors": errors})
