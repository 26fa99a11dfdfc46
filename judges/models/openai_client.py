"""OpenAI chat completions, and any OpenAI-compatible server by base URL (vLLM, Ollama, llama.cpp)."""

from __future__ import annotations

import time
from typing import Any

from judges.errors import BackendError
from judges.models.guard import backend_error_from_sdk
from judges.models.protocol import ImagePart, ModelReply, ModelRequest, StopReason, TextPart, Usage
from judges.models.structured import StructuredMode, next_mode, says_format_unsupported, system_with_schema

_FINISH: dict[str, StopReason] = {"stop": "end", "length": "max_tokens", "content_filter": "refusal"}
class OpenAIChatClient:
    """One model behind the chat completions API. The SDK is imported on first use."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None,
        compatible: bool = False,
        timeout_s: float = 600.0,
    ):
        self.model = model
        self.compatible = compatible
        self.name = f"{'openai-compatible' if compatible else 'openai'}:{model}"
        self._api_key = api_key
        self._base_url = base_url
        self._timeout_s = timeout_s
        self._sdk: Any = None
        self.mode: StructuredMode = "json_schema"

    async def aclose(self) -> None:
        """Close the SDK's HTTP pool in the event loop that opened it."""
        if self._sdk is not None:
            sdk, self._sdk = self._sdk, None
            await sdk.close()

    def _client(self) -> Any:
        if self._sdk is None:
            import openai

            self._sdk = openai.AsyncOpenAI(
                # Local OpenAI-compatible servers usually need no key; the SDK insists on one.
                api_key=self._api_key or "not-needed",
                base_url=self._base_url,
                max_retries=0,
                timeout=self._timeout_s,
            )
        return self._sdk

    @staticmethod
    def _completion_type() -> Any:
        from openai.types.chat import ChatCompletion

        return ChatCompletion

    def _payload(self, request: ModelRequest, mode: StructuredMode) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        system = request.system if mode != "prompt" else system_with_schema(request)
        if system:
            messages.append({"role": "system", "content": system})
        for m in request.messages:
            parts: list[dict[str, Any]] = []
            for p in m.content:
                if isinstance(p, TextPart):
                    parts.append({"type": "text", "text": p.text})
                elif isinstance(p, ImagePart):
                    parts.append({"type": "image_url", "image_url": {"url": p.data_uri()}})
            if m.role == "assistant":
                messages.append({"role": "assistant", "content": "".join(p.get("text", "") for p in parts)})
            else:
                messages.append({"role": "user", "content": parts})
        payload: dict[str, Any] = {"model": self.model, "messages": messages}
        # OpenAI's newer models take only max_completion_tokens; compatible servers know max_tokens.
        payload["max_tokens" if self.compatible else "max_completion_tokens"] = request.max_tokens
        if request.temperature is not None:
            payload["temperature"] = request.temperature
        if request.json_schema is not None and mode == "json_schema":
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.json_schema, "strict": False},
            }
        elif request.json_schema is not None and mode == "json_object":
            payload["response_format"] = {"type": "json_object", "schema": request.json_schema}
        return payload

    @property
    def base_url(self) -> str:
        return str(self._sdk.base_url) if self._sdk is not None else (self._base_url or "https://api.openai.com/v1")

    def _refused_format(self, err: BackendError) -> bool:
        # A server that cannot do this response_format answers 400/422, or 500 (llama.cpp), saying so.
        codes = (400, 422, 500) if self.compatible else (400, 422)
        return err.status in codes and says_format_unsupported(err)

    async def complete(self, request: ModelRequest) -> ModelReply:
        client = self._client()
        started = time.monotonic()
        sent = 0
        while True:
            sent += 1
            try:
                # The payload is built to the API's shape here; `post` sends it as is, skipping the
                # SDK's recursive param transform (~4 ms of CPU a call, most of a judge's overhead).
                resp = await client.post("/chat/completions", body=self._payload(request, self.mode),
                                         cast_to=self._completion_type())
                break
            except Exception as exc:
                err = exc if isinstance(exc, BackendError) else backend_error_from_sdk(exc, self.base_url)
                following = next_mode(self.mode)
                if request.json_schema is not None and following and self._refused_format(err):
                    self.mode = following  # remembered for this model: later calls start here
                    continue
                if err.status in (400, 422):
                    err = BackendError("backend_error", f"{self.base_url} refused the request ({err.status}): {err}",
                                       status=err.status)
                err.requests = sent
                raise err from exc
        if not getattr(resp, "choices", None):
            err = BackendError("backend_error", f"{self.base_url} answered with no choices (an empty reply)")
            err.requests = sent
            raise err
        choice = resp.choices[0]
        message = choice.message
        refusal = getattr(message, "refusal", None)
        usage = getattr(resp, "usage", None)
        details = getattr(usage, "prompt_tokens_details", None)
        return ModelReply(
            text=refusal or message.content or "",
            stop_reason="refusal" if refusal else _FINISH.get(choice.finish_reason or "", "other"),
            usage=Usage(
                input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                output_tokens=getattr(usage, "completion_tokens", 0) or 0,
                cached_tokens=getattr(details, "cached_tokens", 0) or 0,
            ),
            latency_ms=(time.monotonic() - started) * 1000.0,
            model=getattr(resp, "model", None) or self.model,
            requests=sent,
        )
