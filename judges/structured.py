"""How a request's JSON schema travels to a backend, and the fallback order when one is refused."""

from __future__ import annotations

import json
from typing import Any, Literal

from .model import ModelRequest

# native json_schema -> {"type": "json_object", "schema": ...} (llama.cpp's server) -> instructions only
StructuredMode = Literal["json_schema", "json_object", "prompt"]
FALLBACK_ORDER: tuple[StructuredMode, ...] = ("json_schema", "json_object", "prompt")


def next_mode(mode: StructuredMode, modes: tuple[StructuredMode, ...] = FALLBACK_ORDER) -> StructuredMode | None:
    i = modes.index(mode)
    return modes[i + 1] if i + 1 < len(modes) else None


def schema_instruction(schema: dict[str, Any]) -> str:
    return "Reply with only one JSON object that matches this JSON Schema, and nothing else:\n" + json.dumps(
        schema, separators=(",", ":")
    )


def system_with_schema(request: ModelRequest) -> str | None:
    """The system prompt with the schema spelled out, for backends that cannot enforce it."""
    if request.json_schema is None:
        return request.system
    return "\n\n".join(p for p in (request.system, schema_instruction(request.json_schema)) if p)
