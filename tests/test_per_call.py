"""The per-call path's store work: where it runs (the event loop's thread for SQLite, a worker thread for
PostgreSQL) and the day's cache-hit counters, which several replicas add to at once."""

from __future__ import annotations

import io
import logging
import queue
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from judges.store.database import open_database
from judges.store.usage import UsageLedger

REPO = str(Path(__file__).resolve().parents[1])


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


def test_a_short_line_with_room_on_stderr_is_written_by_the_calling_thread() -> None:
    logger, queued, out = _queued_logger("tests.per_call.inline")
    logger.info("tool=get_agent outcome=ok")
    written_at_once = out.getvalue()  # before any flush: the writer thread had no part in it
    queued.listener.stop()
    assert written_at_once == "INFO tool=get_agent outcome=ok\n"


def test_lines_after_one_that_found_stderr_full_wait_behind_it_in_order() -> None:
    logger, queued, out = _queued_logger("tests.per_call.full")
    room = iter([False, True, True, True])
    gate = threading.Event()
    write = queued.listener._write

    def held_write(records: list[logging.LogRecord]) -> None:
        gate.wait(5)  # the writer thread is slow to write the queued line
        write(records)

    queued.listener._write = held_write
    queued._ready = lambda: next(room, True)
    for i in range(4):
        logger.info("line %d", i)
    nothing_yet = out.getvalue()
    gate.set()
    queued.flush()
    queued.listener.stop()
    assert nothing_yet == "" and out.getvalue().splitlines() == [f"INFO line {i}" for i in range(4)]


@pytest.mark.anyio
async def test_a_server_whose_stderr_nobody_reads_keeps_answering(tmp_path: Path) -> None:
    """A host that never reads the server's stderr: once the pipe is full every later line waits in the queue
    for the writer thread, and calls keep being answered."""
    import fcntl
    import os

    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from tests.mcp_helpers import call, server_env

    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, 1031, 4096)  # F_SETPIPE_SZ: one page, full after ~40 lines
    env = server_env(tmp_path / "home", JUDGE_MCP_WARM_EMBEDDINGS="false", JUDGE_MCP_LOG_LEVEL="INFO")
    params = StdioServerParameters(command=sys.executable, args=["-m", "server"], env=env | {"PYTHONPATH": REPO})
    with os.fdopen(write_end, "w") as err, os.fdopen(read_end, "rb") as unread:
        async with Client(stdio_client(params, errlog=err)) as client:
            agent = await call(client, "create_agent", name="Brand", system_prompt="p")
            with anyio.fail_after(60):
                got = [await call(client, "get_agent", agent_id=agent["id"]) for _ in range(300)]
            os.set_blocking(unread.fileno(), False)
            backlog = unread.read() or b""  # the host reads at last: the queued lines follow
    assert len(got) == 300 and {g["id"] for g in got} == {agent["id"]}
    # The pipe was full (but for less than the line waiting to be written, which may be a long one) while the
    # calls were answered.
    assert len(backlog) > 4096 - 1024


@pytest.mark.anyio
async def test_a_call_waiting_on_postgresql_leaves_the_server_answering_others(postgres: Any, tmp_path: Path) -> None:
    """A real server on PostgreSQL: while get_agent's SELECT waits on a lock another connection holds, the same
    process still answers a call that needs no database (a prompt asset); get_agent answers once the lock is
    released."""
    import anyio
    import psycopg
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    import prompts
    from server.resources import prompt_uri
    from tests.mcp_helpers import call, server_env

    url = postgres.create_database()
    env = server_env(tmp_path / "home", JUDGE_MCP_DATABASE_URL=url, JUDGE_MCP_WARM_EMBEDDINGS="false")
    params = StdioServerParameters(command=sys.executable, args=["-m", "server"], env=env | {"PYTHONPATH": REPO})
    done: list[str] = []
    with (tmp_path / "stderr").open("w") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            agent = await call(client, "create_agent", name="Locked out", system_prompt="Score it.")

            async def get_agent() -> None:
                got = await call(client, "get_agent", agent_id=agent["id"])
                done.append(got["name"])

            with psycopg.connect(url, autocommit=True) as holder, psycopg.connect(url, autocommit=True) as watcher:
                async with anyio.create_task_group() as tg:
                    with holder.transaction():
                        holder.execute("LOCK TABLE agents IN ACCESS EXCLUSIVE MODE")
                        tg.start_soon(get_agent)
                        with anyio.fail_after(60):  # only a guard against a hang: the order below is the test
                            while True:  # until get_agent's SELECT waits on the lock
                                if watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE datname="
                                                   "current_database() AND wait_event_type='Lock'").fetchone()[0]:
                                    break
                                await anyio.sleep(0.05)
                            asset = await client.read_resource(prompt_uri(prompts.list_templates()[0]))
                        done.append("prompt asset")
                        assert done == ["prompt asset"]  # answered while get_agent still waits on the database
    assert asset.contents[0].text and done == ["prompt asset", "Locked out"]


async def _evaluate_while_locked(postgres: Any, fake_server: Any, tmp_path: Path, lock: str,
                                 **env: str) -> tuple[list[str], dict[str, Any], str]:
    """A real server on PostgreSQL asking the fake model: evaluate_image starts while another connection holds
    `lock`; once one of the server's statements waits on it, list_agents is called on the same server. Returns
    the order the two calls finished in, evaluate_image's result and the database's URL."""
    import anyio
    import psycopg
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from tests.fake_model_server import Scripted
    from tests.mcp_helpers import call, server_env
    from tests.test_long_work import image_verdict, png_b64

    fake_server.respond_with(lambda rec: Scripted(text=image_verdict(70)))
    url = postgres.create_database()
    env = server_env(tmp_path / "home", JUDGE_MCP_DATABASE_URL=url, JUDGE_MCP_WARM_EMBEDDINGS="false",
                     JUDGE_MCP_MODEL="openai:gpt-fake", OPENAI_API_KEY="sk-test",
                     OPENAI_BASE_URL=fake_server.openai_url, **env)
    params = StdioServerParameters(command=sys.executable, args=["-m", "server"], env=env | {"PYTHONPATH": REPO})
    done: list[str] = []
    evaluated: dict[str, Any] = {}
    with (tmp_path / "stderr").open("w") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            await call(client, "create_agent", name="Judge", system_prompt="You are judge A.")

            async def evaluate() -> None:
                evaluated.update(await call(client, "evaluate_image", brief="a red square", images=[png_b64()]))
                done.append("evaluate_image")

            with psycopg.connect(url, autocommit=True) as holder, psycopg.connect(url, autocommit=True) as watcher:
                async with anyio.create_task_group() as tg:
                    with holder.transaction():
                        holder.execute(lock)
                        tg.start_soon(evaluate)
                        with anyio.fail_after(60):  # only a guard against a hang: the order below is the test
                            while True:  # until one of evaluate_image's statements waits on the lock
                                if watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE datname="
                                                   "current_database() AND wait_event_type='Lock'").fetchone()[0]:
                                    break
                                await anyio.sleep(0.05)
                            listed = await call(client, "list_agents")
                        done.append(f"list_agents: {len(listed['agents'])} agent(s)")
    return done, evaluated, url


@pytest.mark.anyio
async def test_a_call_whose_budget_read_waits_on_postgresql_leaves_the_server_answering_others(
        postgres: Any, fake_server: Any, tmp_path: Path) -> None:
    """With a daily budget set, evaluate_image first reads the day's spend from usage_daily; while that SELECT
    waits on a lock another connection holds, the same server answers list_agents, and evaluate_image finishes
    once the lock is released."""
    done, evaluated, _ = await _evaluate_while_locked(postgres, fake_server, tmp_path,
                                                      "LOCK TABLE usage_daily IN ACCESS EXCLUSIVE MODE",
                                                      JUDGE_MCP_DAILY_BUDGET_USD="1",
                                                      JUDGE_MCP_PRICES='{"gpt-fake": {"input": 2, "output": 10}}')
    assert done == ["list_agents: 1 agent(s)", "evaluate_image"]
    assert [e["score"] for e in evaluated["evaluations"]] == [70.0] and len(fake_server.requests) == 1


@pytest.mark.anyio
async def test_a_call_whose_result_cache_write_waits_on_postgresql_leaves_the_server_answering_others(
        postgres: Any, fake_server: Any, tmp_path: Path) -> None:
    """evaluate_image keeps the reply it read in result_cache; while that write waits on a lock another connection
    holds (EXCLUSIVE: the cache's read goes through, its INSERT waits), the same server answers list_agents, and
    the reply is kept once the lock is released."""
    import psycopg

    done, evaluated, url = await _evaluate_while_locked(postgres, fake_server, tmp_path,
                                                        "LOCK TABLE result_cache IN EXCLUSIVE MODE")
    with psycopg.connect(url) as conn:
        kept = conn.execute("SELECT count(*) FROM result_cache").fetchone()[0]
    assert done == ["list_agents: 1 agent(s)", "evaluate_image"]
    assert [e["score"] for e in evaluated["evaluations"]] == [70.0] and kept == 1
