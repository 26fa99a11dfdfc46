"""Resumable background jobs through real processes: a stdio server restarted during a calibration continues it
from its recorded items, and a replica killed with SIGKILL during a 200-item calibration has its job finished by
another replica (PostgreSQL, FOR UPDATE SKIP LOCKED). The fake model counts what it is asked, item by item."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from judges.text.ranking import GAME_CONCURRENCY
from tests.fake_model_server import FakeModelServer, Recorded, Scripted
from tests.mcp_helpers import call
from tests.replicas import Topology
from tests.test_text_tools_as_used import judge_mcp

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
CRITERIA = [{"name": "overall", "description": "How good the text is.", "scale": {"min": 0, "max": 10}}]
ITEM = re.compile(r"ITEM (\d+) ")


def dataset(n: int) -> list[dict[str, Any]]:
    return [{"id": f"t{i}", "text": f"ITEM {i} a sentence to rate", "human_score": i % 5} for i in range(n)]


def scorer(delay_s: float) -> Any:
    def reply(rec: Recorded) -> Scripted:
        found = ITEM.search(rec.text())
        return Scripted(text=json.dumps({"score": int(found.group(1)) % 11 if found else 0}), delay_s=delay_s)
    return reply


def asked(fake: FakeModelServer, answered: bool = False) -> Counter[int]:
    """How many times the model was asked about each item (`answered`: and its reply reached the asker)."""
    return Counter(int(m.group(1)) for rec in list(fake.requests)
                   if (m := ITEM.search(rec.text())) and not (answered and rec.cut_off))


async def job_when(client: Any, job_id: str, until: Any, timeout_s: float) -> dict[str, Any]:
    with anyio.fail_after(timeout_s):
        while True:
            job = await call(client, "get_job", job_id=job_id)
            if until(job):
                return job
            await anyio.sleep(0.1)


async def test_a_stdio_server_restarted_during_a_calibration_continues_it_without_asking_twice(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(scorer(0.15))
    home = tmp_path / "home"
    async with judge_mcp(home, fake_server) as first:
        started = await call(first, "calibrate_judge", judge="score_text", dataset=dataset(40), criteria=CRITERIA,
                             background=True)
        before = await job_when(first, started["job_id"], lambda j: j["progress"] >= 10, 60)
    left = asked(fake_server)  # the server stopped (the client closed it): nothing more is asked
    async with judge_mcp(home, fake_server) as second:
        job = await job_when(second, started["job_id"], lambda j: j["status"] != "working", 60)
    counts = asked(fake_server)
    assert (job["status"], job["result"]["items"], job["takeovers"], job["units_done"]) == ("completed", 40, 1, 40)
    assert job["worker"] != before["worker"]
    # Items finished before the restart are read back; only those in flight when it stopped are asked again.
    redone = {int(u.removeprefix("item ")) for u in job["units_redone"]}
    # Items finished before the restart are read back; only those begun and unfinished when it stopped (at most the
    # 4 in flight, some perhaps not yet sent) are done again.
    assert {i for i, n in counts.items() if n > 1} <= redone and len(redone) <= 4
    assert job["units_reused"] == len(set(left) - redone)
    assert sorted(counts) == list(range(40)) and max(counts.values()) <= 2


@pytest.fixture
def two_replicas(postgres: Any, fake_server: FakeModelServer, tmp_path: Path) -> Any:
    from tests.replicas import chroma_command, start_topology

    if chroma_command() is None:
        pytest.skip("the chroma command is not installed")
    env = {"JUDGE_MCP_TOKENS": "tok-r=org-r", "JUDGE_MCP_LEASE_S": "3", "JUDGE_MCP_MODEL": "openai:gpt-fake",
           "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": fake_server.openai_url,
           "JUDGE_MCP_WARM_EMBEDDINGS": "false"}
    top: Topology = start_topology(postgres.create_database(), tmp_path / "replicas", env, replicas=1)
    try:
        yield top
    finally:
        top.stop()


async def test_a_replica_killed_during_a_200_item_calibration_has_its_job_finished_by_another(
        two_replicas: Topology, fake_server: FakeModelServer) -> None:
    from tests.test_replicas import sessions

    fake_server.respond_with(scorer(0.05))
    doomed = two_replicas.start("doomed")
    try:
        async with sessions([doomed.url]) as (lost,):
            started = await call(lost, "calibrate_judge", judge="score_text", dataset=dataset(200), criteria=CRITERIA,
                                 background=True)
            before = await job_when(lost, started["job_id"], lambda j: j["progress"] >= 60, 120)
            os.kill(doomed.proc.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            left = asked(fake_server)
    finally:
        doomed.proc.kill()
        doomed.proc.wait()
    async with sessions([two_replicas.replicas[0].url]) as (survivor,):
        taken = await job_when(survivor, started["job_id"], lambda j: j["takeovers"] == 1, 60)
        took_s = time.monotonic() - killed_at
        job = await job_when(survivor, started["job_id"], lambda j: j["status"] != "working", 120)
    counts = asked(fake_server)
    twice = sorted(i for i, n in counts.items() if n > 1)
    answered = asked(fake_server, answered=True)
    cut_off = sorted(set(counts) - {i for i, n in answered.items() if n == counts[i]})
    redone = {int(u.removeprefix("item ")) for u in job["units_redone"]}
    print(f"takeover after {took_s:.1f} s (lease 3 s); items asked twice: {len(twice)} {twice}, of which cut off "
          f"by the kill before their reply: {cut_off}, answered twice: {[i for i, n in answered.items() if n > 1]}; "
          f"units redone {sorted(redone)}; units read back: {job['units_reused']}")
    assert (taken["worker"] != before["worker"], took_s < 3 * 3) == (True, True)
    assert (job["status"], job["result"]["items"], job["units_done"]) == ("completed", 200, 200)
    assert sorted(counts) == list(range(200)) and max(counts.values()) <= 2
    assert set(twice) <= redone and len(redone) <= 4  # only the items in flight at the kill
    assert job["units_reused"] == len(set(left) - redone)  # every item finished before the kill was read back


async def test_a_rank_texts_job_continued_after_a_restart_plays_every_game_once_more_at_most(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text='{"winner": "Response A"}', delay_s=0.2))
    home = tmp_path / "home"
    candidates = [f"Candidate number {i}." for i in range(7)]  # 21 games, 42 model calls
    async with judge_mcp(home, fake_server) as first:
        started = await call(first, "rank_texts", instruction="Describe autumn.", candidates=candidates,
                             background=True)
        before = await job_when(first, started["job_id"], lambda j: j["progress"] >= 6, 60)
    async with judge_mcp(home, fake_server) as second:
        job = await job_when(second, started["job_id"], lambda j: j["status"] != "working", 60)
    redone = len(job["units_redone"])
    assert (job["status"], len(job["result"]["games"]), job["takeovers"]) == ("completed", 21, 1)
    assert job["units_reused"] >= before["progress"] and redone <= GAME_CONCURRENCY  # the games in flight
    assert len(fake_server.requests) <= 42 + 2 * redone  # a game is two requests; only the redone ones again


async def test_an_evaluate_image_job_continued_after_a_restart_judges_each_image_once_more_at_most(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    from tests.test_long_work import image_verdict, png_b64

    # Two judgements answer at once, the next four hang (in flight at the stop), later ones answer at once.
    fake_server.respond_with(lambda rec: Scripted(text=image_verdict(60), delay_s=30 if 3 <= len(
        fake_server.requests) <= 6 else 0))
    home = tmp_path / "home"
    images = [png_b64(colour) for colour in ("red", "green", "blue", "white", "black", "yellow")]
    async with judge_mcp(home, fake_server) as first:
        await call(first, "create_agent", name="Judge-R", system_prompt="You are judge R.")
        started = await call(first, "evaluate_image", brief="a square", images=images, background=True)
        before = await job_when(first, started["job_id"], lambda j: j["progress"] >= 2, 60)
    async with judge_mcp(home, fake_server) as second:
        job = await job_when(second, started["job_id"], lambda j: j["status"] != "working", 60)
    redone = len(job["units_redone"])
    assert (job["status"], len(job["result"]["evaluations"]), job["takeovers"]) == ("completed", 6, 1)
    assert {e["score"] for e in job["result"]["evaluations"]} == {60}
    assert job["units_reused"] >= before["progress"] and len(fake_server.requests) <= 6 + redone


async def test_a_job_taken_over_by_a_server_of_another_organization_runs_as_its_own_organization(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    """Two stdio servers of different organizations on one home: the second takes over the first's job, and the job
    still runs as the organization that started it (its requests are that organization's usage, not the other's)."""
    fake_server.respond_with(scorer(0.1))
    home = tmp_path / "home"
    async with judge_mcp(home, fake_server, JUDGE_MCP_ORG="alpha") as first:
        started = await call(first, "calibrate_judge", judge="score_text", dataset=dataset(12), criteria=CRITERIA,
                             background=True)
        await job_when(first, started["job_id"], lambda j: j["progress"] >= 2, 60)
    async with judge_mcp(home, fake_server, JUDGE_MCP_ORG="beta") as other:
        with anyio.fail_after(60):
            while True:  # the job is continued here, as alpha's
                if len(asked(fake_server)) == 12:
                    break
                await anyio.sleep(0.1)
        beta_usage = await call(other, "get_usage", days=1)
    async with judge_mcp(home, fake_server, JUDGE_MCP_ORG="alpha") as again:
        job = await job_when(again, started["job_id"], lambda j: j["status"] != "working", 60)
        alpha_usage = await call(again, "get_usage", days=1)
    assert job["status"] == "completed" and job["takeovers"] >= 1, job["error"]  # alpha may take it back, too
    assert job["result"]["items"] == 12
    assert (beta_usage["organization"], beta_usage["days"]) == ("beta", [])
    # Every item's answered request is alpha's (those cut off when a server stopped are not recorded).
    assert 12 <= sum(d["requests"] for d in alpha_usage["days"]) <= len(fake_server.requests)
