"""Helpers shared by the tool tests."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

JUDGE_MCP = str(Path(sys.executable).with_name("judge-mcp"))


def data_home(home: Path) -> Path:
    """Where server_env and make_settings keep the server's data for a test's `home`: beside it, never in it
    (the data home may not lie inside an allowed root)."""
    return home.with_name(home.name + "-data")


def server_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a spawned `judge-mcp`: `home` (created) is the one allowed root, its data in
    data_home(home)."""
    from tests.conftest import MODEL_CACHE

    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))
           or k == "JUDGE_MCP_DATABASE_URL"}  # the engine under test (conftest.py `on_engine`)
    roots = {} if "JUDGE_MCP_ORG_ROOTS" in extra else {"JUDGE_MCP_ALLOWED_ROOTS": str(home)}
    tokens = extra.get("JUDGE_MCP_TOKENS", "")
    if "JUDGE_MCP_ALLOWED_ROOTS" not in extra and "JUDGE_MCP_ORG_ROOTS" not in extra and tokens:
        # An HTTP server with tokens: `home` as every organization's own root (tests about tenancy give each
        # organization its own with JUDGE_MCP_ORG_ROOTS).
        orgs = {pair.rpartition("=")[2].rsplit(":", 1)[0] if pair.endswith((":member", ":admin", ":superadmin"))
                else pair.rpartition("=")[2] for pair in tokens.split(",") if "=" in pair}
        roots = {"JUDGE_MCP_ORG_ROOTS": ";".join(f"{org.strip()}={home}" for org in sorted(orgs))}
    env.update({"JUDGE_MCP_HOME": str(data_home(home)), **roots, "JUDGE_MCP_MODEL_CACHE": str(MODEL_CACHE), **extra})
    return env


async def call(client: Any, tool: str, **args: Any) -> dict[str, Any]:
    """The structured result of a tool call that must succeed."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, (result.content[0].text, json.dumps(result.structured_content)[:3000])
    return result.structured_content  # type: ignore[no-any-return]


async def error_of(client: Any, tool: str, **args: Any) -> str:
    """The message of a tool call that must fail."""
    result = await client.call_tool(tool, args)
    assert result.is_error
    return result.content[0].text  # type: ignore[no-any-return]


async def outcome(client: Any, tool: str, **args: Any) -> dict[str, Any]:
    """The structured content of a call that ran: a result, or (when it produced nothing usable) the isError
    result that keeps every detail. For tests that look at the failures themselves."""
    result = await client.call_tool(tool, args)
    assert result.structured_content is not None, result.content[0].text
    assert not result.is_error or result.content[0].text.startswith("No usable result: "), result.content[0].text
    return result.structured_content  # type: ignore[no-any-return]


async def no_result(client: Any, tool: str, **args: Any) -> tuple[str, dict[str, Any]]:
    """A call that produced nothing usable: an isError result whose first text says why and whose structured
    content keeps every detail. Returns (that text, the structured content)."""
    result = await client.call_tool(tool, args)
    assert result.is_error and result.structured_content is not None, result.content[0].text
    return result.content[0].text, result.structured_content


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout_s: float) -> bool:
    """True once something listens on 127.0.0.1:`port`, False after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def processes_with(marker: str, *, excluding: str | None = None) -> list[str]:
    """Command lines of live processes that contain `marker` (and not `excluding`)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmd and (excluding is None or excluding not in cmd):
                found.append(cmd)
    return found


class StdioSession:
    """One real `judge-mcp` process (python -m server, this checkout) and the real MCP client over stdio,
    driven from synchronous tests: the client lives in its own thread and event loop, so one process
    can serve a whole module of tests (`call`/`prompt` block until the answer arrives)."""

    def __init__(self, env: dict[str, str], cwd: str = "/", errlog: Path | None = None) -> None:
        import asyncio
        import threading

        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: Any = None
        self._error: BaseException | None = None
        self.client: Any = None
        repo = str(Path(__file__).resolve().parents[1])
        self._params = (env | {"PYTHONPATH": repo}, cwd)
        self._errlog = errlog  # the server's stderr, appended to this file (default: this process's stderr)
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._main(),), daemon=True)
        self._thread.start()
        if not self._ready.wait(120) or self._error is not None:
            raise RuntimeError(f"the server did not start: {self._error}")

    async def _main(self) -> None:
        import asyncio

        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        env, cwd = self._params
        params = StdioServerParameters(command=sys.executable, args=["-m", "server"], env=env, cwd=cwd)
        self._stop = asyncio.Event()
        errlog = open(self._errlog, "a", buffering=1) if self._errlog is not None else sys.stderr
        try:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                self.client = client
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
            self._ready.set()
        finally:
            if errlog is not sys.stderr:
                errlog.close()

    def run(self, coro: Any, timeout_s: float = 120) -> Any:
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """The CallToolResult of one call."""
        return self.run(self.client.call_tool(tool, arguments))

    def error(self, tool: str, arguments: dict[str, Any], *, unprefixed: bool = False) -> str:
        """The text of one call that must be an error (`unprefixed`: without the SDK's "Error executing tool X: ")."""
        result = self.call(tool, arguments)
        assert result.is_error is True
        text: str = result.content[0].text
        return text.removeprefix(f"Error executing tool {tool}: ") if unprefixed else text

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


class RawStdio:
    """One `judge-mcp` over stdio, spoken to with raw JSON-RPC lines: no client-side work (schema validation)
    in the timings, and the process may be killed mid-call. `answer` waits for the response to one request."""

    def __init__(self, env: dict[str, str], errlog: Any, command: list[str] | None = None) -> None:
        import json
        import subprocess

        self._json = json
        self.proc = subprocess.Popen(command or [JUDGE_MCP], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=errlog, env=env, cwd="/")
        self._next = 100
        self.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
        assert self.answer(1, 120) is not None, "the server did not answer initialize"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((self._json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def answer(self, id_: int, timeout_s: float) -> dict[str, Any] | None:
        """The response to request `id_`; None when the process ended (killed) first."""
        import select

        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                if not line:
                    return None
                message = self._json.loads(line)
                if message.get("id") == id_:
                    return message  # type: ignore[no-any-return]
        raise AssertionError(f"no answer to request {id_} in {timeout_s} s")

    def request(self, method: str, params: dict[str, Any], timeout_s: float = 120) -> dict[str, Any]:
        """Send one request and return its result (an error response fails)."""
        self._next += 1
        self.send({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        answer = self.answer(self._next, timeout_s)
        assert answer is not None and "result" in answer, answer
        return answer["result"]  # type: ignore[no-any-return]

    def call(self, tool: str, arguments: dict[str, Any], timeout_s: float = 120) -> dict[str, Any]:
        """The result of a tools/call that must succeed."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments}, timeout_s)
        assert not result.get("isError"), result
        return result

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
