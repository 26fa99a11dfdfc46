"""A/B judging (seed 002: PairwiseJudge and VIEscorePipe), with position swap beyond the seed.

pairwise: the model names a winner; aliases are normalised (image_a, image a, a → Image A; the
same for B; tie, equal, both, none → Tie); anything else is retried, then "Failed" with every
raw response kept. With swap, both orders are asked at once and the second is mapped back.
viescore: the model gives scores; UnicEdit-style prompts a scalar, EditScore-style v2 prompts a
list read by the prompt's family (instruction_following → score[0], visual_quality → min,
otherwise score[1]).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

import prompts

from .errors import InputError
from .model import ImagePart, Message, ModelClient, ModelRequest, TextPart, Usage
from .parsing import OutputError, json_candidates

Kind = Literal["image", "text"]
LABELS: dict[Kind, tuple[str, str]] = {"image": ("Image A", "Image B"), "text": ("Response A", "Response B")}
_TIE = {"tie", "equal", "both", "none", "c"}


def normalize_winner(raw: Any, kind: Kind = "image") -> str | None:
    """The seed's alias table; None for anything else."""
    if not isinstance(raw, str):
        return None
    text = re.sub(r"[\s_\-]+", " ", raw.strip().strip("\"'`*.[]()").lower()).strip()
    a, b = LABELS[kind]
    for prefix in ("image ", "response ", "assistant ", "candidate ", ""):
        if text == prefix + "a":
            return a
        if text == prefix + "b":
            return b
    return "Tie" if text in _TIE else None


def winner_from_reply(text: str, kind: Kind) -> str | None:
    """The winner from a reply: the last JSON object with a `winner` key, else the whole reply."""
    for candidate in reversed(json_candidates(text)):
        if isinstance(candidate, dict):
            for key in ("winner", "Winner", "WINNER", "choice", "answer"):
                if key in candidate:
                    return normalize_winner(candidate[key], kind)
    return normalize_winner(text, kind)


def swap_back(value: str, kind: Kind) -> str:
    """Map a verdict given with the candidates swapped back to the original order."""
    a, b = LABELS[kind]
    return {a: b, b: a}.get(value, value)


def combine_orders(first: str, second: str, kind: Kind = "image") -> tuple[str, bool | None]:
    """(value, consistent) from the first order's verdict and the swapped order's, mapped back.

    Same winner → it, consistent; different → Tie, inconsistent; one Failed → the other's, null;
    both Failed → Failed, null."""
    if first == "Failed" and second == "Failed":
        return "Failed", None
    if first == "Failed" or second == "Failed":
        return (second if first == "Failed" else first), None
    if first == second:
        return first, True
    return "Tie", False


class OrderResult(BaseModel):
    order: Literal["original", "swapped"]
    verdict: str = Field(description="The normalised verdict as the model saw the candidates.")
    mapped: str = Field(description="The verdict in the original order.")
    raw_responses: list[str]


class CompareResult(BaseModel):
    type: Literal["pairwise_comparison", "single_score"]
    value: float | str
    consistent: bool | None = None
    meta: dict[str, Any]
    usage: Usage = Field(default_factory=Usage)


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
             prompt_id: str) -> list[TextPart | ImagePart]:
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
    return [*parts, TextPart(text=text)]


async def _ask(client: ModelClient, content: list[TextPart | ImagePart], usage: list[Usage]) -> str:
    from .errors import BackendError

    request = ModelRequest(messages=[Message(role="user", content=content)], temperature=0.0, max_tokens=1024)
    try:
        reply = await client.complete(request)
    except BackendError as err:
        return f"[{err.kind}] {err}"
    usage.append(reply.usage)
    return reply.text


async def pairwise_order(client: ModelClient, kind: Kind, instruction: str, a: Any, b: Any, source: Any | None,
                         prompt_id: str, retries: int, order: Literal["original", "swapped"],
                         usage: list[Usage]) -> OrderResult:
    raws: list[str] = []
    verdict = "Failed"
    for _ in range(retries + 1):
        raw = await _ask(client, _content(kind, instruction, a, b, source, prompt_id), usage)
        raws.append(raw)
        found = winner_from_reply(raw, kind)
        if found is not None:
            verdict = found
            break
    mapped = swap_back(verdict, kind) if order == "swapped" else verdict
    return OrderResult(order=order, verdict=verdict, mapped=mapped, raw_responses=raws)


async def pairwise(client: ModelClient, *, kind: Kind, instruction: str, candidates: Sequence[Any],
                   source: Any | None, prompt_id: str, swap: bool, retries: int) -> CompareResult:
    usage: list[Usage] = []
    a, b = candidates
    results: dict[str, OrderResult] = {}

    async def run(order: Literal["original", "swapped"]) -> None:
        first, second = (a, b) if order == "original" else (b, a)
        results[order] = await pairwise_order(client, kind, instruction, first, second, source, prompt_id,
                                              retries, order, usage)

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
    return CompareResult(
        type="pairwise_comparison", value=value, consistent=consistent,
        meta={"raw_response": original.raw_responses[-1], "orders": [o.model_dump() for o in orders]},
        usage=sum(usage, Usage()),
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
    """The seed's _parse_viescore on the `score` field: scalar, or a list read by the family."""
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


def parse_viescore(text: str, family: str) -> float:
    """The score from a judge's reply: the last JSON object with a `score` field."""
    for candidate in reversed(json_candidates(text)):
        if isinstance(candidate, dict) and "score" in candidate:
            return read_score(candidate["score"], family)
    raise OutputError("no JSON object with a 'score' field in the reply")


async def viescore(client: ModelClient, *, kind: Kind, instruction: str, candidates: Sequence[Any],
                   source: Any | None, prompt_id: str, retries: int) -> CompareResult:
    family = score_family(prompt_id)
    usage: list[Usage] = []
    scores: list[float | None] = [None] * len(candidates)
    raws: dict[str, list[str]] = {}

    async def score(i: int) -> None:
        attempts: list[str] = []
        for _ in range(retries + 1):
            raw = await _ask(client, _content(kind, instruction, candidates[i], None, source, prompt_id), usage)
            attempts.append(raw)
            try:
                scores[i] = parse_viescore(raw, family)
                break
            except OutputError:
                continue
        raws[f"edited_image_{i}"] = attempts

    async with anyio.create_task_group() as tg:
        for i in range(len(candidates)):
            tg.start_soon(score, i)
    meta: dict[str, Any] = {"vie_score": scores, "raw_response": {k: v[-1] for k, v in sorted(raws.items())},
                            "attempts": dict(sorted(raws.items())), "family": family}
    total = sum(usage, Usage())
    if len(candidates) == 1:
        only = scores[0]
        return CompareResult(type="single_score", value="Failed" if only is None else only, meta=meta, usage=total)
    a, b = scores
    if a is None or b is None:
        value = "Failed"
    else:
        first, second = LABELS[kind]
        value = first if a > b else second if b > a else "Tie"
    return CompareResult(type="pairwise_comparison", value=value, meta=meta, usage=total)


# --- the tool's core -----------------------------------------------------------------------

DEFAULT_PROMPTS: dict[tuple[str, Kind], str] = {
    ("pairwise", "image"): "vlm/assessment/visual_consistency/pairwise@v1",
    ("pairwise", "text"): "text/assessment/pairwise@v1",
    ("viescore", "image"): "vlm/assessment/visual_consistency/viescore@v1",
}


def _as_image(ref: str, policy: Any) -> ImagePart | None:
    """An image when `ref` is a data: URI, image base64 or written as a path; None when it is text."""
    from .images import is_image_reference, load_image

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
        from .images import load_image

        return "image", [load_image(c, policy) for c in candidates]
    images = [_as_image(c, policy) for c in candidates]
    if all(i is not None for i in images):
        return "image", images
    if any(i is not None for i in images):
        raise InputError("some candidates are images and some are text; pass candidate_type to say which")
    return "text", list(candidates)


async def compare(client: ModelClient, *, instruction: str, candidates: Sequence[str], input_image: str | None,
                  method: str, swap: bool, prompt_id: str | None, prompt_version: str | None,
                  candidate_type: str, policy: Any, retries: int) -> CompareResult:
    """pairwise_compare: inputs checked against the prompt's declared schema before any model call."""
    if method not in ("pairwise", "viescore"):
        raise InputError("method must be pairwise or viescore")
    if method == "pairwise" and len(candidates) != 2:
        raise InputError(f"method pairwise compares exactly two candidates (got {len(candidates)})")
    if method == "viescore" and len(candidates) not in (1, 2):
        raise InputError(f"method viescore scores one or two candidates (got {len(candidates)})")
    # Decoding and resizing images happen in a worker thread, never on the event loop.
    kind, items = await anyio.to_thread.run_sync(resolve_candidates, candidates, candidate_type, policy)
    if method == "viescore" and kind != "image":
        raise InputError("viescore scores images; pass images (paths, data: URIs or base64)")
    if prompt_id is None:
        prompt_id = DEFAULT_PROMPTS[(method, kind)]
    if "@" not in prompt_id:
        prompt_id = f"{prompt_id}@{prompt_version or 'v1'}"
    elif prompt_version is not None and not prompt_id.endswith(f"@{prompt_version}"):
        raise InputError("give the version either in prompt_id (…@v2) or in prompt_version, not both differently")
    from .images import load_image_async

    source = await load_image_async(input_image, policy) if input_image is not None else None
    validate_input(prompt_id, {"instruction": instruction, "input_image": input_image, "edited_images": list(candidates)})
    if method == "pairwise":
        return await pairwise(client, kind=kind, instruction=instruction, candidates=items, source=source,
                              prompt_id=prompt_id, swap=swap, retries=retries)
    return await viescore(client, kind=kind, instruction=instruction, candidates=items, source=source,
                          prompt_id=prompt_id, retries=retries)
