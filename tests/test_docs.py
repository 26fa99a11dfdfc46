"""Every command in README.md and docs/*.md, run as a reader would run it (issue 29.3).

A fenced block's info string says what it is and how it is checked:

- ```sh: shell commands, run in order with bash (-eu -o pipefail) in a checkout-like directory (`.venv` is this
  interpreter's environment), with a fresh HOME holding the project `~/code/my-project` the examples use
  (render.png and render-2.png, two different images; calc.py and its test);
- ```sh background: a server the following blocks of the same page talk to; started, waited for (its port),
  stopped at the end of the page;
- ```sh inspector: MCP Inspector (npx) commands. npx fetches the Inspector from the npm registry, which a test
  may not reach (a fresh clone's `make test` needs no network), so each command is checked with `bash -n`,
  expanded by bash exactly as written, and then performed with the Python MCP client: the same server command
  or URL, the same `-e` variables (on top of what the Inspector passes: PATH and HOME), the same headers,
  method, tool and `--tool-arg` values (JSON parsed where it parses, as the Inspector does);
- ```sh no-run: commands no test can run (installing from the network, the test suite itself, another
  product's CLI); each is listed in NOT_RUN below and checked with `bash -n` only;
- ```json call: tool calls as a host sends them, made against a real `judge-mcp` over stdio (the demo model,
  the project as the one allowed root); `/home/me` stands for the HOME above, `<agent_id>`, `<run_id>`,
  `<document_id>`, `<calibration_id>` and `<job_id>` for what an earlier call of the page returned; a call that
  starts a background job is followed until the job completes;
- ```json patch / analysis / host-config: a patch checked with validate_patch, an analysis that must pass
  evaluate_analysis' deterministic checks, a host configuration block of the right shape;
- ```jsonl path=<file>, ```yaml path=<file>: a file the page asks for, written there (under the HOME above) for
  the calls and commands after it;
- ```yaml github-actions: workflow steps, each with a name and a `run` (checked with `bash -n`) or a `uses`;
- ```text: output shown, not run.

The port 8000 of a page is replaced by a free one (tests run beside other servers). The test environment adds
only plumbing a reader's shell does not need: PYTHONPATH (this checkout), HF_HUB_OFFLINE and the tests' shared
embedding-model cache."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.mcp_helpers import free_port, wait_for_port

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
KINDS = {"sh": {"", "no-run", "background", "inspector"}, "json": {"call", "patch", "analysis", "host-config"},
         "jsonl": {"path"}, "yaml": {"path", "github-actions"}, "text": {""}}

# The blocks no test runs, by page and first command: each says why in its page.
NOT_RUN = {
    ("README.md", "git clone <repository-url> judge-mcp && cd judge-mcp   # no-run: needs the network"),
    ("README.md", "make test           # no-run here (it is the suite itself): ruff, mypy, import contracts, "
                  "pytest; ~20–25 min on 2 cores"),
    ("docs/deployment.md", "make serve   # creates .venv, installs (torch CPU build first), starts the stdio server"),
    ("docs/deployment.md", "# no-run: installs from the network"),
    ("README.md", "uvx judge-mcp --version   # no-run: installs from the network"),
    ("docs/install.md", "# no-run: installs from the network"),
    ("docs/install.md", "make bundle   # no-run here: builds the wheel (make wheel) and dist/judge-mcp-<version>.mcpb"),
    ("docs/install.md", "make wheel          # no-run here: dist/judge_mcp-<version>-py3-none-any.whl, built in .venv"),
    ("docs/deployment.md", "# no-run: needs Claude Code's own CLI"),
}


@dataclass
class Block:
    page: str
    line: int
    lang: str
    tag: str
    arg: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of a page, with their info strings split into language, tag and argument."""
    found, lines = [], path.read_text(encoding="utf-8").splitlines()
    page = str(path.relative_to(REPO))
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            info = lines[i][3:].strip()
            start = i
            i += 1
            body = []
            while not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            lang, _, rest = info.partition(" ")
            tag, _, arg = rest.partition("=")
            found.append(Block(page, start + 1, lang, tag.strip(), arg.strip(), "\n".join(body) + "\n"))
        i += 1
    return found


ALL = [b for page in PAGES for b in blocks_of(page)]


def test_every_block_says_what_it_is() -> None:
    unknown = [f"{b.where} ```{b.lang} {b.tag}" for b in ALL if b.tag not in KINDS.get(b.lang, set())]
    assert unknown == []
    # npx reaches the npm registry: only `sh inspector` blocks (performed with the Python client) may use it.
    assert [b.where for b in ALL if b.lang == "sh" and b.tag in ("", "background") and "npx " in b.text] == []


def test_the_blocks_no_test_runs_are_exactly_the_listed_ones() -> None:
    not_run = {(b.page, b.text.splitlines()[0]) for b in ALL if b.lang == "sh" and b.tag == "no-run"}
    assert not_run == NOT_RUN


@pytest.mark.parametrize("block", [b for b in ALL if b.lang == "sh"], ids=lambda b: b.where)
def test_every_shell_block_is_valid_bash(block: Block) -> None:
    done = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("block", [b for b in ALL if b.lang in ("json", "jsonl")], ids=lambda b: b.where)
def test_every_json_block_parses(block: Block) -> None:
    for value in json_values(block.text):
        assert isinstance(value, dict)


def test_the_quick_start_fits_on_a_screen() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Quick start"):readme.index("\n## ", readme.index("## Quick start"))]
    assert len(section.splitlines()) <= 40
    assert "make serve" in section and "judge-mcp config claude-desktop" in section and "JUDGE_MCP_MODEL=demo" in section


@pytest.mark.parametrize(("page", "heading"), [("README.md", "## Tools"),
                                               ("docs/tools.md", "## Every tool, its arguments and its result")])
def test_the_tools_table_lists_every_tool_the_server_offers(page: str, heading: str, tmp_path: Path) -> None:
    text = (REPO / page).read_text(encoding="utf-8") + "\n## "
    section = text[text.index(heading):text.index("\n## ", text.index(heading))]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    table = section[section.index("| tool |"):]
    assert "\n\n" not in table[:table.index(rows[-1])]  # one table: no blank line splits it
    listed = [re.match(r"\| `(\w+)`", row).group(1) for row in rows]  # type: ignore[union-attr]
    with Reader(tmp_path) as reader:
        offered = reader.run(reader.stdio_tools())
    assert sorted(listed) == sorted(offered) and len(listed) == len(set(listed))


@pytest.mark.e2e
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    runnable = [b for b in blocks_of(page) if not (b.lang == "sh" and b.tag == "no-run") and b.lang != "text"]
    with Reader(tmp_path) as reader:
        for block in runnable:
            reader.perform(block)


def json_values(text: str) -> Iterator[Any]:
    """The JSON values of a block: one value, or several written one after another (JSON lines)."""
    decoder, i = json.JSONDecoder(), 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        value, i = decoder.raw_decode(text, i)
        yield value


def png(colour: str) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (64, 48), colour).save(out, "PNG")
    return out.getvalue()


class Reader:
    """A reader's machine: a HOME with the project, a checkout with its .venv, and the servers the page starts."""

    def __init__(self, tmp: Path) -> None:
        from tests.conftest import MODEL_CACHE

        self.home = (tmp / "home").resolve()
        self.project = self.home / "code" / "my-project"
        (self.project / "tests").mkdir(parents=True)
        (self.project / "render.png").write_bytes(png("red"))
        (self.project / "render-2.png").write_bytes(png("navy"))
        (self.project / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
        (self.project / "tests" / "test_calc.py").write_text(
            "from calc import add\n\n\ndef test_add() -> None:\n    assert add(2, 3) == 5\n")
        self.checkout = tmp / "checkout"
        self.checkout.mkdir()
        (self.checkout / ".venv").symlink_to(sys.prefix)
        self.plumbing = {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "JUDGE_MCP_MODEL_CACHE": str(MODEL_CACHE)}
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
        self.env.update(self.plumbing, HOME=str(self.home))
        self.env.pop("XDG_DATA_HOME", None)
        self.port = free_port()
        self.background: list[subprocess.Popen[bytes]] = []
        self.ids: dict[str, str] = {}
        self.session: Any = None

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.session is not None:
            self.session.close()
        for proc in self.background:  # the page's server and its children: their own process group
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)

    def run(self, coro: Any) -> Any:
        return anyio.run(lambda: coro)

    def shell(self, text: str) -> str:
        return text.replace("8000", str(self.port))

    def perform(self, block: Block) -> None:
        if block.lang == "sh" and block.tag == "":
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", self.shell(block.text)], cwd=self.checkout,
                                  env=self.env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
            assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        elif block.lang == "sh" and block.tag == "background":
            proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", self.shell(block.text)], cwd=self.checkout,
                                    env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
            self.background.append(proc)
            assert wait_for_port(self.port, 120), f"{block.where}: nothing listens on the port"
        elif block.lang == "sh" and block.tag == "inspector":
            for argv in self.inspector_commands(block):
                self.run(self.inspector(argv, block.where))
        elif block.lang == "yaml" and block.tag == "github-actions":
            import yaml

            steps = yaml.safe_load(block.text)
            assert isinstance(steps, list) and steps, block.where
            for step in steps:
                assert step.get("name") and ("run" in step) != ("uses" in step), f"{block.where}: {step}"
                if "run" in step:
                    checked = subprocess.run(["bash", "-n"], input=step["run"], capture_output=True, text=True)
                    assert checked.returncode == 0, f"{block.where}: {checked.stderr}"
        elif block.lang in ("jsonl", "yaml"):
            path = Path(block.arg.replace("/home/me", str(self.home)))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.text, encoding="utf-8")
        elif block.tag == "call":
            for value in json_values(block.text):
                self.call(value["name"], self.filled(value["arguments"]), block.where)
        elif block.tag == "patch":
            checked = self.call("validate_patch", {"patch": next(json_values(block.text))}, block.where)
            assert checked["ok"] is True, checked
        elif block.tag == "analysis":
            result = self.call("evaluate_analysis", {"analysis": next(json_values(block.text)), "llm_judges": []},
                               block.where)
            assert result["passed"] is True, result
        elif block.tag == "host-config":
            config = next(json_values(block.text))
            (servers,) = config.values()
            assert set(servers["judge"]) >= {"command", "args"}, block.where

    # Tool calls against one stdio server per page.

    def filled(self, value: Any) -> Any:
        if isinstance(value, str):
            value = value.replace("/home/me", str(self.home))
            return self.ids.get(value.strip("<>"), value) if value.startswith("<") and value.endswith(">") else value
        if isinstance(value, list):
            return [self.filled(v) for v in value]
        if isinstance(value, dict):
            return {k: self.filled(v) for k, v in value.items()}
        return value

    def call(self, tool: str, arguments: dict[str, Any], where: str) -> dict[str, Any]:
        from tests.mcp_helpers import StdioSession

        if self.session is None:
            self.session = StdioSession(self.env | {"JUDGE_MCP_MODEL": "demo",
                                                    "JUDGE_MCP_ALLOWED_ROOTS": str(self.project)})
        result = self.session.call(tool, arguments)
        assert not result.is_error, f"{where}: {tool}: {result.content[0].text}"
        value: dict[str, Any] = result.structured_content
        self.remember(tool, value)
        if value.get("job_id") and value.get("status") == "working":
            for _ in range(600):
                job = self.session.call("get_job", {"job_id": value["job_id"]}).structured_content
                if job["status"] != "working":
                    break
                time.sleep(0.1)
            assert job["status"] == "completed", f"{where}: {tool} job: {job}"
            value = job["result"]
            self.remember(tool, value)
        return value

    def remember(self, tool: str, value: dict[str, Any]) -> None:
        names = {"create_agent": ("agent_id", "id"), "upload_guideline": ("document_id", "id")}
        if tool in names and names[tool][1] in value:
            self.ids[names[tool][0]] = value[names[tool][1]]
        for key in ("run_id", "calibration_id", "job_id"):
            if isinstance(value.get(key), str):
                self.ids[key] = value[key]

    # The Inspector's commands, performed with the Python client.

    def inspector_commands(self, block: Block) -> list[list[str]]:
        """Each `npx` command of the block as bash expands it (variables, quotes), in order."""
        script = "npx() { printf '%s\\0' \"$@\"; printf '\\1\\0'; }\n" + self.shell(block.text)
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=self.checkout, env=self.env,
                              capture_output=True, timeout=30)
        assert done.returncode == 0, done.stderr
        commands, current = [], []
        for arg in done.stdout.decode().split("\0")[:-1]:
            if arg == "\1":
                commands.append(current)
                current = []
            else:
                current.append(arg)
        assert commands and all(c[:3] == ["-y", "@modelcontextprotocol/inspector@2.12.0", "--cli"] for c in commands)
        return commands

    async def inspector(self, argv: list[str], where: str) -> None:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client

        env: dict[str, str] = {}
        headers: dict[str, str] = {}
        options: dict[str, str] = {}
        tool_args: dict[str, Any] = {}
        target: list[str] = []
        args = iter(argv[3:])
        for arg in args:
            if arg == "-e":
                key, _, value = next(args).partition("=")
                env[key] = value
            elif arg == "--header":
                name, _, value = next(args).partition(":")
                headers[name.strip()] = value.strip()
            elif arg == "--tool-arg":
                key, _, value = next(args).partition("=")
                try:
                    tool_args[key] = json.loads(value)
                except ValueError:
                    tool_args[key] = value
            elif arg.startswith("--"):
                options[arg] = next(args)
            else:
                target.append(arg)
        if "--server-url" in options:
            assert options.get("--transport") == "http" and not target and not env, where
            import httpx2

            http = httpx2.AsyncClient(headers=headers, timeout=120)
            transport: Any = streamable_http_client(options["--server-url"], http_client=http)
        else:
            assert target and not headers, where
            # What the Inspector passes a stdio server: its default variables, then each -e.
            passed = {k: self.env[k] for k in ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER") if k in self.env}
            command = str(self.checkout / target[0]) if target[0].startswith(".") else target[0]
            transport = stdio_client(StdioServerParameters(command=command, args=target[1:], cwd=self.checkout,
                                                           env=passed | self.plumbing | env))
        async with Client(transport) as client:
            method = options["--method"]
            if method == "tools/list":
                assert (await client.list_tools()).tools, where
            elif method == "tools/call":
                result = await client.call_tool(options["--tool-name"], tool_args)
                assert not result.is_error, f"{where}: {result.content[0].text}"
            else:
                raise AssertionError(f"{where}: the test does not perform {method} yet")

    async def stdio_tools(self) -> list[str]:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(command=str(self.checkout / ".venv" / "bin" / "judge-mcp"), env=self.env)
        async with Client(stdio_client(params)) as client:
            return [t.name for t in (await client.list_tools()).tools]


def test_a_placeholder_with_no_earlier_result_stays_as_written(tmp_path: Path) -> None:
    with Reader(tmp_path) as reader:
        assert reader.filled({"agent_id": "<agent_id>", "images": ["/home/me/x.png"]}) == {
            "agent_id": "<agent_id>", "images": [f"{reader.home}/x.png"]}
