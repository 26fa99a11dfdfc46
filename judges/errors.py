"""The one failure shape. Every judge and store says what went wrong as a `JudgeFailure`: a `kind`
from the one enumeration `FailureKind`, a human `message`, an optional `hint` (what to do) and the
`raw` reply it came from. Raised, it travels in a `JudgeError` (or one of the subclasses below, named
for who must act); returned per item, it sits on the judge's result. `server/errors.py` maps both,
once, to MCP tool errors.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Literal

FailureKind = Literal[
    # the model's reply could not be read (judges/reading/)
    "parse_error", "refusal", "truncated", "ambiguous", "out_of_range",
    # the model backend (judges/models/)
    "timeout", "rate_limited", "backend_error",
    # the caller, the server's configuration, the guideline store
    "invalid_input", "not_found", "cancelled", "configuration", "store_error",
    # the organization's daily budget (judges/store/usage.py)
    "budget_exceeded",
    # the caller's role or organization's limits (HTTP tokens, server/roles.py)
    "forbidden", "over_limit",
    # the state database did not answer (PostgreSQL stopped or unreachable: judges/store/database.py)
    "unavailable",
]

# The kinds a model reply or a model backend gives (a judge's per-item failures).
MODEL_KINDS: frozenset[str] = frozenset(
    {"parse_error", "refusal", "truncated", "ambiguous", "out_of_range", "timeout", "rate_limited", "backend_error"}
)


@dataclass(frozen=True)
class JudgeFailure:
    """What went wrong: `kind`, a human `message`, an optional `hint`, and the `raw` reply (verbatim)."""

    kind: FailureKind
    message: str
    hint: str | None = None
    raw: str = ""

    def __post_init__(self) -> None:
        # Every failure a caller reads is this shape (raised or per item): no secret survives into it.
        object.__setattr__(self, "message", SECRETS.scrub(self.message))
        if self.hint:
            object.__setattr__(self, "hint", SECRETS.scrub(self.hint))
        if self.raw:
            object.__setattr__(self, "raw", SECRETS.scrub(self.raw, generic=False))

    @property
    def raw_text(self) -> str:  # the name judges used before the one shape
        return self.raw

    def describe(self) -> str:
        """`kind: message` — how a judge's result states a per-item failure in its `error` field."""
        return f"{self.kind}: {self.message}"


class JudgeError(Exception):
    """A failure raised: carries its `JudgeFailure`. `str(exc)` is the message."""

    default_kind: ClassVar[FailureKind] = "backend_error"

    def __init__(self, message: str = "", *, kind: FailureKind | None = None, hint: str | None = None,
                 raw: str = ""):
        super().__init__(SECRETS.scrub(message))  # str(exc) is read too (logs, wrapped messages)
        self.failure = JudgeFailure(kind or self.default_kind, message, hint, raw)

    @property
    def kind(self) -> FailureKind:
        return self.failure.kind

    @property
    def hint(self) -> str | None:
        return self.failure.hint


def closest(name: str, valid: Iterable[str]) -> str | None:
    """The valid name nearest a misspelt one ('brand_complaince' -> 'brand_compliance'), or None: the "did you
    mean" of every error about a name the caller got wrong."""
    import difflib

    valid = list(valid)
    if len(name) > 200:  # no name is near; difflib would index all of it (a 2 MB name cost 0.6 s)
        return None
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6) or \
        difflib.get_close_matches(name.lower().replace("-", "_"), valid, n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(name: str, valid: Iterable[str]) -> str:
    """"did you mean 'x'? " for the closest valid name, or "" when none is close."""
    close = closest(name, valid)
    return f"did you mean {close!r}? " if close else ""


class InputError(JudgeError, ValueError):
    """The caller's input is wrong; the message says what and how to fix it."""

    default_kind: ClassVar[FailureKind] = "invalid_input"


class NotFoundError(InputError):
    """The caller named something that does not exist (or belongs to another organization)."""

    default_kind: ClassVar[FailureKind] = "not_found"


class ForbiddenError(JudgeError):
    """The caller's token has a role too low for this tool; the message names the role it needs."""

    default_kind: ClassVar[FailureKind] = "forbidden"


class OverLimitError(JudgeError):
    """The caller's organization is over one of its limits (calls per minute); the message says when to retry."""

    default_kind: ClassVar[FailureKind] = "over_limit"


class UnavailableError(JudgeError, RuntimeError):
    """The state database did not answer in time; the call changed nothing it could not finish, retry later."""

    default_kind: ClassVar[FailureKind] = "unavailable"


class ConfigError(JudgeError, RuntimeError):
    """The server is configured wrongly or incompletely; the message names the setting to change."""

    default_kind: ClassVar[FailureKind] = "configuration"


class BackendError(JudgeError, RuntimeError):
    """A model backend failed to give a usable reply (after any retries)."""

    def __init__(self, kind: FailureKind, message: str, *, status: int | None = None, retryable: bool = False,
                 hint: str | None = None):
        super().__init__(message, kind=kind, hint=hint)
        self.status = status
        self.retryable = retryable
        self.retry_after: float | None = None
        self.requests = 1  # HTTP requests spent before giving up (the guard adds its retries)


class BudgetError(JudgeError, RuntimeError):
    """The organization's daily budget is spent: calls that would ask a model are refused until the next day."""

    default_kind: ClassVar[FailureKind] = "budget_exceeded"


# --- secrets never reach a caller or a log --------------------------------------------------------

# Credentials of any kind in text from elsewhere (an upstream error body, an exception): a URL's user
# info, a bearer token, key-shaped words (OpenAI/Anthropic `sk-...`, our stored tokens `jm_...`), and
# key-like query parameters.
_GENERIC = (
    (re.compile(r"(?<=://)[^/@\s'\"]+@"), "[redacted]@"),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 [redacted]"),
    (re.compile(r"\b(?:sk|jm)[-_][A-Za-z0-9_-]{16,}"), "[redacted]"),
    (re.compile(r"(?i)([?&](?:api[-_]?key|key|token|access_token|password|secret)=)[^&\s'\"]+"), r"\1[redacted]"),
)


class Secrets:
    """The process's secrets (API keys, bearer tokens, passwords in URLs), registered from the settings at
    start; `scrub` replaces each of them (and credential-shaped text in general) in a message before a caller
    or a log reads it. One instance, `SECRETS`: JudgeFailure scrubs itself, server/errors.py scrubs every tool
    error, the log's formatter every line."""

    MASK = "[redacted]"
    MIN_LENGTH = 6  # shorter values would mask ordinary words

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._lock = threading.Lock()

    def add(self, *values: str | None) -> None:
        """Register secrets (None and short values are ignored); each is also matched URL- and JSON-escaped."""
        with self._lock:
            for value in values:
                if not value or len(value) < self.MIN_LENGTH:
                    continue
                self._values.update({value, urllib.parse.quote(value, safe=""), json.dumps(value)[1:-1]})
            ordered = sorted(self._values, key=len, reverse=True)  # a secret containing another wins
            self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def scrub(self, text: str, *, generic: bool = True) -> str:
        """`text` with every registered secret (and, with `generic`, credential-shaped text) masked."""
        if not text:
            return text
        pattern = self._pattern
        if pattern is not None:
            text = pattern.sub(self.MASK, text)
        if generic:
            for found, mask in _GENERIC:
                text = found.sub(mask, text)
        return text


SECRETS = Secrets()
