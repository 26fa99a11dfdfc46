"""The first model call of a session against a later one: a real stdio `judge-mcp` (python -m server, this
checkout) and the real MCP client, the model behind the loopback fake model server (real OpenAI SDK).

Each server start: initialize, wait `--after` seconds (a host's user takes a moment before the first
question; the background warm-up runs meanwhile), then time one cheap model-using tool call
(pairwise_compare on two texts, one order: one model request) and then `--later` more. Prints, over
`--starts` server starts, the median first call, the median later call and their ratio, server side (the
call's own log line) and end to end. `--latency` makes the fake model answer after that many seconds (the
issue's figure for a later call of a real model is 0.3 s); 0 shows the server's own first-call overhead alone.
`--tool` chooses the call: pairwise_compare (two texts, one order), score_text (one rubric) or evaluate_image
(one agent, one 8x8 PNG; the agent is made by a set-up start on the same home, so each timed start is a restart).
Usage: python bench/first_call.py [--tool pairwise_compare|score_text|evaluate_image] [--starts 7] [--after 5]
       [--later 5] [--latency 0.3] [--model openai|anthropic]
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fake_model_server import FakeModelServer, Scripted

# Every call asks the model (cache: false; the result cache would answer the repeats). evaluate_image's
# agent_ids and images are filled in by the set-up start.
ARGS: dict[str, dict[str, Any]] = {
    "pairwise_compare": {"instruction": "Say hello politely", "candidates": ["Hello, how can I help?", "hi"],
                         "swap": False, "cache": False},
    "score_text": {"text": "Hello, how can I help?", "rubric": "helpfulness", "cache": False},
    "evaluate_image": {"brief": "A red square", "cache": False},
}
# One reply every judge of these tools reads: the pairwise verdict, a rubric score, an image judge's verdict.
REPLY = json.dumps({"winner": "A", "reasoning": "bench", "score": 4, "TOP_ISSUE": {
    "problem": "none", "severity": "minor", "fix": "none"}, "whatWorked": ["colour"], "promptInstructions": [],
    "feedback": "ok"})


def server_env(fake: FakeModelServer, model: str, home: str) -> dict[str, str]:
    cache = os.environ.get("JUDGE_MCP_MODEL_CACHE") or str(Path(tempfile.gettempdir()) / "judge-mcp-test-models")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    env.update(JUDGE_MCP_HOME=home, JUDGE_MCP_LOG_LEVEL="INFO", JUDGE_MCP_MODEL_CACHE=cache, HF_HUB_OFFLINE="1",
               PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    if model == "anthropic":
        env.update(JUDGE_MCP_MODEL="anthropic:bench", ANTHROPIC_API_KEY="bench", ANTHROPIC_BASE_URL=fake.anthropic_url)
    else:
        env.update(JUDGE_MCP_MODEL="openai:bench", OPENAI_API_KEY="bench", OPENAI_BASE_URL=fake.openai_url)
    return env


async def set_up(env: dict[str, str], errlog: Any, home: str) -> dict[str, Any]:
    """The agent and the image evaluate_image judges, made by a first start on `home`."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from PIL import Image

    image = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(image, "PNG")
    params = StdioServerParameters(command=sys.executable, args=["-m", "server"], env=env, cwd="/")
    async with Client(stdio_client(params, errlog=errlog)) as client:
        made = await client.call_tool("create_agent", {"name": "Bench", "system_prompt": "You judge images."})
        assert not made.is_error, made.content[0].text
    return {"agent_ids": [made.structured_content["id"]], "images": [base64.b64encode(image.getvalue()).decode()]}


async def timed_calls(env: dict[str, str], errlog: Any, after_s: float, later: int, tool: str,
                      arguments: dict[str, Any]) -> list[float]:
    """End-to-end seconds of each call: the first, then the later ones."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "server"], env=env, cwd="/")
    async with Client(stdio_client(params, errlog=errlog)) as client:
        await anyio.sleep(after_s)
        times = []
        for _ in range(1 + later):
            started = time.perf_counter()
            result = await client.call_tool(tool, arguments)
            times.append(time.perf_counter() - started)
            assert not result.is_error, result.content[0].text
    return times


def one_session(fake: FakeModelServer, model: str, after_s: float, later: int, tool: str,
                home: str | None = None, arguments: dict[str, Any] | None = None) -> tuple[list[float], list[float]]:
    """(end-to-end seconds, server-side seconds) of each call of one server start (on `home`, else a fresh one)."""
    home = home or tempfile.mkdtemp()
    log = Path(home) / "stderr.log"
    with open(log, "w") as errlog:
        times = anyio.run(timed_calls, server_env(fake, model, home), errlog, after_s, later, tool,
                          {**ARGS[tool], **(arguments or {})})
    duration = re.compile(rf"tool={tool} .*duration_ms=(\d+)")
    return times, [int(m.group(1)) / 1000 for m in duration.finditer(log.read_text())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=7)
    parser.add_argument("--after", type=float, default=5.0)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--later", type=int, default=5)
    parser.add_argument("--model", choices=["openai", "anthropic"], default="openai")
    parser.add_argument("--tool", choices=list(ARGS), default="pairwise_compare")
    args = parser.parse_args()
    fake = FakeModelServer().start()
    fake.respond_with(lambda rec: Scripted(text=REPLY, delay_s=args.latency))
    runs = []
    try:
        home, arguments = None, None
        if args.tool == "evaluate_image":
            home = tempfile.mkdtemp()
            with open(Path(home) / "setup.log", "w") as errlog:
                arguments = anyio.run(set_up, server_env(fake, args.model, home), errlog, home)
        for _ in range(args.starts):
            runs.append(one_session(fake, args.model, args.after, args.later, args.tool, home, arguments))
    finally:
        fake.stop()
    print(f"first model call vs later: {args.tool}, {args.model} SDK against the fake model server answering "
          f"after {args.latency:g} s, first call {args.after:g} s after initialize, median over {args.starts} starts")
    for label, index in (("server side (the call's log line)", 1), ("end to end (client included)", 0)):
        firsts = [run[index][0] for run in runs]
        laters = [t for run in runs for t in run[index][1:]]
        f, later = statistics.median(firsts), statistics.median(laters)
        print(f"  {label}: first {f * 1000:.0f} ms, later {later * 1000:.0f} ms, ratio {f / later:.2f} "
              f"(each start's first: {', '.join(f'{x * 1000:.0f}' for x in firsts)} ms)")


if __name__ == "__main__":
    main()
