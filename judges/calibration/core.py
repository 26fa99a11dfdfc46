"""Running a judge over a calibration dataset and computing the report."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

from judges.call import JudgeCall
from judges.errors import InputError
from judges.models.protocol import Usage
from judges.pairwise.judge import VIESCORE_SCALE, compare
from judges.progress import Progress, no_progress
from judges.text.scoring import Criterion, StepsMemo, score_text
from judges.units import once

from . import stats
from .dataset import MAX_HUMAN_SCORE, Item, JudgeName

WINNERS = ["A", "B", "Tie"]
BINS = 5
TOP = 10
Contexts = Callable[[str], Awaitable[list[str]]]


class ItemResult(BaseModel):
    id: str
    human: float | str | None = Field(description="The raters' mean score, or their majority winner.")
    judge: float | str | None = Field(description="The judge's score or winner; null when it failed.")
    disagreement: float | None = Field(default=None, description=(
        "Scores: |judge − human| on the 0–1 scale of each; pairwise: 1 when the winners differ, else 0."))
    orders: list[str] | None = Field(default=None, description="Pairwise: the verdict of each order, mapped back "
                                                               "to the original order (A, B, Tie, Failed).")
    length_difference: int | None = Field(default=None, description=(
        "Pairwise texts: len(A) − len(B) in characters; scores: the text's length."))
    failure: str | None = None


class ScoreAgreement(BaseModel):
    n: int = Field(description="Items the judge scored.")
    spearman: float | None
    kendall_tau: float | None = Field(description="Kendall's tau-b.")
    pearson: float | None
    mean_absolute_error: float | None = Field(description="Mean |judge − human|, both on 0–1.")


class PairAgreement(BaseModel):
    n: int = Field(description="Items with a judge verdict.")
    accuracy: float | None
    cohen_kappa: float | None


class HumanAgreement(BaseModel):
    raters: int = Field(description="The most raters any item has.")
    units: int = Field(description="Items with at least two ratings (pairable).")
    krippendorff_alpha: float | None
    level: Literal["interval", "nominal"]
    rater_vs_rest_spearman: float | None = Field(default=None, description=(
        "Scores: the mean over raters of the Spearman correlation between one rater and the mean of the others "
        "(items where both exist): what a judge's Spearman against the mean can be read against."))


class PositionBias(BaseModel):
    both_orders: int = Field(description="Items judged in both orders (neither order failed).")
    flipped: int = Field(description="Of those, items whose verdict changed when the order was swapped.")
    flip_rate: float | None
    first_position_rate: float | None = Field(description=(
        "Of the order verdicts naming a winner, the share that named the candidate shown first (0.5 is fair)."))


class LengthBias(BaseModel):
    measure: str
    n: int
    correlation: float | None


class Confusion(BaseModel):
    labels: list[str]
    matrix: list[list[int]] = Field(description="matrix[i][j]: items the humans put in labels[i] and the judge "
                                                "in labels[j].")


class CalibrationReport(BaseModel):
    calibration_id: str = ""
    created_at: str = ""
    judge: JudgeName
    model: str
    items: int
    judged: int
    failed: int
    human_scale: tuple[float, float] | None = Field(default=None, description="Scores: the humans' scale, "
                                                                              "mapped to 0–1.")
    judge_scale: tuple[float, float] | None = None
    scores: ScoreAgreement | None = None
    pairwise: PairAgreement | None = None
    humans: HumanAgreement
    position_bias: PositionBias | None = None
    length_bias: LengthBias | None = None
    confusion: Confusion
    largest_disagreements: list[ItemResult]
    results: list[ItemResult]
    usage: Usage = Field(default_factory=Usage)
    chart: str = Field(default="", description="The chart's resource URI (PNG).")

    def no_result(self) -> str | None:
        """Why this report rests on nothing (the judge gave no verdict on any item), or None."""
        if self.judged == 0 and self.failed:
            return f"the judge gave no verdict on any item ({self.failed} failed)"
        return None


class JudgeSpec(BaseModel):
    """How to judge each item: the tool-level options the items share (pairwise_compare: an agent's prompt as
    judging rules; judge_code: run_gates, false by default:
    the judge's own verdict; evaluate_analysis: the one LLM category judged, its spec pinned)."""

    judge: JudgeName
    prompt_id: str | None = None
    prompt_version: str | None = None
    criteria: list[Criterion] = []
    method: str = "direct"
    candidate_type: str = "auto"
    score_scale: tuple[float, float] | None = None
    samples: int = 1
    run_gates: bool = False
    category: str | None = None
    category_spec: dict[str, Any] | None = None
    rules: str | None = None  # pairwise_compare with an agent: its prompt, as judging rules


@dataclass(frozen=True)
class JudgeEnv:
    """What judge_code and evaluate_analysis items need from the server: the gates' settings and sandbox roots,
    the operator's analysis categories."""

    gate_settings: Any = None
    allowed_roots: tuple[Path, ...] = ()
    categories: Mapping[str, Any] = field(default_factory=dict)


class Judged(BaseModel):
    value: float | str | None
    orders: list[str] | None = None
    first_named: list[bool] = []
    usage: Usage = Field(default_factory=Usage)
    failure: str | None = None


def _winner(label: str) -> str:
    if label.endswith(" A"):
        return "A"
    if label.endswith(" B"):
        return "B"
    return "Failed" if label == "Failed" else "Tie"


async def judge_item(call: JudgeCall, spec: JudgeSpec, item: Item, *, policy: Any, retries: int,
                     contexts: Contexts | None, steps: StepsMemo | None = None, env: JudgeEnv | None = None
                     ) -> Judged:
    """One item through the judge's core, as its tool would call it (pairwise and VIEScore with the call's
    samples, `spec.samples`: the majority verdict, or the mean score)."""
    x = item.inputs
    if spec.judge in ("judge_code", "evaluate_analysis"):
        return await _judge_binary(call, spec, x, env or JudgeEnv())
    if spec.judge == "score_text":
        passages = list(x.get("context") or [])
        if contexts is not None:
            passages += await contexts(x.get("instruction") or x["text"])
        scored = await score_text(call, text=x["text"], criteria=spec.criteria, instruction=x.get("instruction"),
                                  reference=x.get("reference"), context=passages, method=spec.method, steps=steps)
        failure = None if scored.total is not None else "; ".join(
            f"{c.name}: {c.failure.kind}" for c in scored.criteria if c.failure is not None) or "no score"
        return Judged(value=scored.total, usage=scored.usage, failure=failure)
    method = "pairwise" if spec.judge == "pairwise_compare" else "viescore"
    result = await compare(call, instruction=x["instruction"], candidates=x["candidates"],
                           input_image=x.get("input_image"), method=method, swap=True, prompt_id=spec.prompt_id,
                           prompt_version=spec.prompt_version, candidate_type=spec.candidate_type, policy=policy,
                           retries=retries, score_scale=spec.score_scale if method == "viescore" else None,
                           rules=spec.rules)
    failure = "; ".join(f"{f.get('kind')}: {f.get('message')}" for f in result.failures) or None
    if method == "viescore":
        value = result.value if isinstance(result.value, int | float) else None
        return Judged(value=None if value is None else float(value), usage=result.usage,
                      failure=failure if value is None else None)
    orders = [_winner(o["mapped"]) for o in result.meta.get("orders", [])]
    first = [_winner(o["verdict"]) == "A" for o in result.meta.get("orders", []) if _winner(o["verdict"]) in "AB"]
    verdict = _winner(str(result.value))
    return Judged(value=None if verdict == "Failed" else verdict, orders=orders, first_named=first,
                  usage=result.usage, failure=failure if verdict == "Failed" else None)


async def _judge_binary(call: JudgeCall, spec: JudgeSpec, x: dict[str, Any], env: JudgeEnv) -> Judged:
    """judge_code's verdict (accept, revise or reject; the gates' own verdict when the model gave none is no
    verdict of the judge: failed) or one evaluate_analysis category's pass or fail (a split vote: Tie)."""
    if spec.judge == "judge_code":
        from judges.code.gates import SourceFile
        from judges.code.judge import judge_code

        code = await judge_code(call, spec=x["spec"], root=None, files=[SourceFile(**f) for f in x["files"]],
                                diff=x.get("diff"), run_gates_=spec.run_gates, gates=None,
                                model_notes=x.get("model_notes"), candidates=None, allowed_roots=env.allowed_roots,
                                settings=env.gate_settings)
        if code.status != "ok":
            return Judged(value=None, usage=code.usage, failure=f"{code.status}: {code.error or 'no model verdict'}")
        return Judged(value=code.verdict, usage=code.usage)
    from judges.analysis.judge import evaluate_analysis

    assert spec.category is not None
    result = await evaluate_analysis(call, analysis=x["analysis"], input_url=x.get("input_url"),
                                     user_context=x.get("user_context"), context_type=x.get("context_type"),
                                     deterministic_checks=[], llm_judges=[spec.category], custom=env.categories)
    usage = Usage(requests=result.usage.model_calls, input_tokens=result.usage.input_tokens,
                  output_tokens=result.usage.output_tokens, cache_hits=result.usage.cache_hits,
                  cost_usd=result.usage.cost_usd)
    if result.stopped_at is not None:
        return Judged(value=None, usage=usage, failure=f"stopped at {result.stopped_at}")
    found = result.categories[spec.category]
    if found.votes is not None:
        majority = found.votes.majority
        value = {"pass": "pass", "fail": "fail", "Tie": "Tie"}.get(majority)
        return Judged(value=value, usage=usage, failure=None if value else "every sample failed")
    errors = [f"{name}: {c.error}" for name, c in found.checks.items() if c.error]
    if errors or found.skipped:
        return Judged(value=None, usage=usage, failure="; ".join(errors) or str(found.skipped))
    return Judged(value="pass" if found.passed else "fail", usage=usage)


def _unit(value: float, scale: tuple[float, float]) -> float:
    low, high = scale
    return (value - low) / (high - low)


def _bin(unit: float) -> str:
    i = min(BINS - 1, max(0, math.floor(unit * BINS)))
    return f"{i / BINS:.1f}–{(i + 1) / BINS:.1f}"


def rater_vs_rest(units: Sequence[Sequence[float | None]]) -> float | None:
    """Mean over raters of Spearman(rater, mean of the other raters), over the items where both exist."""
    raters = max((len(u) for u in units), default=0)
    given = [[v for v in u if v is not None] for u in units]
    sums, counts = [sum(g) for g in given], [len(g) for g in given]  # the rest's mean from these: linear work
    found: list[float] = []
    for r in range(raters):
        pairs = []
        for u, total, count in zip(units, sums, counts, strict=True):
            own = u[r] if r < len(u) else None
            if own is not None and count > 1:
                pairs.append((own, (total - own) / (count - 1)))
        rho = stats.spearman([a for a, _ in pairs], [b for _, b in pairs])
        if rho is not None:
            found.append(rho)
    return sum(found) / len(found) if found else None


def human_agreement(items: Sequence[Item], pairwise: bool) -> HumanAgreement:
    units: list[list[Any]] = [list(i.winners) if pairwise else list(i.scores) for i in items]
    return HumanAgreement(raters=max((len(u) for u in units), default=0),
                          units=sum(sum(v is not None for v in u) >= 2 for u in units),
                          krippendorff_alpha=stats.krippendorff_alpha(units, "nominal" if pairwise else "interval"),
                          level="nominal" if pairwise else "interval",
                          rater_vs_rest_spearman=None if pairwise else rater_vs_rest(units))


def _human_scale(items: Sequence[Item], given: tuple[float, float] | None) -> tuple[float, float]:
    if given is not None:
        return given
    values = [s for i in items for s in i.scores if s is not None]
    low, high = min(values), max(values)
    return (low, high) if high > low else (low, low + 1)


def report(spec: JudgeSpec, model: str, items: Sequence[Item], judged: Sequence[Judged],
           human_scale: tuple[float, float] | None = None, judge_scale: tuple[float, float] = (0, 100)
           ) -> CalibrationReport:
    """The statistics of a finished run (pure: the same items and verdicts give the same report)."""
    pairwise = spec.judge == "pairwise_compare"
    results: list[ItemResult] = []
    usage = sum((j.usage for j in judged), Usage())
    if pairwise:
        for item, j in zip(items, judged, strict=True):
            human = item.human_winner()
            a, b = (item.inputs["candidates"] + ["", ""])[:2]
            results.append(ItemResult(
                id=item.id, human=human, judge=j.value, orders=j.orders, failure=j.failure,
                disagreement=None if j.value is None else float(j.value != human),
                length_difference=len(a) - len(b)))
        ok = [r for r in results if r.judge is not None]
        humans_l, judge_l = [str(r.human) for r in ok], [str(r.judge) for r in ok]
        both = [j.orders for j in judged if j.orders and len(j.orders) == 2 and "Failed" not in j.orders]
        firsts = [f for j in judged for f in j.first_named]
        verdict_sign = {"A": 1.0, "B": -1.0, "Tie": 0.0}
        lengths = [float(r.length_difference or 0) for r in ok]
        signs = [verdict_sign[str(r.judge)] for r in ok]
        text_kind = spec.candidate_type == "text" or all(not _looks_like_image(c) for i in items
                                                         for c in i.inputs["candidates"])
        extra: dict[str, Any] = {
            "pairwise": PairAgreement(n=len(ok), accuracy=stats.accuracy(humans_l, judge_l),
                                      cohen_kappa=stats.cohen_kappa(humans_l, judge_l)),
            "position_bias": PositionBias(
                both_orders=len(both), flipped=sum(o[0] != o[1] for o in both),
                flip_rate=sum(o[0] != o[1] for o in both) / len(both) if both else None,
                first_position_rate=sum(firsts) / len(firsts) if firsts else None),
            "length_bias": LengthBias(
                measure="Pearson correlation between the judge's verdict (A=+1, Tie=0, B=−1) and len(A) − len(B)",
                n=len(ok), correlation=stats.pearson(signs, lengths)) if text_kind else None,
            "confusion": Confusion(labels=WINNERS, matrix=stats.confusion(humans_l, judge_l, WINNERS)),
        }
    else:
        scale = _human_scale(items, human_scale)
        for item, j in zip(items, judged, strict=True):
            mean = item.human_score()
            assert mean is not None
            score = j.value if isinstance(j.value, float) else None
            text = item.inputs.get("text")
            results.append(ItemResult(
                id=item.id, human=mean, judge=score, failure=j.failure,
                length_difference=len(text) if isinstance(text, str) else None,
                disagreement=None if score is None else abs(_unit(score, judge_scale) - _unit(mean, scale))))
        ok = [r for r in results if isinstance(r.judge, float)]
        h = [float(r.human) for r in ok]  # type: ignore[arg-type]
        g = [float(r.judge) for r in ok]  # type: ignore[arg-type]
        errors = [r.disagreement for r in ok if r.disagreement is not None]
        bins = [_bin(x / BINS) for x in range(BINS)]
        residual = [_unit(y, judge_scale) - _unit(x, scale) for x, y in zip(h, g, strict=True)]
        with_text = [(d, float(r.length_difference)) for d, r in zip(residual, ok, strict=True)
                     if r.length_difference is not None]
        extra = {
            "human_scale": scale, "judge_scale": judge_scale,
            "scores": ScoreAgreement(n=len(ok), spearman=stats.spearman(h, g), kendall_tau=stats.kendall_tau(h, g),
                                     pearson=stats.pearson(h, g),
                                     mean_absolute_error=sum(errors) / len(errors) if errors else None),
            "length_bias": LengthBias(
                measure="Pearson correlation between (judge − human, both on 0–1) and the text's length",
                n=len(with_text), correlation=stats.pearson([d for d, _ in with_text], [n for _, n in with_text]),
            ) if with_text else None,
            "confusion": Confusion(labels=bins, matrix=stats.confusion(
                [_bin(_unit(x, scale)) for x in h], [_bin(_unit(y, judge_scale)) for y in g], bins)),
        }
    ranked = sorted((r for r in results if r.disagreement), key=lambda r: (-(r.disagreement or 0), r.id))
    return CalibrationReport(
        judge=spec.judge, model=model, items=len(items), judged=len(ok), failed=len(items) - len(ok),
        humans=human_agreement(items, pairwise), largest_disagreements=ranked[:TOP], results=results,
        usage=usage, **extra)


def _looks_like_image(ref: str) -> bool:
    from judges.inputs.images import looks_like_path

    return ref.startswith("data:image") or looks_like_path(ref)


def check_spec(spec: JudgeSpec) -> None:
    """What the judge spec alone can be refused for, before any item is judged (or a job is started)."""
    if spec.samples != 1 and spec.judge == "score_text":
        raise InputError("samples: score_text takes one sample per item (samples: 1); pairwise_compare and "
                         "viescore take more, e.g. samples: 3")
    if spec.judge == "score_text" and not spec.criteria:
        raise InputError("score_text calibration needs rubric or criteria, e.g. rubric: \"helpfulness\"")
    if spec.prompt_id is not None and spec.judge in ("pairwise_compare", "viescore"):  # an unknown asset, now
        from judges.pairwise.judge import declared_input

        declared_input(spec.prompt_id if "@" in spec.prompt_id else f"{spec.prompt_id}@{spec.prompt_version or 'v1'}")


def check_human_scale(human_scale: tuple[float, float] | None) -> None:
    """InputError for a human scale that is upside down or beyond ±MAX_HUMAN_SCORE."""
    if human_scale is not None and not human_scale[0] < human_scale[1]:
        raise InputError(f"human_scale: min must be below max, e.g. {{\"min\": 0, \"max\": 1}} (got {human_scale})")
    if human_scale is not None and max(abs(human_scale[0]), abs(human_scale[1])) > MAX_HUMAN_SCORE:
        raise InputError(f"human_scale: min and max lie within ±{MAX_HUMAN_SCORE:g}, e.g. {{\"min\": 0, \"max\": 1}} "
                         f"(got {human_scale})")


async def calibrate(call: JudgeCall, spec: JudgeSpec, items: Sequence[Item], *, policy: Any, retries: int,
                    human_scale: tuple[float, float] | None = None, contexts: Contexts | None = None,
                    concurrency: int = 4, progress: Progress = no_progress) -> CalibrationReport:
    """Judge every item (at most `concurrency` at once) and report. A judge failure on an item is counted and
    kept in its result; a bad item input fails the whole call before it wastes more model calls."""
    check_spec(spec)
    client = await call.client()
    check_human_scale(human_scale)
    done_items = await judge_all(call, spec, items, policy=policy, retries=retries, contexts=contexts,
                                 concurrency=concurrency, progress=progress)
    if spec.judge == "viescore":
        judge_scale = spec.score_scale or VIESCORE_SCALE
    else:
        judge_scale = (0.0, 100.0)

    def computed() -> CalibrationReport:
        load_scipy()
        return report(spec, client.name, items, done_items, human_scale, judge_scale)

    return await anyio.to_thread.run_sync(computed)  # scipy's first import and the statistics, off the event loop


async def judge_all(call: JudgeCall, spec: JudgeSpec, items: Sequence[Item], *, policy: Any, retries: int,
                    contexts: Contexts | None = None, concurrency: int = 4, unit: str = "item",
                    progress: Progress = no_progress, env: JudgeEnv | None = None) -> list[Judged]:
    """Every item through the judge (at most `concurrency` at once), in the items' order. In a background job
    each item is a unit recorded as `<unit> <index>` (judges/units.py): a caller that judges several passes in
    one job (align_judge) names each pass apart, so one pass never reads back another's verdicts."""
    judged: list[Judged | None] = [None] * len(items)
    done = 0
    limiter = anyio.CapacityLimiter(concurrency)
    steps = StepsMemo()  # G-Eval steps: asked once for the whole run
    await progress(0, len(items), f"judging {len(items)} items with {spec.judge}")

    async def one(i: int) -> None:
        nonlocal done
        async def run() -> Judged:
            return await judge_item(call, spec, items[i], policy=policy, retries=retries, contexts=contexts,
                                    steps=steps, env=env)
        async with limiter:
            judged[i] = await once(f"{unit} {i}", Judged, run)  # a background job's unit (judges/units.py)
        done += 1
        await progress(done, len(items), f"item {items[i].id} judged ({done} of {len(items)})")

    try:
        async with anyio.create_task_group() as tg:
            for i in range(len(items)):
                tg.start_soon(one, i)
    except ExceptionGroup as group:
        refused, _ = group.split(InputError)
        if refused is not None:  # a bad item input (or an agent without guidelines) is the caller's error, said once
            raise _first(refused) from None
        raise
    return [j for j in judged if j is not None]


def _first(group: BaseExceptionGroup[Any]) -> BaseException:
    found = group.exceptions[0]
    return _first(found) if isinstance(found, BaseExceptionGroup) else found


def load_scipy() -> None:
    """scipy.stats under the heavy-import lock (rag/warmup.py), never beside the warm-up's own imports."""
    from rag.warmup import HEAVY, import_numpy

    import_numpy()
    with HEAVY:
        import scipy.stats  # noqa: F401
