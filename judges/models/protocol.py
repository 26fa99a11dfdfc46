"""The model-client contract: one Protocol, one async method, and the shapes it speaks."""

from __future__ import annotations

import base64
import re
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field, computed_field, field_validator

LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class TextPart(BaseModel):
    type: Literal["text"] = "text"
    text: str


class ImagePart(BaseModel):
    """An image as bytes in base64, with its media type (image/png, image/jpeg, image/webp, image/gif)."""

    type: Literal["image"] = "image"
    media_type: str
    data_base64: str

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str) -> ImagePart:
        return cls(media_type=media_type, data_base64=base64.b64encode(data).decode("ascii"))

    def data_uri(self) -> str:
        return f"data:{self.media_type};base64,{self.data_base64}"


class Message(BaseModel):
    role: Literal["user", "assistant"]
    content: list[TextPart | ImagePart]

    @classmethod
    def user(cls, *parts: str | TextPart | ImagePart) -> Message:
        return cls(role="user", content=[TextPart(text=p) if isinstance(p, str) else p for p in parts])

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls(role="assistant", content=[TextPart(text=text)])


class ModelRequest(BaseModel):
    system: str | None = None
    messages: list[Message]
    temperature: float | None = None
    max_tokens: int = 2048
    json_schema: dict[str, Any] | None = Field(
        default=None, description="Ask for structured output matching this JSON Schema, where the backend can."
    )
    schema_name: str = "judge_output"
    logprobs: bool = Field(
        default=False, description="Ask for each output token's top log-probabilities (OpenAI-compatible "
        "backends; others ignore it), for a probability-weighted expected score.")
    sample: int = Field(
        default=0, description="Which of n repeated samples of the same request this is (0-based): part of a "
        "result cache's key, so n samples are n answers; never sent to the backend."
    )


StopReason = Literal["end", "max_tokens", "refusal", "other"]


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    requests: int = Field(default=0, description="Model requests sent, retries and repair rounds included.")
    cache_hits: int = Field(default=0, description="Replies answered from the result cache (no model request).")
    cost_usd: float | None = Field(
        default=0.0, description="What the model requests cost in USD at the configured prices (JUDGE_MCP_PRICES); "
        "null when a model's price is unknown. Cached replies cost nothing.")
    refused_requests: int = Field(default=0, description=(
        "Model requests not sent: the organization's daily budget could not cover their estimated cost."))
    budget_exceeded: bool = Field(default=False, description=(
        "The daily budget ran out during this work: what is missing from the result (failures of kind "
        "budget_exceeded) was not judged, and nothing was guessed in its place."))

    @computed_field(description="Every reply came from the result cache: no model request was made.")  # type: ignore[prop-decorator]
    @property
    def cached(self) -> bool:
        return self.cache_hits > 0 and self.requests == 0

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            requests=self.requests + other.requests,
            cache_hits=self.cache_hits + other.cache_hits,
            cost_usd=None if cost is None else round(cost, 8),
            refused_requests=self.refused_requests + other.refused_requests,
            budget_exceeded=self.budget_exceeded or other.budget_exceeded,
        )


class TokenLogprob(BaseModel):
    """One output token with its log-probability and the top alternatives at its position."""

    token: str
    logprob: float
    top: dict[str, float] = {}


class ModelReply(BaseModel):
    text: str
    parsed: Any | None = None
    stop_reason: StopReason = "end"
    usage: Usage = Field(default_factory=Usage)
    latency_ms: float = 0.0
    model: str = ""
    requests: int = Field(default=1, description="HTTP requests this reply took (format fallbacks, retries).")
    cached: bool = Field(default=False, description="Answered from the result cache (then requests is 0).")
    logprobs: list[TokenLogprob] | None = Field(default=None, description="Per output token, when asked and given.")

    @field_validator("text")
    @classmethod
    def _encodable(cls, text: str) -> str:
        """A lone surrogate (an API's JSON body may escape one, `\\ud800`, in the reply text) as U+FFFD: no store,
        tool result or transport can encode it, and one in a reply kept as `raw` ended the stdio server."""
        return LONE_SURROGATE.sub("\ufffd", text) if LONE_SURROGATE.search(text) else text


@runtime_checkable
class ModelClient(Protocol):
    """Anything that turns a ModelRequest into a ModelReply (or raises BackendError).

    A client may also have `async def accept(exchanges)`: the reading path awaits it with the (request, reply)
    pairs of a reading that succeeded, so a result cache keeps only replies that were read
    (judges/store/metering.py)."""

    name: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...
