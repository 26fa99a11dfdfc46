"""The usage ledger's table (judges/store/usage.py) on both engines: counters that replicas add to at once,
and the daily budget they read (the `db` fixture; the tools' side is in test_cache_and_cost.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from judges.errors import BudgetError
from judges.models.protocol import Usage
from judges.store.database import Database, open_database
from judges.store.usage import UsageLedger, today


def test_two_connections_record_every_call_once(database_url: str | None, tmp_path: Path) -> None:
    """Two Database objects stand for two replicas sharing one database: no request, token or cent is lost."""
    databases = [open_database(database_url, tmp_path / "judge.sqlite3") for _ in range(2)]
    ledgers = [UsageLedger(db) for db in databases]
    usage = Usage(input_tokens=11, output_tokens=7, cost_usd=0.25)
    threads = [threading.Thread(target=lambda led=led: [led.record("acme", "openai:m", usage, 1) for _ in range(50)])
               for led in ledgers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (day,) = ledgers[0].report("acme", days=1).days
    for db in databases:
        db.close()
    assert (day.requests, day.input_tokens, day.output_tokens, day.cost_usd) == (100, 1100, 700, 25.0)


def test_the_budget_refuses_the_call_after_the_spend_reaches_it(db: Database) -> None:
    ledger = UsageLedger(db, daily_budget_usd=1.0)
    ledger.record("acme", "openai:m", Usage(cost_usd=0.6), 1)
    ledger.check_budget("acme")  # $0.60 of $1: still allowed
    ledger.record("acme", "openai:m", Usage(cost_usd=0.4), 1)
    with pytest.raises(BudgetError, match=r"'acme' is spent: \$1 of \$1 used today"):
        ledger.check_budget("acme")


def test_an_organizations_own_budget_replaces_the_default(db: Database) -> None:
    ledger = UsageLedger(db, daily_budget_usd=1.0, budgets={"big": 100.0})
    ledger.record("big", "openai:m", Usage(cost_usd=1.0), 1)
    ledger.check_budget("big")  # $1 of its $100
    assert (ledger.spent("big"), ledger.spent("big", "2000-01-01")) == (1.0, 0.0)


def test_an_unpriced_request_is_counted_apart_from_the_cost(db: Database) -> None:
    ledger = UsageLedger(db)
    ledger.record("acme", "local:m", Usage(input_tokens=5, output_tokens=2, cost_usd=None), 2)
    (day,) = ledger.report("acme", days=1).days
    assert (day.day, day.requests, day.unpriced_requests, day.cost_usd) == (today(), 2, 2, 0.0)


# --- reservations: each request's estimate is held before it is sent ------------------------------------------

def test_a_reservation_that_would_pass_the_budget_is_refused(db: Database) -> None:
    ledger = UsageLedger(db, daily_budget_usd=0.05)
    first, _ = ledger.reserve("acme", 0.03, 60)
    second, view = ledger.reserve("acme", 0.03, 60)
    assert first is not None and second is None
    assert (view.budget, view.spent, view.reserved, view.fits(0.03)) == (0.05, 0.0, 0.03, True)


def test_settling_replaces_the_estimate_by_the_real_cost(db: Database) -> None:
    ledger = UsageLedger(db, daily_budget_usd=0.05)
    held, _ = ledger.reserve("acme", 0.03, 60)
    assert held is not None
    ledger.settle(held, "openai:m", Usage(input_tokens=11, output_tokens=7, cost_usd=0.002), 1)
    again, view = ledger.reserve("acme", 0.03, 60)
    assert again is not None and (view.spent, view.reserved) == (0.002, 0.03)
    assert ledger.spent("acme") == 0.002


def test_the_budget_row_starts_from_what_the_day_already_spent(db: Database) -> None:
    ledger = UsageLedger(db, daily_budget_usd=0.05)
    ledger.record("acme", "openai:m", Usage(cost_usd=0.04), 1)  # spent before any reservation (an older server)
    held, view = ledger.reserve("acme", 0.02, 60)
    assert held is None and (view.spent, view.fits(0.02)) == (0.04, False)


def test_an_expired_reservation_is_reclaimed(db: Database) -> None:
    """A process that died with a request in flight does not hold the budget for the rest of the day."""
    ledger = UsageLedger(db, daily_budget_usd=0.05)
    dead, _ = ledger.reserve("acme", 0.04, -1)  # already expired
    live, view = ledger.reserve("acme", 0.04, 60)
    assert dead is not None and live is not None and view.reserved == 0.04


def test_settling_a_reclaimed_reservation_does_not_release_it_twice(db: Database) -> None:
    ledger = UsageLedger(db, daily_budget_usd=0.05)
    dead, _ = ledger.reserve("acme", 0.04, -1)
    live, _ = ledger.reserve("acme", 0.04, 60)  # reclaims `dead`
    assert dead is not None and live is not None
    ledger.settle(dead, "openai:m", Usage(cost_usd=0.001), 1)
    _, view = ledger.reserve("acme", 0.04, 60)
    assert (view.spent, view.reserved) == (0.001, 0.04)


def test_concurrent_reservations_of_two_replicas_never_pass_the_budget(database_url: str | None,
                                                                       tmp_path: Path) -> None:
    """Two Database objects stand for two replicas: 2 × 20 threads each try to reserve $0.01 of a $0.05 budget."""
    databases = [open_database(database_url, tmp_path / "judge.sqlite3") for _ in range(2)]
    ledgers = [UsageLedger(db, daily_budget_usd=0.05) for db in databases]
    held: list[object] = []

    def attempt(ledger: UsageLedger) -> None:
        reservation, _ = ledger.reserve("acme", 0.01, 60)
        if reservation is not None:
            held.append(reservation)

    threads = [threading.Thread(target=attempt, args=(led,)) for led in ledgers for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _, view = ledgers[0].reserve("acme", 0.0, 60)
    for db in databases:
        db.close()
    assert len(held) == 5 and view.reserved == 0.05


def test_a_request_cancelled_in_flight_counts_at_its_estimate(db: Database) -> None:
    """The backend may bill a request whose caller went away: cancelling is no way around the budget."""
    import anyio

    from judges.models.prices import Price, estimated_cost
    from judges.models.protocol import Message, ModelReply, ModelRequest
    from judges.store.metering import Metering
    from judges.store.results import ResultCache

    class Slow:
        name = "openai:m"

        async def complete(self, request: ModelRequest) -> ModelReply:
            await anyio.sleep(30)
            raise AssertionError("not reached")

    price = Price(input=2.0, output=10.0)
    metering = Metering(cache=ResultCache(db, ttl_s=0, max_entries=1), ledger=UsageLedger(db, daily_budget_usd=1.0),
                        prices={"m": price})
    request = ModelRequest(messages=[Message.user("Which is better?")], max_tokens=100)

    async def cancelled() -> None:
        client = await metering.client(Slow(), "acme", "openai:m")
        with anyio.move_on_after(0.2):
            await client.complete(request)

    anyio.run(cancelled)
    (day,) = metering.ledger.report("acme", days=1).days
    assert (day.requests, day.cost_usd) == (1, estimated_cost(price, request))
