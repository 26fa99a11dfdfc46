"""What a model request costs: USD per million input and output tokens, per model, and the cost of a Usage; and
what a request may cost at most before it is sent (its estimate, reserved against a daily budget)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from pydantic import BaseModel, Field

from judges.models.protocol import ImagePart, ModelRequest, Usage


class Price(BaseModel):
    input: float = Field(ge=0, description="USD per million input tokens.")
    output: float = Field(ge=0, description="USD per million output tokens.")


# List prices (USD per million tokens) of the common models, as published by Anthropic and OpenAI in 2025.
# A model not named here (nor in SNAPSHOTS, nor in JUDGE_MCP_PRICES) has an unknown cost: null, never a guess.
DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus-4-1": Price(input=15.0, output=75.0),
    "claude-opus-4": Price(input=15.0, output=75.0),
    "claude-sonnet-4-5": Price(input=3.0, output=15.0),
    "claude-sonnet-4": Price(input=3.0, output=15.0),
    "claude-3-7-sonnet": Price(input=3.0, output=15.0),
    "claude-haiku-4-5": Price(input=1.0, output=5.0),
    "claude-3-5-haiku": Price(input=0.8, output=4.0),
    "gpt-5": Price(input=1.25, output=10.0),
    "gpt-5-mini": Price(input=0.25, output=2.0),
    "gpt-5-nano": Price(input=0.05, output=0.4),
    "gpt-4.1": Price(input=2.0, output=8.0),
    "gpt-4.1-mini": Price(input=0.4, output=1.6),
    "gpt-4.1-nano": Price(input=0.1, output=0.4),
    "gpt-4o": Price(input=2.5, output=10.0),
    "gpt-4o-mini": Price(input=0.15, output=0.6),
    "o3": Price(input=2.0, output=8.0),
    "o4-mini": Price(input=1.1, output=4.4),
}

# The dated snapshots (and `-latest` aliases) the vendors publish for the models above, each priced as the model it
# is a snapshot of. Only these: a name is never priced by a prefix it starts with (`gpt-x-2` is not `gpt-x`, and
# `gpt-4o-2024-05-13` had another price than `gpt-4o`, so it is not listed).
SNAPSHOTS: dict[str, str] = {
    "claude-opus-4-1-20250805": "claude-opus-4-1",
    "claude-opus-4-20250514": "claude-opus-4",
    "claude-sonnet-4-5-20250929": "claude-sonnet-4-5",
    "claude-sonnet-4-20250514": "claude-sonnet-4",
    "claude-3-7-sonnet-20250219": "claude-3-7-sonnet",
    "claude-3-7-sonnet-latest": "claude-3-7-sonnet",
    "claude-haiku-4-5-20251001": "claude-haiku-4-5",
    "claude-3-5-haiku-20241022": "claude-3-5-haiku",
    "claude-3-5-haiku-latest": "claude-3-5-haiku",
    "gpt-5-2025-08-07": "gpt-5",
    "gpt-5-mini-2025-08-07": "gpt-5-mini",
    "gpt-5-nano-2025-08-07": "gpt-5-nano",
    "gpt-4.1-2025-04-14": "gpt-4.1",
    "gpt-4.1-mini-2025-04-14": "gpt-4.1-mini",
    "gpt-4.1-nano-2025-04-14": "gpt-4.1-nano",
    "gpt-4o-2024-08-06": "gpt-4o",
    "gpt-4o-2024-11-20": "gpt-4o",
    "gpt-4o-mini-2024-07-18": "gpt-4o-mini",
    "o3-2025-04-16": "o3",
    "o4-mini-2025-04-16": "o4-mini",
}


def price_of(prices: Mapping[str, Price], model: str) -> Price | None:
    """A model's price, by exact name only: its full string (`openai:gpt-4o`), then its name (`gpt-4o`), then, for a
    listed dated snapshot (SNAPSHOTS), the model it is a snapshot of; None if unknown."""
    name = model.partition(":")[2] or model
    for key in (model, name, SNAPSHOTS.get(name)):
        if key is not None and key in prices:
            return prices[key]
    return None


def cost_of(prices: Mapping[str, Price], model: str, usage: Usage) -> float | None:
    """USD for `usage` on `model` at `prices`; None when the model's price is unknown."""
    price = price_of(prices, model)
    if price is None:
        return None
    return round((usage.input_tokens * price.input + usage.output_tokens * price.output) / 1_000_000, 8)


# An image costs at most ~1,600 input tokens on most vendors' counts (Anthropic: width × height / 750 after resizing
# to ≤1.15 MP; OpenAI's tile models: 85 + 170 a 512-px tile, ≤1,445 at high detail, 8 tiles).
IMAGE_TOKENS = 1_600
# OpenAI's models that count an image otherwise, at their most (an image of the largest side we send, 2048 px):
# patch models bill up to 1,536 32-px patches times the model's multiplier (1.62, 2.46, 1.72); gpt-4o-mini bills
# 2,833 + 5,667 a tile (8 tiles at most). Counted at 1,600 they were billed up to 30 times their estimate.
MODEL_IMAGE_TOKENS: dict[str, int] = {
    "gpt-4.1-mini": 2_489, "gpt-5-mini": 2_489, "gpt-4.1-nano": 3_779, "gpt-5-nano": 3_779, "o4-mini": 2_642,
    "gpt-4o-mini": 2_833 + 8 * 5_667,
}
MESSAGE_TOKENS = 8  # each message's own framing (role, separators)


def _text_tokens(text: str) -> int:
    """At least as many tokens as `text` will likely count: ASCII at one per 3 bytes (English runs ~4 characters a
    token, code ~3), every byte of any other character one token. Byte-level BPE (every vendor's tokenizer) splits a
    character its vocabulary lacks (emoji, rare CJK, hieroglyphs) into its bytes: 4-byte characters counted at 3
    bytes a token were a third of what was billed, and one request passed the budget by twice its estimate."""
    utf8 = len(text.encode())
    ascii_chars = len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_chars / 3) + (utf8 - ascii_chars)


def image_tokens(model: str | None) -> int:
    """The most input tokens one image may count on `model` (its name, a listed snapshot, or a full model string)."""
    name = (model or "").partition(":")[2] or (model or "")
    for key in (name, SNAPSHOTS.get(name)):
        if key is not None and key in MODEL_IMAGE_TOKENS:
            return MODEL_IMAGE_TOKENS[key]
    return IMAGE_TOKENS


def estimated_input_tokens(request: ModelRequest, model: str | None = None) -> int:
    """At least as many input tokens as the request will likely count on `model`: its text (the structured-output
    schema included) by _text_tokens, image_tokens(model) an image and MESSAGE_TOKENS a message."""
    texts = [request.system or ""]
    images = 0
    for message in request.messages:
        for part in message.content:
            if isinstance(part, ImagePart):
                images += 1
            else:
                texts.append(part.text)
    if request.json_schema is not None:
        import json

        texts.append(json.dumps(request.json_schema))
    return (sum(_text_tokens(t) for t in texts) + images * image_tokens(model)
            + (len(request.messages) + 1) * MESSAGE_TOKENS)


def estimated_cost(price: Price, request: ModelRequest, model: str | None = None) -> float:
    """The most `request` is expected to cost at `price` on `model`: its estimated input tokens and all of
    max_tokens out."""
    usage = Usage(input_tokens=estimated_input_tokens(request, model), output_tokens=request.max_tokens)
    return round((usage.input_tokens * price.input + usage.output_tokens * price.output) / 1_000_000, 8)
