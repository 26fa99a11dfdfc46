"""judge_code and propose_patch on a small real Python project, real gates, fake model server."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from judges.code.brief import build_project_brief, casing
from judges.code.gates import GateSettings, run_gates, sandbox_from
from server.app import create_server
from server.settings import Settings
from tests.fake_model_server import FakeModelServer, Scripted
from tests.mcp_helpers import call, processes_with

pytestmark = pytest.mark.anyio

CART = "import os\n\n\ndef total(prices: list[float]) -> float:\n    return sum(prices)\n\n\ndef label(count: int) -> str:\n    return count\n"
TESTS = ("from shop.cart import total\n\n\ndef test_total():\n    assert total([1.0, 2.0]) == 3.0\n\n\n"
         "def test_total_empty():\n    assert total([]) == 1.0\n")
FIX = {"ops": [
    {"kind": "edit", "path": "shop/cart.py", "find": "import os\n\n\n", "replace": ""},
    {"kind": "edit", "path": "shop/cart.py", "find": "    return count\n", "replace": "    return str(count)\n"},
    {"kind": "edit", "path": "test_cart.py", "find": "== 1.0", "replace": "== 0"},
]}
VERDICT = {"verdict": "accept", "scores": {"compilation": 1, "tests_functional": 1, "tests_edge": 1, "types": 1,
                                           "style": 1, "security": 1, "boundaries": 1, "schema": 1},
           "explanations": {"root_cause": "none", "minimal_fix": "none"}, "fix_plan": []}


def make_project(root: Path) -> Path:
    (root / "shop").mkdir(parents=True)
    (root / "shop" / "__init__.py").write_text("")
    (root / "shop" / "cart.py").write_text(CART)
    (root / "test_cart.py").write_text(TESTS)
    return root


def tree_hash(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "home" / "shop-project")



async def test_signals_name_exactly_the_planted_errors_and_no_model_gives_a_gates_verdict(
        client: Any, project: Path) -> None:
    before = tree_hash(project)
    result = await call(client, "judge_code", spec="cart totals", root=str(project))
    s = result["signals"]
    assert s["lintErrors"] == ["shop/cart.py:1:8: F401 `os` imported but unused"]
    assert s["typeErrors"] == ['shop/cart.py:9:12: error: Incompatible return value type (got "int", expected "str")  '
                               "[return-value]"]
    assert (s["test"]["passed"], s["test"]["failed"]) == (1, 1)
    assert s["test"]["details"] == ["test_cart::test_total_empty: assert 0 == 1.0"]
    assert (result["status"], result["verdict"]) == ("no_model", "revise")
    assert {k: result["scores"][k] for k in ("style", "types", "tests_functional")} == {
        "style": 0.0, "types": 0.0, "tests_functional": 0.0}
    assert tree_hash(project) == before


async def test_fixing_patch_applied_in_a_sandbox_passes_every_gate_and_leaves_the_callers_files(
        model_settings: Settings, fake_server: FakeModelServer, project: Path) -> None:
    model_settings.allowed_roots = [project.parent]
    before = tree_hash(project)
    fake_server.respond_with(lambda rec: Scripted(text=json.dumps(FIX)))
    async with Client(create_server(model_settings)) as c:
        result = await call(c, "propose_patch", spec="cart totals", root=str(project), apply_and_rejudge=True)
    assert result["validation"]["ok"] and result["applied"]
    assert [g["passed"] for g in result["gates"]] == [True, True, True]
    assert result["signals"]["lintErrors"] == [] and result["signals"]["typeErrors"] == []
    assert result["signals"]["test"]["passed"] == 2
    assert tree_hash(project) == before


def test_a_test_that_loops_forever_is_killed_within_the_gate_timeout(tmp_path: Path) -> None:
    box = sandbox_from(None, [], [])
    (box / "test_loop.py").write_text("def test_forever():\n    while True:\n        pass\n")
    started = time.monotonic()
    signals, runs = run_gates(box, GateSettings(timeout_s=3))
    tests = next(r for r in runs if r.name == "tests")
    assert tests.timed_out and not tests.passed and tests.exit_code is None
    assert time.monotonic() - started < 3 * 3 + 15  # three gates; only the test gate hangs
    assert "the test run was killed after 3 s" in signals.test.details


def test_a_forking_test_leaves_no_process_behind(tmp_path: Path) -> None:
    marker = f"judge-fork-{uuid.uuid4().hex}"
    box = sandbox_from(None, [], [])
    (box / "test_fork.py").write_text(
        "import subprocess, sys\n\n"
        f"def test_fork():\n    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{marker}'])\n"
    )
    run_gates(box, GateSettings(timeout_s=30))
    time.sleep(0.2)
    assert processes_with(marker, excluding="pytest") == []


async def test_accept_while_a_gate_fails_is_overridden_to_revise(
        model_settings: Settings, fake_server: FakeModelServer, project: Path) -> None:
    model_settings.allowed_roots = [project.parent]
    fake_server.respond_with(lambda rec: Scripted(text=json.dumps(VERDICT)))
    async with Client(create_server(model_settings)) as c:
        result = await call(c, "judge_code", spec="cart totals", root=str(project))
    assert (result["status"], result["verdict"]) == ("ok", "revise")
    assert "verdict 'accept' overridden to 'revise': a gate failed" in result["overrides"]
    assert result["scores"]["types"] == 0 and result["scores"]["security"] == 1
    request = fake_server.requests[0].body
    assert request["messages"][0]["content"].startswith("You are a senior code reviewer.")
    assert "<judge_input>" in request["messages"][1]["content"][0]["text"]


async def test_invalid_verdict_gets_one_repair_round_then_a_typed_failure(
        model_settings: Settings, fake_server: FakeModelServer, project: Path) -> None:
    model_settings.allowed_roots = [project.parent]
    bad = {**VERDICT, "verdict": "ship it"}
    fake_server.respond_with(lambda rec: Scripted(text=json.dumps(bad)))
    async with Client(create_server(model_settings)) as c:
        result = await call(c, "judge_code", spec="cart totals", root=str(project))
    assert result["status"] == "model_failed" and result["error"].startswith("parse_error")
    assert len(fake_server.requests) == 2 and "verdict" in fake_server.requests[1].body["messages"][-1]["content"][0]["text"]
    assert result["verdict"] == "revise"  # the gates' own verdict stands


async def test_fixer_patch_failing_validation_gets_one_repair_round_with_the_errors(
        model_settings: Settings, fake_server: FakeModelServer, project: Path) -> None:
    model_settings.allowed_roots = [project.parent]
    wrong = {"ops": [{"kind": "edit", "path": "shop/cart.py", "find": "import sys\n", "replace": ""}]}
    replies = iter([json.dumps(wrong), json.dumps(FIX)])
    fake_server.respond_with(lambda rec: Scripted(text=next(replies)))
    async with Client(create_server(model_settings)) as c:
        result = await call(c, "propose_patch", spec="cart totals", root=str(project), diagnostics="lint errors")
    assert result["validation"]["ok"] and result["attempts"] == 2
    repair = fake_server.requests[1].body["messages"][-1]["content"][0]["text"]
    assert "op 0 (edit shop/cart.py): 'find' text not found." in repair


async def test_tournament_picks_the_candidate_whose_gates_pass(client: Any) -> None:
    broken = [{"path": "mod.py", "content": "import os\n\ndef f() -> int:\n    return 'x'\n"},
              {"path": "test_mod.py", "content": "from mod import f\n\ndef test_f():\n    assert f() == 1\n"}]
    good = [{"path": "mod.py", "content": "def f() -> int:\n    return 1\n"},
            {"path": "test_mod.py", "content": "from mod import f\n\n\ndef test_f():\n    assert f() == 1\n"}]
    result = await call(client, "judge_code", spec="f returns 1", candidates=[broken, good])
    assert result["winner_index"] == 1 and result["verdict"] == "accept"
    assert [c["index"] for c in result["candidates"]] == [0, 1]
    assert result["candidates"][1]["score"] > result["candidates"][0]["score"]


async def test_root_outside_the_allowed_roots_is_refused(client: Any, tmp_path: Path) -> None:
    elsewhere = make_project(tmp_path / "elsewhere")
    result = await client.call_tool("judge_code", {"spec": "x", "root": str(elsewhere)})
    assert result.is_error and "outside the allowed roots" in result.content[0].text


async def test_a_command_in_gates_is_refused_the_server_builds_the_commands(client: Any, project: Path) -> None:
    result = await client.call_tool("judge_code", {"spec": "x", "root": str(project),
                                                   "gates": {"tests": ["bash", "-c", "rm -rf /"]}})
    assert result.is_error and "gates.tests: give only arguments, not a command" in result.content[0].text


def test_brief_finds_conventions_glossary_layers_and_boundary_errors(tmp_path: Path) -> None:
    for pkg in ("api", "core"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "api" / "routes.py").write_text("from core.orders import OrderBook\n\ndef list_orders():\n    pass\n")
    (tmp_path / "api" / "views.py").write_text("import core.orders\n\nclass OrderView:\n    pass\n")
    (tmp_path / "core" / "orders.py").write_text("MAX_ORDERS = 5\n\nclass OrderBook:\n    pass\n")
    (tmp_path / "core" / "leak.py").write_text("from api.views import OrderView\n")
    brief = build_project_brief(tmp_path)
    assert brief.conventions == {"function": "snake_case", "class": "PascalCase", "constant": "UPPER_CASE"}
    assert brief.glossary[0] == "order" or "orders" in brief.glossary[:3]
    assert brief.layers == ["api", "core"]
    assert brief.boundaryErrors == ["core/leak.py imports api, against the inferred direction api → core"]


def test_casing_kinds() -> None:
    assert [casing(n) for n in ("snake_case", "PascalCase", "camelCase", "UPPER_CASE", "_private")] == [
        "snake_case", "PascalCase", "camelCase", "UPPER_CASE", "snake_case"]



def test_a_project_over_the_gate_settings_file_cap_is_refused(tmp_path: Path) -> None:
    from judges.errors import InputError

    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text("x = 1\n")
    with pytest.raises(InputError, match="larger than 2 files"):
        sandbox_from(tmp_path, None, [tmp_path], GateSettings(max_files=2))
    box = sandbox_from(tmp_path, None, [tmp_path], GateSettings(max_files=3))
    try:
        assert sorted(p.name for p in box.iterdir()) == ["a.py", "b.py", "c.py"]
    finally:
        shutil.rmtree(box)


@pytest.mark.e2e
async def test_a_file_name_that_is_not_utf8_is_left_out_of_the_sandbox_and_the_server_keeps_serving(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Before, the name's undecodable byte (a lone surrogate in Python) reached the result: the stdio server died.
    from tests.test_text_tools_as_used import judge_mcp

    project = make_project(tmp_path / "home" / "shop-project")
    (project / "shop").joinpath(os.fsdecode(b"old\xff.py")).write_text("import sys\n")
    fake_server.respond_with(lambda rec: Scripted(text=json.dumps(VERDICT)))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        result = await call(c, "judge_code", spec="cart totals", root=str(project))
        assert (await c.call_tool("list_jobs", {})).structured_content == {"jobs": []}
    assert result["signals"]["lintErrors"] == ["shop/cart.py:1:8: F401 `os` imported but unused"]



async def files_refusal(tmp_path: Path, fake_server: FakeModelServer, files: list[dict[str, str]]) -> str:
    """judge_code's message for `files`, through a real judge-mcp; no model request was made."""
    from tests.mcp_helpers import error_of
    from tests.test_text_tools_as_used import judge_mcp

    fake_server.respond_with(lambda rec: Scripted(text=json.dumps(VERDICT)))
    async with judge_mcp(tmp_path / "home", fake_server) as c:
        said = await error_of(c, "judge_code", spec="cart totals", files=files)
    assert fake_server.requests == []
    return said


@pytest.mark.e2e
async def test_files_where_one_path_needs_another_to_be_a_directory_are_the_callers_error(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Before: an internal error (FileExistsError) with an incident id, "not a problem with your input".
    said = await files_refusal(tmp_path, fake_server, [{"path": "shop", "content": "x = 1\n"},
                                                       {"path": "shop/cart.py", "content": CART}])
    assert said.endswith("files[1].path 'shop/cart.py' cannot be written: another entry of files is a file where "
                         "this path needs a directory (or the reverse), e.g. 'app' and 'app/main.py'; use paths like "
                         "a project's, e.g. 'src/app.py' and 'tests/test_app.py'")


@pytest.mark.e2e
async def test_a_file_name_too_long_for_the_file_system_is_the_callers_error_shown_cut(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Before: an internal error (OSError: File name too long) echoing the whole name.
    said = await files_refusal(tmp_path, fake_server, [{"path": "a" * 300 + ".py", "content": CART}])
    assert said.endswith(f"files[0].path '{'a' * 60}…(303 characters)' cannot be written: File name too long; use "
                         "paths like a project's, e.g. 'src/app.py' and 'tests/test_app.py'")


@pytest.mark.e2e
async def test_a_path_given_twice_in_files_is_refused_naming_both_entries(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Before: the second silently replaced the first and the gates judged a file the caller may not have meant.
    said = await files_refusal(tmp_path, fake_server, [{"path": "shop/cart.py", "content": CART},
                                                       {"path": "shop//cart.py", "content": "x = 1\n"}])
    assert said.endswith("files[1].path 'shop//cart.py' names the same file as files[0]; give each file once")


@pytest.mark.e2e
async def test_files_beyond_the_project_file_cap_are_refused_like_a_copied_root(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    # Before: 20,000 files were written to the server's disk and copied into the sandbox; a root stops at 5,000.
    said = await files_refusal(tmp_path, fake_server, [{"path": f"m{i}.py", "content": "x = 1\n"}
                                                       for i in range(5001)])
    assert said.endswith("files: 5001 files; the limit is 5000 (as for a project copied from root). Give the files "
                         "the spec concerns, e.g. the module and its tests")


@pytest.mark.e2e
@pytest.mark.parametrize(("tool", "args", "said"), [
    ("judge_code", {"spec": "x", "run_gates": False},
     "give exactly one of root (a project directory) or files ([{path, content}])"),
    ("propose_patch", {"spec": "x", "diagnostics": "E1"},
     "give exactly one of root (a project directory) or files ([{path, content}])"),
    ("judge_code", {"spec": "x", "run_gates": False, "root": "/etc"}, "root '/etc' is outside the allowed roots")])
async def test_a_code_judge_in_the_background_refuses_its_sources_without_a_job(
        tmp_path: Path, fake_server: FakeModelServer, tool: str, args: dict[str, Any], said: str) -> None:
    # Before, background: true started a job that failed with the same message.
    from tests.mcp_helpers import error_of
    from tests.test_text_tools_as_used import judge_mcp

    async with judge_mcp(tmp_path / "home", fake_server) as c:
        text = await error_of(c, tool, **args, background=True)
        assert await call(c, "list_jobs") == {"jobs": []}
    assert said in text
    assert fake_server.requests == []
