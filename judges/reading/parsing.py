"""The one path every judge reply takes: structured output, tolerant extraction, validation,
one repair retry, and otherwise a typed failure that keeps the raw text. Never a made-up score."""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

import anyio.to_thread
from pydantic import AliasChoices, AliasGenerator, BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel, to_pascal

from judges.errors import BackendError, BudgetError, FailureKind, JudgeError, JudgeFailure
from judges.models.protocol import (
    LONE_SURROGATE,
    Message,
    ModelClient,
    ModelReply,
    ModelRequest,
    TokenLogprob,
    Usage,
)


def _aliases(name: str) -> AliasChoices:
    # top_issue also arrives as TOP_ISSUE, topIssue or TopIssue.
    return AliasChoices(name, to_camel(name), name.upper(), to_pascal(name))


class JudgeModel(BaseModel):
    """Base for judge output models: accepts snake_case, camelCase, PascalCase and UPPER_CASE keys."""

    model_config = ConfigDict(
        alias_generator=AliasGenerator(validation_alias=_aliases), populate_by_name=True, extra="ignore"
    )


T = TypeVar("T", bound=BaseModel)


@dataclass
class Judged(Generic[T]):
    """A judge's outcome: exactly one of `value` and `failure` is set."""

    value: T | None = None
    failure: JudgeFailure | None = None
    raw_text: str = ""
    usage: Usage = field(default_factory=Usage)
    latency_ms: float = 0.0
    attempts: int = 0
    model: str = ""
    read_as: str | None = None
    raw_texts: list[str] = field(default_factory=list)
    logprobs: list[TokenLogprob] | None = None  # the read reply's, when the request asked for them

    @property
    def ok(self) -> bool:
        return self.value is not None


class OutputError(JudgeError, ValueError):
    """A reply could not be turned into the expected output; the message is shown to the model on repair."""

    default_kind: ClassVar[FailureKind] = "parse_error"


_FENCE = re.compile(r"```[ \t]*(?:json|JSON|jsonc)?[ \t]*\n(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
# How a refusal opens (OpenAI, Anthropic and open models alike); the verdict conventions use it too.
REFUSAL = re.compile(
    r"^\s*(?:I['’]m sorry|I am sorry|Sorry|I apologi[sz]e|I can(?:not|['’]t)|I am (?:not able|unable)|"
    r"I['’]m (?:not able|unable)|As an AI)",
    re.I,
)
MAX_REPLY_CHARS = 400_000


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def json_candidates(text: str) -> list[Any]:
    """Every top-level JSON object in `text`, in order: whole text, fenced blocks, or embedded in prose. A lone
    surrogate a reply's escape decodes to (`"\\ud800"` without its pair) reads as U+FFFD: the verdict is kept,
    and no tool result holds a character no encoder can write."""
    found = _json_candidates(text)
    if not _SURROGATE_ESCAPE.search(text):
        return found
    try:
        return [_encodable(v) for v in found]
    except RecursionError:  # nested as deep as the parser goes, and holding one: no verdict
        return []


def _encodable(value: Any) -> Any:
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_encodable(v) for v in value]
    return value


def _json_candidates(text: str) -> list[Any]:
    text = text[:MAX_REPLY_CHARS]
    stripped = text.strip()
    for attempt in (stripped, _TRAILING_COMMA.sub(r"\1", stripped)):
        try:
            value = json.loads(attempt, strict=False)
        except (ValueError, RecursionError):  # a reply nested deeper than the parser goes is no verdict
            continue
        return [value]
    found: list[Any] = []
    for block in _FENCE.findall(text):
        found.extend(_json_candidates(block) if block.strip() != stripped else [])
    if found:
        return found
    decoder = json.JSONDecoder(strict=False)  # raw newlines inside strings, as small models write them
    # Every '{' is a possible start, and each try reads on from it: a reply of thousands of unclosed braces
    # (which a caller's own sampling model can send) made this quadratic. The characters the tries read
    # are counted; past a few times the reply's length, what was found so far is the answer.
    budget = 4 * len(text) + 100_000
    pos = text.find("{")
    while pos != -1 and budget > 0:
        try:
            value, end = decoder.raw_decode(text, pos)
            budget -= end - pos
        except (ValueError, RecursionError) as exc:
            budget -= (exc.pos - pos) if isinstance(exc, json.JSONDecodeError) else len(text) - pos
            close = _matching_brace(text, pos)
            budget -= ((close or len(text)) - pos)
            value, end = (_near_json(text[pos : close + 1]) if close else None), ((close + 1) if close else pos + 1)
        if isinstance(value, dict):
            found.append(value)
            pos = text.find("{", end)
        else:
            pos = text.find("{", pos + 1)
    return found


def _near_json(span: str) -> Any:
    """A span that is almost JSON: a trailing comma (the commonest near-miss), or a Python dict literal
    with single quotes, as some vision models write ({'score': [8, 9]}); None otherwise."""
    try:
        return json.loads(_TRAILING_COMMA.sub(r"\1", span), strict=False)
    except (ValueError, RecursionError):
        pass
    if len(span) > 100_000:
        return None
    try:
        value = ast.literal_eval(span)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    return value if isinstance(value, dict) else None


_BRACE_SIGNIFICANT = re.compile(r'[{}"\\]')


def _matching_brace(text: str, start: int) -> int | None:
    """The index of the '}' closing the '{' at `start` (braces inside strings not counted), within 200,000
    characters; None when there is none."""
    depth, in_str, skip_to = 0, False, -1
    for m in _BRACE_SIGNIFICANT.finditer(text, start, min(len(text), start + 200_000)):
        i, ch = m.start(), m.group()
        if i < skip_to:
            continue  # the character after a backslash
        if in_str:
            if ch == "\\":
                skip_to = i + 2
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def parse_json_output(text: str, model: type[T]) -> T:
    """The LAST JSON object in `text` that validates as `model` (so text the judge quotes cannot win)."""
    candidates = json_candidates(text)
    if not candidates:
        raise OutputError("the reply contains no JSON object")
    last_error: ValidationError | None = None
    for candidate in reversed(candidates):
        try:
            return model.model_validate(candidate)
        except ValidationError as exc:
            last_error = exc
    assert last_error is not None
    raise OutputError(_describe(last_error))


def _describe(error: ValidationError) -> str:
    parts = []
    for e in error.errors()[:8]:
        where = ".".join(str(p) for p in e["loc"]) or "(top level)"
        parts.append(f"{where}: {e['msg']}")
    return "the JSON does not match the expected shape: " + "; ".join(parts)


def looks_like_refusal(text: str) -> bool:
    return bool(REFUSAL.match(text)) and not json_candidates(text)


@functools.cache
def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema, built once (pydantic takes ~5 ms per build; judges ask on every call)."""
    return model.model_json_schema()


REPAIR_INSTRUCTION = (
    "Your previous reply could not be used: {error}. Reply again with only the corrected output, "
    "in exactly the format asked for, and nothing else."
)

Conventions = Callable[[str], tuple[T, str]]
Check = Callable[[T], None]
# Failures a second ask cannot fix honestly: the reply held a verdict, but two, or one off the scale.
TERMINAL: frozenset[str] = frozenset({"ambiguous", "out_of_range", "refusal"})


def _kind(exc: Exception) -> FailureKind:
    kind: FailureKind = getattr(exc, "kind", "parse_error")
    return kind


def read_reply(text: str, output: type[T], *, parse: Callable[[str], T] | None = None,
               conventions: Conventions[T] | None = None, check: Check[T] | None = None) -> tuple[T, str]:
    """(value, read_as) from one reply: tolerant JSON first, then the published conventions.

    Raises OutputError (with `kind` when it is not a plain parse error)."""
    parser: Callable[[str], T] = parse or (lambda t: parse_json_output(t, output))
    try:
        value = parser(text)
        read_as = "json"
    except ValueError as exc:  # OutputError and pydantic's ValidationError are ValueErrors
        if _kind(exc) != "parse_error":
            raise  # the JSON held a verdict that cannot count (refused, ambiguous, off the scale)
        json_error = _describe(exc) if isinstance(exc, ValidationError) else str(exc)
        if conventions is None:
            raise OutputError(json_error) from None
        try:
            value, name = conventions(text)
        except ValueError as conv:
            if _kind(conv) != "parse_error":
                raise
            raise OutputError(f"{json_error}; {conv}") from None
        read_as = f"convention:{name}"
    if check is not None:
        check(value)
    return value, read_as


async def run_judge(
    client: ModelClient,
    request: ModelRequest,
    output: type[T],
    *,
    parse: Callable[[str], T] | None = None,
    conventions: Conventions[T] | None = None,
    check: Check[T] | None = None,
    repair: bool = True,
    structured: bool = True,
) -> Judged[T]:
    """The one reading path: ask `client`; read the reply as JSON (`output`, or `parse`), else by the
    published `conventions`; `check` the value (e.g. its declared scale); one repair round for a reply
    with no verdict; otherwise a typed failure keeping the raw text. `read_as` says how it was read."""
    if structured and parse is None and request.json_schema is None:
        request = request.model_copy(update={"json_schema": json_schema(output)})
    outcome: Judged[T] = Judged(model=client.name)

    def fail(kind: FailureKind, message: str) -> Judged[T]:
        outcome.failure = JudgeFailure(kind, message, raw=outcome.raw_text)
        return outcome

    exchanges: list[tuple[ModelRequest, ModelReply]] = []
    for round_ in range(2 if repair else 1):
        outcome.attempts += 1
        try:
            reply: ModelReply = await client.complete(request)
        except BackendError as err:
            outcome.usage = outcome.usage + Usage(requests=getattr(err, "requests", 1))
            return fail(err.kind, str(err))
        except BudgetError as err:  # not sent: the day's budget cannot cover it (judges/store/metering.py)
            outcome.usage = outcome.usage + Usage(refused_requests=1, budget_exceeded=True)
            return fail(err.kind, str(err))
        exchanges.append((request, reply))
        outcome.raw_text = reply.text
        outcome.raw_texts.append(reply.text)
        outcome.usage = outcome.usage + reply.usage + Usage(requests=reply.requests)
        outcome.latency_ms += reply.latency_ms
        outcome.model = reply.model or outcome.model
        outcome.logprobs = reply.logprobs
        if reply.stop_reason == "refusal":
            return fail("refusal", "the model refused")
        if reply.stop_reason == "max_tokens":
            return fail(
                "truncated", f"the reply was cut at max_tokens ({request.max_tokens}); raise the limit or shorten the input"
            )
        try:  # off the event loop: a long reply (which a caller's own sampling model can send) takes a while to read
            outcome.value, read_as = await anyio.to_thread.run_sync(functools.partial(
                read_reply, reply.text, output, parse=parse, conventions=conventions, check=check))
        except ValueError as exc:
            error = _describe(exc) if isinstance(exc, ValidationError) else str(exc)
            kind = _kind(exc)
            if kind in TERMINAL:
                return fail(kind, error)
            if looks_like_refusal(reply.text):
                return fail("refusal", error)
            if round_ == 0 and repair:
                request = request.model_copy(
                    update={
                        "messages": [
                            *request.messages,
                            Message.assistant(reply.text),
                            Message.user(REPAIR_INSTRUCTION.format(error=error)),
                        ]
                    }
                )
                continue
            return fail("parse_error", error)
        outcome.read_as = "repair" if round_ else read_as
        accept = getattr(client, "accept", None)
        if accept is not None:  # a result cache keeps only replies that were read (never a failure); an error
            await accept(exchanges)  # of the cache's own is not taken for a reading that failed
        return outcome
    return outcome
