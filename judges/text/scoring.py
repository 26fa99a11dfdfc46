"""score_text: one text scored per criterion on the criterion's declared scale, normalised to 0–100,
with a weighted total over the criteria that scored. Built-in rubrics are prompt assets
(`text/rubric/<name>@v1`); custom criteria come in the call. The G-Eval path asks once per rubric and call
for evaluation steps and uses them for every item the call scores (StepsMemo)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Literal

import anyio
from pydantic import BaseModel, Field, field_validator

import prompts
from judges.call import JudgeCall
from judges.errors import InputError, did_you_mean
from judges.models.protocol import ModelClient, Usage
from judges.progress import Progress, no_progress
from judges.reading.parsing import JudgeFailure, JudgeModel, OutputError
from judges.reading.verdicts import VerdictError, read_rating_on

from .asking import ask

BUILTIN_RUBRICS = ("correctness", "helpfulness", "faithfulness", "conciseness", "safety")
# Criteria one call scores: each is a model call (two with g_eval), so one call's requests stay bounded, as
# rank_texts' are by JUDGE_MCP_RANK_MAX_CALLS; a longer list is several rubrics, scored in several calls.
MAX_CRITERIA = 20
# Scale ends and weights lie within ±1e12: beyond, a scale's width or the total's sum of weights overflows to inf
# (±1e308 are finite), and the normalised score or the total would be 0 or NaN, not what the judge said.
MAX_MAGNITUDE = 1e12
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _\-]{0,63}$")


class Scale(BaseModel):
    """The scale a criterion is scored on; scores are also given normalised to 0–100."""

    min: float = Field(default=1, description="Lowest score, e.g. 1.")
    max: float = Field(default=5, description="Highest score, e.g. 5 or 10.")


class Criterion(BaseModel):
    name: str = Field(description="Short name, letters, digits, spaces, _ or -, e.g. 'tone'.")
    description: str = Field(min_length=1, description="What the criterion asks, with what low and high scores mean.")
    weight: float = Field(default=1.0, ge=0, description="Weight in the total (0 reports the score but leaves "
                                                         "it out of the total).")
    scale: Scale = Field(default_factory=Scale)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("a name is 1–64 letters, digits, spaces, _ or -, starting with a letter or digit, "
                             "e.g. 'tone'")
        return value


def builtin_criterion(name: str) -> Criterion:
    """A built-in rubric as a criterion: its description and scale come from the prompt asset."""
    if name not in BUILTIN_RUBRICS:
        raise InputError(f"rubric: unknown rubric {name!r}; {did_you_mean(name, BUILTIN_RUBRICS)}"
                         f"built-in rubrics are {', '.join(BUILTIN_RUBRICS)} "
                         "(or pass criteria: [{name, description, weight, scale}])")
    asset = prompts.load(f"text/rubric/{name}@v1")
    low, high = (float(x) for x in asset.meta["scale"].split("-"))
    return Criterion(name=name, description=asset.render(), scale=Scale(min=low, max=high))


def resolve_criteria(rubric: str | Sequence[str] | None, criteria: Sequence[Criterion] | None) -> list[Criterion]:
    """The criteria of a call: the built-in rubrics named, or the custom criteria (exactly one of the two)."""
    if (rubric is None) == (criteria is None):
        raise InputError("give exactly one of rubric (a built-in name, e.g. \"correctness\", or a list of names) "
                         "and criteria (e.g. [{\"name\": \"tone\", \"description\": \"Is it polite?\"}])")
    if criteria is not None:
        found = list(criteria)
    else:
        names = [rubric] if isinstance(rubric, str) else list(rubric or [])
        found = [builtin_criterion(n) for n in names]
    if not found:
        raise InputError("criteria: give at least one criterion, e.g. rubric: \"helpfulness\"")
    if len(found) > MAX_CRITERIA:
        raise InputError(f"criteria: {len(found)} criteria; one call scores at most {MAX_CRITERIA} (each is a model "
                         "call). Split them over several calls, e.g. the first 20, then the rest")
    names = [c.name for c in found]
    if len(set(names)) != len(names):
        raise InputError(f"criteria: names must be unique (got {names})")
    for c in found:
        if not max(abs(c.scale.min), abs(c.scale.max)) <= MAX_MAGNITUDE:
            raise InputError(f"criteria[{c.name}].scale: min and max lie within ±{MAX_MAGNITUDE:g} (got "
                             f"{c.scale.min:g}–{c.scale.max:g}), e.g. {{\"min\": 1, \"max\": 5}}")
        if not c.weight <= MAX_MAGNITUDE:
            raise InputError(f"criteria[{c.name}].weight: at most {MAX_MAGNITUDE:g} (got {c.weight:g}); weights "
                             "count relative to each other, e.g. 1 and 2")
        if not c.scale.min < c.scale.max:
            raise InputError(f"criteria[{c.name}].scale: min must be below max, e.g. {{\"min\": 1, \"max\": 5}}")
    if sum(c.weight for c in found) <= 0:
        raise InputError("criteria: at least one weight must be above 0")
    return found


class CriterionVerdict(JudgeModel):
    score: float
    reasoning: str = ""


class EvaluationSteps(JudgeModel):
    steps: list[str] = Field(min_length=1, max_length=12)


def _check_scale(scale: Scale) -> Callable[[CriterionVerdict], None]:
    def check(value: CriterionVerdict) -> None:
        if not scale.min <= value.score <= scale.max:
            raise VerdictError(f"score {value.score:g} is outside the declared scale {scale.min:g}–{scale.max:g}",
                               "out_of_range")
    return check


def _conventions(scale: Scale) -> Callable[[str], tuple[CriterionVerdict, str]]:
    def read(text: str) -> tuple[CriterionVerdict, str]:
        rating = read_rating_on(text, scale.max, f"{scale.min:g}–{scale.max:g}")
        return CriterionVerdict(score=rating.value), rating.convention
    return read


def normalise(score: float, scale: Scale) -> float:
    """A score on its scale mapped to 0–100."""
    return round((score - scale.min) / (scale.max - scale.min) * 100.0, 4)


class CriterionScore(BaseModel):
    name: str
    weight: float
    scale: Scale
    score: float | None = Field(default=None, description="On the criterion's scale; null when the judge failed.")
    normalised: float | None = Field(default=None, description="The score mapped to 0–100.")
    reasoning: str = ""
    read_as: str | None = Field(default=None, description="json, convention:<name> or repair; null when failed.")
    steps: list[str] | None = Field(default=None, description="The G-Eval evaluation steps used (method g_eval).")
    failure: JudgeFailure | None = Field(default=None, description="Why there is no score: a typed failure "
                                                                   "with the judge's raw text. Never a default.")
    usage: Usage = Field(default_factory=Usage)


class TextScore(BaseModel):
    criteria: list[CriterionScore]
    total: float | None = Field(description="Weighted mean of the normalised scores (0–100) over the criteria "
                                            "that scored; null when none did.")
    scored: int
    failed: int
    method: Literal["direct", "g_eval"]
    planned_model_calls: int = Field(description="Model calls planned before any repair round.")
    steps_cached: list[str] = Field(default=[], description="Criteria whose G-Eval steps came from the cache.")
    model: str = ""
    usage: Usage = Field(default_factory=Usage)

    def no_result(self) -> str | None:
        """Why this result holds no usable score (no criterion scored), or None."""
        return f"no criterion was scored ({self.failed} failed)" if self.total is None and self.failed else None


StepsKey = tuple[str, str, str, float, float]


class StepsMemo:
    """The G-Eval steps one call has been given, per (model, criterion): asked once however many items the call
    scores (calibrate_judge), concurrent items waiting for the first ask. One per call, never per process: across
    calls a rubric's steps are reused only through the organization's own result cache (the steps request is a
    model request like any other), so another organization never receives them, and `cache: false` asks again."""

    def __init__(self) -> None:
        self._steps: dict[StepsKey, list[str]] = {}
        self._asking: dict[StepsKey, anyio.Lock] = {}

    def known(self, key: StepsKey) -> bool:
        return key in self._steps


def _steps_key(client: ModelClient, c: Criterion) -> StepsKey:
    return (client.name, c.name, c.description, c.scale.min, c.scale.max)


async def evaluation_steps(client: ModelClient, c: Criterion, memo: StepsMemo) -> tuple[
        list[str] | None, JudgeFailure | None, Usage, bool]:
    """(steps, failure, usage, from_cache) for one criterion: this call's, else asked (the organization's result
    cache may answer) and kept for the rest of the call. from_cache: no model request was made for them."""
    key = _steps_key(client, c)
    async with memo._asking.setdefault(key, anyio.Lock()):
        if key in memo._steps:
            return memo._steps[key], None, Usage(), True
        judged = await ask(client, "text/score/steps@v1", EvaluationSteps, criterion=c.name,
                           description=c.description, low=f"{c.scale.min:g}", high=f"{c.scale.max:g}")
        if judged.value is None:
            assert judged.failure is not None
            failure = dataclasses.replace(judged.failure, message=f"evaluation steps: {judged.failure.message}")
            return None, failure, judged.usage, False
        steps = [s.strip() for s in judged.value.steps if s.strip()]
        memo._steps[key] = steps
        return steps, None, judged.usage, judged.usage.cached


def planned_score_calls(client: ModelClient, criteria: Sequence[Criterion], method: str,
                        memo: StepsMemo | None = None) -> int:
    """One call per criterion, and with g_eval one steps call per criterion this call has no steps for yet
    (the organization's result cache may still answer some: usage says what was sent)."""
    steps = sum(1 for c in criteria if memo is None or not memo.known(_steps_key(client, c))) if method == "g_eval" else 0
    return len(criteria) + steps


async def score_criterion(client: ModelClient, c: Criterion, *, text: str, instruction: str | None,
                          reference: str | None, context: Sequence[str], method: str,
                          memo: StepsMemo) -> tuple[CriterionScore, bool]:
    """One criterion's score (or typed failure), and whether its steps came from the cache."""
    steps: list[str] | None = None
    usage = Usage()
    cached = False
    if method == "g_eval":
        steps, failure, usage, cached = await evaluation_steps(client, c, memo)
        if failure is not None:
            return CriterionScore(name=c.name, weight=c.weight, scale=c.scale, failure=failure,
                                  usage=usage), cached
    judged = await ask(client, "text/score/criterion@v1", CriterionVerdict, conventions=_conventions(c.scale),
                       check=_check_scale(c.scale), text=text, instruction=instruction or "",
                       reference=reference or "", context=list(context), criterion=c.name,
                       description=c.description, low=f"{c.scale.min:g}", high=f"{c.scale.max:g}", steps=steps or [])
    usage = usage + judged.usage
    result = CriterionScore(name=c.name, weight=c.weight, scale=c.scale, steps=steps, usage=usage)
    if judged.value is None:
        result.failure = judged.failure
    else:
        result.score = judged.value.score
        result.normalised = normalise(judged.value.score, c.scale)
        result.reasoning = judged.value.reasoning
        result.read_as = judged.read_as
    return result, cached


def weighted_total(scores: Sequence[CriterionScore]) -> float | None:
    """Σ(normalised·weight) / Σ(weight) over the criteria that scored; None when none with weight did."""
    counted = [(s.normalised, s.weight) for s in scores if s.normalised is not None and s.weight > 0]
    weight = sum(w for _, w in counted)
    if not counted or weight <= 0:
        return None
    return round(sum(n * w for n, w in counted) / weight, 4)


def check_text_inputs(text: str, criteria: Sequence[Criterion], context: Sequence[str]) -> None:
    if not text.strip():
        raise InputError("text must not be empty, e.g. \"Paris is the capital of France.\"")
    if any(c.name == "faithfulness" for c in criteria) and not context:
        raise InputError("rubric faithfulness scores against a context: pass context (a list of passages) or "
                         "agent_id (the agent's guidelines are searched)")


async def score_text(call: JudgeCall, *, text: str, criteria: Sequence[Criterion], instruction: str | None = None,
                     reference: str | None = None, context: Sequence[str] = (), method: str = "direct",
                     progress: Progress = no_progress, steps: StepsMemo | None = None) -> TextScore:
    """Score `text` on every criterion at once (one call each, plus one steps call per rubric with g_eval,
    unless `steps`, the calling tool's memo, has them); a failed criterion is a typed failure and left out of
    the total."""
    client = await call.client()
    if method not in ("direct", "g_eval"):
        raise InputError(f"method must be direct or g_eval (got {method!r})")
    check_text_inputs(text, criteria, context)
    memo = steps if steps is not None else StepsMemo()
    planned = planned_score_calls(client, criteria, method, memo)
    await progress(0, len(criteria), f"scoring {len(criteria)} criteria: {planned} model calls planned")
    results: list[CriterionScore | None] = [None] * len(criteria)
    cached: list[str] = []
    done = 0

    async def one(i: int, c: Criterion) -> None:
        nonlocal done
        results[i], from_cache = await score_criterion(client, c, text=text, instruction=instruction,
                                                       reference=reference, context=context, method=method,
                                                       memo=memo)
        if from_cache:
            cached.append(c.name)
        done += 1
        await progress(done, len(criteria), f"criterion {c.name} done ({done} of {len(criteria)})")

    async with anyio.create_task_group() as tg:
        for i, c in enumerate(criteria):
            tg.start_soon(one, i, c)
    scores = [r for r in results if r is not None]
    usage = sum((s.usage for s in scores), Usage())
    return TextScore(criteria=scores, total=weighted_total(scores), scored=sum(s.score is not None for s in scores),
                     failed=sum(s.failure is not None for s in scores), method=method,  # type: ignore[arg-type]
                     planned_model_calls=planned, steps_cached=sorted(cached), model=client.name, usage=usage)


__all__ = ["BUILTIN_RUBRICS", "Criterion", "CriterionScore", "OutputError", "Scale", "StepsMemo", "TextScore",
           "score_text"]
