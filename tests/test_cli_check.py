"""`judge-mcp check` through the real CLI: each part (model, sandbox, store, roots) ok or missing with what to
do, and exit 1 when something the configuration asks for cannot work (issue 29.6)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.mcp_helpers import free_port

JUDGE_MCP = str(Path(sys.executable).with_name("judge-mcp"))
PARTS = ("model", "sandbox", "store", "roots")


def check(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    clean.update(JUDGE_MCP_HOME=str(tmp_path / "home"), **env)
    return subprocess.run([JUDGE_MCP, "check", *args], env=clean, cwd="/", capture_output=True, text=True,
                          timeout=120)


def project(tmp_path: Path) -> str:
    """A project directory beside the data home (a root may not hold the data home)."""
    path = tmp_path / "project"
    path.mkdir(exist_ok=True)
    return str(path)


def line(done: subprocess.CompletedProcess[str], part: str) -> str:
    """The one line `check` printed for `part`."""
    found = [x for x in done.stderr.splitlines() if x.split(" ", 1)[0] == part]
    assert len(found) == 1, done.stderr
    return found[0]


def test_a_named_model_without_its_key_is_a_problem_that_says_which_variable(tmp_path: Path) -> None:
    done = check(tmp_path, JUDGE_MCP_MODEL="anthropic:claude-sonnet-4-5")
    assert done.returncode == 1 and done.stdout == ""
    assert line(done, "model") == "model    missing: model 'anthropic:claude-sonnet-4-5' needs ANTHROPIC_API_KEY to be set."
    assert line(done, "result") == "result   1 problem(s): model cannot work as configured (see above)"


def test_a_complete_configuration_says_each_part_is_ok(tmp_path: Path) -> None:
    done = check(tmp_path, OPENAI_API_KEY="sk-test", JUDGE_MCP_ALLOWED_ROOTS=project(tmp_path))
    assert done.returncode == 0, done.stderr
    assert [line(done, p).split(" ", 1)[1].lstrip()[:3] for p in PARTS] == ["ok:"] * 4
    assert line(done, "model") == "model    ok: auto -> openai:gpt-4.1-mini"
    assert line(done, "roots") == f"roots    ok: {tmp_path / 'project'}"
    assert line(done, "store") == (f"store    ok: SQLite in {tmp_path / 'home'} (created at first start); guideline "
                                   f"vectors in embedded Chroma ({tmp_path / 'home' / 'chroma'})")
    assert line(done, "result") == "result   ok"


def test_no_model_and_no_roots_are_listed_missing_with_what_to_do_not_ok(tmp_path: Path) -> None:
    done = check(tmp_path)
    assert done.returncode == 0  # nothing asked for is broken: host sampling and MCP roots may provide both
    assert line(done, "model").startswith("model    missing: no API key or base URL in the environment;")
    assert "JUDGE_MCP_MODEL=demo to try the tools" in line(done, "model")
    assert line(done, "roots").startswith("roots    missing: none configured:")
    assert "set JUDGE_MCP_ALLOWED_ROOTS=/path/to/project" in line(done, "roots")
    assert line(done, "result") == "result   usable, with model, roots missing: the tools that need them say what to set"


def test_the_demo_model_is_ok_and_said_to_give_example_replies(tmp_path: Path) -> None:
    done = check(tmp_path, JUDGE_MCP_MODEL="demo")
    assert line(done, "model") == "model    ok: demo -> demo (labelled example replies, not real judgements)"


def test_a_sandbox_turned_off_is_missing_on_stdio(tmp_path: Path) -> None:
    done = check(tmp_path, JUDGE_MCP_MODEL="demo", JUDGE_MCP_ALLOWED_ROOTS=project(tmp_path),
                 JUDGE_MCP_GATE_SANDBOX="none")
    assert done.returncode == 0
    assert line(done, "sandbox") == ("sandbox  missing: turned off (JUDGE_MCP_GATE_SANDBOX=none): judge_code gates "
                                     "run unisolated")
    assert line(done, "result").startswith("result   usable, with sandbox missing")


def test_organizations_over_http_without_a_sandbox_are_a_problem(tmp_path: Path) -> None:
    done = check(tmp_path, JUDGE_MCP_MODEL="demo", JUDGE_MCP_TOKENS="tok-a=org-a,tok-b=org-b",
                 JUDGE_MCP_GATE_SANDBOX="none")
    assert done.returncode == 1
    assert "refuse to run gates without it" in line(done, "sandbox")
    assert "JUDGE_MCP_UNSANDBOXED_GATES=1" in line(done, "sandbox")
    assert line(done, "result").startswith("result   1 problem(s): sandbox")
    assert "tok-a" not in done.stderr


def test_organizations_that_accept_unsandboxed_gates_are_not_a_problem(tmp_path: Path) -> None:
    done = check(tmp_path, JUDGE_MCP_MODEL="demo", JUDGE_MCP_TOKENS="tok-a=org-a,tok-b=org-b",
                 JUDGE_MCP_GATE_SANDBOX="none", JUDGE_MCP_UNSANDBOXED_GATES="1")
    assert done.returncode == 0 and line(done, "sandbox").startswith("sandbox  missing: turned off")


def test_an_unreachable_database_is_a_problem_and_its_password_is_never_shown(tmp_path: Path) -> None:
    port = free_port()
    done = check(tmp_path, JUDGE_MCP_MODEL="demo",
                 JUDGE_MCP_DATABASE_URL=f"postgresql://judge:hunter2@127.0.0.1:{port}/judge")
    assert done.returncode == 1
    assert line(done, "store").startswith(
        f"store    missing: PostgreSQL at postgresql://judge:***@127.0.0.1:{port}/judge did not answer (")
    assert "To fix: start it, or correct JUDGE_MCP_DATABASE_URL" in line(done, "store")
    assert "hunter2" not in done.stderr
    assert line(done, "result").startswith("result   1 problem(s): store")


def test_a_reachable_database_is_ok(tmp_path: Path, postgres: object) -> None:
    url = postgres.create_database()  # type: ignore[attr-defined]
    done = check(tmp_path, JUDGE_MCP_MODEL="demo", JUDGE_MCP_DATABASE_URL=url)
    assert line(done, "store").startswith("store    ok: PostgreSQL at ")


def test_an_unreachable_chroma_server_is_a_problem(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = check(tmp_path, JUDGE_MCP_MODEL="demo", JUDGE_MCP_CHROMA_URL=url)
    assert done.returncode == 1
    assert line(done, "store").startswith(f"store    missing: the Chroma server {url} did not answer (ConnectError)")


def test_a_root_that_does_not_exist_is_a_problem_naming_it(tmp_path: Path) -> None:
    absent = tmp_path / "no-such-project"
    done = check(tmp_path, JUDGE_MCP_MODEL="demo", JUDGE_MCP_ALLOWED_ROOTS=str(absent))
    assert done.returncode == 1 and str(absent) in done.stderr


def test_asking_the_demo_model_gets_an_answer(tmp_path: Path) -> None:
    done = check(tmp_path, "--model", JUDGE_MCP_MODEL="demo", JUDGE_MCP_ALLOWED_ROOTS=project(tmp_path))
    assert line(done, "reach").startswith("reach    ok: the model answered in ")


def test_a_database_url_the_driver_cannot_read_is_a_problem_that_never_shows_its_password(tmp_path: Path) -> None:
    done = check(tmp_path, JUDGE_MCP_MODEL="demo", JUDGE_MCP_DATABASE_URL="mysql://judge:hunter2@127.0.0.1/judge")
    assert done.returncode == 1 and "hunter2" not in done.stderr
    assert line(done, "store").startswith("store    missing: PostgreSQL at mysql://judge:***@127.0.0.1/judge did not "
                                          "answer (ProgrammingError: ")


def test_each_organizations_roots_are_listed(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    done = check(tmp_path, JUDGE_MCP_MODEL="demo",
                 JUDGE_MCP_ORG_ROOTS=f"org-a={tmp_path / 'a'};org-b={tmp_path / 'b'}")
    assert line(done, "roots") == f"roots    ok: org-a: {tmp_path / 'a'}; org-b: {tmp_path / 'b'}"


def test_a_misspelt_provider_is_answered_with_the_model_string_it_is_closest_to(tmp_path: Path) -> None:
    done = check(tmp_path, JUDGE_MCP_MODEL="opnai:gpt-4o")
    assert done.returncode == 1
    assert done.stderr.splitlines()[1] == (
        "  JUDGE_MCP_MODEL: Value error, model 'opnai:gpt-4o' is not understood: use 'auto', 'sampling', "
        "'anthropic:<model>', 'openai:<model>', 'openai-compatible:<model>' or 'demo'; did you mean 'openai:gpt-4o'?")
