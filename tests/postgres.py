"""A throwaway PostgreSQL cluster for the tests: initdb into a temp dir, pg_ctl on a free loopback port.

Run as the `postgres` user when the tests run as root (PostgreSQL refuses root). When the binaries are
absent the PostgreSQL tests skip with the reason (`.ci/run` installs the `postgresql` package, so CI never
skips them)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path


def pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgCluster:
    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="judge-mcp-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.as_root = os.geteuid() == 0

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(a) for a in args]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=self.root)

    def start(self) -> PgCluster:
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(self.bindir / "initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-sync")
        self._run(self.bindir / "pg_ctl", "-D", self.data, "-l", self.root / "log", "-w", "-o",
                  f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                  f"-c max_connections=300", "start")
        return self

    def pause(self) -> None:
        """Stop the server (its data kept): clients lose their connections and cannot connect."""
        self._run(self.bindir / "pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start the server again on the same port and data."""
        self._run(self.bindir / "pg_ctl", "-D", self.data, "-l", self.root / "log", "-w", "-o",
                  f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                  f"-c max_connections=300", "start")

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def create_database(self) -> str:
        """A fresh, empty database in the cluster; its URL."""
        import psycopg

        name = "t" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def drop_database(self, url: str) -> None:
        """Drop a database create_database made, closing its connections: the session's cluster stays ~50 MB
        (each database copies a ~10 MB template: ~2.5 GB over the suite, as slow to remove at its end)."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(url.rsplit("/", 1)[1])))

    def stop(self) -> None:
        try:
            self._run(self.bindir / "pg_ctl", "-D", self.data, "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
