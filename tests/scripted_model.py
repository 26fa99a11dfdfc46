"""An in-process scripted ModelClient for unit tests of judging logic (no HTTP, no SDK).

Each reply is a function of the request, like pydantic-ai's FunctionModel or inspect_ai's mockllm.
The loopback fake model server (tests/fake_model_server.py) stays for the SDK paths and the
as-used suite; this is for the logic above the client: reading, repair, failures, aggregation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from judges.call import JudgeCall
from judges.errors import ConfigError
from judges.models.protocol import ModelReply, ModelRequest, Usage

Reply = str | ModelReply | BaseException


class ScriptedModel:
    """A ModelClient whose reply to each request is `respond(request)`: text, a whole ModelReply, or an
    exception to raise (e.g. BackendError). Every request is recorded in `requests`."""

    def __init__(self, respond: Callable[[ModelRequest], Reply], name: str = "scripted:test") -> None:
        self.respond = respond
        self.name = name
        self.requests: list[ModelRequest] = []

    @classmethod
    def queue(cls, replies: Iterable[Reply], name: str = "scripted:test") -> ScriptedModel:
        """Replies in order, one per request; a request past the end fails the test loudly."""
        pending = list(replies)

        def next_reply(request: ModelRequest) -> Reply:
            if not pending:
                raise AssertionError(f"ScriptedModel got an unscripted request: {request.messages[-1]}")
            return pending.pop(0)

        return cls(next_reply, name)

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        reply = self.respond(request)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, str):
            return ModelReply(text=reply, model=self.name, usage=Usage(input_tokens=10, output_tokens=5))
        return reply

    def last_text(self) -> str:
        """The text of the last user message of the last request (what the judge was last asked)."""
        (part, *_) = self.requests[-1].messages[-1].content
        return str(getattr(part, "text", ""))


def call_of(client: Any = None, *, samples: int = 1, jury: Sequence[tuple[str, Any]] | None = None) -> JudgeCall:
    """The JudgeCall a judge is handed, for a judge called as a plain function: every model is `client`, or the
    call names `jury` (name, client) pairs; with neither, a missing backend (ConfigError) as a server without
    one would give."""
    named = dict(jury or [])

    async def resolve(model: str | None, agent_model: str | None) -> Any:
        if model in named:
            return named[model]
        if client is None:
            raise ConfigError("no model backend (test)")
        return client

    return JudgeCall(resolve, models=tuple(named), samples=samples)
