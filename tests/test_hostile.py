"""Hostile and careless input through the real server (issue 15): each test spawns `judge-mcp`."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.mcp_helpers import JUDGE_MCP, data_home, server_env

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@asynccontextmanager
async def stdio_client(home: Path, **env: str) -> AsyncIterator[Any]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=JUDGE_MCP, args=[], env=server_env(home, **env))
    async with Client(params) as client:
        yield client


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under `root`: file bytes, or the link target / 'dir'."""
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        out[rel] = os.readlink(p) if p.is_symlink() else ("dir" if p.is_dir() else p.read_bytes())
    return out


async def stall_while(attack: Callable[[], Awaitable[Any]], probe: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    """Run `attack` while calling `probe` back to back (the first sent together with the attack).

    Returns (attack's result, the slowest probe in seconds); at least one probe runs during the attack."""
    baseline = 0.0
    for _ in range(5):  # the same probe with no attack running: this machine's noise, for the report
        started = time.monotonic()
        await probe()
        baseline = max(baseline, time.monotonic() - started)
    print(f"\n  probe baseline (no attack): slowest of 5 {baseline * 1000:.0f} ms", end="")
    slowest = 0.0
    done = anyio.Event()
    result: list[Any] = []

    async def run_attack() -> None:
        try:
            result.append(await attack())
        finally:
            done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_attack)
        while True:
            started = time.monotonic()
            await probe()
            slowest = max(slowest, time.monotonic() - started)
            if done.is_set():
                break
            await anyio.sleep(0.02)
    return result[0], slowest


# --- 1. symlink races ----------------------------------------------------------------------

RACES = 500


async def test_swapping_a_directory_for_a_symlink_never_lets_apply_patch_write_outside(tmp_path: Path) -> None:
    project, outside, home = tmp_path / "project", tmp_path / "outside", tmp_path / "home"
    (project / "sub").mkdir(parents=True)
    (project / "sub" / "keep.txt").write_text("inside\n")
    outside.mkdir()
    (outside / "keep.txt").write_text("canary\n")
    canaries = snapshot(outside)
    stop = threading.Event()
    flips = [0]

    def flipper() -> None:  # sub <-> symlink to outside, as fast as it goes
        sub, parked = project / "sub", project / "sub.parked"
        while not stop.is_set():
            os.rename(sub, parked)
            os.symlink(outside, sub)
            time.sleep(0.0005)
            os.unlink(sub)
            os.rename(parked, sub)
            flips[0] += 1
            time.sleep(0.002)

    outcomes = {"applied": 0, "refused": 0}
    async with stdio_client(home, JUDGE_MCP_ALLOWED_ROOTS=str(project)) as client:
        thread = threading.Thread(target=flipper, daemon=True)
        thread.start()
        try:
            for i in range(RACES):
                patch = {"ops": [{"kind": "add", "path": f"sub/new{i}.txt", "content": "x\n"},
                                 {"kind": "edit", "path": "sub/keep.txt", "find": "inside", "replace": "inside"}]}
                result = await client.call_tool("apply_patch", {"patch": patch, "root": str(project)})
                applied = not result.is_error and result.structured_content["applied"]
                outcomes["applied" if applied else "refused"] += 1
        finally:
            stop.set()
            thread.join()
    print(f"\n{RACES} races, {flips[0]} flips: {outcomes}")
    assert snapshot(outside) == canaries  # nothing written, renamed or removed outside
    assert outcomes["applied"] > 0 and outcomes["refused"] > 0 and flips[0] > 100  # both sides of the race ran


# --- one HTTP server with two organizations, for the attacks that must not stall others ------

@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    from tests.mcp_helpers import free_port, wait_for_port

    home = tmp_path_factory.mktemp("http-home")
    port = free_port()
    log = (home / "stderr.log").open("w")
    proc = subprocess.Popen([JUDGE_MCP, "--transport", "http", "--port", str(port)],
                            env=server_env(home, JUDGE_MCP_TOKENS="tok-attacker=org-a,tok-probe=org-b"),
                            stdout=subprocess.DEVNULL, stderr=log)
    assert wait_for_port(port, 30), "the HTTP server did not start within 30 s"
    url = f"http://127.0.0.1:{port}/mcp"
    anyio.run(warm_up, url)
    yield url, home
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


async def warm_up(url: str) -> None:
    """One upload, so the embedding model and the store are loaded before stalls are measured: the
    figures are the attacks', not the start-up's."""
    async with http_client(url, "tok-probe") as client:
        agent = (await client.call_tool("create_agent", {"name": "warm", "system_prompt": "p"})).structured_content
        done = await client.call_tool("upload_guideline", {"agent_id": agent["id"], "text": "Warm up.",
                                                           "filename": "w.txt"})
        assert not done.is_error, done.content[0].text


def http_client(url: str, token: str) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=60)))


async def attack_with_probe(url: str, tool: str, args: dict[str, Any]) -> tuple[Any, float]:
    """Call `tool` as org-a while org-b's get_agent is timed; (org-a's result, org-b's slowest answer)."""
    async with http_client(url, "tok-attacker") as attacker, http_client(url, "tok-probe") as prober:
        agent = (await prober.call_tool("create_agent", {"name": "probe", "system_prompt": "p"})).structured_content

        async def probe() -> None:
            got = await prober.call_tool("get_agent", {"agent_id": agent["id"]})
            assert not got.is_error

        return await stall_while(lambda: attacker.call_tool(tool, args), probe)


# What "stalls no one" means: the other caller's get_agent (~5 ms alone) still answers within this. The
# attacks it guards against block the loop for seconds (or forever); 0.5 s leaves room for a loaded 2-core
# CI machine, where a 20 MB body's JSON parsing alone has taken 0.2 s.
STALL_LIMIT_S = 0.5

# --- 2. ReDoS in a caller's JSON Schema ------------------------------------------------------

async def test_a_catastrophic_schema_pattern_runs_in_linear_time_and_stalls_no_one(http_url: tuple[str, Path]) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}}}
    analysis = {"name": "a" * 200_000 + "!"}
    result, stall = await attack_with_probe(http_url[0], "evaluate_analysis", {
        "analysis": analysis, "schema": schema, "deterministic_checks": ["D-1", "D-2"], "llm_judges": []})
    print(f"\nReDoS: concurrent get_agent slowest {stall * 1000:.0f} ms")
    assert not result.is_error
    check = result.structured_content["checks"][1]
    assert check["check_name"] == "schema_compliance" and not check["pass"]
    assert "does not match '^(a+)+$'" in check["rationale"]
    assert stall < STALL_LIMIT_S


async def test_a_schema_regex_with_a_backreference_is_refused_with_the_reason(http_url: tuple[str, Path]) -> None:
    async with http_client(http_url[0], "tok-attacker") as client:
        result = await client.call_tool("evaluate_analysis", {
            "analysis": {"name": "aa"}, "llm_judges": [], "deterministic_checks": ["D-1", "D-2"],
            "schema": {"type": "object", "properties": {"name": {"type": "string", "pattern": "^(a)\\1$"}}}})
    assert result.is_error
    assert ("schema.properties.name.pattern: the regex '^(a)\\\\1$' cannot be checked in linear time "
            "(invalid escape sequence: \\1)") in result.content[0].text


# --- 3. huge images --------------------------------------------------------------------------

def blank_png(width: int, height: int) -> str:
    """A valid 1-bit PNG of width×height as a data: URI: a few KB that decode to width·height pixels."""
    import base64
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    row = b"\x00" + b"\x00" * ((width + 7) // 8)
    packer = zlib.compressobj(9)
    idat = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))
           + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
    return "data:image/png;base64," + base64.b64encode(png).decode()


async def judge_image_as_attacker(url: str, image: str) -> tuple[Any, float]:
    async with http_client(url, "tok-attacker") as attacker:
        await attacker.call_tool("create_agent", {"name": "judge", "template_id": "composition"})
    return await attack_with_probe(url, "evaluate_image", {"brief": "a cat", "images": [image]})


async def test_an_image_above_the_pixel_limit_is_refused_from_its_header(http_url: tuple[str, Path]) -> None:
    result, stall = await judge_image_as_attacker(http_url[0], blank_png(12_000, 12_000))
    print(f"\n12000x12000 image: concurrent get_agent slowest {stall * 1000:.0f} ms")
    assert result.is_error
    assert ("images[0]: the image is 12000×12000 (144.0 megapixels), more than the 40 megapixels allowed "
            "(JUDGE_MCP_MAX_IMAGE_PIXELS); send a smaller image") in result.content[0].text
    assert stall < STALL_LIMIT_S


async def test_a_large_image_under_the_limit_is_decoded_off_the_event_loop(http_url: tuple[str, Path]) -> None:
    result, stall = await judge_image_as_attacker(http_url[0], blank_png(6_000, 6_000))
    print(f"\n6000x6000 image (decoded, resized): concurrent get_agent slowest {stall * 1000:.0f} ms")
    assert result.is_error and "ANTHROPIC_API_KEY" in result.content[0].text  # decoded; then no model to ask
    assert stall < STALL_LIMIT_S


# --- 4. default roots ------------------------------------------------------------------------

def env_without_roots(home: Path) -> dict[str, str]:
    env = server_env(home)
    del env["JUDGE_MCP_ALLOWED_ROOTS"]
    return env


async def test_without_configured_or_client_roots_no_file_is_reachable_even_from_cwd_slash(tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters

    (tmp_path / "a.txt").write_text("x\n")
    params = StdioServerParameters(command=JUDGE_MCP, args=[], env=env_without_roots(tmp_path / "home"), cwd="/")
    async with Client(params) as client:
        result = await client.call_tool("validate_patch", {"patch": {"ops": [{"kind": "remove", "path": "a.txt"}]},
                                                           "root": str(tmp_path)})
    assert result.is_error
    assert ("no file access: no allowed roots are configured and the client offers no MCP roots. Set "
            "JUDGE_MCP_ALLOWED_ROOTS") in result.content[0].text


@pytest.mark.filterwarnings("ignore:The roots capability is deprecated")
async def test_the_clients_roots_are_used_and_followed_when_they_change(tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.types import ListRootsResult, Root

    first, second = tmp_path / "first", tmp_path / "second"
    for d in (first, second):
        d.mkdir()
        (d / "a.txt").write_text("x\n")
    offered = [first]

    async def list_roots(_: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=d.as_uri()) for d in offered])  # type: ignore[arg-type]

    patch = {"ops": [{"kind": "edit", "path": "a.txt", "find": "x", "replace": "y"}]}
    params = StdioServerParameters(command=JUDGE_MCP, args=[], env=env_without_roots(tmp_path / "home"), cwd="/")
    async with Client(params, list_roots_callback=list_roots) as client:
        inside = await client.call_tool("validate_patch", {"patch": patch, "root": str(first)})
        outside = await client.call_tool("validate_patch", {"patch": patch, "root": str(second)})
        offered[:] = [second]
        await client.send_roots_list_changed()
        moved = await client.call_tool("validate_patch", {"patch": patch, "root": str(second)})
        left = await client.call_tool("validate_patch", {"patch": patch, "root": str(first)})
    assert not inside.is_error and inside.structured_content["ok"]
    assert outside.is_error and "is outside the allowed roots" in outside.content[0].text
    assert not moved.is_error and moved.structured_content["ok"]
    assert left.is_error and "is outside the allowed roots" in left.content[0].text


def test_an_explicit_slash_root_is_refused_at_start(tmp_path: Path) -> None:
    proc = subprocess.run([JUDGE_MCP], env=server_env(tmp_path, JUDGE_MCP_ALLOWED_ROOTS=f"{tmp_path}:/"),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    assert ("JUDGE_MCP_ALLOWED_ROOTS: Value error, entry 2 is '/', which would open the whole filesystem; "
            "name the project directories instead") in proc.stderr


# --- 6. tokens -------------------------------------------------------------------------------

@pytest.fixture
def base64_token_server(tmp_path: Path) -> Iterator[str]:
    from tests.mcp_helpers import free_port, wait_for_port

    port = free_port()
    proc = subprocess.Popen([JUDGE_MCP, "--transport", "http", "--port", str(port)],
                            env=server_env(tmp_path, JUDGE_MCP_TOKENS="dG9rLWE==org-a,dG9rLWI===org-b"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_for_port(port, 30)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=10)


async def test_a_base64_token_ending_in_equals_signs_authenticates_its_organization(base64_token_server: str) -> None:
    import httpx2

    url = base64_token_server
    async with http_client(url, "dG9rLWE=") as a, http_client(url, "dG9rLWI==") as b:
        made_a = (await a.call_tool("create_agent", {"name": "A", "system_prompt": "p"})).structured_content
        made_b = (await b.call_tool("create_agent", {"name": "B", "system_prompt": "p"})).structured_content
    async with httpx2.AsyncClient() as http:  # the token without its '=' is not the token
        truncated = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers={
            "authorization": "Bearer dG9rLWE", "accept": "application/json, text/event-stream"})
    assert (made_a["organization_id"], made_b["organization_id"]) == ("org-a", "org-b")
    assert truncated.status_code == 401


@pytest.mark.parametrize(("tokens", "message"), [
    ("s3cret-one=org-a,=org-b", "pair 2 has an empty token"),
    ("s3cret-one=org-a,s3cret-one=org-b", "pair 2 repeats the token of an earlier pair"),
    ("s3cret-one=org-a, s3cret-two", "pair 2 is not 'token=organization'"),
    ("s3cret-one=", "pair 1 is not 'token=organization'"),
])
def test_a_bad_token_list_stops_the_start_naming_the_pair_not_the_token(tmp_path: Path, tokens: str,
                                                                        message: str) -> None:
    proc = subprocess.run([JUDGE_MCP, "--transport", "http", "--port", "9"], env=server_env(tmp_path, JUDGE_MCP_TOKENS=tokens),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert f"JUDGE_MCP_TOKENS: Value error, {message}" in proc.stderr
    assert "s3cret" not in proc.stderr


# --- 5. existence oracle ---------------------------------------------------------------------

async def test_pairwise_refuses_a_path_outside_the_roots_the_same_whether_or_not_it_exists(
        tmp_path: Path, fake_server: Any) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "real.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    env = {"JUDGE_MCP_ALLOWED_ROOTS": str(project), "JUDGE_MCP_MODEL": "openai:fake", "OPENAI_API_KEY": "k",
           "OPENAI_BASE_URL": fake_server.openai_url}
    async with stdio_client(tmp_path / "home", **env) as client:
        answers = {}
        for name in ("real.png", "none.png"):
            result = await client.call_tool("pairwise_compare", {
                "instruction": "which is better", "candidates": [str(outside / name), str(project / "a.png")]})
            assert result.is_error
            answers[name] = result.content[0].text.replace(name, "X.png")
        missing = await client.call_tool("pairwise_compare", {
            "instruction": "which is better", "candidates": [str(project / "a.png"), str(project / "b.png")]})
    assert answers["real.png"] == answers["none.png"]
    assert "is outside the allowed roots" in answers["real.png"]
    assert missing.is_error and f"path '{project / 'a.png'}': no such file" in missing.content[0].text
    assert fake_server.requests == []  # refused before any model call


# --- 7. leftovers and modes ------------------------------------------------------------------

def edit_op(path: str, find: str, replace: str) -> dict[str, Any]:
    return {"kind": "edit", "path": path, "find": find, "replace": replace}


async def concurrent_edits(client: Any, file: Path, roots: list[Path], rounds: int) -> list[tuple[list[int], list[int]]]:
    """`rounds` times: len(roots) apply_patch calls at once, the i-th through roots[i] editing its own line of
    `file`; per round (the calls that said applied, the edits the file holds)."""
    seen = []
    for _ in range(rounds):
        file.write_text("".join(f"x{i} = 0\n" for i in range(100)))
        applied: list[int] = []

        async def edit(i: int, applied: list[int]) -> None:
            patch = {"ops": [{"kind": "edit", "path": file.relative_to(roots[i]).as_posix(), "find": f"x{i} = 0\n",
                              "replace": f"x{i} = 1\n"}]}
            result = await client.call_tool("apply_patch", {"patch": patch, "root": str(roots[i])})
            if not result.is_error and result.structured_content["applied"]:
                applied.append(i)

        async with anyio.create_task_group() as tg:
            for i in range(len(roots)):
                tg.start_soon(edit, i, applied)
        text = file.read_text()
        seen.append((sorted(applied), [i for i in range(len(roots)) if f"x{i} = 1\n" in text]))
    return seen


async def test_concurrent_apply_patch_calls_on_one_file_each_keep_their_edit(tmp_path: Path) -> None:
    # Before, four applies at once each said applied, and the file kept one or two of the four edits.
    project = tmp_path / "project"
    project.mkdir()
    async with stdio_client(tmp_path / "home", JUDGE_MCP_ALLOWED_ROOTS=str(project)) as client:
        seen = await concurrent_edits(client, project / "a.py", [project] * 4, rounds=3)
    assert seen == [([0, 1, 2, 3], [0, 1, 2, 3])] * 3


async def test_applies_through_nested_roots_on_one_file_never_lose_an_edit_they_report(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    roots = [project, project / "sub", project, project / "sub"]
    async with stdio_client(tmp_path / "home", JUDGE_MCP_ALLOWED_ROOTS=str(project)) as client:
        seen = await concurrent_edits(client, project / "sub" / "a.py", roots, rounds=3)
    assert [applied == held for applied, held in seen] == [True] * 3


async def test_apply_patch_through_a_file_says_it_is_a_file_and_changes_nothing(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("x = 1\n")
    async with stdio_client(tmp_path / "home", JUDGE_MCP_ALLOWED_ROOTS=str(project)) as client:
        result = await client.call_tool("apply_patch", {"root": str(project), "patch": {"ops": [
            {"kind": "remove", "path": "app.py"}, {"kind": "add", "path": "app.py/__init__.py", "content": "x = 1\n"}]}})
    assert result.structured_content["errors"] == [
        "op 1 (add app.py/__init__.py): app.py is a file, not a directory, so nothing lies inside it (one patch "
        "cannot replace a file by a directory)"]
    assert snapshot(project) == {"app.py": b"x = 1\n"}


async def test_apply_patch_adding_a_path_ending_in_a_slash_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    # Before: "add notes/" wrote a regular file named notes, and said applied.
    project = tmp_path / "project"
    project.mkdir()
    async with stdio_client(tmp_path / "home", JUDGE_MCP_ALLOWED_ROOTS=str(project)) as client:
        result = await client.call_tool("apply_patch", {"root": str(project), "patch": {"ops": [
            {"kind": "add", "path": "notes/", "content": "remember\n"}]}})
    assert result.structured_content["errors"] == [
        "op 0 (add notes/): path 'notes/' names a directory; name a file in it, e.g. notes/notes.md"]
    assert snapshot(project) == {}


async def test_apply_patch_keeps_each_files_mode_and_new_files_follow_the_umask(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "run.sh").write_text("echo a\n")
    (project / "run.sh").chmod(0o750)
    umask = os.umask(0o027)
    try:
        async with stdio_client(tmp_path / "home", JUDGE_MCP_ALLOWED_ROOTS=str(project)) as client:
            result = await client.call_tool("apply_patch", {"root": str(project), "patch": {"ops": [
                edit_op("run.sh", "echo a", "echo b"), {"kind": "add", "path": "new.txt", "content": "n\n"}]}})
    finally:
        os.umask(umask)
    assert not result.is_error and result.structured_content["applied"]
    assert (project / "run.sh").stat().st_mode & 0o7777 == 0o750
    assert (project / "new.txt").stat().st_mode & 0o7777 == 0o640  # 0666 under the server's umask 027


async def test_apply_patch_refuses_a_read_only_file_unless_allowed(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "locked.py").write_text("x = 1\n")
    (project / "locked.py").chmod(0o444)
    patch = {"ops": [edit_op("locked.py", "x = 1", "x = 2")]}
    async with stdio_client(tmp_path / "home", JUDGE_MCP_ALLOWED_ROOTS=str(project)) as client:
        refused = await client.call_tool("apply_patch", {"root": str(project), "patch": patch})
        untouched = (project / "locked.py").read_text()
        allowed = await client.call_tool("apply_patch", {"root": str(project), "patch": patch, "allow_read_only": True})
    assert refused.structured_content["applied"] is False
    assert refused.structured_content["errors"] == [
        "locked.py: the file is read-only (mode 444); make it writable, or pass allow_read_only: true to change it anyway"]
    assert untouched == "x = 1\n"
    assert allowed.structured_content["applied"] and (project / "locked.py").read_text() == "x = 2\n"
    assert (project / "locked.py").stat().st_mode & 0o7777 == 0o444


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that is gone, as after a kill -9 of the server."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    return dead.pid


async def test_the_next_apply_removes_temp_files_an_interrupted_apply_left(tmp_path: Path, dead_pid: int) -> None:
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "a.txt").write_text("a\n")
    stale = [project / f".a.txt.{dead_pid}-0123456789ab.judge-mcp.tmp",
             project / "pkg" / f".b.txt.{dead_pid}-ba9876543210.judge-mcp.del"]
    live = project / f".a.txt.{os.getpid()}-aaaaaaaaaaaa.judge-mcp.tmp"  # a running apply's: kept
    for f in [*stale, live]:
        f.write_text("left over\n")
    async with stdio_client(tmp_path / "home", JUDGE_MCP_ALLOWED_ROOTS=str(project)) as client:
        result = await client.call_tool("apply_patch", {"root": str(project), "patch": {"ops": [
            edit_op("a.txt", "a", "b")]}})
    assert result.structured_content["applied"]
    assert not any(f.exists() for f in stale) and live.exists()
    assert result.structured_content["warnings"] == [
        "removed 2 temporary file(s) left by an interrupted earlier apply: "
        f".a.txt.{dead_pid}-0123456789ab.judge-mcp.tmp, pkg/.b.txt.{dead_pid}-ba9876543210.judge-mcp.del"]


async def test_judge_code_leaves_no_gate_directory_behind_on_success_or_refusal(tmp_path: Path) -> None:
    project, scratch = tmp_path / "project", tmp_path / "tmp"
    project.mkdir()
    scratch.mkdir()
    async with stdio_client(tmp_path / "home", JUDGE_MCP_ALLOWED_ROOTS=str(project), TMPDIR=str(scratch)) as client:
        refused = await client.call_tool("judge_code", {"spec": "s", "root": str(tmp_path), "run_gates": False})
        judged = await client.call_tool("judge_code", {"spec": "s", "run_gates": False,
                                                       "files": [{"path": "m.py", "content": "x = 1\n"}]})
    assert refused.is_error and "outside the allowed roots" in refused.content[0].text
    assert not judged.is_error
    assert [p.name for p in scratch.iterdir() if p.name.startswith("judge-gates-")] == []


# --- 8. unbounded work -----------------------------------------------------------------------

def test_a_5000_deep_request_on_stdio_gets_a_json_rpc_error_and_the_next_call_its_answer(tmp_path: Path) -> None:
    import json

    deep = "[" * 5000 + "]" * 5000
    hello = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "create_agent", "arguments": {
            "name": "probe", "system_prompt": "p"}}},
    ]
    proc = subprocess.Popen([JUDGE_MCP], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=server_env(tmp_path))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in hello))
        proc.stdin.flush()
        replies = [json.loads(proc.stdout.readline()) for _ in range(2)]
        agent_id = replies[1]["result"]["structuredContent"]["id"]
        started = time.monotonic()
        proc.stdin.write('{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get_agent", '
                         f'"arguments": {{"agent_id": {deep}}}}}}}\n')
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "get_agent", "arguments": {"agent_id": agent_id}}}) + "\n")
        proc.stdin.flush()
        answers = {}
        while len(answers) < 2:
            reply = json.loads(proc.stdout.readline())
            answers[reply["id"]] = (reply, time.monotonic() - started)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    print(f"\n5000-deep request: error after {answers[3][1] * 1000:.0f} ms, "
          f"next get_agent answered after {answers[4][1] * 1000:.0f} ms")
    assert answers[3][0]["error"]["code"] == -32700
    assert answers[3][0]["error"]["message"].startswith(
        "Parse error: the message could not be read (Invalid JSON: recursion limit exceeded")
    assert "nest the arguments less deeply" in answers[3][0]["error"]["message"]
    assert answers[4][0]["result"]["structuredContent"]["id"] == agent_id
    assert answers[4][1] < STALL_LIMIT_S


RAW_CALL = """
import json, sys, httpx2
url, token, body = sys.argv[1], sys.argv[2], open(sys.argv[3], "rb").read()
headers = {"authorization": "Bearer " + token, "accept": "application/json, text/event-stream",
           "content-type": "application/json"}
with httpx2.Client(timeout=60) as http:
    init = http.post(url, headers=headers, content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}))
    if "mcp-session-id" in init.headers:  # stateful HTTP (JUDGE_MCP_STATELESS_HTTP=0); stateless has none
        headers["mcp-session-id"] = init.headers["mcp-session-id"]
    headers["mcp-protocol-version"] = "2025-06-18"
    http.post(url, headers=headers, content=b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    print(http.post(url, headers=headers, content=body).text)
"""


async def raw_call(url: str, token: str, body_file: Path) -> str:
    """One tools/call with a prepared JSON-RPC body, sent from another process: the probe in this
    process then times the server, not this client's encoding of 28 MB."""
    import sys

    done = await anyio.run_process([sys.executable, "-c", RAW_CALL, url, token, str(body_file)])
    return done.stdout.decode()


async def test_http_accepts_the_20_mb_inline_upload_the_readme_promises(http_url: tuple[str, Path],
                                                                        tmp_path: Path) -> None:
    import base64
    import json

    # exactly JUDGE_MCP_MAX_UPLOAD_BYTES (20 MiB), in base64 with its '=' padding
    payload = base64.b64encode(b"a" * (20 * 1024 * 1024)).decode()
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "upload_guideline", "arguments": {"agent_id": "no-such-agent", "content_base64": payload}}}))
    async with http_client(http_url[0], "tok-probe") as prober:
        agent = (await prober.call_tool("create_agent", {"name": "probe", "system_prompt": "p"})).structured_content

        async def probe() -> None:
            assert not (await prober.call_tool("get_agent", {"agent_id": agent["id"]})).is_error

        reply, stall = await stall_while(lambda: raw_call(http_url[0], "tok-attacker", body), probe)
    print(f"\n20 MB inline upload ({body.stat().st_size} byte body): concurrent get_agent slowest {stall * 1000:.0f} ms")
    assert "no agent with id 'no-such-agent'" in reply  # read and decoded: the body was not refused
    assert stall < STALL_LIMIT_S


async def test_http_refuses_a_body_above_the_documented_limit_with_413(http_url: tuple[str, Path]) -> None:
    import httpx2

    limit = -(-20 * 1024 * 1024 // 3) * 4 + 1024 * 1024
    async with httpx2.AsyncClient(timeout=60) as http:
        r = await http.post(http_url[0], content=b" " * (limit + 1), headers={
            "authorization": "Bearer tok-attacker", "content-type": "application/json",
            "accept": "application/json, text/event-stream"})
    assert r.status_code == 413


# --- 9. bare errors --------------------------------------------------------------------------

def test_every_tool_maps_its_errors_through_the_one_wrapper(settings: Any) -> None:
    from server.app import create_server
    from server.errors import WRAPPED

    tools = create_server(settings).catalog.list_tools()
    assert len(tools) >= 18
    assert [t.name for t in tools if not getattr(t.fn, WRAPPED, False)] == []


async def test_an_unexpected_failure_says_what_happened_and_logs_a_traceback_with_its_incident_id(
        tmp_path: Path) -> None:
    import re

    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    home = tmp_path / "home"
    log = (tmp_path / "stderr.log").open("w")
    params = StdioServerParameters(command=JUDGE_MCP, args=[], env=server_env(home))
    async with Client(stdio_client(params, errlog=log)) as client:
        await client.call_tool("create_agent", {"name": "A", "system_prompt": "p"})
        for part in data_home(home).glob("judge.sqlite3*"):  # the disk goes bad under the running server
            with part.open("r+b") as f:
                f.write(b"garbage!" * max(1, part.stat().st_size // 8))
        result = await client.call_tool("list_agents", {})
    log.close()
    assert result.is_error
    text = result.content[0].text
    match = re.search(r"internal error, incident ([0-9a-f]{12}): DatabaseError: file is not a database\. "
                      r"This is not a problem with your input\. Retry once", text)
    assert match, text
    stderr = (tmp_path / "stderr.log").read_text()
    assert f"incident {match.group(1)}: tool list_agents failed unexpectedly" in stderr
    assert "Traceback (most recent call last)" in stderr
