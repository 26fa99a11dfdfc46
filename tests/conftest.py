from __future__ import annotations

import ipaddress
import os
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from server.settings import Settings
from tests.fake_model_server import FakeModelServer

_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: Any) -> Any:
    """Nothing in the tests may reach the network: only loopback and Unix sockets connect."""
    if isinstance(address, tuple):
        host = address[0]
        try:
            ok = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            ok = False
        if not ok:
            raise ConnectionRefusedError(f"tests may not reach the network ({host})")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def fake_server_session() -> Iterator[FakeModelServer]:
    server = FakeModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def fake_server(fake_server_session: FakeModelServer) -> Iterator[FakeModelServer]:
    fake_server_session.reset()
    yield fake_server_session
    fake_server_session.reset()


# One exported embedding model for every test (and every test run): the export takes ~10 s.
MODEL_CACHE = Path(tempfile.gettempdir()) / "judge-mcp-test-models"


def memory_tmpdir() -> str | None:
    """/dev/shm when this machine has it writable with a GB free (a filesystem in memory: a file sync or a
    directory removal costs microseconds there, ~10 ms on a busy disk), else None (tempfile's default). For tests
    whose time goes to their own scratch trees, not to what they assert (tests/test_patch_properties.py)."""
    try:
        free = os.statvfs("/dev/shm")
    except OSError:
        return None
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) and free.f_bavail * free.f_frsize >= 1 << 30 else None


def make_settings(home: Path, **overrides: Any) -> Settings:
    """Settings whose one allowed root is `home` (created), with the data beside it (mcp_helpers.data_home)."""
    from tests.mcp_helpers import data_home

    home.mkdir(parents=True, exist_ok=True)
    values: dict[str, Any] = {"home": data_home(home), "allowed_roots": [home], "max_retry_wait_s": 5.0,
                              "model_cache": MODEL_CACHE, "warm_embeddings": False}
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path / "home")


@pytest.fixture
def model_settings(tmp_path: Path, fake_server: FakeModelServer) -> Settings:
    """Settings whose default model is the fake server behind the real OpenAI SDK."""
    return make_settings(
        tmp_path / "home", model="openai:gpt-fake", openai_api_key="sk-test", openai_base_url=fake_server.openai_url
    )


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[Any]:
    from mcp import Client

    from server.app import create_server

    async with Client(create_server(settings)) as c:
        yield c


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A throwaway PostgreSQL cluster for the whole session (skipped, with why, without the binaries)."""
    from tests.postgres import PgCluster, pg_bin

    bindir = pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL binaries not found (/usr/lib/postgresql/*/bin): apt-get install postgresql")
    cluster = PgCluster(bindir).start()
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest) -> str:
    """Each store test runs on both engines."""
    return str(request.param)


@pytest.fixture
def database_url(engine: str, request: pytest.FixtureRequest) -> Iterator[str | None]:
    """None for SQLite in the data home, or a fresh PostgreSQL database's URL (dropped after the test)."""
    if engine == "sqlite":
        yield None
        return
    cluster = request.getfixturevalue("postgres")
    url = str(cluster.create_database())
    yield url
    cluster.drop_database(url)


@pytest.fixture
def on_engine(database_url: str | None, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """Every server the test makes keeps its state on the engine under test: JUDGE_MCP_DATABASE_URL is set (a
    fresh PostgreSQL database) or unset (SQLite in the data home), and both in-process Settings and spawned
    `judge-mcp` processes (tests/mcp_helpers.py `server_env`) read it. Use it as
    `pytest.mark.usefixtures("on_engine")` on a test or module to run it on both engines."""
    if database_url is None:
        monkeypatch.delenv("JUDGE_MCP_DATABASE_URL", raising=False)
    else:
        monkeypatch.setenv("JUDGE_MCP_DATABASE_URL", database_url)
    return database_url


@pytest.fixture
def db(database_url: str | None, tmp_path: Path) -> Iterator[Any]:
    """The state database on each engine, empty."""
    from judges.store.database import open_database

    database = open_database(database_url, tmp_path / "judge.sqlite3")
    yield database
    database.close()
