"""stdio serving that answers every request: a line the SDK cannot read gets a JSON-RPC error back.

The SDK's stdio transport turns an unreadable line (invalid JSON, or JSON nested deeper than its
parser's recursion limit) into an exception the server only logs, so the client waits forever.
Here such a line is answered with a JSON-RPC "Parse error" (-32700) carrying the request's id
when it can be found at the top level of the line (else null, as JSON-RPC says)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

log = logging.getLogger("judge_mcp")

PARSE_ERROR = -32700
_ID = re.compile(r'\s*("(?:[^"\\]|\\.)*"|-?\d+)')


def top_level_id(line: str) -> str | int | None:
    """The `id` member of the outermost JSON object in `line`, found without parsing the nesting."""
    depth = 0
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == '"':
            end = i + 1
            while end < n and line[end] != '"':
                end += 2 if line[end] == "\\" else 1
            key = line[i + 1:end]
            i = end + 1
            if depth == 1 and key == "id":
                rest = line[i:].lstrip()
                if rest.startswith(":"):
                    m = _ID.match(rest[1:])
                    if m:
                        value = m.group(1)
                        found: str | int = json.loads(value)
                        return found
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        i += 1
    return None


def parse_error_reply(exc: Exception) -> Any:
    """A JSON-RPC error message answering the unreadable line behind `exc`."""
    from mcp.shared.message import SessionMessage
    from mcp.types import ErrorData, JSONRPCError

    line, reason = "", str(exc).splitlines()[1].strip() if len(str(exc).splitlines()) > 1 else str(exc)
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            line, reason = str(first.get("input", "")), first.get("msg", reason)
        except Exception:  # not a pydantic error after all
            pass
    hint = ("nest the arguments less deeply (the server reads about 200 levels)" if "recursion limit" in reason
            else "send one JSON-RPC 2.0 message per line")
    message = f"Parse error: the message could not be read ({reason}); {hint}"
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=top_level_id(line),
                                       error=ErrorData(code=PARSE_ERROR, message=message)))


def writable(message: Any) -> Any:
    """`message` when it can be written as JSON; else, for a response, a JSON-RPC internal error (-32603)
    answering the same request and saying why, and for a notification None (dropped, logged). The SDK's stdio
    writer serialises each message in its one writer task: one that cannot be (a lone surrogate in a string
    that reached a result) ended that task, and with it the whole server."""
    from mcp.shared.message import SessionMessage
    from mcp.types import ErrorData, JSONRPCError

    try:
        message.message.model_dump_json(by_alias=True, exclude_unset=True)
        return message
    except Exception as exc:
        request_id = getattr(message.message, "id", None)
        reason = str(exc).splitlines()[0][:300]
        log.error("a message to the client could not be written as JSON (%s): %s",
                  f"request {request_id!r}" if request_id is not None else "a notification", reason)
        if request_id is None:
            return None
        return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(
            code=-32603, message=f"Internal error: the result could not be written as JSON ({reason}); "
                                 "nothing else failed, and the server goes on serving")))


MAX_LINE = 1 << 30  # a cap on one message line (the pipe reader's buffer grows only as a line needs)


class _PipeLines:
    """stdin as the SDK's stdio transport reads it (text lines, iterated), from an asyncio pipe reader."""

    def __init__(self, reader: asyncio.StreamReader):
        self._reader = reader

    def __aiter__(self) -> _PipeLines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _PipeWriter:
    """stdout as the SDK's stdio transport writes it (write, then flush), to an asyncio pipe writer."""

    def __init__(self, writer: asyncio.StreamWriter):
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))
        await self._writer.drain()

    async def flush(self) -> None:
        return None


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@asynccontextmanager
async def _pipe_stdio() -> AsyncIterator[tuple[Any, Any] | None]:
    """When stdin and stdout are pipes (as a host spawns a server): both served by the event loop itself,
    with no worker thread per line read and two per message written (the SDK's stdio transport wraps the
    files for anyio, each read, write and flush a hand-off to a thread and back, ≈0.2-0.5 ms of a call
    here). As the SDK does, fd 0 then reads the null device and fd 1 writes to stderr while serving, so a
    library's stray print never reaches the wire. Otherwise (a terminal, a file) None: the SDK's transport."""
    if os.name != "posix" or not (_is_pipe(0) and _is_pipe(1)):  # Windows' loops serve no pipes this way
        yield None
        return
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)  # not inherited by child processes (PEP 446); 0-2 are open: fds ≥ 3
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    reader = asyncio.StreamReader(limit=MAX_LINE)
    in_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                   os.fdopen(wire_in, "rb", buffering=0))
    out_transport, out_protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                                os.fdopen(wire_out, "wb", buffering=0))
    writer = asyncio.StreamWriter(out_transport, out_protocol, None, loop)
    try:
        yield _PipeLines(reader), _PipeWriter(writer)
    finally:
        in_transport.close()
        out_transport.close()


async def serve_stdio(server: Any) -> None:
    """Run the MCP server on stdin/stdout, answering unreadable lines instead of dropping them."""
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    from .sdk import lowlevel as lowlevel_of

    lowlevel = lowlevel_of(server)  # MCPServer.run_stdio_async does the same, minus the answers
    async with _pipe_stdio() as pipes, stdio_server(*(pipes or ())) as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def forward() -> None:
            async with send:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        log.warning("unreadable message on stdin: %s", str(item).splitlines()[0])
                        await write_stream.send(parse_error_reply(item))
                        continue
                    await send.send(item)

        out_send, out_receive = anyio.create_memory_object_stream[SessionMessage](0)
        writing = anyio.Event()
        writing.set()  # set while no message is between the server and the SDK's writer

        async def write() -> None:
            nonlocal writing
            async with out_receive:
                async for message in out_receive:
                    writing = anyio.Event()
                    answer = writable(message)
                    if answer is not None:
                        await write_stream.send(answer)
                    writing.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(forward)
            tg.start_soon(write)
            async with out_send:
                await lowlevel.run(receive, out_send, lowlevel.create_initialization_options())
            with anyio.move_on_after(5):  # the last message handed over, as the SDK's own writer would
                await writing.wait()
            tg.cancel_scope.cancel()
        await write_stream.aclose()  # (the low-level server closed the stream it was given) the SDK's writer ends


def stop_on_signals() -> None:
    """Ctrl-C (SIGINT) or SIGTERM stops a stdio server at once, with one log line and no traceback.

    Shutting down in order would wait for the thread blocked reading stdin (it only returns on the next line
    or EOF), so the process ends here. Nothing is lost that a restart does not handle: SQLite commits are
    durable, an upload cut short is marked failed at the next start, parse workers exit when their pipe
    closes and gate sandboxes die with their parent (bwrap --die-with-parent)."""
    import os
    import signal

    def stop(signum: int, _frame: object) -> None:
        log.info("stopping on %s", signal.Signals(signum).name)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(130 if signum == signal.SIGINT else 143)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
