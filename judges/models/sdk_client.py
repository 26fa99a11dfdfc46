"""What the SDK clients share: the SDK built lazily on first use, its HTTP pool closed in the loop that
opened it, and one request loop that steps down to a weaker structured-output mode when a server
refuses one, counts the HTTP requests spent, and turns every failure into a BackendError."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import anyio

from judges.errors import BackendError
from judges.models.guard import backend_error_from_sdk
from judges.models.protocol import ImagePart, Message, ModelReply, ModelRequest, TextPart
from judges.models.structured import StructuredMode
from rag.warmup import HEAVY


class SdkClient:
    """Base of the Anthropic and OpenAI clients; a subclass says how to build the SDK, the payload and
    the reply, and which refusal of a structured-output mode it steps down from."""

    endpoint: ClassVar[str]
    default_base_url: ClassVar[str]
    refused_statuses: ClassVar[tuple[int, ...]] = (400,)  # told apart from other backend errors

    def __init__(self, model: str, *, name: str, api_key: str | None, base_url: str | None, timeout_s: float):
        self.model = model
        self.name = name
        self._api_key = api_key
        self._base_url = base_url
        self._timeout_s = timeout_s
        self._sdk: Any = None
        # Structured outputs first; remembered per model once a server refuses them.
        self.mode: StructuredMode = "json_schema"

    async def aclose(self) -> None:
        """Close the SDK's HTTP pool in the event loop that opened it."""
        if self._sdk is not None:
            sdk, self._sdk = self._sdk, None
            await sdk.close()

    # A minimal reply of the API, read once by prepare(): the SDK builds its reply models' validators on first use.
    sample_reply: ClassVar[dict[str, Any]] = {}

    def prepare(self) -> None:
        """Build the SDK now (its HTTP pool and TLS context, its reply models: ~0.25 s of CPU), e.g. in the
        warm-up thread, so the first call does not pay it."""
        self._client()
        if self.sample_reply:
            import importlib

            # Read the way the SDK reads a reply (its `_models.construct_type`, the same in both SDKs).
            reply_type = self._reply_type()
            sdk_models = importlib.import_module(reply_type.__module__.split(".")[0] + "._models")
            sdk_models.construct_type(type_=reply_type, value=self.sample_reply)

    def _client(self) -> Any:
        if self._sdk is None:
            with HEAVY:  # the SDK's import never runs beside the warm-up's (numpy, httpx users)
                if self._sdk is None:
                    # httpx whole before any request: openai 3 reads `sys.modules["httpx"]` on every request
                    # without importing it, and met it half imported while the warm-up imported chromadb
                    # (AttributeError: partially initialized module 'httpx'); mcp depends on httpx.
                    import httpx  # noqa: F401

                    self._sdk = self._make_sdk()
        return self._sdk

    @property
    def base_url(self) -> str:
        return str(self._sdk.base_url) if self._sdk is not None else (self._base_url or self.default_base_url)

    def _make_sdk(self) -> Any:
        raise NotImplementedError

    def _reply_type(self) -> Any:
        raise NotImplementedError

    def _payload(self, request: ModelRequest, mode: StructuredMode) -> dict[str, Any]:
        raise NotImplementedError

    def _image_block(self, part: ImagePart) -> dict[str, Any]:
        """How this API wants an image inside a message."""
        raise NotImplementedError

    def _blocks(self, message: Message) -> list[dict[str, Any]]:
        """A message's parts as content blocks: text as both APIs write it, images as `_image_block` says."""
        blocks: list[dict[str, Any]] = []
        for p in message.content:
            if isinstance(p, TextPart):
                blocks.append({"type": "text", "text": p.text})
            elif isinstance(p, ImagePart):
                blocks.append(self._image_block(p))
        return blocks

    def _step_down(self, err: BackendError) -> StructuredMode | None:
        """The weaker mode to retry in when `err` says the server cannot do the current one, else None."""
        raise NotImplementedError

    def _reply(self, resp: Any, latency_ms: float, sent: int) -> ModelReply:
        raise NotImplementedError

    async def complete(self, request: ModelRequest) -> ModelReply:
        # The first call builds the SDK under HEAVY, which the warm-up holds for seconds while it loads the
        # embedding model: wait for it in a worker thread, never on the event loop (other calls keep going).
        client = self._sdk if self._sdk is not None else await anyio.to_thread.run_sync(self._client)
        started = time.monotonic()
        sent = 0
        while True:
            sent += 1
            try:
                # The payload is built to the API's shape here; `post` sends it as is, skipping the
                # SDK's recursive param transform (~4 ms of CPU a call, most of a judge's overhead).
                resp = await client.post(self.endpoint, body=self._payload(request, self.mode), cast_to=self._reply_type())
                break
            except Exception as exc:
                err = exc if isinstance(exc, BackendError) else backend_error_from_sdk(exc, self.base_url)
                weaker = self._step_down(err) if request.json_schema is not None else None
                if weaker is not None:
                    self.mode = weaker  # for this call and every later one of this model
                    continue
                if err.status in self.refused_statuses:
                    err = BackendError("backend_error", f"{self.base_url} refused the request ({err.status}): {err}",
                                       status=err.status)
                err.requests = sent
                raise err from exc
        return self._reply(resp, (time.monotonic() - started) * 1000.0, sent)
