"""A/B judging (seed 002: PairwiseJudge and VIEscorePipe), with position swap beyond the seed.

Every reply goes through the one reading path (judges.reading.parsing.run_judge): a JSON `winner`
(Image A / image_b / a / tie …), else the published pairwise conventions (judges.reading.verdicts:
FastChat [[A]], Arena-Hard [[A>>B]] with its margin, Prometheus [RESULT] A, LLMBar Output (a),
AlpacaEval rankings, PandaLM 1/2/Tie, JudgeLM score pairs), one repair round, else FAILED with
the typed failure and every raw reply kept. "none"/"neither" is a failure, never a tie. With swap,
both orders are asked at once and the second is mapped back.
viescore: the model gives scores on the 0–10 scale (checked, never clamped); UnicEdit-style prompts a
scalar, EditScore-style v2 prompts a list read by the prompt's family (instruction_following →
score[0], visual_quality → min, otherwise score[1]).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

import prompts
from judges.call import JudgeCall
from judges.errors import BackendError, InputError
from judges.inputs.sizes import SizeLimits
from judges.models.protocol import ImagePart, Message, ModelClient, ModelRequest, TextPart, Usage
from judges.progress import Progress, no_progress
from judges.reading.expected import expected_score
from judges.reading.jury import Jury, JuryMember, score_jury, verdict_jury
from judges.reading.parsing import OutputError, json_candidates, run_judge
from judges.reading.samples import SampleFailure, SampleStats, Votes, sample_stats, vote
from judges.reading.verdicts import (
    PairRead,
    VerdictError,
    read_pair,
    read_rating_on,
    winner_word,
)

Kind = Literal["image", "text"]
LABELS: dict[Kind, tuple[str, str]] = {"image": ("Image A", "Image B"), "text": ("Response A", "Response B")}
WINNER_KEYS = ("winner", "Winner", "WINNER", "choice", "answer", "verdict", "Verdict", "preferred", "better")


def label_of(winner: str, kind: Kind) -> str:
    a, b = LABELS[kind]
    return {"A": a, "B": b}.get(winner, "Tie")


class PairVerdict(BaseModel):
    winner: Literal["A", "B", "tie"]
    margin: Literal["strong", "slight", "tie"] | None = None
    scores: tuple[float, float] | None = None


def parse_pair_json(text: str) -> PairVerdict:
    """The last JSON object with a winner key (a refusal when it names neither candidate)."""
    for candidate in reversed(json_candidates(text)):
        if isinstance(candidate, dict):
            for key in WINNER_KEYS:
                if key in candidate:
                    winner = winner_word(candidate[key])
                    if winner is None:
                        raise OutputError(f"winner {candidate[key]!r} is not A, B or tie")
                    return PairVerdict(winner=winner)
    raise OutputError("the reply holds no JSON object with a 'winner'")


def pair_conventions(text: str) -> tuple[PairVerdict, str]:
    read: PairRead = read_pair(text)
    return PairVerdict(winner=read.winner, margin=read.margin, scores=read.scores), read.convention


def swap_back(value: str, kind: Kind) -> str:
    """Map a verdict given with the candidates swapped back to the original order."""
    a, b = LABELS[kind]
    return {a: b, b: a}.get(value, value)


FAILED = "Failed"  # a verdict no reply gave (the failures list says why: JudgeFailure kind and message)


def combine_orders(first: str, second: str, kind: Kind = "image") -> tuple[str, bool | None]:
    """(value, consistent) from the first order's verdict and the swapped order's, mapped back.

    Same winner → it, consistent; different → Tie, inconsistent; one Failed → the other's, null;
    both Failed → Failed, null."""
    if first == FAILED and second == FAILED:
        return FAILED, None
    if first == FAILED or second == FAILED:
        return (second if first == FAILED else first), None
    if first == second:
        return first, True
    return "Tie", False


class OrderResult(BaseModel):
    order: Literal["original", "swapped"]
    verdict: str = Field(description="The normalised verdict as the model saw the candidates.")
    mapped: str = Field(description="The verdict in the original order.")
    raw_responses: list[str]
    read_as: str | None = Field(default=None, description="json, convention:<name> or repair; null when failed.")
    margin: Literal["strong", "slight", "tie"] | None = Field(
        default=None, description="Arena-Hard strength (A>>B strong, A>B slight, A=B tie), when the judge gave one.")
    scores: tuple[float, float] | None = Field(default=None, description="A judge's score pair (JudgeLM), as shown.")
    failure_kind: str | None = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)


class SampleVerdict(BaseModel):
    sample: int
    value: float | str
    consistent: bool | None = None
    read_as: list[str | None] = []
    failures: list[dict[str, str]] = []


class CompareResult(BaseModel):
    type: Literal["pairwise_comparison", "single_score"]
    value: float | str
    consistent: bool | None = None
    meta: dict[str, Any]
    usage: Usage = Field(default_factory=Usage)
    read_as: list[str | None] = Field(default=[], description="How each reply was read (json, convention:<name>, "
                                                               "repair), per order or per image; null when it failed.")
    margin: Literal["strong", "slight", "tie"] | None = Field(
        default=None, description="The verdict's strength when the judge gave one (Arena-Hard); the weaker of two orders.")
    failures: list[dict[str, str]] = Field(default=[], description="Each failed reply's kind and message.")
    samples: list[SampleVerdict] | None = Field(
        default=None, description="samples > 1: each sample's verdict (value, consistency, failures), in order.")
    votes: Votes | None = Field(default=None, description="samples > 1, pairwise: the samples' vote and majority "
                                                          "(the value); a split vote is Tie, consistent false.")
    jury: Jury | None = Field(
        default=None, description="models given: each model's verdict, the jury's (the value: majority winner, or "
                                  "mean score) and the models' agreement; a failing model is counted and left out.")
    expected_score: list[float | None] | None = Field(
        default=None, description="viescore with expected_score: per candidate, the probability-weighted score "
                                  "Σ p(v)·v over the score token's top log-probabilities (G-Eval); null where the "
                                  "backend gave none (only OpenAI-compatible backends do). Mean over samples.")
    sample_stats: list[SampleStats] | None = Field(
        default=None, description="samples > 1, viescore: each candidate's score spread over the samples "
                                  "(its value is the mean).")

    def no_result(self) -> str | None:
        """Why this result holds no usable verdict (every reply failed), or None."""
        if self.value != FAILED or any(v is not None for v in self.meta.get("vie_score") or []):
            return None  # a verdict, or a real score for one of two images (the failures count the other)
        kinds = sorted({f.get("kind", "") for f in self.failures} | {
            "failed" for m in (self.jury.members if self.jury else []) if m.value is None})
        return f"no judge's verdict could be read ({', '.join(k for k in kinds if k) or 'failed'})"


# --- inputs, declared by the prompt assets -------------------------------------------------

class PairJudgeInput(BaseModel):
    """The seed's PairJudgeInput: exactly two edited images (or texts)."""

    instruction: str = Field(min_length=1)
    input_image: Any | None = None
    edited_images: list[Any] = Field(min_length=2, max_length=2)


class VieScoreInput(BaseModel):
    instruction: str = Field(min_length=1)
    input_image: Any | None = None
    edited_images: list[Any] = Field(min_length=1, max_length=2)


INPUTS: dict[str, type[BaseModel]] = {"pair_judge": PairJudgeInput, "vie_score": VieScoreInput}


def declared_input(prompt_id: str) -> type[BaseModel]:
    name = prompts.load(prompt_id).meta.get("input")
    if name not in INPUTS:
        raise InputError(f"prompt {prompt_id} declares no known input schema")
    return INPUTS[name]


def validate_input(prompt_id: str, data: dict[str, Any]) -> None:
    """Check the inputs against the prompt's declared schema before any model call."""
    from pydantic import ValidationError

    try:
        declared_input(prompt_id).model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InputError(f"inputs do not fit prompt {prompt_id}: {problems}") from None


# --- calls ---------------------------------------------------------------------------------

def _content(kind: Kind, instruction: str, first: Any, second: Any | None, source: Any | None,
             prompt_id: str, rules: str | None = None) -> list[TextPart | ImagePart]:
    parts: list[TextPart | ImagePart] = []
    if kind == "image":
        if source is not None:
            parts += [TextPart(text="Source image:"), source]
        parts += [TextPart(text="Image A:" if second is not None else "Edited image:"), first]
        if second is not None:
            parts += [TextPart(text="Image B:"), second]
        text = prompts.render(prompt_id, instruction=instruction, response_a="", response_b="")
    else:
        text = prompts.render(prompt_id, instruction=instruction, response_a=first, response_b=second or "")
    if rules:  # an agent's own judging rules (align_judge revises them), before the prompt asset's text
        text = f"Judging rules (they come first):\n{rules}\n\n{text}"
    return [*parts, TextPart(text=text)]


def _request(content: list[TextPart | ImagePart], sample: int = 0, logprobs: bool = False) -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", content=content)], temperature=0.0, max_tokens=1024,
                        sample=sample, logprobs=logprobs)


async def pairwise_order(client: ModelClient, kind: Kind, instruction: str, a: Any, b: Any, source: Any | None,
                         prompt_id: str, repair: bool, order: Literal["original", "swapped"],
                         sample: int = 0, rules: str | None = None) -> OrderResult:
    judged = await run_judge(client, _request(_content(kind, instruction, a, b, source, prompt_id, rules), sample),
                             PairVerdict,
                             parse=parse_pair_json, conventions=pair_conventions, repair=repair, structured=False)
    if judged.value is None:
        assert judged.failure is not None
        return OrderResult(order=order, verdict=FAILED, mapped=FAILED, raw_responses=judged.raw_texts,
                           usage=judged.usage, failure_kind=judged.failure.kind, error=judged.failure.message)
    verdict = label_of(judged.value.winner, kind)
    mapped = swap_back(verdict, kind) if order == "swapped" else verdict
    return OrderResult(order=order, verdict=verdict, mapped=mapped, raw_responses=judged.raw_texts,
                       read_as=judged.read_as, margin=judged.value.margin, scores=judged.value.scores,
                       usage=judged.usage)


_STRENGTH = {"strong": 2, "slight": 1, "tie": 0}


async def pairwise(client: ModelClient, *, kind: Kind, instruction: str, candidates: Sequence[Any],
                   source: Any | None, prompt_id: str, swap: bool, retries: int,
                   progress: Progress = no_progress, sample: int = 0, rules: str | None = None) -> CompareResult:
    a, b = candidates
    results: dict[str, OrderResult] = {}
    total = 2 if swap else 1
    await progress(0, total, f"asking the judge in {'both orders' if swap else 'the original order'}")

    async def run(order: Literal["original", "swapped"]) -> None:
        first, second = (a, b) if order == "original" else (b, a)
        results[order] = await pairwise_order(client, kind, instruction, first, second, source, prompt_id,
                                              retries > 0, order, sample, rules)
        await progress(len(results), total, f"{order} order judged: {results[order].mapped} "
                                            f"({len(results)} of {total} orders)")

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "original")
        if swap:
            tg.start_soon(run, "swapped")
    original = results["original"]
    if swap:
        value, consistent = combine_orders(original.mapped, results["swapped"].mapped, kind)
    else:
        value, consistent = original.mapped, None
    orders = [results[o] for o in ("original", "swapped") if o in results]
    margin: Literal["strong", "slight", "tie"] | None = None
    if consistent is not False:
        for o in orders:
            if o.margin is not None and o.mapped == value and (margin is None or _STRENGTH[o.margin] < _STRENGTH[margin]):
                margin = o.margin
    last_raw = original.raw_responses[-1] if original.raw_responses else ""
    return CompareResult(
        type="pairwise_comparison", value=value, consistent=consistent,
        meta={"raw_response": last_raw, "orders": [o.model_dump() for o in orders]},
        usage=sum((o.usage for o in orders), Usage()), read_as=[o.read_as for o in orders], margin=margin,
        failures=[{"order": o.order, "kind": o.failure_kind or "", "message": o.error or ""}
                  for o in orders if o.failure_kind],
    )


# --- VIEScore ------------------------------------------------------------------------------

def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def score_family(prompt_id: str) -> Literal["scalar", "instruction_following", "visual_quality", "other"]:
    name, version = prompt_id.split("@")
    if version == "v1":
        return "scalar"
    if "instruction_following" in name:
        return "instruction_following"
    if "visual_quality" in name:
        return "visual_quality"
    return "other"


def read_score(value: Any, family: str) -> float:
    """The seed's _parse_viescore on the `score` field: scalar, or a list read by the family. A list
    under a scalar prompt is read by VIEScore's own rule, the lowest score."""
    if isinstance(value, list) and len(value) > 1 and family == "scalar":
        family = "visual_quality"
    if family == "scalar" or not isinstance(value, list):
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        number = _number(value)
        if number is None:
            raise OutputError(f"score {value!r} is not a number")
        return number
    numbers = [_number(v) for v in value]
    if not numbers or any(n is None for n in numbers):
        raise OutputError(f"score list {value!r} holds something that is not a number")
    clean = [n for n in numbers if n is not None]
    if family == "instruction_following":
        return clean[0]
    if family == "visual_quality":
        return min(clean)
    if len(clean) < 2:
        raise OutputError(f"score list {value!r} needs a second entry for this prompt")
    return clean[1]


VIESCORE_SCALE = (0.0, 10.0)


def check_viescore_range(value: Any, scale: tuple[float, float] = VIESCORE_SCALE) -> None:
    """Every number of a VIEScore `score` must lie on its scale (0–10); out of it is a typed failure."""
    items = value if isinstance(value, list) else [value]
    low, high = scale
    for item in items:
        number = _number(item)
        if number is not None and not low <= number <= high:
            raise VerdictError(f"score {number:g} is outside the declared scale {low:g}–{high:g}", "out_of_range")


class VieReading(BaseModel):
    score: float
    raw: Any = None


def read_viescore(text: str, family: str, scale: tuple[float, float] = VIESCORE_SCALE) -> VieReading:
    """The score from a judge's reply: the last JSON object with a `score` field, checked against its scale."""
    for candidate in reversed(json_candidates(text)):
        if isinstance(candidate, dict) and "score" in candidate:
            check_viescore_range(candidate["score"], scale)
            return VieReading(score=read_score(candidate["score"], family), raw=candidate["score"])
    raise OutputError("no JSON object with a 'score' field in the reply")


def _viescore_conventions(scale: tuple[float, float]) -> Any:
    def read(text: str) -> tuple[VieReading, str]:
        rating = read_rating_on(text, scale[1], f"{scale[0]:g}–{scale[1]:g}")
        check_viescore_range(rating.value, scale)
        return VieReading(score=rating.value, raw=rating.value), rating.convention
    return read


async def viescore(client: ModelClient, *, kind: Kind, instruction: str, candidates: Sequence[Any],
                   source: Any | None, prompt_id: str, retries: int,
                   scale: tuple[float, float] = VIESCORE_SCALE, progress: Progress = no_progress,
                   sample: int = 0, logprobs: bool = False) -> CompareResult:
    family = score_family(prompt_id)
    expected: list[float | None] = [None] * len(candidates)
    scores: list[float | None] = [None] * len(candidates)
    raws: dict[str, list[str]] = {}
    read_as: list[str | None] = [None] * len(candidates)
    usages: list[Usage] = [Usage()] * len(candidates)
    failures: list[dict[str, str]] = []

    async def score(i: int) -> None:
        request = _request(_content(kind, instruction, candidates[i], None, source, prompt_id), sample, logprobs)
        judged = await run_judge(client, request, VieReading, parse=lambda t: read_viescore(t, family, scale),
                                 conventions=_viescore_conventions(scale) if family == "scalar" else None,
                                 repair=retries > 0, structured=False)
        raws[f"edited_image_{i}"] = judged.raw_texts
        usages[i] = judged.usage
        if judged.value is not None:
            scores[i], read_as[i] = judged.value.score, judged.read_as
            expected[i] = expected_score(judged.logprobs, judged.value.score, *scale)
        else:
            assert judged.failure is not None
            failures.append({"image": str(i), "kind": judged.failure.kind, "message": judged.failure.message})
        done.append(i)
        await progress(len(done), len(candidates), f"candidate {i + 1} scored: "
                       f"{'failed' if scores[i] is None else f'{scores[i]:g}'} ({len(done)} of {len(candidates)})")

    done: list[int] = []
    await progress(0, len(candidates), f"scoring {len(candidates)} candidate(s)")
    async with anyio.create_task_group() as tg:
        for i in range(len(candidates)):
            tg.start_soon(score, i)
    meta: dict[str, Any] = {"vie_score": scores, "raw_response": {k: (v[-1] if v else "") for k, v in sorted(raws.items())},
                            "attempts": dict(sorted(raws.items())), "family": family, "scale": list(scale)}
    total = sum(usages, Usage())
    common = dict(meta=meta, usage=total, read_as=read_as, failures=sorted(failures, key=lambda f: f["image"]),
                  expected_score=expected if logprobs else None)
    if len(candidates) == 1:
        only = scores[0]
        return CompareResult(type="single_score", value=FAILED if only is None else only, **common)  # type: ignore[arg-type]
    a, b = scores
    if a is None or b is None:
        value = FAILED
    else:
        first, second = LABELS[kind]
        value = first if a > b else second if b > a else "Tie"
    return CompareResult(type="pairwise_comparison", value=value, **common)  # type: ignore[arg-type]


# --- the tool's core -----------------------------------------------------------------------

DEFAULT_PROMPTS: dict[tuple[str, Kind], str] = {
    ("pairwise", "image"): "vlm/assessment/visual_consistency/pairwise@v1",
    ("pairwise", "text"): "text/assessment/pairwise@v1",
    ("viescore", "image"): "vlm/assessment/visual_consistency/viescore@v1",
}


def _as_image(ref: str, policy: Any) -> ImagePart | None:
    """An image when `ref` is a data: URI, image base64 or written as a path; None when it is text."""
    from judges.inputs.images import is_image_reference, load_image

    if not is_image_reference(ref):
        return None
    try:
        return load_image(ref, policy)
    except InputError as exc:
        raise InputError(f"{exc} (the candidate is written as a file path; pass candidate_type: text "
                         "to compare it as text)") from None


def resolve_candidates(candidates: Sequence[str], candidate_type: str, policy: Any) -> tuple[Kind, list[Any]]:
    if candidate_type not in ("auto", "image", "text"):
        raise InputError("candidate_type must be auto, image or text")
    if candidate_type == "text":
        return "text", list(candidates)
    if candidate_type == "image":
        from judges.inputs.images import load_image

        return "image", [load_image(c, policy) for c in candidates]
    images = [_as_image(c, policy) for c in candidates]
    if all(i is not None for i in images):
        return "image", images
    if any(i is not None for i in images):
        raise InputError("some candidates are images and some are text; pass candidate_type to say which")
    return "text", list(candidates)


def check_compare(method: str, candidates: Sequence[str], score_scale: tuple[float, float] | None,
                  logprobs: bool) -> None:
    """What pairwise_compare refuses before reading any candidate (also before a background call's job starts)."""
    if method not in ("pairwise", "viescore"):
        raise InputError("method must be pairwise or viescore")
    if score_scale is not None:
        if method != "viescore":
            raise InputError("score_scale applies to method viescore (the scale its prompt scores on)")
        low, high = score_scale
        if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
            raise InputError(f"score_scale: min must be below max, e.g. {{\"min\": 0, \"max\": 10}} "
                             f"(got {low:g}–{high:g})")
    if logprobs and method != "viescore":
        raise InputError("expected_score applies to method viescore (a score read from token probabilities)")
    if method == "pairwise" and len(candidates) != 2:
        raise InputError(f"method pairwise compares exactly two candidates (got {len(candidates)}), e.g. "
                         '["/home/me/project/a.png", "/home/me/project/b.png"]; method viescore scores one or two')
    if method == "viescore" and len(candidates) not in (1, 2):
        raise InputError(f"method viescore scores one or two candidates (got {len(candidates)})")


async def compare(call: JudgeCall, *, instruction: str, candidates: Sequence[str], input_image: str | None,
                  method: str, swap: bool, prompt_id: str | None, prompt_version: str | None,
                  candidate_type: str, policy: Any, retries: int,
                  score_scale: tuple[float, float] | None = None, progress: Progress = no_progress,
                  logprobs: bool = False, rules: str | None = None, sizes: SizeLimits | None = None
                  ) -> CompareResult:
    """pairwise_compare: inputs checked against the prompt's declared schema before any model call; then each
    of the call's models (one, or a jury) × its samples at once. A jury's member that fails (a backend error,
    or no verdict) is counted and left out. `rules`: an agent's judging rules, before the pairwise prompt.
    `sizes`: the text limits text candidates are held to (images have their own, judges/inputs/images.py)."""
    members = await call.members()
    check_compare(method, candidates, score_scale, logprobs)
    # Decoding and resizing images happen in a worker thread, never on the event loop.
    kind, items = await anyio.to_thread.run_sync(resolve_candidates, candidates, candidate_type, policy)
    if kind == "text" and sizes is not None:
        sizes.texts("candidates", candidates)
    if method == "viescore" and kind != "image":
        raise InputError("viescore scores images; pass images (paths, data: URIs or base64)")
    if prompt_id is None:
        prompt_id = DEFAULT_PROMPTS[(method, kind)]
    if "@" not in prompt_id:
        prompt_id = f"{prompt_id}@{prompt_version or 'v1'}"
    elif prompt_version is not None and not prompt_id.endswith(f"@{prompt_version}"):
        raise InputError("give the version either in prompt_id (…@v2) or in prompt_version, not both differently")
    prompt_id, rules = await call.prompt(prompt_id, rules)  # an organization's own version: its asset and rules
    if rules is not None and method != "pairwise":
        raise InputError("judging rules (an agent's prompt, or a kept prompt version) apply to method pairwise")
    from judges.inputs.images import load_image_async

    source = await load_image_async(input_image, policy) if input_image is not None else None
    validate_input(prompt_id, {"instruction": instruction, "input_image": input_image, "edited_images": list(candidates)})
    scale = score_scale or VIESCORE_SCALE

    async def one(client: ModelClient, sample: int, progress: Progress) -> CompareResult:
        if method == "pairwise":
            return await pairwise(client, kind=kind, instruction=instruction, candidates=items, source=source,
                                  prompt_id=prompt_id, swap=swap, retries=retries, progress=progress, sample=sample,
                                  rules=rules)
        return await viescore(client, kind=kind, instruction=instruction, candidates=items, source=source,
                              prompt_id=prompt_id, retries=retries, scale=scale, progress=progress, sample=sample,
                              logprobs=logprobs)

    samples, jury = call.samples, members[0][0] is not None
    if samples == 1 and not jury:
        return await one(members[0][1], 0, progress)
    asked, done = len(members) * samples, []
    await progress(0, asked, f"asking a jury of {len(members)} models" if jury
                   else f"asking the judge {samples} times at once")

    async def judged(client: ModelClient, sample: int) -> CompareResult | BackendError:
        try:
            result: CompareResult | BackendError = await one(client, sample, no_progress)
        except BackendError as exc:
            if not jury:
                raise
            result = exc
        done.append(sample)
        await progress(len(done), asked, f"{'failed' if isinstance(result, BackendError) else result.value} "
                                         f"({len(done)} of {asked} judgements)")
        return result

    outcomes: list[CompareResult | BackendError] = []
    for results in await call.ask(members, judged):
        failed = next((r for r in results if isinstance(r, BackendError)), None)
        ok = [r for r in results if isinstance(r, CompareResult)]
        outcomes.append(failed or (combine_samples(ok, kind) if samples > 1 else ok[0]))
    if not jury:
        return outcomes[0]  # type: ignore[return-value]
    return combine_jury([str(name) for name, _ in members], outcomes, method, len(candidates))


def combine_samples(results: Sequence[CompareResult], kind: Kind) -> CompareResult:
    """n samples of one comparison as one result: pairwise by majority vote (split → Tie, consistent false;
    a sample inconsistent across orders makes the whole inconsistent), viescore by each candidate's mean."""
    first = results[0]
    per_sample = [SampleVerdict(sample=i, value=r.value, consistent=r.consistent, read_as=r.read_as,
                                failures=r.failures) for i, r in enumerate(results)]
    common: dict[str, Any] = dict(
        usage=sum((r.usage for r in results), Usage()), read_as=[a for r in results for a in r.read_as],
        failures=[{"sample": str(i), **f} for i, r in enumerate(results) for f in r.failures], samples=per_sample)
    meta = {**first.meta, "samples": len(results)}
    if first.meta.get("vie_score") is None:
        votes = vote([str(r.value) for r in results], failed=FAILED, tie="Tie")
        consistent = votes.consistent
        if consistent and any(r.consistent is False for r in results):
            consistent = False
        return CompareResult(type=first.type, value=votes.majority, consistent=consistent, meta=meta, votes=votes,
                             **common)
    stats = []
    for c in range(len(first.meta["vie_score"])):
        failures = [SampleFailure(sample=i, kind=f["kind"], message=f["message"])
                    for i, r in enumerate(results) for f in r.failures if f.get("image") == str(c)]
        stats.append(sample_stats([r.meta["vie_score"][c] for r in results], failures))
    means = [s.mean for s in stats]
    meta["vie_score"] = means
    value: float | str
    if len(means) == 1:
        value = FAILED if means[0] is None else means[0]
    elif means[0] is None or means[1] is None:
        value = FAILED
    else:
        a_label, b_label = LABELS[kind]
        value = a_label if means[0] > means[1] else b_label if means[1] > means[0] else "Tie"
    expected: list[float | None] | None = None
    if first.expected_score is not None:
        expected = []
        for c in range(len(means)):
            found = [e for r in results if r.expected_score is not None and (e := r.expected_score[c]) is not None]
            expected.append(round(statistics.fmean(found), 6) if found else None)
    return CompareResult(type=first.type, value=value, meta=meta, sample_stats=stats, expected_score=expected,
                         **common)


def combine_jury(names: Sequence[str], outcomes: Sequence[CompareResult | BackendError], method: str,
                 candidates: int) -> CompareResult:
    """A jury's comparisons as one result: the jury's verdict (pairwise: the majority winner; viescore: each
    candidate's mean score), each model's, and their agreement."""
    members: list[JuryMember] = []
    for name, outcome in zip(names, outcomes, strict=True):
        if isinstance(outcome, CompareResult):
            scores = outcome.meta.get("vie_score")
            verdict: Any = scores if scores is not None else outcome.value
            failed = outcome.value == FAILED and (scores is None or all(v is None for v in scores))
            members.append(JuryMember(model=name, value=None if failed else verdict, error="; ".join(
                f"{f['kind']}: {f['message']}" for f in outcome.failures) if failed else None))
        else:
            members.append(JuryMember(model=name, value=None, error=outcome.failure.describe()))
    results = [o for o in outcomes if isinstance(o, CompareResult)]
    usage = sum((r.usage for r in results), Usage())
    # Every member's failed replies (a sample, an order), named by model: a member that still voted says too.
    failures = [{"model": name, **f} for name, o in zip(names, outcomes, strict=True)
                if isinstance(o, CompareResult) for f in o.failures]
    if method == "viescore":
        jury = score_jury(members)
        means = jury.verdict if isinstance(jury.verdict, list) else []
        value: float | str
        if len(means) == 1 and means[0] is not None:
            value = means[0]
        elif len(means) == 2 and None not in means:
            a, b = means
            value = LABELS["image"][0] if a > b else LABELS["image"][1] if b > a else "Tie"  # type: ignore[operator]
        else:
            value = FAILED
        kind: Literal["pairwise_comparison", "single_score"] = "single_score" if candidates == 1 \
            else "pairwise_comparison"
        return CompareResult(type=kind, value=value, meta={"jury_models": list(names)}, usage=usage,
                             jury=jury, failures=failures)
    jury = verdict_jury(members, failed=FAILED, tie="Tie")
    consistent = vote([str(m.value) for m in members if m.value is not None], failed=FAILED).consistent
    return CompareResult(type="pairwise_comparison", value=str(jury.verdict), consistent=consistent,
                         meta={"jury_models": list(names)}, usage=usage, jury=jury, failures=failures)
