"""The host's own model through MCP sampling, as a ModelClient (the one judges/ adapter that knows MCP)."""

from __future__ import annotations

import time
import warnings
from typing import Any

from judges.errors import BackendError
from judges.models.protocol import ImagePart, ModelReply, ModelRequest, StopReason, TextPart
from judges.models.structured import system_with_schema

_STOP: dict[str, StopReason] = {"endTurn": "end", "stopSequence": "end", "maxTokens": "max_tokens"}


def sampling_offered(ctx: Any) -> bool:
    """True when the connected client declared sampling on a protocol version that still has it.

    Sampling mid-call (`sampling/createMessage`) exists up to protocol 2025-11-25; 2026-07-28
    deprecates it, so there `auto` falls through to the API keys.
    """
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    try:
        caps = ctx.client_capabilities
        version = ctx.protocol_version
    except Exception:
        return False
    return bool(caps is not None and caps.sampling is not None and version not in MODERN_PROTOCOL_VERSIONS)


class SamplingClient:
    name = "sampling"

    def __init__(self, ctx: Any):
        self._ctx = ctx

    async def complete(self, request: ModelRequest) -> ModelReply:
        from mcp.types import ImageContent, SamplingMessage, TextContent

        messages = []
        for m in request.messages:
            blocks: list[Any] = []
            for p in m.content:
                if isinstance(p, TextPart):
                    blocks.append(TextContent(type="text", text=p.text))
                elif isinstance(p, ImagePart):
                    blocks.append(ImageContent(type="image", data=p.data_base64, mime_type=p.media_type))
            messages.append(SamplingMessage(role=m.role, content=blocks[0] if len(blocks) == 1 else blocks))
        started = time.monotonic()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated in 2026-07-28; we only call it on older versions
                result = await self._ctx.session.create_message(
                    messages=messages,
                    max_tokens=request.max_tokens,
                    system_prompt=system_with_schema(request),
                    temperature=request.temperature,
                )
        except Exception as exc:
            raise BackendError("backend_error", f"the host's sampling failed: {exc}") from exc
        content = result.content
        text = getattr(content, "text", "") if not isinstance(content, list) else "".join(
            getattr(c, "text", "") for c in content
        )
        return ModelReply(
            text=text,
            stop_reason=_STOP.get(result.stop_reason or "endTurn", "other"),
            latency_ms=(time.monotonic() - started) * 1000.0,
            model=result.model or "sampling",
        )
