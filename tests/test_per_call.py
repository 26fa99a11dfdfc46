"""The per-call path's store work: where it runs (the event loop's thread for SQLite, a worker thread for
PostgreSQL) and the day's cache-hit counters, which several replicas add to at once."""

from __future__ import annotations

import io
import logging
import queue
import threading
from pathlib import Path
from typing import Any

import pytest

from judges.store.database import open_database
from judges.store.usage import UsageLedger


@pytest.mark.anyio
async def test_store_work_from_async_code_leaves_the_event_loop_only_for_postgresql(db: Any) -> None:
    here = threading.get_ident()
    ran_in = await db.run(threading.get_ident)
    assert (ran_in == here) is (db.kind == "sqlite")


@pytest.mark.anyio
async def test_store_work_from_async_code_returns_its_result(db: Any) -> None:
    assert [r[0] for r in await db.run(db.query, "SELECT 1 + ?", (41,))] == [42]


def test_two_replicas_count_every_cache_hit_once(database_url: str | None, tmp_path: Path) -> None:
    """Two Database objects stand for two replicas sharing one database: no hit is lost or counted twice."""
    ledgers = [UsageLedger(open_database(database_url, tmp_path / "judge.sqlite3")) for _ in range(2)]
    threads = [threading.Thread(target=lambda led=led: [led.record_hit("acme", "openai:m", 0.25) for _ in range(50)])
               for led in ledgers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    days = ledgers[0].report("acme", 1).days
    for ledger in ledgers:
        ledger.db.close()
    assert [(d.model, d.requests, d.cache_hits, d.saved_usd) for d in days] == [("openai:m", 0, 100, 25.0)]


def test_a_cache_hit_of_an_unpriced_model_counts_and_saves_nothing_known(tmp_path: Path) -> None:
    ledger = UsageLedger(open_database(None, tmp_path / "judge.sqlite3"))
    ledger.record_hit("acme", "openai-compatible:llama", None)
    days = ledger.report("acme", 1).days
    assert [(d.cache_hits, d.saved_usd, d.cost_usd) for d in days] == [(1, 0.0, 0.0)]


def _queued_logger(name: str) -> tuple[logging.Logger, Any, io.StringIO]:
    from server.cli import _Queued

    out = io.StringIO()
    stream = logging.StreamHandler(out)
    stream.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    queued = _Queued(queue.SimpleQueue(), stream)
    logger = logging.getLogger(name)
    logger.handlers, logger.propagate = [queued], False
    logger.setLevel(logging.INFO)
    return logger, queued, out


def test_the_log_lines_of_a_burst_of_calls_are_written_whole_and_in_order() -> None:
    logger, queued, out = _queued_logger("tests.per_call.burst")
    for i in range(500):
        logger.info("tool=get_agent call=%d", i)
    queued.flush()
    queued.listener.stop()
    assert out.getvalue().splitlines() == [f"INFO tool=get_agent call={i}" for i in range(500)]


def test_a_logged_traceback_is_written_by_the_writer_thread() -> None:
    logger, queued, out = _queued_logger("tests.per_call.traceback")
    try:
        raise ValueError("the cause")
    except ValueError:
        logger.exception("incident %s", "abc123")
    queued.flush()
    queued.listener.stop()
    lines = out.getvalue().splitlines()
    assert lines[0] == "ERROR incident abc123" and lines[-1] == "ValueError: the cause"
