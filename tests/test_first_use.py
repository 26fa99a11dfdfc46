"""First use (issue 29 item 5), through a real `judge-mcp` over stdio started from `/`: the first start of a fresh
home embeds with the packaged model (no export, nothing written to the model cache), and the first search after a
restart finds the agent's search state already loaded."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from tests.mcp_helpers import RawStdio, StdioSession, server_env

REPO = Path(__file__).resolve().parents[1]

RULES = "\n\n".join(f"Rule {i}: the logo keeps {i} mm of clear space near headline number {i}, in brand blue."
                    for i in range(300))


def test_the_first_upload_on_a_fresh_home_embeds_with_the_packaged_model_and_exports_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "fresh-model-cache"
    errlog = tmp_path / "stderr.log"
    session = StdioSession(server_env(tmp_path / "home", JUDGE_MCP_MODEL="demo", JUDGE_MCP_MODEL_CACHE=str(cache),
                                      JUDGE_MCP_WARM_DELAY_S="0"), errlog=errlog)
    messages: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    try:
        made = session.call("create_agent", {"name": "Brand", "system_prompt": "judge"})
        assert not made.is_error, made.content[0].text
        agent = made.structured_content["id"]
        started = time.monotonic()
        uploaded = session.run(session.client.call_tool(
            "upload_guideline", {"agent_id": agent, "text": "Never stretch the logo.", "filename": "logo.md"},
            progress_callback=progress), timeout_s=120)
        took = time.monotonic() - started
    finally:
        session.close()
    assert not uploaded.is_error and uploaded.structured_content["processing_status"] == "processed"
    print(f"\n  first upload on a fresh home: {took:.1f} s")
    assert [m for m in messages if "export" in m] == []
    assert not cache.exists()
    assert "export" not in errlog.read_text()


def wait_for_log(path: Path, text: str, count: int, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count(text) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not logged {count} times in {timeout_s} s")


def timed(server: RawStdio, tool: str, args: dict[str, Any]) -> float:
    started = time.perf_counter()
    result = server.call(tool, args)
    took = time.perf_counter() - started
    assert result["structuredContent"]["chunks"], result
    return took


def test_the_first_search_after_a_restart_takes_at_most_twice_a_warm_one(tmp_path: Path) -> None:
    errlog_path = tmp_path / "stderr.log"
    # No idle second before each restart's warm-up (the default delay): the test waits for "warm-up done" anyway.
    env = server_env(tmp_path / "home", JUDGE_MCP_MODEL="demo", JUDGE_MCP_WARM_DELAY_S="0") | {"PYTHONPATH": str(REPO)}
    queries = ["brand blue logo", "clear space near the headline", "rule 17", "headline number 250", "logo margin"]
    firsts: list[float] = []
    warms: list[float] = []
    with open(errlog_path, "ab", buffering=0) as errlog:
        first = RawStdio(env, errlog)
        try:
            made = first.call("create_agent", {"name": "Brand", "system_prompt": "judge"})
            agent = made["structuredContent"]["id"]
            doc = first.call("upload_guideline", {"agent_id": agent, "text": RULES, "filename": "rules.md"}, 300)
            assert doc["structuredContent"]["chunk_count"] > 10
        finally:
            first.kill()
        for restart in range(4):
            server = RawStdio(env, errlog)
            try:
                server.request("tools/list", {})  # as a host does on connecting
                # A person restarts the server, then searches: by then the warm-up (~1-3 s) is done.
                wait_for_log(errlog_path, "warm-up done in ", restart + 2)
                first_search = timed(server, "search_guidelines", {"agent_id": agent, "query": queries[0]})
                warm = [timed(server, "search_guidelines", {"agent_id": agent, "query": q}) for q in queries[1:] * 2]
            finally:
                server.kill()
            firsts.append(first_search)
            warms += warm
            print(f"\n  restart {restart}: first search {first_search * 1000:.0f} ms, warm median "
                  f"{statistics.median(warm) * 1000:.0f} ms", end="")
    # What a first search pays every time (loading vectors, the BM25 index, building the tool: 0.1-0.2 s before,
    # against ~3-6 ms warm) shows in each restart's first search; a busy shared machine adds random delays to
    # single calls. So: the fastest first search of four restarts against twice the median warm one, plus 5 ms
    # (a scheduling slice on a shared 2-core machine, where a warm search takes 2-4 ms).
    assert min(firsts) <= 2.0 * statistics.median(warms) + 0.005, (firsts, statistics.median(warms))
