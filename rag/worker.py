"""Parse a document in a separate process with a wall-clock budget and a memory cap.

A hostile file (a decompression bomb, a parser loop) can then only hurt a child process that
is killed at the deadline; the server keeps answering meanwhile.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection

from .formats import DocumentError, Limits, ParsedDocument, parse


def _child(conn: Connection, data: bytes, filename: str | None, limits: Limits, memory_mb: int) -> None:
    try:
        import resource

        cap = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    except (ImportError, ValueError, OSError):
        pass
    try:
        conn.send(("ok", parse(data, filename, limits)))
    except DocumentError as exc:
        conn.send(("error", str(exc)))
    except MemoryError:
        conn.send(("error", f"parsing needed more than {memory_mb} MB of memory (a decompression bomb?)"))
    except Exception as exc:
        conn.send(("error", f"the document could not be parsed: {type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def parse_in_worker(data: bytes, filename: str | None, limits: Limits, *, timeout_s: float,
                    memory_mb: int) -> ParsedDocument:
    """`formats.parse` in a spawned process; DocumentError on failure, timeout or crash."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, data, filename, limits, memory_mb), daemon=True)
    proc.start()
    send.close()
    try:
        if not receive.poll(timeout_s):
            raise DocumentError(f"parsing took longer than {timeout_s:g} s and was stopped")
        try:
            status, value = receive.recv()
        except (EOFError, OSError):
            raise DocumentError("the parser crashed (out of memory on a hostile file?)") from None
    finally:
        receive.close()
        if proc.is_alive():
            proc.kill()
        proc.join(5)
    if status == "error":
        raise DocumentError(str(value))
    result: ParsedDocument = value
    return result
