"""Median time from spawn to an answered tools/list: judge-mcp vs a bare MCPServer with one tool.

Both run in this process's Python, alternating, so the machine's noise hits both alike.
Usage: python bench/cold_start.py [runs]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BARE = """
from mcp.server.mcpserver import MCPServer
s = MCPServer("bare")
@s.tool()
def ping() -> str:
    return "pong"
s.run()
"""

MESSAGES = "".join(
    json.dumps(m) + "\n"
    for m in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    )
)


def time_to_tools_list(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, text=True)
    assert proc.stdin and proc.stdout
    proc.stdin.write(MESSAGES)
    proc.stdin.flush()
    for line in proc.stdout:
        if '"id":2' in line.replace(" ", ""):
            break
    elapsed = time.perf_counter() - started
    proc.kill()
    proc.wait()
    return elapsed


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    home = tempfile.mkdtemp()
    # The embedding warm-up runs in the background at start (as in production), with the
    # exported model already cached, as it is after the first start.
    cache = os.environ.get("JUDGE_MCP_MODEL_CACHE") or str(Path(tempfile.gettempdir()) / "judge-mcp-test-models")
    env = {**os.environ, "JUDGE_MCP_HOME": home, "JUDGE_MCP_LOG_LEVEL": "WARNING", "JUDGE_MCP_MODEL_CACHE": cache}
    judge = [str(Path(sys.executable).with_name("judge-mcp"))]
    bare = [sys.executable, "-c", BARE]
    ours, base = [], []
    time_to_tools_list(judge, env)  # warm the file cache for both
    time_to_tools_list(bare, env)
    for _ in range(runs):
        ours.append(time_to_tools_list(judge, env))
        base.append(time_to_tools_list(bare, env))
    o, b = statistics.median(ours), statistics.median(base)
    print(f"cold start to tools/list (embedding warm-up running), median of {runs}: judge-mcp {o * 1000:.0f} ms, "
          f"bare MCPServer {b * 1000:.0f} ms, ratio {o / b:.2f}")


if __name__ == "__main__":
    main()
