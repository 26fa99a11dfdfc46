"""Uploads left pending at start: only those whose owner is gone become failed (on SQLite the owner process is
looked up on this host; on PostgreSQL, shared by replicas on other hosts, its lease decides)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from judges.store.agents import AgentStore
from judges.store.database import Database
from judges.store.guidelines import INTERRUPTED, Guidelines, IngestSettings, owner_alive, process_token
from judges.store.leases import cutoff
from rag.store import GuidelineStore
from tests.test_store import TinyEmbedder


@pytest.fixture
def live_process() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def pending(db: Database, doc: str, agent: str, owner: str | None, heartbeat_at: str | None = None) -> None:
    with db.transaction() as conn:
        conn.execute("INSERT INTO documents (id, organization_id, agent_id, filename, file_size, sha256, "
                     "processing_status, created_at, updated_at, owner, heartbeat_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                     (doc, "default", agent, f"{doc}.txt", 1, doc, "pending", "t", "t", owner, heartbeat_at))


def status(db: Database, doc: str) -> tuple[str, str | None]:
    row = db.query("SELECT processing_status, error FROM documents WHERE id=?", (doc,))[0]
    return row["processing_status"], row["error"]


@pytest.mark.parametrize("engine", ["sqlite"])  # one home, one host: process ids; PostgreSQL: leases (below)
def test_only_uploads_of_gone_processes_are_marked_interrupted(db: Database, tmp_path: Path,
                                                               live_process: subprocess.Popen[bytes]) -> None:
    agents = AgentStore(db)
    Guidelines(db, agents, GuidelineStore(TinyEmbedder(), path=tmp_path / "chroma"), IngestSettings())  # adds owner
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_owner = process_token(int(dead.stdout))  # the pid is gone: no /proc entry, so no start time matches
    alive_owner = process_token(live_process.pid)
    pending(db, "gone", "a1", f"{process_token().rsplit('/', 2)[0]}/{dead.stdout.strip()}/1")
    pending(db, "alive", "a1", alive_owner)
    pending(db, "old-version", "a1", None)
    Guidelines(db, agents, GuidelineStore(TinyEmbedder(), path=tmp_path / "chroma"), IngestSettings())
    assert owner_alive(alive_owner) and not owner_alive(dead_owner)
    assert status(db, "gone") == ("failed", INTERRUPTED)
    assert status(db, "old-version") == ("failed", INTERRUPTED)
    assert status(db, "alive") == ("pending", None)


@pytest.mark.parametrize("engine", ["postgresql"])  # SQLite decides by process ids: the test above
def test_on_postgresql_only_uploads_whose_lease_expired_are_marked_interrupted(db: Database, tmp_path: Path) -> None:
    agents = AgentStore(db)
    Guidelines(db, agents, GuidelineStore(TinyEmbedder(), path=tmp_path / "chroma"), IngestSettings(lease_s=15))
    pending(db, "held", "a1", "replica-2", cutoff(0))  # another replica beat just now: its lease holds
    pending(db, "expired", "a1", "replica-3", cutoff(60))
    pending(db, "never-beat", "a1", "replica-4")
    Guidelines(db, agents, GuidelineStore(TinyEmbedder(), path=tmp_path / "chroma"), IngestSettings(lease_s=15))
    assert status(db, "held") == ("pending", None)
    assert status(db, "expired") == ("failed", INTERRUPTED)
    assert status(db, "never-beat") == ("failed", INTERRUPTED)
