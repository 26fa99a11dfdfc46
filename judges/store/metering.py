"""The organization's view of a model client: its result cache, the cost of each request at the configured
prices, the day's usage ledger and the daily budget. One `MeteredClient` wraps the resolved client per call."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from judges.errors import BackendError
from judges.models.prices import Price, cost_of
from judges.models.protocol import ModelClient, ModelReply, ModelRequest, Usage
from judges.store.database import Database
from judges.store.results import ResultCache, cache_key
from judges.store.usage import UsageLedger

log = logging.getLogger(__name__)


@dataclass
class Metering:
    """What every call's client shares: the cache, the ledger, the prices."""

    cache: ResultCache
    ledger: UsageLedger
    prices: Mapping[str, Price] = field(default_factory=dict)

    @property
    def db(self) -> Database:
        return self.ledger.db

    async def client(self, inner: ModelClient, org: str, model_id: str | None, *,
                     use_cache: bool = True) -> MeteredClient:
        """`inner` for one call of `org`, after checking the organization's daily budget (a BudgetError when it
        is spent). The budget's read is store work: through `Database.run` (off the event loop on PostgreSQL), and
        only when the organization has a budget.

        `model_id` is the resolved model string (`openai:gpt-4.1-mini`); None for the host's model (sampling):
        that is neither cached (the host picks the model) nor priced (the host pays). The demo model costs nothing
        and is not cached."""
        if self.ledger.budget_of(org) is not None:
            await self.db.run(self.ledger.check_budget, org)
        return MeteredClient(inner, org, model_id, self, use_cache=use_cache)


class MeteredClient:
    """Answers from the cache when it can; otherwise asks, prices the reply and adds it to the day's usage."""

    def __init__(self, inner: ModelClient, org: str, model_id: str | None, metering: Metering, *,
                 use_cache: bool = True):
        self.inner = inner
        self.name = inner.name
        self.org = org
        self.model_id = model_id
        self.metering = metering
        base = str(getattr(getattr(inner, "inner", inner), "base_url", None) or "").rstrip("/")
        self.cacheable = (use_cache and metering.cache.ttl_s > 0 and model_id is not None
                          and not model_id.startswith("demo"))
        self.scope = f"{model_id}@{base}"  # the same model behind another endpoint is another model
        self._keys: dict[int, str] = {}
        self._ledger_model = (model_id or "sampling").rstrip(":")  # the demo model's string is `demo:`

    def _cost(self, usage: Usage) -> float | None:
        if self.model_id is None:
            return None
        if self.model_id.startswith("demo"):
            return 0.0
        return cost_of(self.metering.prices, self.model_id, usage)

    async def complete(self, request: ModelRequest) -> ModelReply:
        key = cache_key(self.scope, request) if self.cacheable else None
        if key is not None:
            started = time.monotonic()
            hit = await self.metering.db.run(self.metering.cache.get, self.org, key)
            if hit is not None:
                answered = hit.model_copy(update={"cached": True, "requests": 0, "usage": Usage(cache_hits=1),
                                                  "latency_ms": (time.monotonic() - started) * 1000.0})
                # The day's usage counts the hit and what asking would have cost (its tokens at today's prices).
                await self.metering.db.run(self.metering.ledger.record_hit, self.org, self._ledger_model,
                                           self._cost(hit.usage))
                return answered
        try:
            reply = await self.inner.complete(request)
        except BackendError as err:
            await self.metering.db.run(self.metering.ledger.record, self.org, self._ledger_model,
                                       Usage(cost_usd=0.0), getattr(err, "requests", 1))
            raise
        reply.usage = reply.usage.model_copy(update={"cost_usd": self._cost(reply.usage)})
        await self.metering.db.run(self.metering.ledger.record, self.org, self._ledger_model, reply.usage,
                                   reply.requests)
        if key is not None:
            self._keys[id(reply)] = key
        return reply

    async def accept(self, exchanges: Sequence[tuple[ModelRequest, ModelReply]]) -> None:
        """The reading of these replies succeeded: keep them (every round, so a repaired reading replays too),
        through `Database.run` (off the event loop on PostgreSQL)."""
        kept: list[tuple[str, ModelReply]] = []
        for _, reply in exchanges:
            key = self._keys.pop(id(reply), None)
            if key is not None and not reply.cached:
                kept.append((key, reply.model_copy(update={"latency_ms": 0.0})))
        if kept:
            try:
                await self.metering.db.run(self._keep, kept)
            except Exception as exc:  # the verdicts were read: a cache that cannot keep them does not lose them
                log.warning("the result cache could not keep a reply of %s: %s: %s", self.model_id,
                            type(exc).__name__, exc)

    def _keep(self, kept: Sequence[tuple[str, ModelReply]]) -> None:
        for key, stored in kept:
            self.metering.cache.put(self.org, key, self.model_id or "", stored)
