"""The job store and the job-or-result output shape, without a server."""

from __future__ import annotations

import functools
import socket
import time
from pathlib import Path

import jsonschema
import pytest

from judges.errors import InputError, NotFoundError
from judges.image.optimizer import OptimizedPrompt
from judges.store.database import MIGRATIONS, Database, open_database, timestamp
from judges.store.jobs import JobStore
from judges.store.leases import JOB_LOST, Leases
from server.jobs import or_job


def test_a_job_belongs_to_its_organization(db: Database) -> None:
    jobs = JobStore(db)
    job = jobs.create("org-a", "evaluate_image")
    with pytest.raises(NotFoundError, match="no job"):
        jobs.get("org-b", job.job_id)
    assert jobs.get("org-a", job.job_id).status == "working" and jobs.list("org-b") == []


def test_progress_and_the_result_are_stored(db: Database) -> None:
    jobs = JobStore(db)
    job = jobs.create("o", "judge_code")
    jobs.progress(job.job_id, 2, 4, "gate lint passed")
    jobs.finish(job.job_id, "completed", result={"verdict": "accept"})
    jobs.progress(job.job_id, 3, 4, "late")  # a finished job's record no longer moves
    stored = jobs.get("o", job.job_id)
    assert (stored.status, stored.progress, stored.total, stored.message) == ("completed", 2, 4, "gate lint passed")
    assert stored.result == {"verdict": "accept"} and stored.finished_at is not None
    assert [(j.job_id, j.result) for j in jobs.list("o")] == [(job.job_id, None)]  # results only from get


def test_progress_written_out_of_order_keeps_the_furthest(db: Database) -> None:
    jobs = JobStore(db)
    job = jobs.create("o", "evaluate_image")
    jobs.progress(job.job_id, 2, 2, "judge B done")
    jobs.progress(job.job_id, 1, 2, "judge A done")  # committed second, reported first
    stored = jobs.get("o", job.job_id)
    assert (stored.progress, stored.total, stored.message) == (2, 2, "judge B done")


@pytest.mark.parametrize("engine", ["sqlite"])  # one home, one host: process ids; PostgreSQL: leases (below)
def test_a_restart_interrupts_jobs_of_dead_workers_on_this_host_only(db: Database) -> None:
    host = socket.gethostname()
    dead = JobStore(db, worker=f"{host}:999999999").create("o", "evaluate_image")
    other_host = JobStore(db, worker="elsewhere:1").create("o", "evaluate_image")
    alive = JobStore(db, worker=f"{host}:1").create("o", "evaluate_image")  # pid 1 runs
    assert JobStore(db).interrupt_orphans() == 1
    statuses = {j.job_id: j.status for j in JobStore(db).list("o")}
    assert statuses == {dead.job_id: "interrupted", other_host.job_id: "working", alive.job_id: "working"}


@pytest.mark.parametrize("engine", ["postgresql"])  # SQLite decides by process ids: the test above
def test_a_restart_leaves_other_workers_jobs_to_their_leases_on_postgresql(db: Database) -> None:
    dead = JobStore(db, worker=f"{socket.gethostname()}:999999999").create("o", "evaluate_image")
    assert JobStore(db).interrupt_orphans() == 0 and JobStore(db).get("o", dead.job_id).status == "working"


def test_a_job_whose_lease_expired_is_interrupted_by_another_replica(db: Database) -> None:
    held = JobStore(db, worker=f"{socket.gethostname()}:999999999").create("o", "evaluate_image")  # a dead pid
    with db.transaction() as conn:
        conn.execute("UPDATE jobs SET heartbeat_at=? WHERE id=?", ("2020-01-01T00:00:00.000Z", held.job_id))
    fresh = JobStore(db, worker="replica-2").create("o", "evaluate_image")
    Leases(JobStore(db, worker="replica-3"), None, lease_s=15).beat()
    got = {j.job_id: (j.status, j.error) for j in JobStore(db).list("o")}
    assert got == {held.job_id: ("interrupted", JOB_LOST), fresh.job_id: ("working", None)}


def test_the_heartbeat_refreshes_only_the_jobs_this_replica_holds(db: Database) -> None:
    mine = JobStore(db, worker="replica-1")
    job, other = mine.create("o", "judge_code"), JobStore(db, worker="replica-2").create("o", "judge_code")
    with db.transaction() as conn:
        conn.execute("UPDATE jobs SET heartbeat_at=?", ("2020-01-01T00:00:00.000Z",))
    Leases(mine, None, lease_s=3600).beat()
    beats = {r["id"]: r["heartbeat_at"] for r in db.query("SELECT id, heartbeat_at FROM jobs")}
    assert beats[job.job_id] > "2020" + "-01-02" and beats[other.job_id] == "2020-01-01T00:00:00.000Z"


def test_a_cancel_on_another_replica_is_recorded_and_reaches_the_holder_once(db: Database) -> None:
    holder = JobStore(db, worker="replica-1")
    job = holder.create("o", "judge_code")
    cancelled = JobStore(db, worker="replica-3").request_cancel("o", job.job_id)
    assert (cancelled.status, cancelled.error) == ("cancelled", "cancelled with cancel_job")
    leases = Leases(holder, None, lease_s=15)
    assert leases.beat() == [job.job_id] and leases.beat() == []


def test_migrations_are_recorded_once_and_reopening_applies_none(db: Database, database_url: str | None,
                                                                tmp_path: Path) -> None:
    versions = [r["version"] for r in db.query("SELECT version FROM schema_version ORDER BY version")]
    assert versions == [v for v, _ in MIGRATIONS]
    again = open_database(database_url, tmp_path / "judge.sqlite3")
    assert [r["version"] for r in again.query("SELECT version FROM schema_version ORDER BY version")] == versions
    assert {"owner", "heartbeat_at"} <= again.columns("documents") and "cancel_requested" in again.columns("jobs")
    again.close()


def test_list_refuses_an_unknown_status_by_name(db: Database) -> None:
    with pytest.raises(InputError, match=r"status must be one of working, completed, failed, cancelled, "
                                         r"interrupted \(got 'done'\)"):
        JobStore(db).list("o", "done")


def test_the_output_schema_admits_the_result_and_a_started_job_and_has_an_object_root() -> None:
    schema = or_job(OptimizedPrompt).model_json_schema()
    result = OptimizedPrompt(prompt="p", addressed=[], preserved=[], instructions_included=[]).model_dump(mode="json")
    jsonschema.validate(result, schema)
    jsonschema.validate({"job_id": "j", "status": "working", "tool": "optimize_prompt"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"job_id": "j"}, schema)
    assert schema["type"] == "object" and or_job(OptimizedPrompt) is or_job(OptimizedPrompt)


@pytest.mark.anyio
async def test_a_background_call_on_the_hosts_sampling_model_is_refused_with_what_to_do(tmp_path: Path) -> None:
    from mcp import Client
    from mcp.types import CreateMessageResult, TextContent

    from server.app import create_server
    from tests.conftest import make_settings

    async def sampling(context: object, params: object) -> CreateMessageResult:
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text='{"winner": "A"}'),
                                   model="host-model", stop_reason="endTurn")

    async with Client(create_server(make_settings(tmp_path / "home")), mode="legacy", sampling_callback=sampling) as c:
        result = await c.call_tool("pairwise_compare", {"instruction": "say hi", "candidates": ["hi", "hello"],
                                                        "candidate_type": "text", "background": True})
    assert result.is_error
    assert "cannot run as a background job. Call it without background, or set JUDGE_MCP_MODEL to an API " \
           "backend" in result.content[0].text


def resumable(db: Database, worker: str, heartbeat: str | None = None) -> str:
    job = JobStore(db, worker=worker).create("o", "calibrate_judge", arguments={"judge": "score_text"},
                                             caller={"authenticated": True, "role": "member"})
    if heartbeat is not None:
        with db.transaction() as conn:
            conn.execute("UPDATE jobs SET heartbeat_at=? WHERE id=?", (heartbeat, job.job_id))
    return job.job_id


@pytest.mark.parametrize("engine", ["postgresql"])
def test_a_resumable_job_whose_lease_expired_is_taken_over_by_one_replica_only(db: Database) -> None:
    job_id = resumable(db, "replica-1", "2020-01-01T00:00:00.000Z")
    first = Leases(JobStore(db, worker="replica-2"), None, lease_s=15, resumable=("calibrate_judge",))
    second = Leases(JobStore(db, worker="replica-3"), None, lease_s=15, resumable=("calibrate_judge",))
    first.beat()
    second.beat()
    job = JobStore(db).get("o", job_id)
    assert [(c.job_id, c.org, c.arguments, c.caller, c.previous) for c in first.claimed] == [
        (job_id, "o", {"judge": "score_text"}, {"authenticated": True, "role": "member"}, "replica-1")]
    assert (second.claimed, job.status, job.worker, job.takeovers) == ([], "working", "replica-2", 1)


@pytest.mark.parametrize("engine", ["postgresql"])
def test_two_replicas_claiming_at_once_never_take_the_same_job(db: Database) -> None:
    from concurrent.futures import ThreadPoolExecutor

    jobs = {resumable(db, "dead", "2020-01-01T00:00:00.000Z") for _ in range(20)}
    stores = [JobStore(db, worker=f"replica-{i}") for i in range(4)]
    with ThreadPoolExecutor(4) as pool:
        claimed = list(pool.map(lambda s: [c.job_id for _ in range(3) for c in s.claim(("calibrate_judge",),
                                                                                      "2021-01-01")], stores))
    taken = [job for batch in claimed for job in batch]
    assert sorted(taken) == sorted(jobs)  # every job once, none twice


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_one_claim_takes_at_most_claim_limit_jobs_oldest_first(db: Database) -> None:
    from judges.store.jobs import CLAIM_LIMIT

    dead = f"{socket.gethostname()}:999999999"
    jobs = [resumable(db, dead, "2020-01-01T00:00:00.000Z") for _ in range(CLAIM_LIMIT + 3)]
    store = JobStore(db, worker="replica-2")
    first = [c.job_id for c in store.claim(("calibrate_judge",), "2021-01-01")]
    second = [c.job_id for c in store.claim(("calibrate_judge",), "2021-01-01")]
    assert (first, second) == (jobs[:CLAIM_LIMIT], jobs[CLAIM_LIMIT:])


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_resumable_jobs_left_by_a_limited_claim_stay_working_for_the_next_heartbeat(db: Database) -> None:
    from judges.store.jobs import CLAIM_LIMIT

    dead = f"{socket.gethostname()}:999999999"
    jobs = [resumable(db, dead, "2020-01-01T00:00:00.000Z") for _ in range(CLAIM_LIMIT + 2)]
    leases = Leases(JobStore(db, worker="replica-2"), None, lease_s=15, resumable=("calibrate_judge",))
    leases.beat()
    first = [c.job_id for c in leases.claimed]
    assert [JobStore(db).get("o", j).status for j in jobs] == ["working"] * len(jobs)
    leases.beat()
    assert first + [c.job_id for c in leases.claimed] == jobs


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_a_restart_under_the_same_name_takes_every_own_job_in_batches_once(db: Database) -> None:
    from judges.store.jobs import CLAIM_LIMIT

    jobs = [resumable(db, "me") for _ in range(CLAIM_LIMIT * 2 + 1)]
    time.sleep(0.002)  # the earlier process's last write, then this one's start (timestamps in milliseconds)
    store, started, taken = JobStore(db, worker="me"), timestamp(), []
    while batch := store.claim(("calibrate_judge",), "2000-01-01", started=started):
        taken += [c.job_id for c in batch]
    assert taken == jobs and {JobStore(db).get("o", j).takeovers for j in jobs} == {1}


@pytest.mark.parametrize("engine", ["sqlite"])
def test_a_restarted_server_takes_over_the_resumable_jobs_of_its_dead_process_and_interrupts_the_others(
        db: Database) -> None:
    dead = f"{socket.gethostname()}:999999999"
    job_id = resumable(db, dead)
    other = JobStore(db, worker=dead).create("o", "judge_code").job_id
    store = JobStore(db)
    claimed = store.claim(("calibrate_judge",), "2000-01-01", started=timestamp())
    assert [c.job_id for c in claimed] == [job_id] and store.interrupt_orphans() == 1
    assert [store.get("o", j).status for j in (job_id, other)] == ["working", "interrupted"]


def test_a_stopping_server_leaves_its_resumable_job_working_with_an_expired_lease(db: Database) -> None:
    store = JobStore(db, worker="me")
    job_id = resumable(db, "me")
    other = store.create("o", "judge_code").job_id
    store.interrupt_mine()
    later = Leases(JobStore(db, worker="next"), None, lease_s=3600, resumable=("calibrate_judge",))
    later.beat()
    assert [store.get("o", j).status for j in (job_id, other)] == ["working", "interrupted"]
    assert [c.job_id for c in later.claimed] == ([job_id] if db.kind == "postgresql" else [])  # SQLite: pid-alive


@pytest.mark.anyio
async def test_units_recorded_are_read_back_and_a_begun_one_is_redone_and_listed(db: Database) -> None:
    from judges.calibration.core import Judged as Item  # what a calibration item records
    from judges.units import UNITS, once
    from server.jobs import JobUnits

    store = JobStore(db, worker="w1")
    job_id = resumable(db, "w1")
    asked: list[str] = []

    async def run(key: str) -> Item:
        asked.append(key)
        return Item(value=float(len(asked)))

    UNITS.set(JobUnits(store, job_id, {}))
    await once("item 0", Item, lambda: run("item 0"))
    store.unit_started(job_id, "item 1")  # begun, then the process stopped
    taken = JobStore(db, worker="w2")
    units = JobUnits(taken, job_id, taken.units(job_id))
    UNITS.set(units)
    got = [await once(key, Item, functools.partial(run, key)) for key in ("item 0", "item 1", "item 2")]
    job = store.get("o", job_id)
    assert asked == ["item 0", "item 1", "item 2"] and [g.value for g in got] == [1.0, 2.0, 3.0]
    assert (units.reused, job.units_done, job.units_redone) == (1, 3, ["item 1"])


def test_a_job_taken_over_three_times_is_interrupted_instead_of_taken_again(db: Database) -> None:
    job_id = resumable(db, f"{socket.gethostname()}:999999999", "2020-01-01T00:00:00.000Z")
    with db.transaction() as conn:
        conn.execute("UPDATE jobs SET takeovers=3 WHERE id=?", (job_id,))
    leases = Leases(JobStore(db, worker="replica-9"), None, lease_s=15, resumable=("calibrate_judge",))
    leases.beat()
    assert (leases.claimed, JobStore(db).get("o", job_id).status) == ([], "interrupted")
