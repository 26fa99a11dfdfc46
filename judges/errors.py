"""The three kinds of error, split by who must act. `server/` maps each to an MCP result."""

from __future__ import annotations

from typing import Literal


class InputError(ValueError):
    """The caller's input is wrong; the message says what and how to fix it."""


class NotFoundError(InputError):
    """The caller named something that does not exist (or belongs to another organization)."""


class ConfigError(RuntimeError):
    """The server is configured wrongly or incompletely; the message names the setting to change."""


FailureKind = Literal["parse_error", "refusal", "truncated", "timeout", "rate_limited", "backend_error", "ambiguous",
                      "out_of_range"]


class BackendError(RuntimeError):
    """A model backend failed to give a usable reply (after any retries)."""

    def __init__(self, kind: FailureKind, message: str, *, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.kind: FailureKind = kind
        self.status = status
        self.retryable = retryable
        self.retry_after: float | None = None
        self.requests = 1  # HTTP requests spent before giving up (the guard adds its retries)
