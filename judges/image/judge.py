"""Judge agents scoring images (seed 000): retrieval per agent, the evaluation prompt, one parse
path, all agents × images concurrently, and the weighted aggregate over judges that scored."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field, field_validator

import prompts
from judges import telemetry
from judges.call import JudgeCall
from judges.errors import ConfigError
from judges.models.protocol import Message, ModelClient, ModelRequest, TextPart, Usage
from judges.progress import Progress, no_progress
from judges.reading.expected import expected_score
from judges.reading.jury import Jury, jurors, score_jury
from judges.reading.parsing import Judged, JudgeModel, run_judge
from judges.reading.samples import SampleFailure, SampleStats, sample_stats
from judges.reading.verdicts import VerdictError, read_rating_on
from judges.store.agents import Agent, ScoreScale
from judges.units import once

log = logging.getLogger(__name__)

Severity = Literal["critical", "major", "moderate", "minor"]
SEVERITY_RANK: dict[str, int] = {"critical": 0, "major": 1, "moderate": 2, "minor": 3}
ITERATION_CONTEXT = (
    "This is iteration {n} of {m}. Previous scores: [{scores}].\n"
    "Score the image on its absolute merits. If this iteration genuinely improved on previous issues, "
    "the score SHOULD increase. If the same problems persist, the score should NOT increase. Do not "
    "inflate scores just because this is a later iteration."
)


class TopIssue(JudgeModel):
    problem: str
    severity: Severity
    fix: str

    @field_validator("severity", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


class ChecklistItem(JudgeModel):
    item: str
    passed: bool | None = None
    note: str | None = None


class _Scored(JudgeModel):
    score: float = Field(allow_inf_nan=False, description="The overall score on the agent's declared scale.")


class VerdictFields(JudgeModel):
    """What a judge says about an image besides its score: in its reply (ImageVerdict) and in the result
    (Evaluation), written once."""

    top_issue: TopIssue | None = None
    category_scores: dict[str, float] = {}
    what_worked: list[str] = []
    prompt_instructions: list[str] = []
    checklist: list[ChecklistItem] = []
    feedback: str = ""

    @field_validator("checklist", mode="before")
    @classmethod
    def _items(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"item": v} if isinstance(v, str) else v for v in value]
        return value


class ImageVerdict(VerdictFields, _Scored):
    """What a judge agent answers about one image (the seed's default format, any key casing)."""


class GuidelineUse(BaseModel):
    document_id: str
    chunk_index: int
    similarity: float


class _EvaluationHead(BaseModel):
    image_index: int
    agent_id: str
    agent_name: str
    status: Literal["ok", "failed", "fallback"] = Field(
        description="ok: the judge scored; failed: no score (see error); fallback: the opt-in fallback score")
    score: float | None = Field(default=None, description="0–100: the judge's reading mapped from its scale.")
    raw_score: float | None = Field(default=None, description="The score as the judge wrote it, on `scale`.")
    scale: ScoreScale | None = Field(default=None, description="The agent's declared score scale.")
    read_as: str | None = Field(default=None, description="How the reply was read: json, convention:<name> or repair.")


# One judge's evaluation of one image; fields in this order: the head, the verdict, then these.
class Evaluation(VerdictFields, _EvaluationHead):
    guidelines_used: list[GuidelineUse] = []
    guidelines_error: str | None = Field(
        default=None, description="Why guideline retrieval failed for this judge (it then judged without them).")
    error: str | None = Field(default=None, description="Failure kind and message, when the judge did not score.")
    failure_kind: str | None = None
    raw_response: str | None = Field(default=None, description="The model's own text, kept when it failed.")
    usage: Usage = Field(default_factory=Usage)
    latency_ms: float = 0.0
    model: str = ""
    jury: Jury | None = Field(
        default=None, description="models given: each model's 0–100 score (the mean of its samples), the jury's "
                                  "(their mean, which is `score`) ; a failing model is counted and left out.")
    samples: SampleStats | None = Field(
        default=None, description="samples > 1: the spread of the samples' 0–100 scores; `score` is their mean, "
                                  "the other fields are the first scoring sample's.")
    expected_score: float | None = Field(
        default=None, description="expected_score asked: the probability-weighted 0–100 score, the score token's "
                                  "top log-probabilities weighing the whole scores on the agent's scale (G-Eval); "
                                  "null where the backend gave none (only OpenAI-compatible backends do) or the "
                                  "score is not whole. Mean over samples and models.")


class RankedImage(BaseModel):
    image_index: int
    aggregate_score: float | None = Field(description="Σ(score·weight)/Σ(weight) over judges that scored; null if none.")
    judges_scored: int
    judges_failed: int


def aggregate_scores(evaluations: Sequence[Evaluation], weights: dict[str, float], images: int) -> list[RankedImage]:
    """Per image: Σ(score·scoring_weight)/Σ(scoring_weight) over the judges that returned a score.

    Best first; images no judge scored (or only zero-weight judges) have a null aggregate and
    rank last, in image order."""
    ranked = []
    for i in range(images):
        mine = [e for e in evaluations if e.image_index == i]
        scored = [e for e in mine if e.score is not None]
        total = sum(weights[e.agent_id] for e in scored)
        value = sum(e.score * weights[e.agent_id] for e in scored if e.score is not None) / total if total else None
        ranked.append(RankedImage(image_index=i, aggregate_score=None if value is None else round(value, 4),
                                  judges_scored=len(scored), judges_failed=len(mine) - len(scored)))
    return sorted(ranked, key=lambda r: (r.aggregate_score is None, -(r.aggregate_score or 0), r.image_index))


def iteration_context(iteration: int, max_iterations: int, previous: Sequence[float]) -> str:
    return ITERATION_CONTEXT.format(n=iteration, m=max_iterations, scores=", ".join(f"{s:g}" for s in previous))


def own_format(agent: Agent) -> bool:
    """The agent's system prompt brings its own OUTPUT FORMAT (seed 000): no schema is imposed."""
    return "OUTPUT FORMAT" in agent.system_prompt


def evaluation_text(agent: Agent, *, brief: str, prompt: str, context: str, guidelines: Sequence[str]) -> str:
    """The seed's evaluation prompt for one agent (the same for each of its images)."""
    return prompts.render(
        "image/judge@v1", iteration_context=context, brief=brief, prompt=prompt or "(not given)",
        guidelines=list(guidelines), categories=agent.evaluation_categories or "",
        default_format=not own_format(agent), scale=f"{agent.score_scale.min:g}-{agent.score_scale.max:g}",
    )


def scale_check(scale: ScoreScale) -> Callable[[ImageVerdict], None]:
    def check(verdict: ImageVerdict) -> None:
        if not scale.min <= verdict.score <= scale.max:
            raise VerdictError(f"score {verdict.score:g} is outside the agent's declared scale {scale.describe()} "
                               "(set the agent's score_scale to the scale its prompt uses)", "out_of_range")
    return check


def evaluation_request(agent: Agent, image: Any, text: str) -> ModelRequest:
    """The image first, then the fenced data, the instructions last; temperature 0.3 as in the seed."""
    return ModelRequest(system=agent.system_prompt, messages=[Message(role="user", content=[image, TextPart(text=text)])],
                        temperature=0.3, max_tokens=2048)


def _with_denominator(scale: ScoreScale) -> Callable[[str], tuple[ImageVerdict, str]]:
    """Rating conventions; a score written out of another maximum (7/5 on a 0–10 agent) is out of range."""
    def read(text: str) -> tuple[ImageVerdict, str]:
        rating = read_rating_on(text, scale.max, scale.describe())
        return ImageVerdict(score=rating.value, feedback=text.strip()[:4000]), rating.convention
    return read


Retrieve = Callable[[Agent], Awaitable[list[tuple[str, GuidelineUse]]]]


async def evaluate(call: JudgeCall, agents: Sequence[Agent], images: Sequence[Any], *, brief: str, prompt: str,
                   context: str, retrieve: Retrieve, fallback_score: float | None = None,
                   progress: Progress = no_progress, logprobs: bool = False) -> list[Evaluation]:
    """Every agent × image, concurrently (the model registry's cap bounds calls in flight), each by the
    agent's models (call.members: the call's jury, else the agent's own, else one model) × the call's samples.

    One judge's failure never cancels the others; it becomes a failed evaluation with its reason.
    `progress` hears of each judge × image as it finishes (total: judges × images)."""
    results: list[Evaluation | None] = [None] * (len(agents) * len(images))
    total = len(agents) * len(images)
    finished = 0

    async def judged_one(evaluation: Evaluation) -> None:
        nonlocal finished
        finished += 1
        outcome = f"score {evaluation.score:g}" if evaluation.score is not None else f"no score ({evaluation.failure_kind})"
        await progress(finished, total, f"{evaluation.agent_name} judged image {evaluation.image_index + 1} of "
                                        f"{len(images)}: {outcome} ({finished} of {total} judgements)")
    retrieved: dict[str, list[tuple[str, GuidelineUse]]] = {}
    retrieval_errors: dict[str, str] = {}

    async def fetch(agent: Agent) -> None:
        try:
            retrieved[agent.id] = await retrieve(agent)
        except Exception as exc:  # retrieval is an aid; judging goes on without it, and says so
            log.warning("guideline retrieval for agent %s failed: %s", agent.id, exc)
            retrieved[agent.id] = []
            retrieval_errors[agent.id] = f"guideline retrieval failed: {exc}"

    await progress(0, total, f"retrieving guidelines for {len(agents)} judge(s), then {total} judgement(s)")
    async with anyio.create_task_group() as tg:
        for agent in agents:
            tg.start_soon(fetch, agent)
    texts = {a.id: evaluation_text(a, brief=brief, prompt=prompt, context=context,
                                   guidelines=[text for text, _ in retrieved.get(a.id, [])]) for a in agents}

    async def judge(slot: int, agent: Agent, index: int, image: Any) -> None:
        chunks = retrieved.get(agent.id, [])
        data: dict[str, Any] = {"image_index": index, "agent_id": agent.id, "agent_name": agent.name,
                                "guidelines_used": [use for _, use in chunks],
                                "guidelines_error": retrieval_errors.get(agent.id)}
        samples, jury = call.samples, call.is_jury(agent)
        try:
            members = await call.members(agent)
        except ConfigError as exc:
            data.update(status="failed", error=exc.failure.describe(), failure_kind="backend_error")
            results[slot] = Evaluation.model_validate(data)
            await judged_one(results[slot])  # type: ignore[arg-type]
            return
        request = evaluation_request(agent, image, texts[agent.id]).model_copy(update={"logprobs": logprobs})
        scale = agent.score_scale

        async def one(model: ModelClient, sample: int) -> Judged[ImageVerdict]:
            return await run_judge(model, request.model_copy(update={"sample": sample}), ImageVerdict,
                                   conventions=_with_denominator(scale), check=scale_check(scale),
                                   structured=not own_format(agent))

        by_member = await call.ask(members, one)
        sampled = [j for member in by_member for j in member]
        member_means: list[float] = []
        if jury:  # each model's score: the mean of its samples'
            panel, member_means = jurors([name for name, _ in members], by_member,
                                         lambda ok: sum(j.value.score for j in ok) / len(ok), scale.to_100)
            data["jury"] = score_jury(panel)
        judged = next((j for j in sampled if j.value is not None), sampled[0])
        data.update(usage=sum((j.usage for j in sampled), Usage()), latency_ms=round(max(j.latency_ms for j in sampled), 1),
                    model=judged.model, scale=scale)
        if logprobs:
            weighted = [e for j in sampled if j.value is not None
                        and (e := expected_score(j.logprobs, j.value.score, scale.min, scale.max)) is not None]
            data["expected_score"] = scale.to_100(sum(weighted) / len(weighted)) if weighted else None
        if samples > 1 or jury:
            stats = sample_stats(
                [None if j.value is None else scale.to_100(j.value.score) for j in sampled],
                [SampleFailure(sample=i, kind=j.failure.kind, message=j.failure.message)
                 for i, j in enumerate(sampled) if j.failure is not None])
            data["samples"] = stats if samples > 1 else None
            if judged.value is not None:  # the verdict's words are the first scoring sample's; its score the mean
                raws = [j.value.score for j in sampled if j.value is not None]
                if jury:  # the jury's score: the mean of its members' means
                    raws = member_means
                judged.value = judged.value.model_copy(update={"score": round(sum(raws) / len(raws), 6)})
        if judged.value is not None:
            verdict = judged.value.model_dump()
            raw = verdict.pop("score")
            data.update(status="ok", score=scale.to_100(raw), raw_score=raw, read_as=judged.read_as, **verdict)
        else:
            failure = judged.failure
            assert failure is not None
            fallback = fallback_score if failure.kind in ("parse_error", "truncated") else None
            data.update(status="fallback" if fallback is not None else "failed", score=fallback,
                        error=failure.describe(), failure_kind=failure.kind, raw_response=failure.raw)
        results[slot] = Evaluation.model_validate(data)
        await judged_one(results[slot])  # type: ignore[arg-type]

    async def recorded(slot: int, agent: Agent, index: int, image: Any) -> None:
        """judge(), as a background job's unit (judges/units.py): read back when it was recorded before."""
        async def run() -> Evaluation:
            await judge(slot, agent, index, image)
            return results[slot]  # type: ignore[return-value]
        found = await once(f"agent {agent.id} image {index}", Evaluation, run)
        if results[slot] is None:
            results[slot] = found
            await judged_one(found)
        telemetry.evaluation(agent.name, found.score, found.status, found.feedback or found.error,
                             agent_id=agent.id, prompt_id=agent.template_id or "image_evaluation",
                             prompt_version=None, model=found.model, image_index=str(index))

    async with anyio.create_task_group() as tg:
        slot = 0
        for agent in agents:
            for index, image in enumerate(images):
                tg.start_soon(recorded, slot, agent, index, image)
                slot += 1
    return [r for r in results if r is not None]
