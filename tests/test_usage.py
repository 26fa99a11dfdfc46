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
