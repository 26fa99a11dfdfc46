"""An organization's own prompt versions as hosts meet them: align_judge on a pairwise prompt asset keeps its
revised rules as `<name>@v<N>` of that organization, which pairwise_compare then judges by, after a restart too,
and which another organization never sees. A real `judge-mcp` (stdio, and HTTP with two organizations), the
loopback fake model behind the real OpenAI SDK."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from judges.store.database import Database
from judges.store.prompt_versions import PromptVersion, PromptVersions
from tests.fake_model_server import FakeModelServer, Recorded, Scripted
from tests.test_align_pairwise_as_used import (
    PAIRS,
    RULES,
    WRITER,
    assert_test_pairs_only_judged,
    current_judge,
    pair_judge,
)
from tests.test_http_access import client, start, stop
from tests.test_text_tools_as_used import judge_mcp

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
REVISED = "REVISED: the right answer wins."
ASSET = "text/assessment/pairwise"
PAIR = {"instruction": "Question 77?", "candidates": ["PAIR-77 first", "PAIR-77 second"],  # not aligned on
        "candidate_type": "text"}


def respond(rec: Recorded) -> Scripted:
    if WRITER in rec.text():
        return Scripted(text=json.dumps({"instructions": REVISED, "rationale": "r"}))
    return pair_judge(lambda n, t: True if "REVISED" in t else current_judge(n))(rec)


async def test_an_alignment_of_a_prompt_asset_is_kept_as_a_version_pairwise_compare_judges_by(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(respond)
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        aligned = await c.call_tool("align_judge", {"judge": "pairwise_compare", "prompt_id": ASSET,
                                                    "dataset": PAIRS, "background": False})
        judged_before = len(fake_server.requests)
        assert_test_pairs_only_judged(fake_server, (RULES, "You compare two responses"))
        compared = await c.call_tool("pairwise_compare", {**PAIR, "prompt_id": f"{ASSET}@v2"})
    report = aligned.structured_content
    assert (report["kept"], report["agent_id"], report["prompt_id"], report["new_prompt_id"]) == (
        True, None, f"{ASSET}@v1", f"{ASSET}@v2")
    assert report["diff"].endswith(f"+{REVISED}\n")  # a shipped asset has no rules yet: the revision adds them
    current = [r.text() for r in fake_server.requests[:judged_before] if WRITER not in r.text()
               and "REVISED" not in r.text()]
    assert current and all(t.startswith("You compare two responses") for t in current)
    assert not compared.is_error and compared.structured_content["value"] == "Response B"
    assert [r.text().startswith(f"{RULES}{REVISED}\n\nYou compare two responses")
            for r in fake_server.requests[judged_before:]] == [True, True]


async def test_an_organizations_prompt_version_survives_a_restart_and_no_other_organization_sees_it(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(respond)
    env = {"JUDGE_MCP_TOKENS": "tok-a=org-a,tok-b=org-b:member", "JUDGE_MCP_MODEL": "openai:gpt-fake",
           "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": fake_server.openai_url,
           "JUDGE_MCP_WARM_EMBEDDINGS": "false"}

    async def compare(port: int, token: str) -> Any:
        async with client(f"http://127.0.0.1:{port}", token) as c:
            return await c.call_tool("pairwise_compare", {**PAIR, "prompt_id": f"{ASSET}@v2"})

    proc, port = start(tmp_path / "home", **env)
    try:
        async with client(f"http://127.0.0.1:{port}", "tok-a") as c:
            aligned = await c.call_tool("align_judge", {"judge": "pairwise_compare", "prompt_id": ASSET,
                                                        "dataset": PAIRS, "background": False})
        assert aligned.structured_content["new_prompt_id"] == f"{ASSET}@v2"
        other = await compare(port, "tok-b")
    finally:
        stop(proc)
    proc, port = start(tmp_path / "home", **env)
    try:
        seen = len(fake_server.requests)
        own = await compare(port, "tok-a")
        other_after = await compare(port, "tok-b")
    finally:
        stop(proc)
    assert not own.is_error and own.structured_content["value"] == "Response B"
    assert all(r.text().startswith(f"{RULES}{REVISED}") for r in fake_server.requests[seen:seen + 2])
    for refused in (other, other_after):
        assert refused.is_error and f"no prompt asset '{ASSET}@v2'; the closest: {ASSET}@v1" in \
            refused.content[0].text
    assert len(fake_server.requests) == seen + 2  # org-b's calls asked no model


def test_a_version_is_numbered_past_the_shipped_and_stored_ones_per_organization(db: Database) -> None:
    versions = PromptVersions(db)
    first = versions.save("org-a", f"{ASSET}@v1", "R1")
    second = versions.save("org-a", f"{ASSET}@v1", "R2")
    other = versions.save("org-b", f"{ASSET}@v1", "B1")
    assert (first.id, second.id, other.id) == (f"{ASSET}@v2", f"{ASSET}@v3", f"{ASSET}@v2")
    assert versions.get("org-a", f"{ASSET}@v3") == second and versions.get("org-b", f"{ASSET}@v3") is None
    assert versions.get("org-a", f"{ASSET}@v1") is None  # the shipped asset is not a stored version


@pytest.mark.parametrize("version", ["99999999999999999999", "\u0661\u0662", "1 ", "-1", ""])
def test_a_version_number_no_stored_version_can_have_is_none_without_asking_the_database(
        db: Database, version: str) -> None:
    assert PromptVersions(db).get("org-a", f"{ASSET}@v{version}") is None


def test_only_the_canonical_spelling_of_a_version_number_names_a_stored_version(db: Database) -> None:
    versions = PromptVersions(db)
    versions.save("org-a", f"{ASSET}@v1", "R2")
    versions.save("org-a", f"{ASSET}@v1", "R3")
    odd = ["@v02", "@v\u0663", "@v\u00b2", "@v99999999999999999999", "@v+2", "@v 2", "@v2 "]  # ٣ and ² are unicode digits
    assert [versions.get("org-a", f"{ASSET}{v}") for v in odd] == [None] * len(odd)
    assert versions.get("org-a", f"{ASSET}@v3") == PromptVersion(id=f"{ASSET}@v3", base=f"{ASSET}@v1", rules="R3")


async def test_a_prompt_id_with_an_odd_version_number_or_a_huge_name_is_the_callers_error(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    odd = [f"{ASSET}@v99999999999999999999", f"{ASSET}@v\u00b2", f"{ASSET}@v\u0663", "x" * 100_000 + "@v2"]
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        results = [await c.call_tool("pairwise_compare", {**PAIR, "prompt_id": prompt_id}) for prompt_id in odd]
    texts = [r.content[0].text for r in results]
    assert all(r.is_error for r in results)
    assert [t.startswith("Error executing tool pairwise_compare: invalid input: ") for t in texts] == [True] * 4, texts
    assert f"the closest: {ASSET}@v1" in texts[0] and "is too long (at most 200)" in texts[3]
    assert fake_server.requests == []


def test_versions_kept_at_the_same_time_each_get_their_own_number(db: Database) -> None:
    versions = PromptVersions(db)
    kept: list[str] = []
    threads = [threading.Thread(target=lambda i=i: kept.append(versions.save("org-a", f"{ASSET}@v1", f"R{i}").id))
               for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(kept) == [f"{ASSET}@v{n}" for n in range(2, 6)]


def test_sixteen_versions_kept_at_the_same_instant_each_get_their_own_number(db: Database) -> None:
    versions = PromptVersions(db)
    kept: list[str] = []
    failed: list[str] = []
    start = threading.Barrier(16)

    def save(i: int) -> None:
        start.wait()
        try:
            kept.append(versions.save("org-a", f"{ASSET}@v1", f"R{i}").id)
        except Exception as exc:  # the test reports every failure
            failed.append(repr(exc))

    threads = [threading.Thread(target=save, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failed == []
    assert sorted(kept, key=lambda v: int(v.rsplit("@v", 1)[1])) == [f"{ASSET}@v{n}" for n in range(2, 18)]


async def test_an_agent_aligns_on_its_organizations_prompt_version(tmp_path: Path,
                                                                     fake_server: FakeModelServer) -> None:
    def respond(rec: Recorded) -> Scripted:
        text = rec.text()
        if WRITER in text:  # the agent's rules are revised to AGENT-REVISED; the asset's to REVISED
            return Scripted(text=json.dumps({"instructions": "AGENT-REVISED: the right answer wins." if "CURRENT"
                                             in text else REVISED, "rationale": "r"}))
        return pair_judge(lambda n, t: "AGENT-REVISED" in t or ("REVISED" in t and "CURRENT" not in t)
                          or current_judge(n))(rec)

    fake_server.respond_with(respond)
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        version = await c.call_tool("align_judge", {"judge": "pairwise_compare", "prompt_id": ASSET,
                                                    "dataset": PAIRS, "background": False})
        agent = (await c.call_tool("create_agent", {"name": "referee", "system_prompt": "CURRENT: the better "
                                                                                        "answer wins."})).structured_content
        seen = len(fake_server.requests)
        aligned = await c.call_tool("align_judge", {"agent_id": agent["id"], "judge": "pairwise_compare",
                                                    "prompt_id": f"{ASSET}@v2", "dataset": PAIRS,
                                                    "background": False})
    assert version.structured_content["new_prompt_id"] == f"{ASSET}@v2"
    assert not aligned.is_error, aligned.content[0].text
    report = aligned.structured_content
    assert (report["kept"], report["prompt_id"], report["instructions"]) == (
        True, f"{ASSET}@v2", "AGENT-REVISED: the right answer wins.")
    writers = [r.text() for r in fake_server.requests[seen:] if WRITER in r.text()]
    assert writers and all(f"<prompt>\n{REVISED}\n\nYou compare two responses" in t for t in writers)
    judged = [r.text() for r in fake_server.requests[seen:] if WRITER not in r.text()]
    assert all(t.startswith(f"{RULES}{REVISED}\n\n") for t in judged)  # the version's rules first, then the agent's


async def test_template_syntax_the_writer_puts_in_a_kept_version_reaches_the_model_literally(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    written = ("REVISED {{ 7*7 }} {{ ''.__class__.__mro__ }} {% for x in range(99999999) %}x{% endfor %} "
               "{# gone? #} {{ prompt_id }}")

    def respond(rec: Recorded) -> Scripted:
        if WRITER in rec.text():
            return Scripted(text=json.dumps({"instructions": written, "rationale": "r"}))
        return pair_judge(lambda n, t: True if "REVISED" in t else current_judge(n))(rec)

    fake_server.respond_with(respond)
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        aligned = await c.call_tool("align_judge", {"judge": "pairwise_compare", "prompt_id": ASSET,
                                                    "dataset": PAIRS, "background": False})
        seen = len(fake_server.requests)
        compared = await c.call_tool("pairwise_compare", {**PAIR, "prompt_id": f"{ASSET}@v2"})
    assert aligned.structured_content["new_prompt_id"] == f"{ASSET}@v2"
    assert not compared.is_error, compared.content[0].text
    assert [r.text().startswith(f"{RULES}{written}\n\nYou compare two responses")
            for r in fake_server.requests[seen:]] == [True, True]
