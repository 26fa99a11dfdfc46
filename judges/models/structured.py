"""How a request's JSON schema travels to a backend, and the fallback order when one is refused."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from judges.errors import BackendError
from judges.models.protocol import ModelRequest

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


# What a server says when it cannot do a response_format / schema (OpenAI, vLLM, llama.cpp, Ollama).
FORMAT_REFUSED = re.compile(r"response.?format|json.?schema|json.?object|structured.?output|\bschema\b|"
                            r"output.?config|output.?format|guided.?(?:json|decoding)|grammar", re.I)


def says_format_unsupported(err: BackendError) -> bool:
    """A 400/422 (or a compatible server's 500) whose message is about the response format or schema."""
    return bool(FORMAT_REFUSED.search(str(err)))
