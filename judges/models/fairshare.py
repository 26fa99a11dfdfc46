"""The shared pool of model requests, served fairly between organizations.

One pool caps the model requests in flight, all organizations together (JUDGE_MCP_CONCURRENCY); each
organization may hold at most `per_org` of its slots (JUDGE_MCP_ORG_CONCURRENCY). When the pool is full,
waiting requests are served round-robin between the organizations that wait, not first come first served: an
organization that queued 2,000 requests gets one slot in turn like one that queued a single request.

The organization is the one the request runs for: `ORGANIZATION`, set once per MCP request by the server
(and inherited by the background jobs and tasks it starts).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar

import anyio

ORGANIZATION: ContextVar[str] = ContextVar("judge_mcp_organization", default="")


class _Waiter:
    __slots__ = ("event", "granted")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.granted = False


class FairPool:
    """Slots for model requests: `async with pool.slot(): ...` around each one. Lives on one event loop (all its
    state changes happen there, between awaits, so it needs no lock)."""

    def __init__(self, total: int, per_org: int | None = None,
                 count: Callable[[str], Awaitable[object]] | None = None):
        self.total = total
        self.per_org = max(1, min(per_org or total, total))
        # Called before each request with its organization (the rate limit's count); may raise to refuse it.
        self.count = count
        self._running = 0
        self._by_org: dict[str, int] = {}
        self._queues: dict[str, deque[_Waiter]] = {}
        self._ring: deque[str] = deque()  # organizations with waiters, in serving order

    def in_flight(self, org: str | None = None) -> int:
        """Requests holding a slot: all of them, or one organization's."""
        return self._running if org is None else self._by_org.get(org, 0)

    def waiting(self, org: str | None = None) -> int:
        if org is not None:
            return len(self._queues.get(org, ()))
        return sum(len(q) for q in self._queues.values())

    @asynccontextmanager
    async def slot(self, org: str | None = None) -> AsyncIterator[None]:
        """Hold one slot for `org` (default: the organization this request runs for) while the body runs."""
        org = ORGANIZATION.get() if org is None else org
        if self.count is not None:
            await self.count(org)
        await self._acquire(org)
        try:
            yield
        finally:
            self._release(org)

    def _free_for(self, org: str) -> bool:
        return self._running < self.total and self._by_org.get(org, 0) < self.per_org

    def _take(self, org: str) -> None:
        self._running += 1
        self._by_org[org] = self._by_org.get(org, 0) + 1

    async def _acquire(self, org: str) -> None:
        # Free slots are always handed to eligible waiters at once (_dispatch), so a newcomer whose organization
        # has nobody waiting and is under its share may go ahead of waiters held back by their own share.
        if not self._queues.get(org) and self._free_for(org):
            self._take(org)
            return
        waiter = _Waiter()
        queue = self._queues.get(org)
        if queue is None:
            queue = self._queues[org] = deque()
            self._ring.append(org)
        queue.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.granted:  # handed a slot while being cancelled: pass it on
                self._release(org)
            else:
                queue.remove(waiter)
                if not queue:
                    del self._queues[org]
                    self._ring.remove(org)
            raise

    def _release(self, org: str) -> None:
        self._running -= 1
        left = self._by_org[org] - 1
        if left:
            self._by_org[org] = left
        else:
            del self._by_org[org]
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand free slots to waiters, one organization after another (round-robin)."""
        passed = 0
        while self._running < self.total and self._ring and passed < len(self._ring):
            org = self._ring[0]
            self._ring.rotate(-1)
            if self._by_org.get(org, 0) >= self.per_org:
                passed += 1
                continue
            queue = self._queues[org]
            waiter = queue.popleft()
            if not queue:
                del self._queues[org]
                self._ring.remove(org)
            self._take(org)
            waiter.granted = True
            waiter.event.set()
            passed = 0
