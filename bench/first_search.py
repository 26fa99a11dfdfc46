"""The first search_guidelines after a restart against a warm one, and the first upload on a fresh home: a real
stdio `judge-mcp` (this checkout, started from `/`).

1. A fresh home and a fresh model cache (the real MCP client): the first server start exports the embedding
   model in its warm-up. Timed: the first upload_guideline (one sentence), sent `--after` seconds after
   initialize (what a person waits for), and the next one.
2. `--starts` restarts on that home (raw JSON-RPC, so the client's own first-call work is not counted): each
   lists the tools, waits `--after` seconds and until the server's log says the warm-up is done, then times
   one search (the first after the restart) and `--later` more (warm).
Prints the median first search, the median warm search and their ratio (issue 29 item 5: at most 2×).
Usage: python bench/first_search.py [--starts 5] [--after 5] [--later 5] [--chunks 400]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.mcp_helpers import RawStdio  # noqa: E402

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


async def session(env: dict[str, str], errlog: Any, after_s: float, work: Any) -> Any:
    """Start a server (the real MCP client), wait `after_s` seconds after initialize, then run `work`."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "server"], env=env, cwd="/")
    async with Client(stdio_client(params, errlog=errlog)) as client:
        await anyio.sleep(after_s)
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
    log_path = Path(home) / "stderr.log"
    log = open(log_path, "w", buffering=1)
    text = guideline_text(args.chunks)
    agent: dict[str, Any] = {}

    async def first_start(client: Any) -> tuple[float, float]:
        _, made = await timed(client, "create_agent", {"name": "bench", "system_prompt": "judge"})
        agent["id"] = made["id"]
        first, _ = await timed(client, "upload_guideline", {"agent_id": made["id"], "filename": "logo.md",
                                                            "text": "Never stretch the logo."})
        second, _ = await timed(client, "upload_guideline", {"agent_id": made["id"], "filename": "margin.md",
                                                             "text": "Keep wide margins."})
        _, doc = await timed(client, "upload_guideline", {"agent_id": made["id"], "text": text,
                                                             "filename": "brand.md"})
        agent["chunks"] = doc["chunk_count"]
        return first, second

    upload, later_upload = anyio.run(session, env, log, args.after, first_start)
    queries = ["logo spacing near the headline", "colour contrast for accessibility", "tone of voice in campaigns",
               "icon motion in layouts", "photo margin grid"]

    waits: list[float] = []

    def restarted(index: int) -> list[float]:
        """One restart, spoken to in raw JSON-RPC (a client's own first-call work, e.g. the Python SDK compiling
        the tool's output schema, is not the server's): tools/list as a host does, wait for the warm-up, search."""
        server = RawStdio(env, log)
        try:
            server.request("tools/list", {})
            before = time.perf_counter()
            time.sleep(args.after)
            while warm_ups(log_path) < index + 2:  # the first start's, each earlier restart's, and this one's
                time.sleep(0.05)
            waits.append(time.perf_counter() - before)
            times = []
            for i in range(1 + args.later):
                started = time.perf_counter()
                found = server.call("search_guidelines", {"agent_id": agent["id"], "query": queries[i % len(queries)]})
                times.append(time.perf_counter() - started)
                assert found["structuredContent"]["chunks"], found
            return times
        finally:
            server.kill()

    runs = [restarted(i) for i in range(args.starts)]
    firsts = [r[0] for r in runs]
    warm = [t for r in runs for t in r[1:]]
    f, w = statistics.median(firsts), statistics.median(warm)
    fresh = "" if args.model_cache else " (fresh model cache: it waits for the one-time export)"
    exported = re.findall(r"embedding model exported in ([0-9.]+) s", log_path.read_text())
    print(f"first upload_guideline (one sentence) on a fresh home, {args.after:g} s after initialize: {upload:.2f} s"
          f"{fresh}; the next one {later_upload:.2f} s; the export took "
          f"{exported[0] + ' s' if exported else 'nothing (the model was there)'}")
    print(f"search_guidelines over {agent['chunks']} chunks, {args.starts} restarts, first search once the warm-up "
          f"is done (median {statistics.median(waits):.1f} s after initialize, at least {args.after:g} s), "
          f"raw JSON-RPC client, {agent['chunks']} chunks: "
          f"first {f * 1000:.0f} ms (fastest {min(firsts) * 1000:.0f}), warm {w * 1000:.0f} ms, ratio {f / w:.2f} "
          f"(fastest first / warm: {min(firsts) / w:.2f}) "
          f"(each restart's first: {', '.join(f'{x * 1000:.0f}' for x in firsts)} ms)")


if __name__ == "__main__":
    main()
