"""Settings: environment variables are part of the contract."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from server.settings import Settings, load_settings


def test_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    s = Settings()
    assert s.org == "default" and s.model == "auto"
    assert s.allowed_roots == []  # never the working directory implicitly


def test_allowed_roots_split_like_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    monkeypatch.setenv("JUDGE_MCP_ALLOWED_ROOTS", f"{tmp_path}/a{os.pathsep}{tmp_path}/b")
    assert Settings().allowed_roots == [(tmp_path / "a").resolve(), (tmp_path / "b").resolve()]


def test_tokens_map_to_organizations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_MCP_TOKENS", "tok1=orgA, tok2=orgB")
    assert Settings().tokens == {"tok1": "orgA", "tok2": "orgB"}


def test_tokens_can_come_from_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    f = tmp_path / "tokens"
    f.write_text("# team tokens\ntok1=orgA\ntok2=orgB\n")
    monkeypatch.setenv("JUDGE_MCP_TOKENS", f"@{f}")
    assert Settings().tokens == {"tok1": "orgA", "tok2": "orgB"}


def test_sdk_variables_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-1")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    s = Settings()
    assert s.openai_api_key == "sk-1" and s.anthropic_base_url == "http://127.0.0.1:9"


@pytest.mark.parametrize(
    ("var", "value"),
    [("JUDGE_MCP_MODEL", "gpt-4"), ("JUDGE_MCP_CONCURRENCY", "0"), ("JUDGE_MCP_TOKENS", "justatoken")],
)
def test_bad_value_stops_start_naming_the_variable(monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(SystemExit, match=var):
        load_settings()


def test_org_roots_give_each_organization_its_directories(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("a", "a2", "b"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("JUDGE_MCP_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("JUDGE_MCP_ORG_ROOTS", f"org-a={tmp_path}/a{os.pathsep}{tmp_path}/a2; org-b={tmp_path}/b")
    assert Settings().org_roots == {"org-a": [tmp_path / "a", tmp_path / "a2"], "org-b": [tmp_path / "b"]}


@pytest.mark.parametrize(("value", "message"), [
    ("acme", "entry 1 is not 'organization=directory' (e.g. 'acme=/srv/acme')"),
    ("acme=", "entry 1 (organization 'acme') names no directory (e.g. 'acme=/srv/acme')"),
    ("acme=/srv;acme=/opt", "entry 2 names organization 'acme' again"),
])
def test_a_malformed_org_roots_entry_stops_the_start_saying_which(monkeypatch: pytest.MonkeyPatch, value: str,
                                                                   message: str) -> None:
    monkeypatch.setenv("JUDGE_MCP_ORG_ROOTS", value)
    with pytest.raises(SystemExit, match="JUDGE_MCP_ORG_ROOTS: Value error, " + message.replace("(", r"\(")
                       .replace(")", r"\)")):
        load_settings()
