"""Calls/s and latency of one HTTP replica against a bare MCPServer, at 10 and 50 concurrent sessions.

judge-mcp (`python -m server --transport http`, bearer token, log at INFO as deployed) answers get_agent; the bare
server (an MCPServer with one `ping` tool, same SDK, same transport mode) answers ping. Each session is a real
MCP client (streamable HTTP) calling in a loop for `--seconds`; the two servers are measured in the same run on
the same machine. Prints calls/s and p50/p99 for both sides and their ratios (judge-mcp / bare), and the CPU
time per call of each server process (from /proc: what one replica can serve per core, whatever else runs on
the machine) and of this load-generating process (its MCP client also checks each result against the tool's
output schema, which costs more for get_agent's agent than for ping's "pong"; on a 2-core machine that CPU is
taken from the servers). So the bare server also answers get_agent with the very agent judge-mcp returns (a
constant of the same pydantic model: the same output schema, the same bytes to send and for the client to
check), and the third row compares like with like: what judge-mcp adds per call (auth, the store read, the call's
log line, error mapping) without the difference in the answer's size.

Two harnesses, both printed. `mcp`: each session is the SDK's MCP client. On a 2-core machine that client spends
more CPU per call than either server (it also checks every result against the tool's output schema), so with
client and servers on the same cores this measures mostly the client: the calls/s ratio is then the ratio of
the CPU per call of client and server together. `raw`: each session is one HTTP connection posting the very
request the MCP client sends (same headers and JSON-RPC body, captured from it) and parsing every answer (an
error or `isError` counts as an error): about half the client CPU per call, so the server is the bottleneck
and calls/s is what one replica serves, as a load generator on other machines would find.
Usage: python bench/http_load.py [--sessions 10 50] [--seconds 10] [--harness mcp raw] [--tree DIR (the
judge-mcp checkout to run)]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BARE = """
import sys
from mcp.server.mcpserver import MCPServer
mcp = MCPServer("bare", log_level="WARNING")

@mcp.tool()
def ping() -> str:
    return "pong"

if len(sys.argv) > 3:  # the same answer get_agent gives, as a constant: the same output schema and result to send
    from judges.store.agents import Agent
    AGENT = Agent.model_validate_json(sys.argv[3])

    @mcp.tool()
    def get_agent(agent_id: str) -> Agent:
        return AGENT

mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]), stateless_http=sys.argv[2] == "1")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(port: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port} after {timeout_s} s")


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used so far; 0 where /proc is missing."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


async def load(url: str | list[str], token: str | None, tool: str, args: dict[str, Any], sessions: int,
               seconds: float, server_pid: int | None = None) -> tuple[float, float, float, int, float, float]:
    """calls/s, p50 ms, p99 ms, errors, the server's and this process's CPU ms per call. Given several URLs
    (replicas), session i calls urls[i % len(urls)]."""
    urls = [url] if isinstance(url, str) else url
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    times: list[float] = []
    errors = 0
    ready = 0
    all_ready, started = anyio.Event(), anyio.Event()
    stop_at = 0.0

    async def session(i: int) -> None:
        nonlocal errors, ready
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = httpx2.AsyncClient(headers=headers, timeout=120)
        async with Client(streamable_http_client(urls[i % len(urls)], http_client=http)) as c:
            await c.call_tool(tool, args)  # warm
            ready += 1
            if ready == sessions:
                all_ready.set()
            await started.wait()
            while time.perf_counter() < stop_at:
                t = time.perf_counter()
                result = await c.call_tool(tool, args)
                times.append((time.perf_counter() - t) * 1000)
                errors += bool(result.is_error)

    async with anyio.create_task_group() as tg:
        for i in range(sessions):
            tg.start_soon(session, i)
        with anyio.fail_after(180):
            await all_ready.wait()  # every session connected and warm
        begin = time.perf_counter()
        server_cpu, own_cpu = cpu_s(server_pid) if server_pid else 0.0, time.process_time()
        stop_at = begin + seconds
        started.set()
    return figures(times, errors, begin, server_pid, server_cpu, own_cpu)


def figures(times: list[float], errors: int, begin: float, server_pid: int | None, server_cpu: float,
            own_cpu: float) -> tuple[float, float, float, int, float, float]:
    """calls/s, p50 ms, p99 ms, errors, the server's and this process's CPU ms per call, since `begin`."""
    elapsed = time.perf_counter() - begin
    calls = max(1, len(times))
    server_ms = (cpu_s(server_pid) - server_cpu) * 1000 / calls if server_pid else 0.0
    return (len(times) / elapsed, pct(times, 50), pct(times, 99), errors, server_ms,
            (time.process_time() - own_cpu) * 1000 / calls)


async def load_raw(url: str, token: str | None, tool: str, args: dict[str, Any], sessions: int, seconds: float,
                   server_pid: int | None = None) -> tuple[float, float, float, int, float, float]:
    """As `load`, each session one HTTP connection posting the request an MCP client sends for `tool` (its
    headers and body: protocol 2026-07-28, stateless) and parsing each answer, without the client's machinery."""
    import httpx2

    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": args, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}}}}).encode()
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": tool}
    if token:
        headers["authorization"] = f"Bearer {token}"
    times: list[float] = []
    errors = 0
    stop_at = 0.0

    async def call(http: Any) -> bool:
        answer = json.loads((await http.post(url, content=body, headers=headers)).content)
        return "error" in answer or bool(answer["result"].get("isError"))

    async def session(http: Any) -> None:
        nonlocal errors
        while time.perf_counter() < stop_at:
            t = time.perf_counter()
            failed = await call(http)
            times.append((time.perf_counter() - t) * 1000)
            errors += failed

    clients = [httpx2.AsyncClient(timeout=120) for _ in range(sessions)]
    for http in clients:
        errors += await call(http)  # warm: every connection open
    begin = time.perf_counter()
    server_cpu, own_cpu = cpu_s(server_pid) if server_pid else 0.0, time.process_time()
    stop_at = begin + seconds
    async with anyio.create_task_group() as tg:
        for http in clients:
            tg.start_soon(session, http)
    result = figures(times, errors, begin, server_pid, server_cpu, own_cpu)
    for http in clients:
        await http.aclose()
    return result


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sessions", type=int, nargs="+", default=[10, 50])
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--tree", default=str(ROOT), help="the judge-mcp checkout to run (default: this one)")
    p.add_argument("--stateful", action="store_true", help="run both servers with sessions (Mcp-Session-Id)")
    p.add_argument("--harness", nargs="+", choices=["mcp", "raw"], default=["mcp", "raw"],
                   help="mcp: the SDK's MCP client per session; raw: the same requests over plain HTTP (server-bound)")
    a = p.parse_args()
    if a.stateful and "raw" in a.harness:
        p.error("--harness raw sends stateless requests (no Mcp-Session-Id): use --harness mcp with --stateful")

    home = tempfile.mkdtemp(prefix="http-load-")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    env.update(JUDGE_MCP_HOME=home, JUDGE_MCP_TOKENS="bench-token=bench", JUDGE_MCP_MODEL="demo",
               JUDGE_MCP_WARM_EMBEDDINGS="0", PYTHONPATH=a.tree,
               JUDGE_MCP_STATELESS_HTTP="0" if a.stateful else "1")
    jport, bport = free_port(), free_port()
    log = (Path(home) / "server.stderr").open("w")
    judge = subprocess.Popen([sys.executable, "-m", "server", "--transport", "http", "--port", str(jport)],
                             env=env, cwd=a.tree, stdout=subprocess.DEVNULL, stderr=log)
    procs = [judge]
    try:
        wait_for(jport)
        agent = anyio.run(create_agent, jport)
        bare = subprocess.Popen([sys.executable, "-c", BARE, str(bport), "0" if a.stateful else "1", agent],
                                env=env, cwd=a.tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(bare)
        wait_for(bport)
        anyio.run(measure, jport, bport, a.sessions, a.seconds, judge.pid, bare.pid, json.loads(agent)["id"], a.harness)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


async def create_agent(jport: int) -> str:
    """An agent created through judge-mcp, as the JSON get_agent answers with."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": "Bearer bench-token"}, timeout=60)
    async with Client(streamable_http_client(f"http://127.0.0.1:{jport}/mcp", http_client=http)) as c:
        agent_id = (await c.call_tool("create_agent", {"name": "bench", "system_prompt": "p"})).structured_content["id"]
        return json.dumps((await c.call_tool("get_agent", {"agent_id": agent_id})).structured_content)


async def measure(jport: int, bport: int, sessions: list[int], seconds: float, jpid: int, bpid: int,
                  agent_id: str, harnesses: list[str]) -> None:
    print(f"{'harness':>7} {'sessions':>8} {'side':>16} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6} "
          f"{'server CPU ms/call':>18} {'client CPU ms/call':>18}")
    for harness in harnesses:
        run = load if harness == "mcp" else load_raw
        for n in sessions:
            j = await run(f"http://127.0.0.1:{jport}/mcp", "bench-token", "get_agent", {"agent_id": agent_id},
                          n, seconds, jpid)
            b = await run(f"http://127.0.0.1:{bport}/mcp", None, "ping", {}, n, seconds, bpid)
            same = await run(f"http://127.0.0.1:{bport}/mcp", None, "get_agent", {"agent_id": agent_id}, n, seconds,
                             bpid)
            for side, r in (("judge-mcp", j), ("bare ping", b), ("bare same answer", same)):
                print(f"{harness:>7} {n:>8} {side:>16} {r[0]:>8.1f} {r[1]:>8.1f} {r[2]:>8.1f} {r[3]:>6} {r[4]:>18.2f} "
                      f"{r[5]:>18.2f}")
            # The server CPU ratio is bare / judge-mcp: the calls/s one replica serves per core, relative to bare.
            for label, base in (("vs ping", b), ("vs same", same)):
                print(f"{harness:>7} {n:>8} {label:>16} {j[0] / base[0]:>7.2f}x {j[1] / base[1]:>7.2f}x "
                      f"{j[2] / base[2]:>7.2f}x {'':>6} {base[4] / j[4] if j[4] else 0:>17.2f}x "
                      f"{j[5] / base[5] if base[5] else 0:>17.2f}x", flush=True)


if __name__ == "__main__":
    main()
