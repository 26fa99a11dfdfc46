"""The first search_guidelines after a restart against a warm one, and the first upload on a fresh home: a real
stdio `judge-mcp` (python -m server, this checkout, started from `/`) and the real MCP client.

1. A fresh home and a fresh model cache: the first server start exports the embedding model in its warm-up.
   Timed: the first upload_guideline, sent `--after` seconds after initialize (what a person waits for).
2. `--starts` restarts on that home: each waits `--after` seconds after initialize (the warm-up runs
   meanwhile, and until the server's log says it is done), then times one search (the first after the restart)
   and `--later` more (warm).
Prints the median first search, the median warm search and their ratio (issue 29 item 5: at most 2×).
Usage: python bench/first_search.py [--starts 5] [--after 5] [--later 5] [--chunks 400]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("brand colour palette logo spacing typography contrast headline imagery tone voice photo layout grid "
         "margin accessibility icon illustration motion button campaign audience").split()


def guideline_text(chunks: int) -> str:
    """About `chunks` chunks of distinct sentences (default chunk size 1000)."""
    out = []
    for i in range(chunks * 7):
        w = [WORDS[(i * k + k) % len(WORDS)] for k in range(1, 12)]
        out.append(f"Rule {i}: the {w[0]} and the {w[1]} keep the {w[2]} of {w[3]} near {w[4]}, {w[5]} and {w[6]}.")
        out.append("\n\n" if i % 7 == 6 else " ")
    return "".join(out)


def server_env(home: str, cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    env.update(JUDGE_MCP_HOME=home, JUDGE_MCP_MODEL_CACHE=cache, JUDGE_MCP_MODEL="demo", HF_HUB_OFFLINE="1",
               PYTHONPATH=str(ROOT))
    return env


WARMED = "warm-up done in "


async def session(env: dict[str, str], errlog: Any, after_s: float, work: Any, warmed: bool = False) -> Any:
    """Start a server, wait `after_s` seconds after initialize (and, with `warmed`, until its log says the warm-up
    is done, as a person who restarts the server and then searches would find it), then run `work`."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "server"], env=env, cwd="/")
    log = Path(errlog.name)
    before = warm_ups(log)
    async with Client(stdio_client(params, errlog=errlog)) as client:
        started = time.perf_counter()
        await anyio.sleep(after_s)
        while warmed and warm_ups(log) == before:  # noqa: ASYNC110 - polling the server's log file
            await anyio.sleep(0.05)
        WARM_UP.append(time.perf_counter() - started)
        return await work(client)


def warm_ups(log: Path) -> int:
    return log.read_text().count(WARMED)


WARM_UP: list[float] = []


async def timed(client: Any, tool: str, args: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    result = await client.call_tool(tool, args)
    took = time.perf_counter() - started
    assert not result.is_error, result.content[0].text
    return took, result.structured_content


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--after", type=float, default=5.0)
    parser.add_argument("--later", type=int, default=5)
    parser.add_argument("--chunks", type=int, default=400)
    parser.add_argument("--model-cache", help="reuse an exported model (skips the first-upload figure)")
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="judge-mcp-bench-")
    cache = args.model_cache or tempfile.mkdtemp(prefix="judge-mcp-bench-models-")
    env = server_env(home, cache)
    log = open(Path(home) / "stderr.log", "w", buffering=1)
    text = guideline_text(args.chunks)
    agent: dict[str, Any] = {}

    async def first_start(client: Any) -> float:
        _, made = await timed(client, "create_agent", {"name": "bench", "system_prompt": "judge"})
        agent["id"] = made["id"]
        took, doc = await timed(client, "upload_guideline", {"agent_id": made["id"], "text": text,
                                                             "filename": "brand.md"})
        agent["chunks"] = doc["chunk_count"]
        return took

    upload = anyio.run(session, env, log, args.after, first_start)
    queries = ["logo spacing near the headline", "colour contrast for accessibility", "tone of voice in campaigns",
               "icon motion in layouts", "photo margin grid"]

    async def restarted(client: Any) -> list[float]:
        times = []
        for i in range(1 + args.later):
            took, found = await timed(client, "search_guidelines", {"agent_id": agent["id"],
                                                                    "query": queries[i % len(queries)]})
            assert found["chunks"], found
            times.append(took)
        return times

    runs = [anyio.run(session, env, log, args.after, restarted, True) for _ in range(args.starts)]
    firsts = [r[0] for r in runs]
    warm = [t for r in runs for t in r[1:]]
    f, w = statistics.median(firsts), statistics.median(warm)
    fresh = "" if args.model_cache else " (fresh model cache: includes the one-time export if the warm-up had not done it)"
    print(f"first upload_guideline on a fresh home, {args.after:g} s after initialize: {upload:.2f} s{fresh}, "
          f"{agent['chunks']} chunks")
    print(f"search_guidelines over {agent['chunks']} chunks, {args.starts} restarts, first search once the warm-up "
          f"is done (median {statistics.median(WARM_UP[1:]):.1f} s after initialize, at least {args.after:g} s): "
          f"first {f * 1000:.0f} ms (fastest {min(firsts) * 1000:.0f}), warm {w * 1000:.0f} ms, ratio {f / w:.2f} "
          f"(fastest first / warm: {min(firsts) / w:.2f}) "
          f"(each restart's first: {', '.join(f'{x * 1000:.0f}' for x in firsts)} ms)")


if __name__ == "__main__":
    main()
