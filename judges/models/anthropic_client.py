"""Anthropic's messages API. The SDK is imported on first use."""

from __future__ import annotations

import time
from typing import Any

from judges.errors import BackendError
from judges.models.guard import backend_error_from_sdk
from judges.models.protocol import ImagePart, ModelReply, ModelRequest, StopReason, TextPart, Usage
from judges.models.structured import StructuredMode, says_format_unsupported, system_with_schema

_STOP: dict[str, StopReason] = {
    "end_turn": "end",
    "stop_sequence": "end",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}


class AnthropicClient:
    def __init__(self, model: str, *, api_key: str | None, base_url: str | None, timeout_s: float = 600.0):
        self.model = model
        self.name = f"anthropic:{model}"
        self._api_key = api_key
        self._base_url = base_url
        self._timeout_s = timeout_s
        self._sdk: Any = None
        # Structured outputs (output_config.format) first; instructions in the system prompt if refused.
        self.mode: StructuredMode = "json_schema"

    async def aclose(self) -> None:
        """Close the SDK's HTTP pool in the event loop that opened it."""
        if self._sdk is not None:
            sdk, self._sdk = self._sdk, None
            await sdk.close()

    def _client(self) -> Any:
        if self._sdk is None:
            import anthropic

            self._sdk = anthropic.AsyncAnthropic(
                api_key=self._api_key, base_url=self._base_url, max_retries=0, timeout=self._timeout_s
            )
        return self._sdk

    @staticmethod
    def _message_type() -> Any:
        from anthropic.types import Message

        return Message

    def _payload(self, request: ModelRequest) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        for m in request.messages:
            blocks: list[dict[str, Any]] = []
            for p in m.content:
                if isinstance(p, TextPart):
                    blocks.append({"type": "text", "text": p.text})
                elif isinstance(p, ImagePart):
                    blocks.append(
                        {"type": "image", "source": {"type": "base64", "media_type": p.media_type, "data": p.data_base64}}
                    )
            messages.append({"role": m.role, "content": blocks})
        payload: dict[str, Any] = {"model": self.model, "max_tokens": request.max_tokens, "messages": messages}
        system = request.system if self.mode == "json_schema" else system_with_schema(request)
        if system:
            payload["system"] = system
        # No temperature: anthropic 2.x's messages.create has none (current models fix their sampling).
        if request.json_schema is not None and self.mode == "json_schema":
            payload["output_config"] = {"format": {"type": "json_schema", "schema": request.json_schema}}
        return payload

    @property
    def base_url(self) -> str:
        return str(self._sdk.base_url) if self._sdk is not None else (self._base_url or "https://api.anthropic.com")

    async def complete(self, request: ModelRequest) -> ModelReply:
        client = self._client()
        started = time.monotonic()
        sent = 0
        while True:
            sent += 1
            try:
                # Sent as built (see the OpenAI client): no recursive param transform per call.
                resp = await client.post("/v1/messages", body=self._payload(request), cast_to=self._message_type())
                break
            except Exception as exc:
                err = exc if isinstance(exc, BackendError) else backend_error_from_sdk(exc, self.base_url)
                if (request.json_schema is not None and self.mode == "json_schema" and err.status == 400
                        and says_format_unsupported(err)):
                    # The model or schema is not accepted for structured outputs: say it in words instead,
                    # for this call and every later one of this model.
                    self.mode = "prompt"
                    continue
                if err.status == 400:
                    err = BackendError("backend_error", f"{self.base_url} refused the request (400): {err}", status=400)
                err.requests = sent
                raise err from exc
        text = "".join(getattr(b, "text", "") for b in resp.content if getattr(b, "type", "") == "text")
        usage = resp.usage
        return ModelReply(
            text=text,
            stop_reason=_STOP.get(resp.stop_reason or "", "other"),
            usage=Usage(
                input_tokens=usage.input_tokens or 0,
                output_tokens=usage.output_tokens or 0,
                cached_tokens=getattr(usage, "cache_read_input_tokens", 0) or 0,
            ),
            latency_ms=(time.monotonic() - started) * 1000.0,
            model=resp.model or self.model,
            requests=sent,
        )
