"""The organization's view of a model client: its result cache, the cost of each request at the configured
prices, the day's usage ledger and the daily budget. One `MeteredClient` wraps the resolved client per call.

With a budget, every request's estimated cost (its input as estimated from the request, all of max_tokens out, at
the model's price) is reserved in the store before it is sent and settled to the real cost after the reply
(UsageLedger.reserve/settle), so samples, juries, games and jobs all count, and concurrent calls of every process
cannot pass the budget together. A request the budget cannot cover is not sent: the judge reads it as a failure of
kind budget_exceeded, and that call sends nothing more."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import anyio

from judges import telemetry
from judges.errors import BackendError, BudgetError, ConfigError
from judges.models.prices import Price, cost_of, estimated_cost, price_of
from judges.models.protocol import ModelClient, ModelReply, ModelRequest, Usage
from judges.store.database import Database
from judges.store.results import ResultCache, cache_key
from judges.store.usage import NANO, BudgetView, Reservation, UsageLedger, today, usd

log = logging.getLogger(__name__)
BUDGET_HINT = ("raise JUDGE_MCP_DAILY_BUDGET_USD, or this organization's entry in JUDGE_MCP_ORG_BUDGETS_USD; a "
               "smaller call (fewer samples, candidates or items, a cheaper model) may still fit")


@dataclass
class Metering:
    """What every call's client shares: the cache, the ledger, the prices."""

    cache: ResultCache
    ledger: UsageLedger
    prices: Mapping[str, Price] = field(default_factory=dict)
    reservation_ttl_s: float = 600.0  # a reservation not settled by then (its process died) is reclaimed
    _settled: anyio.Event | None = field(default=None, repr=False)

    @property
    def db(self) -> Database:
        return self.ledger.db

    async def client(self, inner: ModelClient, org: str, model_id: str | None, *,
                     use_cache: bool = True) -> MeteredClient:
        """`inner` for one call of `org`, after checking the organization's daily budget (a BudgetError when it
        is spent). The budget's read is store work: through `Database.run` (off the event loop on PostgreSQL), and
        only when the organization has a budget. With a budget, a model with no known price is refused (a
        ConfigError naming the model and JUDGE_MCP_PRICES): its requests could not be counted against it.

        `model_id` is the resolved model string (`openai:gpt-4.1-mini`); None for the host's model (sampling):
        that is neither cached (the host picks the model) nor priced (the host pays). The demo model costs nothing
        and is not cached."""
        budget = self.ledger.budget_of(org)
        price: Price | None = None
        if budget is not None:
            if model_id is not None and not model_id.startswith("demo"):
                price = price_of(self.prices, model_id)
                if price is None:
                    name = model_id.partition(":")[2] or model_id
                    raise ConfigError(
                        f"model {model_id!r} has no known price, and organization {org!r} has a daily budget "
                        f"({usd(budget)}): its requests could not be counted against the budget, so none is sent",
                        hint=f'name a model with a price, or set its price (USD per million tokens) in '
                             f'JUDGE_MCP_PRICES, e.g. {{"{name}": {{"input": 0.4, "output": 1.6}}}}')
            await self.db.run(self.ledger.check_budget, org)
        return MeteredClient(inner, org, model_id, self, use_cache=use_cache, price=price)

    async def settled(self, timeout_s: float) -> None:
        """Wait until a request of this process settles its reservation, or `timeout_s` (another replica's)."""
        if self._settled is None:
            self._settled = anyio.Event()
        with anyio.move_on_after(timeout_s):
            await self._settled.wait()

    def notify_settled(self) -> None:
        if self._settled is not None:
            self._settled.set()
            self._settled = None


class MeteredClient:
    """Answers from the cache when it can; otherwise asks, prices the reply and adds it to the day's usage."""

    def __init__(self, inner: ModelClient, org: str, model_id: str | None, metering: Metering, *,
                 use_cache: bool = True, price: Price | None = None):
        self.inner = inner
        self.price = price  # set when the organization has a budget: each request is reserved at this price
        self._refused: BudgetError | None = None  # once the budget could not cover a request, none more is sent
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
                telemetry.count_model(self._ledger_model, hit.usage, 0, cached=True)
                return answered
        reservation = await self._reserve(request)
        with telemetry.model_span(self.model_id) as span:  # a child of the tool call's span, when tracing is on
            reply = await self._ask(request, reservation)
            telemetry.model_usage(span, reply.usage, reply.model)
        telemetry.count_model(self._ledger_model, reply.usage, reply.requests, cached=False)
        if key is not None:
            self._keys[id(reply)] = key
        return reply

    async def _ask(self, request: ModelRequest, reservation: Reservation | None) -> ModelReply:
        """The request sent, its reply priced and the reservation settled (at its estimate when it failed in a
        way the backend may bill)."""
        try:
            reply = await self.inner.complete(request)
        except BackendError as err:
            # A timed-out request may still be billed: with a budget it counts at its estimate, never at nothing.
            lost = reservation.nusd / NANO if reservation is not None and err.kind == "timeout" else 0.0
            await self._settle(reservation, Usage(cost_usd=lost), getattr(err, "requests", 1))
            raise
        except BaseException as exc:
            if reservation is not None:  # cancelled in flight: the backend may bill it, so it counts at its estimate
                cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
                with anyio.CancelScope(shield=True):
                    await self._settle(reservation, Usage(cost_usd=reservation.nusd / NANO if cancelled else 0.0),
                                       int(cancelled))
            raise
        reply.usage = reply.usage.model_copy(update={"cost_usd": self._cost(reply.usage)})
        await self._settle(reservation, reply.usage, reply.requests)
        return reply

    async def _reserve(self, request: ModelRequest) -> Reservation | None:
        """Hold the request's estimated cost against the organization's budget (None: no budget to hold against).
        While requests in flight hold what this one needs, wait for them to settle; once the budget cannot cover
        it even then, refuse it (and every later request of this call) with a BudgetError."""
        if self._refused is not None:
            raise BudgetError(str(self._refused), hint=self._refused.hint)
        if self.price is None:
            return None
        metering = self.metering
        amount = estimated_cost(self.price, request, self.model_id)
        give_up = time.monotonic() + metering.reservation_ttl_s
        pause = 0.02
        while True:
            reservation, view = await metering.db.run(metering.ledger.reserve, self.org, amount,
                                                      metering.reservation_ttl_s)
            if reservation is not None:
                return reservation
            if self._refused is not None:
                raise BudgetError(str(self._refused), hint=self._refused.hint)
            if not view.fits(amount) or time.monotonic() > give_up:
                self._refused = self._refusal(view, amount)
                raise self._refused
            await metering.settled(pause)
            pause = min(0.25, pause * 2)

    def _refusal(self, view: BudgetView, amount: float) -> BudgetError:
        return BudgetError(
            f"the daily budget of organization {self.org!r} cannot cover another request to {self.model_id}: "
            f"{usd(view.spent)} of {usd(view.budget)} spent today (UTC day {today()}) and this request may cost up "
            f"to {usd(amount)}; it was not sent, nor is any later request of this call", hint=BUDGET_HINT)

    async def _settle(self, reservation: Reservation | None, usage: Usage, requests: int) -> None:
        ledger = self.metering.ledger
        if reservation is None:
            await self.metering.db.run(ledger.record, self.org, self._ledger_model, usage, requests)
            return
        try:
            await self.metering.db.run(ledger.settle, reservation, self._ledger_model, usage, requests)
        finally:
            self.metering.notify_settled()

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
