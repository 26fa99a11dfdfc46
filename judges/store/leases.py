"""Leases on background jobs and uploads, so several replicas can share one database.

The replica that accepted a job (or an upload) holds it: its id is the job's `worker` (the document's
`owner`), and `heartbeat_at` is refreshed every lease/3 seconds by `Leases.run`. Any replica, on its
own beat, takes over the resumable jobs whose heartbeat is older than the lease (their replica died;
JobStore.claim, handed to `resume`) and marks `interrupted` the other working jobs and the pending uploads
whose lease expired; it also notices `cancel_requested` on the jobs it holds (cancel_job called
on another replica) and cancels them here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import anyio

from judges.store.database import timestamp
from judges.store.jobs import Claimed, JobStore

if TYPE_CHECKING:
    from judges.store.guidelines import Guidelines

log = logging.getLogger(__name__)

JOB_LOST = "the server replica running this job stopped (its lease expired) before it finished; call the tool again"


def cutoff(lease_s: float) -> str:
    """The heartbeat time before which a lease has expired (ISO text, compared as text)."""
    then = datetime.now(UTC) - timedelta(seconds=lease_s)
    return then.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Leases:
    def __init__(self, jobs: JobStore, guidelines: Guidelines | None, lease_s: float,
                 resumable: Collection[str] = ()):
        self.jobs = jobs
        self.guidelines = guidelines
        self.lease_s = lease_s
        self.resumable = resumable  # tools whose jobs are taken over rather than interrupted
        self.claimed: list[Claimed] = []

    def beat(self) -> list[str]:
        """One heartbeat: refresh this replica's leases, take over the resumable jobs of dead replicas (into
        `claimed`), expire the other dead leases; the ids of jobs held here whose cancel was requested elsewhere."""
        db, now = self.jobs.db, timestamp()
        with db.transaction() as conn:
            conn.execute("UPDATE jobs SET heartbeat_at=? WHERE status='working' AND worker=?", (now, self.jobs.worker))
        self.claimed = self.jobs.claim(self.resumable, cutoff(self.lease_s))
        expired = self.jobs.expire(cutoff(self.lease_s), self.resumable)
        if expired:
            log.warning("%d background job(s) of a stopped replica marked interrupted", expired)
        if self.guidelines is not None:
            self.guidelines.heartbeat(now)
            self.guidelines.expire(cutoff(self.lease_s))
        return self.jobs.cancel_requested()

    async def run(self, cancel: Callable[[str], None],
                  resume: Callable[[Sequence[Claimed]], None] = lambda claimed: None) -> None:
        """Beat every lease/3 seconds until cancelled (the server's task group)."""
        while True:
            try:
                for job_id in await anyio.to_thread.run_sync(self.beat):
                    cancel(job_id)
                if self.claimed:
                    resume(self.claimed)
            except Exception:  # a database hiccup must not end the heartbeat
                log.exception("lease heartbeat failed; retrying")
            await anyio.sleep(self.lease_s / 3)
