"""Every model call's guard: a shared concurrency cap, a total deadline, bounded retries.

The SDKs' own retries are switched off (max_retries=0) so that one policy, here,
decides: retry 429/5xx/529 and connection errors, honour retry-after, never retry
authentication, permission or spend-limit errors, and stop at the deadline.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from dataclasses import dataclass
from typing import Any

import anyio

from judges.errors import SECRETS, BackendError, OverLimitError
from judges.models.fairshare import FairPool
from judges.models.protocol import ModelClient, ModelReply, ModelRequest

log = logging.getLogger(__name__)

# Error codes that mean "you are out of money/quota": retrying cannot help.
_SPEND_LIMIT_CODES = {"insufficient_quota", "billing_hard_limit_reached", "billing_not_active"}


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from `retry-after-ms` / `retry-after` (seconds or an HTTP date), if given."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(0.0, parsed.timestamp() - time.time())


def backend_error_from_status(status: int, message: str, headers: Any = None, body: Any = None,
                              base_url: str | None = None) -> BackendError:
    """Classify an HTTP error from a model API into a BackendError with a retry decision."""
    code = ""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            code = str(err.get("code") or err.get("type") or "")
    if status in (401, 403):
        where = f" by {base_url}" if base_url else ""
        return BackendError("backend_error", f"the API key was rejected{where} ({status}): {message}", status=status)
    if status == 402 or code in _SPEND_LIMIT_CODES:
        return BackendError("backend_error", f"spend limit reached ({status}): {message}", status=status)
    err = BackendError(
        "rate_limited" if status == 429 else "backend_error",
        f"model API answered {status}: {message}",
        status=status,
        retryable=status in (408, 409, 429) or status >= 500,
    )
    err.retry_after = parse_retry_after(headers)
    return err


def backend_error_from_sdk(exc: Exception, base_url: str | None = None) -> BackendError:
    """Map an openai/anthropic SDK exception (both share the same shape) to a BackendError."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        return backend_error_from_status(status, str(getattr(exc, "message", exc)), headers, getattr(exc, "body", None),
                                         base_url)
    name = type(exc).__name__
    if name == "APITimeoutError":
        return BackendError("timeout", f"model API timed out: {exc}", retryable=True)
    if name == "APIConnectionError":
        return BackendError("backend_error", f"could not reach the model API: {exc}", retryable=True)
    return BackendError("backend_error", f"{name}: {exc}")


@dataclass
class CallPolicy:
    deadline_s: float = 120.0
    max_retries: int = 2
    max_retry_wait_s: float = 30.0
    backoff_base_s: float = 0.5
    key_rejected_s: float = 30.0  # how long a rejected key fails calls at once, before one call tries it again


class GuardedClient:
    """Wraps a ModelClient with the shared pool of model requests (fair between organizations), a total
    deadline and bounded retries.

    A rejected key (401/403) costs one request: the first call of a client goes alone, and once the backend
    rejects the key, calls fail at once (no request) for `key_rejected_s`; then one call tries again alone
    while the others wait for its answer, so a transient 401 (a proxy's) or a key the backend accepts again
    does not stick for the life of the process."""

    def __init__(self, inner: ModelClient, limiter: FairPool, policy: CallPolicy, model_id: str | None = None):
        self.inner = inner
        self.name = inner.name
        self.model_id = model_id  # the resolved model string (`openai:gpt-4.1-mini`); None for the host's model
        self.limiter = limiter
        self.policy = policy
        # Only API backends have keys to reject; the host's own model (sampling) needs no first call alone.
        self._verified = not hasattr(inner, "base_url")
        self._trying: anyio.Event | None = None  # set when the call trying the key alone has its answer
        self._rejected: BackendError | None = None
        self._rejected_at = 0.0

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()

    async def complete(self, request: ModelRequest) -> ModelReply:
        while True:
            rejected = self._rejected
            if rejected is not None:
                left = self.policy.key_rejected_s - (time.monotonic() - self._rejected_at)
                if left > 0:
                    err = BackendError(rejected.kind, f"{rejected} (remembered: calls of {self.name} fail without a "
                                       f"request for {left:.0f} s more, then one call tries the key again)",
                                       status=rejected.status)
                    err.requests = 0
                    raise err
            elif self._verified:
                return await self._complete(request)
            if self._trying is not None:  # another call is trying the key alone: its answer decides
                await self._trying.wait()
                continue
            trying = self._trying = anyio.Event()
            try:
                return await self._complete(request)
            finally:
                self._trying = None
                trying.set()

    async def _complete(self, request: ModelRequest) -> ModelReply:
        started = time.monotonic()
        spent = [0]
        try:
            with anyio.fail_after(self.policy.deadline_s):
                reply = await self._with_retries(request, spent)
        except TimeoutError:
            err = BackendError("timeout", f"no reply from {self.name} within {self.policy.deadline_s:g} s")
            err.requests = spent[0] + 1
            raise err from None
        except BackendError as err:
            if err.status in (401, 403):
                self._rejected, self._rejected_at = err, time.monotonic()
            elif err.requests:
                # The key was not refused: later calls need not wait for a first one.
                self._rejected, self._verified = None, True
            raise
        self._rejected, self._verified = None, True
        reply.latency_ms = (time.monotonic() - started) * 1000.0
        reply.text = SECRETS.scrub(reply.text, generic=False)  # a proxy or server echoing a key back in a reply
        return reply

    async def _with_retries(self, request: ModelRequest, spent: list[int]) -> ModelReply:
        attempt = 0
        while True:
            try:
                try:
                    async with self.limiter.slot():
                        reply = await self.inner.complete(request)
                except OverLimitError as over:  # the organization's rate limit counts model requests too
                    refused = BackendError("rate_limited", str(over))
                    refused.requests = 0
                    raise refused from None
                reply.requests += spent[0]
                return reply
            except BackendError as err:
                spent[0] += err.requests
                err.requests = spent[0]
                if not err.retryable or attempt >= self.policy.max_retries:
                    raise
                wait = getattr(err, "retry_after", None)
                if wait is None:
                    wait = self.policy.backoff_base_s * (2**attempt) * (0.5 + random.random() / 2)
                if wait > self.policy.max_retry_wait_s:
                    late = BackendError(
                        err.kind, f"{err} (asked to wait {wait:.0f} s, more than the {self.policy.max_retry_wait_s:g} s allowed)",
                        status=err.status)
                    late.requests = spent[0]
                    raise late from err
                attempt += 1
                log.warning("%s: %s; retry %d/%d in %.2f s", self.name, err, attempt, self.policy.max_retries, wait)
                await anyio.sleep(wait)
