"""Background jobs as stored records: status, progress, the result or the error, per organization.

Statuses follow MCP's Tasks extension where it has a word (working, completed, failed, cancelled), plus
`interrupted`: the process running the job ended before it finished. `worker` names the process that runs
a job and `heartbeat_at` is refreshed with every progress report, so a later lease (several replicas on
one PostgreSQL database) can take over jobs whose worker stopped beating.

A resumable job (its tool records units of work, judges/units.py) keeps the call's `arguments` and its
`caller`; each finished unit is a row of `job_units`. When its worker stops (lease expired, or a single
server restarted), `claim` gives it to another process, which calls the tool again with the same arguments
and reads the finished units back instead of asking the model again (`takeovers` counts the hand-overs,
`units_reused` the units read back, and a unit begun before the hand-over and done again is listed in
`units_redone`).
"""

from __future__ import annotations

import builtins
import json
import os
import socket
import uuid
from collections.abc import Collection
from typing import Any, Literal

from pydantic import BaseModel, Field

from judges.errors import InputError, NotFoundError, OverLimitError
from judges.processes import pid_alive
from judges.store.database import Database, shown, timestamp

JobStatus = Literal["working", "completed", "failed", "cancelled", "interrupted"]
STATUSES: tuple[str, ...] = ("working", "completed", "failed", "cancelled", "interrupted")
FINISHED = ("completed", "failed", "cancelled", "interrupted")
STOPPED = "the server stopped before the job finished; call the tool again"  # why a job is interrupted
# A job whose process stopped this many times is not taken over again (interrupted: its work may be what stops them).
MAX_TAKEOVERS = 3
# At most this many jobs taken over per claim (a heartbeat, or a start): thousands of dead replicas' jobs are
# spread over later heartbeats instead of one unbounded transaction and a burst of restarted work.
CLAIM_LIMIT = 4
EXPIRED = "1970-01-01T00:00:00.000Z"  # a heartbeat that has expired whatever the lease


class Job(BaseModel):
    job_id: str
    tool: str
    status: JobStatus
    progress: float = Field(description="Work done so far, in the unit of `total`.")
    total: float | None = Field(default=None, description="Work to do in all, when known.")
    message: str = Field(default="", description="The last progress message, a sentence a person can read.")
    result: dict[str, Any] | None = Field(
        default=None, description="When completed: the structured result the tool would have returned.")
    error: str | None = Field(default=None, description="When failed, cancelled or interrupted: why.")
    worker: str | None = Field(default=None, description="The server process that runs (or ran) the job.")
    takeovers: int = Field(default=0, description=(
        "How many times another server process took the job over (its worker stopped) and continued it."))
    units_done: int | None = Field(default=None, description=(
        "Units of work recorded as finished (items, games, judge x image); get_job has it, list_jobs not."))
    units_reused: int = Field(default=0, description="Finished units read back at a takeover instead of redone.")
    units_redone: list[str] | None = Field(default=None, description=(
        "Units begun by a worker that stopped before finishing them, done again after a takeover (at most 100)."))
    created_at: str
    updated_at: str
    finished_at: str | None = None



def this_worker() -> str:
    """This process as a job worker: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(worker: str) -> bool:
    """Whether a worker on this host is still running (a worker on another host is assumed alive)."""
    host, _, pid = worker.rpartition(":")
    return host != socket.gethostname() or not pid.isdigit() or pid_alive(int(pid))


class JobStore:
    def __init__(self, db: Database, worker: str | None = None):
        self.db = db
        self.worker = worker or this_worker()

    def create(self, org: str, tool: str, limit: int | None = None, *, arguments: dict[str, Any] | None = None,
               caller: dict[str, Any] | None = None) -> Job:
        """A new working job; with `limit`, OverLimitError when the organization already has that many working.
        `arguments` and `caller` (a resumable tool's): what another process needs to call it again.
        The count and the insert are one transaction, serialised per organization (SQLite's writer lock; a
        transaction-scoped advisory lock on PostgreSQL), so calls racing each other cannot pass the limit."""
        job_id = str(uuid.uuid4())
        now = timestamp()
        with self.db.transaction() as conn:
            if limit is not None:
                if self.db.kind == "postgresql":
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (f"jobs:{org}",))
                running = int(conn.execute("SELECT COUNT(*) FROM jobs WHERE organization_id=? AND status='working'",
                                           (org,)).fetchone()[0])
                if running >= limit:
                    raise OverLimitError(
                        f"organization {org!r} already has {running} background jobs running, the most it may have "
                        f"(JUDGE_MCP_MAX_JOBS_PER_ORG={limit}); wait for one to finish (list_jobs, get_job), cancel "
                        "one (cancel_job), or call the tool without background")
            conn.execute(
                "INSERT INTO jobs (id, organization_id, tool, status, progress, total, message, worker, heartbeat_at, "
                "created_at, updated_at, arguments, caller) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (job_id, org, tool, "working", 0.0, None, "started", self.worker, now, now, now,
                 None if arguments is None else json.dumps(arguments),
                 None if caller is None else json.dumps(caller)))
        return self.get(org, job_id)

    def get(self, org: str, job_id: str) -> Job:
        rows = self.db.query("SELECT * FROM jobs WHERE id=? AND organization_id=?", (job_id, org))
        if not rows:
            raise NotFoundError(f"no job {job_id!r} in this organization (a tool called with background=true "
                                "returns job_id; list_jobs lists them)")
        units = self.db.query("SELECT unit, result IS NOT NULL AS done, attempts FROM job_units WHERE job_id=? "
                              "ORDER BY started_at, unit", (job_id,))
        return _job(rows[0]).model_copy(update={
            "units_done": sum(1 for u in units if u["done"]),
            "units_redone": [u["unit"] for u in units if int(u["attempts"]) > 1][:100]})

    def list(self, org: str, status: str | None = None, limit: int = 100) -> list[Job]:
        """The organization's jobs, newest first, without their results (get has them: they can be large)."""
        if status is not None and status not in STATUSES:
            raise InputError(f"status must be one of {', '.join(STATUSES)} (got {status!r}), e.g. \"working\"")
        sql = "SELECT * FROM jobs WHERE organization_id=?" + (" AND status=?" if status else "")
        params: tuple[object, ...] = (org, status) if status else (org,)
        rows = self.db.query(sql + " ORDER BY created_at DESC, id LIMIT ?", (*params, limit))
        return [_job(r, with_result=False) for r in rows]

    def progress(self, job_id: str, done: float, total: float | None, message: str) -> None:
        """Record progress (and a heartbeat) of a job that is still working. Progress only moves forward (as MCP
        progress must): judges finishing at once report together, and on PostgreSQL their writes run in worker
        threads that may commit in either order, so a report behind the stored one leaves it as it is."""
        now = timestamp()
        with self.db.transaction() as conn:
            conn.execute("UPDATE jobs SET progress=?, total=?, message=?, heartbeat_at=?, updated_at=? "
                         "WHERE id=? AND status='working' AND (progress IS NULL OR progress <= ?)",
                         (done, total, shown(message), now, now, job_id, done))

    def finish(self, job_id: str, status: JobStatus, *, result: dict[str, Any] | None = None,
               error: str | None = None) -> None:
        """A working job's end: completed with its result, or failed/cancelled/interrupted with why."""
        now = timestamp()
        with self.db.transaction() as conn:
            conn.execute("UPDATE jobs SET status=?, result=?, error=?, updated_at=?, finished_at=? "
                         "WHERE id=? AND status='working'",
                         (status, None if result is None else json.dumps(result), shown(error), now, now, job_id))

    def claim(self, tools: Collection[str], before: str, *, started: str | None = None,
              limit: int = CLAIM_LIMIT) -> builtins.list[Claimed]:
        """Take over the working jobs of resumable `tools` whose worker stopped: those whose heartbeat is older
        than `before` (their lease expired; on SQLite, one home, only when that process on this host has ended),
        and at start (`started`: when this process started) this process's own name's last changed before it (a
        restarted container keeps its host name and pid; a job claimed since is not claimed again). On PostgreSQL
        each row is locked with FOR UPDATE SKIP LOCKED, so two replicas never take the same job. Each becomes this
        worker's, its heartbeat fresh and `takeovers` one more; returned: what to call again. At most `limit`,
        oldest first: the rest wait for a later claim (expire leaves them)."""
        if not tools:
            return []
        marks = ",".join("?" for _ in tools)
        sql = (f"SELECT id, organization_id, tool, arguments, caller, worker, updated_at FROM jobs WHERE status='working' "
               f"AND arguments IS NOT NULL AND takeovers<? AND tool IN ({marks}) AND ")
        params: tuple[object, ...] = (MAX_TAKEOVERS, *tools)
        if self.db.kind == "sqlite":
            sql += "1=1"  # which: decided below, per row
        elif started is not None:
            sql, params = sql + "((worker=? AND updated_at<?) OR heartbeat_at<?)", (*params, self.worker, started, before)
        else:
            sql, params = sql + "worker<>? AND heartbeat_at<?", (*params, self.worker, before)
        if self.db.kind == "postgresql":
            sql, params = sql + " ORDER BY created_at LIMIT ? FOR UPDATE SKIP LOCKED", (*params, limit)
        else:
            sql += " ORDER BY created_at"
        now = timestamp()
        with self.db.transaction() as conn:
            rows = conn.execute(sql, params).fetchall()
            if self.db.kind == "sqlite":  # one home: a live process on this host keeps its jobs
                rows = [r for r in rows if (started is not None and r["worker"] == self.worker
                                            and r["updated_at"] < started)
                        or (r["worker"] != self.worker and not _alive(r["worker"] or ""))][:limit]
            for r in rows:
                conn.execute("UPDATE jobs SET worker=?, heartbeat_at=?, updated_at=?, takeovers=takeovers+1, "
                             "message=? WHERE id=?",
                             (self.worker, now, now, f"taken over by {self.worker} from {r['worker']}", r["id"]))
        return [Claimed(job_id=r["id"], org=r["organization_id"], tool=r["tool"],
                        arguments=json.loads(r["arguments"]), caller=json.loads(r["caller"] or "{}"),
                        previous=r["worker"] or "") for r in rows]

    def units(self, job_id: str) -> dict[str, str | None]:
        """A job's recorded units: the JSON result of each finished one, None for one begun and not finished."""
        return {r["unit"]: r["result"] for r in self.db.query("SELECT unit, result FROM job_units WHERE job_id=?",
                                                              (job_id,))}

    def unit_started(self, job_id: str, unit: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO job_units (job_id, unit, worker, started_at) VALUES (?,?,?,?) "
                         "ON CONFLICT (job_id, unit) DO UPDATE SET attempts=job_units.attempts+1, "
                         "worker=excluded.worker, started_at=excluded.started_at", (job_id, unit, self.worker, timestamp()))

    def unit_finished(self, job_id: str, unit: str, result: str) -> None:
        now = timestamp()
        with self.db.transaction() as conn:
            conn.execute("UPDATE job_units SET result=?, finished_at=? WHERE job_id=? AND unit=?",
                         (result, now, job_id, unit))
            conn.execute("UPDATE jobs SET heartbeat_at=? WHERE id=? AND status='working'", (now, job_id))

    def reused(self, job_id: str, count: int) -> None:
        """`count` more units of this job were read back at a takeover instead of done again."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE jobs SET units_reused=units_reused+? WHERE id=?", (count, job_id))

    def interrupt_orphans(self) -> int:
        """At start: jobs still `working` whose worker process on this host has ended are `interrupted`."""
        rows = self.db.query("SELECT id, worker FROM jobs WHERE status='working' AND (arguments IS NULL "
                             "OR takeovers>=?)", (MAX_TAKEOVERS,))
        # Resumable jobs (arguments kept) are taken over instead (claim). With a shared database (replicas on other hosts) leases decide instead: see judges/store/leases.py.
        orphans = [r["id"] for r in rows if r["worker"] == self.worker
                   or (self.db.kind == "sqlite" and not _alive(r["worker"] or ""))]
        for job_id in orphans:
            self.finish(job_id, "interrupted", error="the server process running this job ended before it finished; "
                                                     "call the tool again")
        return len(orphans)

    def expire(self, before: str, resumable: Collection[str] = ()) -> int:
        """Working jobs of another worker whose heartbeat is older than `before` (its lease expired) are
        `interrupted`, except those of `resumable` tools a later claim will take over; how many."""
        from judges.store.leases import JOB_LOST

        sql = "SELECT id, worker FROM jobs WHERE status='working' AND worker<>? AND heartbeat_at<?"
        params: tuple[object, ...] = (self.worker, before)
        if resumable:
            marks = ",".join("?" for _ in resumable)
            sql += f" AND NOT (arguments IS NOT NULL AND takeovers<? AND tool IN ({marks}))"
            params = (*params, MAX_TAKEOVERS, *resumable)
        rows = self.db.query(sql, params)
        # One home (SQLite): a live process on this host keeps its jobs even when its heartbeat was late.
        stale = [r["id"] for r in rows if self.db.kind != "sqlite" or not _alive(r["worker"] or "")]
        now, count = timestamp(), 0
        for job_id in stale:
            with self.db.transaction() as conn:
                count += int(conn.execute(
                    "UPDATE jobs SET status='interrupted', error=?, updated_at=?, finished_at=? "
                    "WHERE id=? AND status='working' AND heartbeat_at<?", (JOB_LOST, now, now, job_id, before)).rowcount)
        return count

    def request_cancel(self, org: str, job_id: str) -> Job:
        """Cancel a job held by another replica: it is `cancelled` now, and its holder stops the work when
        it sees the flag on its next heartbeat."""
        now = timestamp()
        with self.db.transaction() as conn:
            conn.execute("UPDATE jobs SET cancel_requested=1, status='cancelled', error=?, updated_at=?, "
                         "finished_at=? WHERE id=? AND organization_id=? AND status='working'",
                         ("cancelled with cancel_job", now, now, job_id, org))
        return self.get(org, job_id)

    def cancel_requested(self) -> builtins.list[str]:
        """Jobs held here whose cancel was requested on another replica (each returned once)."""
        with self.db.transaction() as conn:
            rows = conn.execute("SELECT id FROM jobs WHERE worker=? AND cancel_requested=1", (self.worker,)).fetchall()
            for r in rows:
                conn.execute("UPDATE jobs SET cancel_requested=2 WHERE id=?", (r["id"],))
        return [r["id"] for r in rows]

    def stopped(self, job_id: str) -> None:
        """This process stops before the job finished: a resumable job is left working with its lease expired at
        once, for another replica (or this server, started again) to take over; any other is `interrupted`."""
        with self.db.transaction() as conn:
            left = conn.execute("UPDATE jobs SET heartbeat_at=?, message=?, updated_at=? WHERE id=? AND worker=? "
                                "AND status='working' AND arguments IS NOT NULL",
                                (EXPIRED, "the server running it stopped; the next server process continues it",
                                 timestamp(), job_id, self.worker)).rowcount
        if not left:
            self.finish(job_id, "interrupted", error=STOPPED)

    def interrupt_mine(self) -> None:
        """At shutdown: this process's jobs that are still working are `interrupted` (resumable ones left for a
        takeover: `stopped`)."""
        rows = self.db.query("SELECT id FROM jobs WHERE status='working' AND worker=?", (self.worker,))
        for r in rows:
            self.stopped(r["id"])


class Claimed(BaseModel):
    """A job this process took over: the call to make again."""

    job_id: str
    org: str
    tool: str
    arguments: dict[str, Any]
    caller: dict[str, Any]
    previous: str


def _job(row: Any, with_result: bool = True) -> Job:
    result = json.loads(row["result"]) if with_result and row["result"] is not None else None
    return Job(job_id=row["id"], tool=row["tool"], status=row["status"], progress=row["progress"], total=row["total"],
               message=row["message"], result=result,
               error=row["error"], worker=row["worker"], takeovers=int(row["takeovers"] or 0),
               units_reused=int(row["units_reused"] or 0), created_at=row["created_at"], updated_at=row["updated_at"],
               finished_at=row["finished_at"])
