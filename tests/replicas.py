"""Several judge-mcp HTTP replicas sharing one state, started from processes: a PostgreSQL database (a
tests/postgres.py cluster), a real `chroma run` server and N `judge-mcp --transport http` replicas on free
ports, each with its own data home. The multi-replica tests (tests/test_replicas.py) and bench/replicas.py
both start their topology here."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.mcp_helpers import JUDGE_MCP, free_port, server_env, wait_for_port

CHROMA = Path(sys.executable).with_name("chroma")


def chroma_command() -> str | None:
    """The `chroma` command (installed with chromadb), or None."""
    return str(CHROMA) if CHROMA.exists() else shutil.which("chroma")


@dataclass
class Replica:
    url: str
    proc: subprocess.Popen[bytes]


@dataclass
class Topology:
    """State in `database_url` and `chroma_url`; replicas started by `start` share both."""

    database_url: str
    chroma_url: str
    root: Path
    env: dict[str, str]  # every replica's settings besides the shared state (tokens, model, lease, ...)
    replicas: list[Replica] = field(default_factory=list)
    chroma: subprocess.Popen[bytes] | None = None

    def start(self, name: str) -> Replica:
        """One more replica (its data home under `root`), once it listens; `start_topology` keeps the ones it
        starts in `replicas` (stopped by `stop`), a caller of `start` stops its own."""
        home = self.root / name
        home.mkdir(parents=True, exist_ok=True)
        port = free_port()
        env = server_env(home, JUDGE_MCP_DATABASE_URL=self.database_url, JUDGE_MCP_CHROMA_URL=self.chroma_url,
                         **self.env)
        with (home / "stderr.log").open("ab") as err:
            proc = subprocess.Popen([JUDGE_MCP, "--transport", "http", "--port", str(port)],
                                    env=env, stdout=subprocess.DEVNULL, stderr=err)
        if not wait_for_port(port, 60):
            proc.kill()
            raise RuntimeError(f"replica {name} did not start within 60 s (its log: {home / 'stderr.log'})")
        return Replica(f"http://127.0.0.1:{port}/mcp", proc)

    def stop(self) -> None:
        """Every replica, then the Chroma server (the database belongs to its cluster)."""
        for r in self.replicas:
            r.proc.terminate()
        for r in self.replicas:
            try:
                r.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                r.proc.kill()
                r.proc.wait()
        if self.chroma is not None:
            self.chroma.terminate()
            try:
                self.chroma.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.chroma.kill()
                self.chroma.wait()


def start_topology(database_url: str, root: Path, env: dict[str, str], replicas: int) -> Topology:
    """A `chroma run` server in `root` and `replicas` judge-mcp replicas on `database_url`; stop() ends them.
    RuntimeError when the chroma command is missing or something does not start."""
    command = chroma_command()
    if command is None:
        raise RuntimeError("the chroma command is not installed (it comes with chromadb)")
    port = free_port()
    chroma = subprocess.Popen([command, "run", "--path", str(root / "chroma-server"), "--host", "127.0.0.1",
                               "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    top = Topology(database_url, f"http://127.0.0.1:{port}", root, env, chroma=chroma)
    try:
        if not wait_for_port(port, 60):
            raise RuntimeError("chroma run did not start within 60 s")
        for i in range(replicas):
            top.replicas.append(top.start(f"replica-{i + 1}"))
    except BaseException:
        top.stop()
        raise
    return top
