"""Parse a document in a separate process with a wall-clock budget and a memory cap, in a small
pool of warm worker processes (`ParsePool`).

A hostile file (a decompression bomb, a parser loop) can then only hurt a child process that
is killed at the deadline; the server keeps answering meanwhile.
"""

from __future__ import annotations

import multiprocessing
import threading
from multiprocessing.connection import Connection

from .formats import DocumentError, Limits, ParsedDocument, parse


def _serve(conn: Connection, memory_mb: int) -> None:
    """A warm worker: the memory cap set and the parsers imported once, then one document per request."""
    try:
        import resource

        cap = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    except (ImportError, ValueError, OSError):
        pass
    import mammoth  # noqa: F401  (warm: the parsers' imports are the cost a fresh process pays)
    import pypdf  # noqa: F401

    while True:
        try:
            data, filename, limits = conn.recv()
        except (EOFError, OSError):
            return  # the server went away
        try:
            conn.send(("ok", parse(data, filename, limits)))
        except DocumentError as exc:
            conn.send(("error", str(exc)))
        except MemoryError:
            conn.send(("error", f"parsing needed more than {memory_mb} MB of memory (a decompression bomb?)"))
            return  # a process that ran out of memory is not reused
        except Exception as exc:
            conn.send(("error", f"the document could not be parsed: {type(exc).__name__}: {exc}"))


class _Worker:
    def __init__(self, memory_mb: int):
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_serve, args=(child, memory_mb), daemon=True, name="judge-mcp-parse")
        self.proc.start()
        child.close()
        self.jobs = 0

    def stop(self) -> None:
        self.conn.close()
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)


class ParsePool:
    """At most `size` parse worker processes, kept warm between uploads (a fresh spawned process costs
    ~0.5 s per upload); more parses at once wait their turn. Each worker has the memory cap; one
    that overruns the time budget is killed (and replaced on the next parse), one that crashed or
    ran out of memory is not reused, and each is retired after `max_jobs` documents."""

    def __init__(self, size: int = 2, *, memory_mb: int = 1024, max_jobs: int = 100):
        self.size = size
        self.memory_mb = memory_mb
        self.max_jobs = max_jobs
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    def warm(self) -> None:
        """Start one worker ahead of the first upload."""
        with self._lock:
            if not self._idle:
                self._idle.append(_Worker(self.memory_mb))

    def _take(self) -> _Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.proc.is_alive():
                    return worker
                worker.stop()
        return _Worker(self.memory_mb)

    def parse(self, data: bytes, filename: str | None, limits: Limits, *, timeout_s: float) -> ParsedDocument:
        """`formats.parse` in a warm worker; DocumentError on failure, timeout or crash."""
        with self._slots:
            worker = self._take()
            reuse = False
            try:
                try:
                    worker.conn.send((data, filename, limits))
                except OSError:  # the idle worker died meanwhile: a fresh one
                    worker.stop()
                    worker = _Worker(self.memory_mb)
                    worker.conn.send((data, filename, limits))
                if not worker.conn.poll(timeout_s):
                    raise DocumentError(f"parsing took longer than {timeout_s:g} s and was stopped")
                try:
                    status, value = worker.conn.recv()
                except (EOFError, OSError):
                    raise DocumentError("the parser crashed (out of memory on a hostile file?)") from None
                worker.jobs += 1
                reuse = worker.jobs < self.max_jobs and not (status == "error" and "MB of memory" in str(value))
            finally:
                if reuse and worker.proc.is_alive():
                    with self._lock:
                        self._idle.append(worker)
                else:
                    worker.stop()
        if status == "error":
            raise DocumentError(str(value))
        result: ParsedDocument = value
        return result

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()
