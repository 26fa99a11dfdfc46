"""The built wheel installed with plain `pip install` into a fresh venv under a fresh HOME (packages only from the
configured package index and the local wheel), its `judge-mcp` started from `/` over stdio with the real MCP
client: every tool listed, a real PDF uploaded and found by search, no torch, and the size of the venv."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.documents import BRAND_GUIDE, pdf

REPO = Path(__file__).resolve().parents[1]
LIMIT_MB = 1100


@dataclass
class Installed:
    venv: Path
    home: Path
    project: Path
    install_s: float
    started: float  # when `pip install` began (time.monotonic)

    @property
    def command(self) -> Path:
        return self.venv / "bin" / "judge-mcp"

    def env(self) -> dict[str, str]:
        """What a host passes: PATH, the fresh HOME, and the one directory the tools may use."""
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
                "JUDGE_MCP_ALLOWED_ROOTS": str(self.project)}


def _wheel() -> Path:
    wheel = os.environ.get("JUDGE_TEST_WHEEL", "")
    if not wheel or not Path(wheel).is_file():
        pytest.fail(f"JUDGE_TEST_WHEEL={wheel!r} names no wheel: `make test-install` builds one and runs these",
                    pytrace=False)
    return Path(wheel)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("install")
    home, venv = root / "home", root / "venv"
    project = home / "code" / "my-project"
    project.mkdir(parents=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env, cwd="/")
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(_wheel())], check=True, env=env,
                   cwd="/", timeout=1800)
    took = time.monotonic() - started
    print(f"\n  venv + pip install of {_wheel().name}: {took:.0f} s", file=sys.stderr)
    yield Installed(venv, home, project, took, started)
    shutil.rmtree(root, ignore_errors=True)


async def _session(installed: Installed, work: Any) -> Any:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=str(installed.command), args=[], env=installed.env(), cwd="/")
    async with Client(stdio_client(params)) as client:
        return await work(client)


def _names_listed(command: list[str], env: dict[str, str]) -> list[str]:
    async def listed() -> list[str]:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd="/")
        async with Client(stdio_client(params)) as client:
            return sorted(t.name for t in (await client.list_tools()).tools)

    return anyio.run(listed)


def test_the_installed_venv_has_no_torch_and_no_cuda_libraries(installed: Installed) -> None:
    site = next((installed.venv / "lib").glob("python3*/site-packages"))
    names = {p.name.lower() for p in site.iterdir()}
    assert sorted(n for n in names if n.startswith(("torch", "nvidia", "triton", "sentence_transformers"))) == []
    found = subprocess.run([str(installed.venv / "bin" / "python"), "-c",
                            "import importlib.util as u; print([m for m in ('torch', 'transformers', "
                            "'sentence_transformers') if u.find_spec(m)])"],
                           capture_output=True, text=True, check=True, cwd="/")
    assert found.stdout.strip() == "[]"


def test_the_installed_venv_stays_under_1100_mb(installed: Installed) -> None:
    size = int(subprocess.run(["du", "-sk", str(installed.venv)], capture_output=True, text=True, check=True)
               .stdout.split()[0]) // 1024
    print(f"\n  installed venv: {size} MB", file=sys.stderr)
    assert size < LIMIT_MB


def test_the_installed_command_says_pyprojects_version(installed: Installed) -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    shown = subprocess.run([str(installed.command), "--version"], capture_output=True, text=True, check=True,
                           cwd="/", env=installed.env())
    assert shown.stdout == f"judge-mcp {version}\n"


def test_the_installed_server_lists_every_tool_the_checkout_lists(installed: Installed) -> None:
    ours = _names_listed([str(installed.command)], installed.env())
    print(f"\n  pip install -> first answered tools/list: {time.monotonic() - installed.started:.0f} s",
          file=sys.stderr)
    checkout = _names_listed([sys.executable, "-m", "server"], installed.env() | {"PYTHONPATH": str(REPO)})
    assert len(ours) > 20 and ours == checkout


def test_a_pdf_uploaded_to_the_installed_server_is_found_by_search(installed: Installed) -> None:
    guide = installed.project / "brand-guide.pdf"
    guide.write_bytes(pdf(BRAND_GUIDE))

    async def work(client: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        made = await client.call_tool("create_agent", {"name": "Brand", "system_prompt": "Judge brand compliance."})
        assert not made.is_error, made.content[0].text
        agent = made.structured_content["id"]
        uploaded = await client.call_tool("upload_guideline", {"agent_id": agent, "path": str(guide)})
        assert not uploaded.is_error, uploaded.content[0].text
        found = await client.call_tool("search_guidelines", {"agent_id": agent, "query": "brand colour palette hex",
                                                             "top_k": 3, "similarity_threshold": 0.0})
        assert not found.is_error, found.content[0].text
        return uploaded.structured_content, found.structured_content

    uploaded, found = anyio.run(_session, installed, work)
    assert (uploaded["processing_status"], uploaded["metadata"]["pages"]) == ("processed", 4)
    assert "primary blue HEX#488EFF" in found["chunks"][0]["text"]


EMBED = "import json, sys; from rag.embedding import OnnxInt8Embedder; print(json.dumps(OnnxInt8Embedder().embed(sys.argv[1:])))"
SENTENCES = ["Never stretch, rotate or recolour the logo.", "a red bicycle on a beach at dawn"]


def test_the_installed_model_embeds_as_the_checkouts_model(installed: Installed) -> None:
    """The model in the wheel is the one the checkout builds: the same vectors, to float precision."""
    def vectors(python: str, env: dict[str, str]) -> list[list[float]]:
        out = subprocess.run([python, "-c", EMBED, *SENTENCES], capture_output=True, text=True, check=True,
                             cwd="/", env=env)
        return json.loads(out.stdout)  # type: ignore[no-any-return]

    theirs = vectors(str(installed.venv / "bin" / "python"), installed.env())
    ours = vectors(sys.executable, installed.env() | {"PYTHONPATH": str(REPO)})
    for a, b in zip(theirs, ours, strict=True):
        assert math.isclose(sum(x * y for x, y in zip(a, b, strict=True)), 1.0, abs_tol=1e-6)
