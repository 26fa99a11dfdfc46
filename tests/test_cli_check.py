"""`judge-mcp check`: what the configuration resolves to, and exit 1 when a tool could not run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

JUDGE_MCP = str(Path(sys.executable).with_name("judge-mcp"))


def check(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    clean.update(JUDGE_MCP_HOME=str(tmp_path / "home"), **env)
    return subprocess.run([JUDGE_MCP, "check"], env=clean, cwd="/", capture_output=True, text=True, timeout=60)


def test_a_named_model_without_its_key_is_a_problem_that_says_which_variable(tmp_path: Path) -> None:
    done = check(tmp_path, JUDGE_MCP_MODEL="openai:gpt-x")
    assert done.returncode == 1 and done.stdout == ""
    assert "model    ERROR: model 'openai:gpt-x' needs OPENAI_API_KEY to be set." in done.stderr.splitlines()
    assert done.stderr.splitlines()[-1] == "result   1 problem(s)"


def test_a_complete_configuration_says_what_each_part_resolves_to(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    done = check(tmp_path, OPENAI_API_KEY="sk-test", JUDGE_MCP_ALLOWED_ROOTS=str(tmp_path / "project"))
    lines = done.stderr.splitlines()
    assert done.returncode == 0
    assert f"roots    {tmp_path / 'project'}" in lines and "model    auto -> openai:gpt-4.1-mini" in lines
    assert lines[-1] == "result   ok"


def test_no_roots_and_no_model_still_pass_and_say_how_to_configure_them(tmp_path: Path) -> None:
    done = check(tmp_path)
    assert done.returncode == 0
    assert "set JUDGE_MCP_ALLOWED_ROOTS=/path/to/project" in done.stderr
    assert "host sampling is used when the client offers it" in done.stderr


def test_each_organizations_roots_are_listed(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    done = check(tmp_path, JUDGE_MCP_ORG_ROOTS=f"org-a={tmp_path / 'a'};org-b={tmp_path / 'b'}")
    assert done.returncode == 0, done.stderr
    assert f"roots    org-a: {tmp_path / 'a'}; org-b: {tmp_path / 'b'}" in done.stderr.splitlines()
