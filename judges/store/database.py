"""The state database: SQLite under the data directory (stdlib sqlite3, WAL) by default, or PostgreSQL
(psycopg 3 with a connection pool) when JUDGE_MCP_DATABASE_URL is set, so several replicas share one state.

One interface, `Database`: `query(sql, params)` and `transaction()` (a connection whose `execute` runs in
one transaction). Store code writes portable SQL: `?` placeholders (translated to `%s` for PostgreSQL),
timestamps as ISO-8601 text, TEXT/INTEGER/REAL columns (REAL and INTEGER become DOUBLE PRECISION and BIGINT
on PostgreSQL), no rowid (use `db.insertion_order`), no PRAGMA (use `db.columns(table)`).

How the schema changes:
- A NEW TABLE (or index): add `CREATE TABLE IF NOT EXISTS ...;` to SCHEMA below. SCHEMA runs at every start
  on both engines, so a table added here exists in old homes and old PostgreSQL databases alike.
- A NEW COLUMN or any change to an existing table: append one entry to MIGRATIONS (never edit or reorder
  one that shipped). Each is applied once, in order, and recorded in `schema_version`; an
  `ALTER TABLE t ADD COLUMN c ...` whose column is already there (homes made before versioning) is skipped.
On PostgreSQL the whole start-up schema step runs under `pg_advisory_lock`, so replicas starting together
do not race.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS agents (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    name TEXT NOT NULL,
    system_prompt TEXT NOT NULL,
    evaluation_categories TEXT,
    scoring_weight REAL NOT NULL,
    optimization_weight REAL NOT NULL,
    rag_config TEXT NOT NULL,
    template_id TEXT,
    model TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    deleted_at TEXT,
    score_scale TEXT
);
CREATE INDEX IF NOT EXISTS agents_org ON agents (organization_id, deleted_at);
CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    filename TEXT NOT NULL,
    mime_type TEXT,
    file_size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    processing_status TEXT NOT NULL,
    chunk_count INTEGER NOT NULL DEFAULT 0,
    characters INTEGER NOT NULL DEFAULT 0,
    pages INTEGER,
    error TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_agent ON documents (organization_id, agent_id);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    brief TEXT NOT NULL,
    max_iterations INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS iterations (
    run_id TEXT NOT NULL REFERENCES runs (id),
    iteration INTEGER NOT NULL,
    prompt TEXT NOT NULL,
    winner_index INTEGER,
    best REAL,
    mean REAL,
    ranking TEXT NOT NULL,
    evaluations TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (run_id, iteration)
);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    status TEXT NOT NULL,
    progress REAL NOT NULL DEFAULT 0,
    total REAL,
    message TEXT NOT NULL DEFAULT '',
    result TEXT,
    error TEXT,
    worker TEXT,
    heartbeat_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE INDEX IF NOT EXISTS jobs_org ON jobs (organization_id, status, created_at);
CREATE TABLE IF NOT EXISTS calibrations (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    judge TEXT NOT NULL,
    model TEXT NOT NULL,
    items INTEGER NOT NULL,
    report TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS calibrations_org ON calibrations (organization_id, created_at);
CREATE TABLE IF NOT EXISTS prompt_versions (
    organization_id TEXT NOT NULL,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    base TEXT NOT NULL,
    rules TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (organization_id, name, version)
);
CREATE TABLE IF NOT EXISTS result_cache (
    organization_id TEXT NOT NULL,
    cache_key TEXT NOT NULL,
    model TEXT NOT NULL,
    reply TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (organization_id, cache_key)
);
CREATE INDEX IF NOT EXISTS result_cache_age ON result_cache (organization_id, created_at);
CREATE TABLE IF NOT EXISTS usage_daily (
    organization_id TEXT NOT NULL,
    day TEXT NOT NULL,
    model TEXT NOT NULL,
    requests INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    unpriced_requests INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (organization_id, day, model)
);
CREATE TABLE IF NOT EXISTS api_tokens (
    id TEXT PRIMARY KEY,
    secret_sha256 TEXT NOT NULL UNIQUE,
    organization_id TEXT NOT NULL,
    role TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE TABLE IF NOT EXISTS rate_windows (
    organization_id TEXT NOT NULL,
    window_start TEXT NOT NULL,
    calls INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (organization_id, window_start)
);
CREATE TABLE IF NOT EXISTS budget_daily (
    organization_id TEXT NOT NULL,
    day TEXT NOT NULL,
    spent_nusd INTEGER NOT NULL DEFAULT 0,
    reserved_nusd INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (organization_id, day)
);
CREATE TABLE IF NOT EXISTS budget_reservations (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    day TEXT NOT NULL,
    amount_nusd INTEGER NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS budget_reservations_day ON budget_reservations (organization_id, day, expires_at);
CREATE TABLE IF NOT EXISTS job_units (
    job_id TEXT NOT NULL,
    unit TEXT NOT NULL,
    result TEXT,
    worker TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 1,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    PRIMARY KEY (job_id, unit)
);
"""



# Numbered changes to existing tables, applied once each, in order (append; never edit one that shipped).
MIGRATIONS: list[tuple[int, str]] = [
    (1, "ALTER TABLE agents ADD COLUMN score_scale TEXT"),
    (2, "ALTER TABLE runs ADD COLUMN panel TEXT"),  # the run's judges (agent ids, JSON), kept when it continues
    (3, "ALTER TABLE documents ADD COLUMN owner TEXT"),  # the process (or replica) processing a pending upload
    (4, "ALTER TABLE documents ADD COLUMN heartbeat_at TEXT"),  # its lease: refreshed while it processes
    (5, "ALTER TABLE jobs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0"),  # cancel from any replica
    (6, "ALTER TABLE agents ADD COLUMN models TEXT"),  # a jury of models (JSON list), when the agent has one
    (7, "ALTER TABLE iterations ADD COLUMN usage TEXT"),  # the iteration's tokens and cost (Usage, JSON)
    (8, "ALTER TABLE usage_daily ADD COLUMN cache_hits INTEGER NOT NULL DEFAULT 0"),  # replies from the cache
    (9, "ALTER TABLE usage_daily ADD COLUMN saved_usd REAL NOT NULL DEFAULT 0"),  # what those would have cost
    # Resumable jobs (judges/store/jobs.py): the call to make again, who made it, how often it was taken over.
    (10, "ALTER TABLE jobs ADD COLUMN arguments TEXT"),  # the tool's arguments (JSON), for a resumable tool
    (11, "ALTER TABLE jobs ADD COLUMN caller TEXT"),  # {"authenticated", "role"} of the call that started it
    (12, "ALTER TABLE jobs ADD COLUMN takeovers INTEGER NOT NULL DEFAULT 0"),  # times another process took it over
    (13, "ALTER TABLE jobs ADD COLUMN units_reused INTEGER NOT NULL DEFAULT 0"),  # units read back, not redone
]

# Counters bumped by every write to the guideline store, so replicas sharing a Chroma server know when
# their in-memory matrices and lexical indexes are stale (rag/store.py).
SCHEMA += """
CREATE TABLE IF NOT EXISTS store_generations (
    scope TEXT PRIMARY KEY,
    generation INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY,
    applied_at TEXT NOT NULL
);
"""

_ADD_COLUMN = re.compile(r"^\s*ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)", re.IGNORECASE)
_ADVISORY_KEY = 0x6A756467  # "judg": the schema lock shared by every replica


def _statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";") if part.strip()]


def storable(params: tuple[object, ...] | list[object]) -> tuple[object, ...]:
    """The parameters of one statement, refused (InputError) when a text holds a NUL byte: PostgreSQL cannot keep
    one and SQLite would, so both engines refuse it alike, as the caller's input, before the statement runs. Tool
    arguments are checked at the door (server/app.py, naming the argument); this catches text from anywhere else
    (a dataset file, a document) the same way on both engines."""
    for value in params:
        if isinstance(value, str) and "\x00" in value:
            from judges.errors import InputError

            raise InputError(f"a text value contains a NUL byte (\\x00) and cannot be stored: remove it "
                             f"(it begins {value[:40]!r})")
    return tuple(params)


def shown(text: str | None) -> str | None:
    """A message the server writes itself (a job's progress or error, a document's error), which may quote bytes
    it read: a NUL written as `\\x00`, so storing it never fails."""
    return None if text is None else text.replace("\x00", "\\x00")


class _SqliteConnection:
    """The SQLite connection inside one transaction (what `transaction()` yields): its statements' parameters
    are checked like PostgreSQL's."""

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn

    def execute(self, sql: str, params: tuple[object, ...] | list[object] = ()) -> Any:
        return self._conn.execute(sql, storable(params))


class Database:
    """The interface, and its SQLite implementation: one connection per process, serialised by a lock;
    every write is one transaction. `PostgresDatabase` is the other implementation."""

    kind = "sqlite"
    insertion_order = "rowid"  # a column ordering rows as they were inserted (ties of created_at)

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        # In WAL mode NORMAL is safe against corruption and skips the fsync of every commit (~5 ms here), which
        # would otherwise dominate a call answered from the result cache; a power cut may lose the last commits.
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=5000")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._lock = threading.RLock()
        self._conn.executescript(SCHEMA)
        self._migrate()

    def describe(self) -> str:
        return str(self.path)

    def columns(self, table: str) -> set[str]:
        return {r["name"] for r in self.query(f"PRAGMA table_info({table})")}

    def _migrate(self) -> None:
        """Apply the MIGRATIONS not yet recorded in schema_version."""
        done = {int(r["version"]) for r in self.query("SELECT version FROM schema_version")}
        for version, sql in MIGRATIONS:
            if version in done:
                continue
            with self.transaction() as conn:
                added = _ADD_COLUMN.match(sql)
                if added is None or added.group(2) not in self._columns_in(conn, added.group(1)):
                    conn.execute(sql)
                conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)", (version, timestamp()))

    def _columns_in(self, conn: Any, table: str) -> set[str]:
        return {r["name"] for r in conn.execute(f"PRAGMA table_info({table})").fetchall()}

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteConnection(self._conn)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[Any]:
        with self._lock:
            return self._conn.execute(sql, storable(params)).fetchall()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` (store work on this database) from async code. SQLite's local reads and writes run here on
        the caller's thread: a hand-off to a worker thread costs more than they do. PostgreSQL's wait on the
        network, so they run in a worker thread (at most the pool's size at once) and the event loop serves
        other calls meanwhile."""
        return fn(*args)


def timestamp() -> str:
    """The current UTC time as every store writes it: ISO 8601 to the millisecond, with Z."""
    from datetime import UTC, datetime
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def pg_sql(sql: str) -> str:
    """Portable SQL to psycopg's: `?` placeholders become `%s` (a literal % is doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


def pg_ddl(sql: str) -> str:
    """SCHEMA/MIGRATIONS DDL for PostgreSQL: SQLite's REAL and INTEGER are 4 bytes there, so widen them."""
    sql = re.sub(r"\bREAL\b", "DOUBLE PRECISION", sql)
    return re.sub(r"\bINTEGER\b", "BIGINT", sql)


class Row(dict[str, Any]):
    """A PostgreSQL row read like sqlite3.Row: by column name or by position."""

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int):
            return list(self.values())[key]
        return super().__getitem__(key)


def _row_factory(cursor: Any) -> Any:
    names = [c.name for c in cursor.description] if cursor.description else []

    def make(values: Any) -> Row:
        return Row(zip(names, values, strict=True))
    return make


class _PgConnection:
    """A pooled connection inside one transaction, taking portable SQL (what `transaction()` yields)."""

    def __init__(self, conn: Any):
        self._conn = conn

    def execute(self, sql: str, params: tuple[object, ...] | list[object] = ()) -> Any:
        return self._conn.execute(pg_sql(sql), storable(params))


POOL_WAIT_S = 5.0  # the longest a call waits for a database connection
CONNECT_TIMEOUT_S = 3  # one connection attempt
START_WAIT_S = 30.0  # the longest a starting server waits for the database, by default (replicas may start before it)


@contextmanager
def unavailable_as_error() -> Iterator[None]:
    """PostgreSQL stopped, restarting or unreachable: an UnavailableError saying so (the store's one failure type),
    not an incident."""
    import psycopg

    try:
        yield
    except psycopg.OperationalError as exc:
        from judges.errors import UnavailableError

        raise UnavailableError(
            f"the state database (PostgreSQL) did not answer: {type(exc).__name__}: {str(exc).strip()[:200]}",
            hint="retry in a few seconds; the server reconnects by itself once the database is back") from exc


class PostgresDatabase(Database):
    """PostgreSQL by URL (psycopg 3, a psycopg_pool connection pool); the same interface as SQLite's."""

    kind = "postgresql"
    insertion_order = "seq"

    def __init__(self, url: str, *, pool_size: int = 10,
                 start_wait_s: float = START_WAIT_S):  # not super().__init__: that one opens SQLite
        import psycopg_pool

        self.url = url
        self._pool_size = pool_size
        self._limiter: Any = None  # anyio.CapacityLimiter, made in the event loop that first needs it
        # A stopped or unreachable database: a call waits at most POOL_WAIT_S for a connection (each attempt at most
        # CONNECT_TIMEOUT_S), then fails with UnavailableError; a connection is checked as it leaves the pool, so
        # the ones a restart broke are replaced, and the pool reconnects by itself once the database is back.
        self._pool = psycopg_pool.ConnectionPool(url, min_size=1, max_size=pool_size, open=True, timeout=POOL_WAIT_S,
                                                 check=psycopg_pool.ConnectionPool.check_connection,
                                                 kwargs={"row_factory": _row_factory, "autocommit": True,
                                                         "connect_timeout": CONNECT_TIMEOUT_S})
        try:
            self._pool.wait(timeout=start_wait_s)
        except psycopg_pool.PoolTimeout:
            self._pool.close()
            from judges.errors import UnavailableError

            raise UnavailableError(
                f"the state database {self.describe()} (JUDGE_MCP_DATABASE_URL) did not answer within "
                f"{start_wait_s:g} s of the start",
                hint="start PostgreSQL, correct the URL's host, port, database and credentials, or wait longer: "
                     "JUDGE_MCP_DATABASE_START_WAIT_S") from None
        self._prepare()

    def describe(self) -> str:
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(self.url)
        return f"postgresql://{info.get('host', '')}:{info.get('port', '')}/{info.get('dbname', '')}"

    def _prepare(self) -> None:
        """SCHEMA and MIGRATIONS under an advisory lock: replicas starting together apply them once."""
        with self._pool.connection() as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (_ADVISORY_KEY,))
            try:
                with conn.transaction():
                    for statement in _statements(SCHEMA):
                        conn.execute(pg_ddl(statement))
                    for table in ("agents", "documents"):
                        conn.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS seq BIGSERIAL")
                    done = {int(r["version"]) for r in conn.execute("SELECT version FROM schema_version").fetchall()}  # type: ignore[call-overload]
                    for version, sql in MIGRATIONS:
                        if version in done:
                            continue
                        added = _ADD_COLUMN.match(sql)
                        if added is None or added.group(2) not in self._columns_in(conn, added.group(1)):
                            conn.execute(pg_ddl(sql))
                        conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (%s, %s)",
                                     (version, timestamp()))
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_ADVISORY_KEY,))

    def _columns_in(self, conn: Any, table: str) -> set[str]:
        rows = conn.execute("SELECT column_name FROM information_schema.columns WHERE table_name=%s "
                            "AND table_schema=current_schema()", (table,)).fetchall()
        return {r["column_name"] for r in rows}

    def columns(self, table: str) -> set[str]:
        with self._pool.connection() as conn:
            return self._columns_in(conn, table)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with unavailable_as_error(), self._pool.connection() as conn, conn.transaction():
            yield _PgConnection(conn)

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[Any]:
        with unavailable_as_error(), self._pool.connection() as conn:
            cur = conn.execute(pg_sql(sql), storable(params))
            return cur.fetchall() if cur.description else []

    def close(self) -> None:
        self._pool.close()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        import anyio.to_thread

        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._pool_size)
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._limiter)


def open_database(url: str | None, path: Path, *, start_wait_s: float = START_WAIT_S) -> Database:
    """PostgreSQL when a URL is given (JUDGE_MCP_DATABASE_URL; waiting at most `start_wait_s` for it to answer),
    else SQLite at `path`."""
    if url:
        return PostgresDatabase(url, start_wait_s=start_wait_s)
    return Database(path)
