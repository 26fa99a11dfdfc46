"""OpenAI chat completions, and any OpenAI-compatible server by base URL (vLLM, Ollama, llama.cpp)."""

from __future__ import annotations

from typing import Any

from judges.errors import BackendError
from judges.models.protocol import ImagePart, ModelReply, ModelRequest, StopReason, TokenLogprob, Usage
from judges.models.sdk_client import SdkClient
from judges.models.structured import StructuredMode, next_mode, says_format_unsupported, system_with_schema

_FINISH: dict[str, StopReason] = {"stop": "end", "length": "max_tokens", "content_filter": "refusal"}
class OpenAIChatClient(SdkClient):
    """One model behind the chat completions API. The SDK is imported on first use."""

    endpoint = "/chat/completions"
    default_base_url = "https://api.openai.com/v1"
    refused_statuses = (400, 422)
    sample_reply = {"id": "warm", "object": "chat.completion", "created": 0, "model": "warm", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "OK"}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2,
                  "prompt_tokens_details": {"cached_tokens": 0}}}

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None,
        compatible: bool = False,
        timeout_s: float = 600.0,
    ):
        super().__init__(model, name=f"{'openai-compatible' if compatible else 'openai'}:{model}", api_key=api_key,
                         base_url=base_url, timeout_s=timeout_s)
        self.compatible = compatible

    def _make_sdk(self) -> Any:
        import openai

        sdk = openai.AsyncOpenAI(
            # Local OpenAI-compatible servers usually need no key; the SDK insists on one.
            api_key=self._api_key or "not-needed",
            base_url=self._base_url,
            max_retries=0,
            timeout=self._timeout_s,
        )
        if self.compatible:
            # The SDK adds OPENAI_ORG_ID / OPENAI_PROJECT_ID from the environment: OpenAI's, not this server's.
            sdk.organization = sdk.project = None
        return sdk

    def _reply_type(self) -> Any:
        from openai.types.chat import ChatCompletion

        return ChatCompletion

    def _image_block(self, part: ImagePart) -> dict[str, Any]:
        return {"type": "image_url", "image_url": {"url": part.data_uri()}}

    def _payload(self, request: ModelRequest, mode: StructuredMode) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        system = request.system if mode != "prompt" else system_with_schema(request)
        if system:
            messages.append({"role": "system", "content": system})
        for m in request.messages:
            parts = self._blocks(m)
            if m.role == "assistant":
                messages.append({"role": "assistant", "content": "".join(p.get("text", "") for p in parts)})
            else:
                messages.append({"role": "user", "content": parts})
        payload: dict[str, Any] = {"model": self.model, "messages": messages}
        # OpenAI's newer models take only max_completion_tokens; compatible servers know max_tokens.
        payload["max_tokens" if self.compatible else "max_completion_tokens"] = request.max_tokens
        if request.temperature is not None:
            payload["temperature"] = request.temperature
        if request.logprobs:
            payload.update(logprobs=True, top_logprobs=20)
        if request.json_schema is not None and mode == "json_schema":
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.json_schema, "strict": False},
            }
        elif request.json_schema is not None and mode == "json_object":
            payload["response_format"] = {"type": "json_object", "schema": request.json_schema}
        return payload

    def _step_down(self, err: BackendError) -> StructuredMode | None:
        # A server that cannot do this response_format answers 400/422, or 500 (llama.cpp), saying so.
        codes = (400, 422, 500) if self.compatible else (400, 422)
        return next_mode(self.mode) if err.status in codes and says_format_unsupported(err) else None

    def _reply(self, resp: Any, latency_ms: float, sent: int) -> ModelReply:
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
            latency_ms=latency_ms,
            model=getattr(resp, "model", None) or self.model,
            requests=sent,
            logprobs=_logprobs(choice),
        )


def _logprobs(choice: Any) -> list[TokenLogprob] | None:
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    return [TokenLogprob(token=t.token, logprob=t.logprob,
                         top={a.token: a.logprob for a in (getattr(t, "top_logprobs", None) or [])})
            for t in content]
