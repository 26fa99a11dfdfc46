"""How the text judges ask: one rendered prompt asset, one request, the one reading path."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread
from pydantic import BaseModel

import prompts
from judges.models.protocol import Message, ModelClient, ModelRequest
from judges.reading.parsing import Check, Conventions, Judged, JudgeFailure, json_schema, run_judge

T = TypeVar("T", bound=BaseModel)


async def ask(client: ModelClient, prompt_id: str, output: type[T], *, conventions: Conventions[T] | None = None,
              check: Check[T] | None = None, parse: Callable[[str], T] | None = None, max_tokens: int = 1024,
              **variables: Any) -> Judged[T]:
    """Render `prompt_id` with `variables` (a missing one fails before any call) and read the reply."""
    # Off the event loop: a prompt of thousands of steps, claims or contexts takes a while to render.
    text = await anyio.to_thread.run_sync(functools.partial(prompts.render, prompt_id, **variables))
    # A JSON reply is asked for as structured output where the backend can (the prompt also spells it out).
    schema = json_schema(output) if parse is None and conventions is None else None
    request = ModelRequest(messages=[Message.user(text)], temperature=0.0, max_tokens=max_tokens,
                           json_schema=schema, schema_name=output.__name__)
    return await run_judge(client, request, output, conventions=conventions, check=check, parse=parse)


def failure_of(judged: Judged[Any]) -> JudgeFailure:
    assert judged.failure is not None
    return judged.failure


def verdict_word(value: Any, aliases: dict[str, str]) -> Any:
    """A verdict as judges spell it ("Partially correct", "NOT-FOUND") as our word: lower case, words joined
    by "_", then its alias if it has one. Anything else is left for the model's validation to refuse."""
    if not isinstance(value, str):
        return value
    word = "_".join(value.strip().lower().replace("-", " ").split())
    return aliases.get(word, word)
