"""`judge-mcp check`: the configuration as the server will use it. Each part (model, gate sandbox, store,
roots) is `ok` or `missing`, with what to do; the exit status is 1 when something the configuration asks for
cannot work (a named model without its key, a database or Chroma server that does not answer, a root that does
not exist, a required sandbox that cannot start), and 0 when the server can start and does what was asked,
even with parts missing (the tools that need them then say what to set)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from judges.errors import ConfigError

from .settings import Settings, url_without_password

REACH_TIMEOUT_S = 5


class Report:
    """The lines of a check, on stderr, and the parts that cannot work."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.missing: list[str] = []

    def say(self, part: str, text: str) -> None:
        print(f"{part:8} {text}", file=sys.stderr)

    def ok(self, part: str, text: str) -> None:
        self.say(part, f"ok: {text}")

    def lacks(self, part: str, text: str, *, asked: bool) -> None:
        """`part` is missing; `asked`: the configuration asks for it, so it is a problem (exit 1)."""
        (self.problems if asked else self.missing).append(part)
        self.say(part, f"missing: {text}")


def run_check(settings: Settings, *, model: bool = False) -> int:
    """Print one line per part on stderr; 0 when the server can start and do what its configuration asks.
    With `model`, also send the model one tiny request (a problem when it does not answer)."""
    report = Report()
    report.say("settings", "ok (a bad value would have stopped here, naming its variable)")
    report.say("home", str(settings.home))
    check_model(settings, report, ask=model)
    check_sandbox(settings, report)
    check_store(settings, report)
    check_roots(settings, report)
    if report.problems:
        report.say("result", f"{len(report.problems)} problem(s): {', '.join(report.problems)} cannot work as "
                             "configured (see above)")
        return 1
    if report.missing:
        report.say("result", f"usable, with {', '.join(report.missing)} missing: the tools that need "
                             f"{'it' if len(report.missing) == 1 else 'them'} say what to set")
        return 0
    report.say("result", "ok")
    return 0


def check_model(settings: Settings, report: Report, *, ask: bool) -> None:
    from .context import build_registry

    registry = build_registry(settings)
    try:
        client = registry.resolve()
    except ConfigError as exc:
        if settings.model == "auto":
            report.lacks("model", "no API key or base URL in the environment; the host's own model (sampling) is "
                                  "used when the client offers it, else judging tools answer with how to configure "
                                  "one. To fix: set ANTHROPIC_API_KEY or OPENAI_API_KEY (or an OpenAI-compatible "
                                  "JUDGE_MCP_COMPATIBLE_BASE_URL), or JUDGE_MCP_MODEL=demo to try the tools with "
                                  "example replies", asked=False)
        else:
            report.lacks("model", str(exc), asked=True)
        return
    name = getattr(client, "name", type(client).__name__)
    note = " (labelled example replies, not real judgements)" if name == "demo" else ""
    report.ok("model", f"{settings.model} -> {name}{note}")
    if ask:
        import anyio

        answered, text = anyio.run(ask_model, registry, client)
        if answered:
            report.ok("reach", text)
        else:
            report.lacks("reach", text, asked=True)


def check_store(settings: Settings, report: Report) -> None:
    """The database and the guideline vectors: where they are, and that a server named answers."""
    if settings.database_url:
        shown = url_without_password(settings.database_url)
        error = reach_database(settings.database_url)
        if error:
            report.lacks("store", f"PostgreSQL at {shown} did not answer ({error}). To fix: start it, or correct "
                                  "JUDGE_MCP_DATABASE_URL (unset: SQLite in the data home)", asked=True)
            return
        where = f"PostgreSQL at {shown}"
    else:
        home = settings.home
        existing = next((p for p in (home, *home.parents) if p.exists()), Path(home.anchor))
        if not existing.is_dir() or not _writable(existing):
            report.lacks("store", f"the data home {home} cannot be created or written ({existing} is not a "
                                  "writable directory). To fix: set JUDGE_MCP_HOME to a directory you own",
                         asked=True)
            return
        where = f"SQLite in {home}" + ("" if home.exists() else " (created at first start)")
    if settings.chroma_url:
        shown = url_without_password(settings.chroma_url)
        error = reach_chroma(settings.chroma_url)
        if error:
            report.lacks("store", f"the Chroma server {shown} did not answer ({error}). To fix: start it "
                                  "(chroma run), or correct JUDGE_MCP_CHROMA_URL (unset: Chroma embedded in the "
                                  "data home)", asked=True)
            return
        report.ok("store", f"{where}; guideline vectors on the Chroma server {shown}")
    else:
        report.ok("store", f"{where}; guideline vectors in embedded Chroma ({settings.chroma_path})")


def _writable(path: Path) -> bool:
    import os

    return os.access(path, os.W_OK | os.X_OK)


def reach_database(url: str) -> str | None:
    """None when the PostgreSQL server at `url` answers a query, else why not (never the password)."""
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=REACH_TIMEOUT_S) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        # The driver may quote the URL it could not read, password and all.
        return f"{type(exc).__name__}: {hide_passwords(first, url)}"[:300]
    return None


def hide_passwords(text: str, url: str) -> str:
    """`text` with the URL, and each password written in it, shown as url_without_password shows them."""
    from urllib.parse import unquote

    text = text.replace(url, url_without_password(url))
    found = re.findall(r"(?i)(?:^|[\s&?])(?:ssl)?password\s*=\s*('[^']*'|[^&\s]+)", url)
    found += re.findall(r"^[\w+.-]+://[^:/@\s]*:([^@\s]+)@", url)
    for secret in {s.strip("'") for s in found if s.strip("'")}:
        text = text.replace(secret, "***").replace(unquote(secret), "***")
    return text


def reach_chroma(url: str) -> str | None:
    """None when the Chroma server at `url` answers its heartbeat, else why not."""
    from rag.warmup import HEAVY

    with HEAVY:  # never beside another thread's heavy imports
        import httpx

    try:
        response = httpx.get(url.rstrip("/") + "/api/v2/heartbeat", timeout=REACH_TIMEOUT_S, trust_env=False)
    except Exception as exc:
        return type(exc).__name__
    return None if response.status_code < 400 else f"HTTP {response.status_code}"


def check_sandbox(settings: Settings, report: Report) -> None:
    from .code_tools import gate_sandbox

    bwrap, why = gate_sandbox(settings)
    if bwrap is not None:
        report.ok("sandbox", why)
        return
    tokens = bool(settings.tokens) or _stored_tokens(settings)
    if settings.gate_sandbox == "bwrap":
        report.lacks("sandbox", f"JUDGE_MCP_GATE_SANDBOX=bwrap asks for it, but {why}. To fix: install "
                                "bubblewrap (apt-get install bubblewrap) on a host that allows user namespaces",
                     asked=True)
    elif tokens and not settings.unsandboxed_gates:
        report.lacks("sandbox", f"{why}. Over HTTP with bearer tokens (several organizations) judge_code and "
                                "propose_patch refuse to run gates without it. To fix: install bubblewrap "
                                "(apt-get install bubblewrap) on a host that allows user namespaces, or set "
                                "JUDGE_MCP_UNSANDBOXED_GATES=1 (any organization's code could then read the "
                                "server's data)", asked=True)
    elif settings.gate_sandbox == "none":
        report.lacks("sandbox", "turned off (JUDGE_MCP_GATE_SANDBOX=none): judge_code gates run unisolated",
                     asked=False)
    else:
        report.lacks("sandbox", f"{why}; judge_code gates run unisolated (each result says sandbox: none). To "
                                "fix: install bubblewrap (apt-get install bubblewrap)", asked=False)


def _stored_tokens(settings: Settings) -> bool:
    from .cli import has_stored_tokens

    try:
        return has_stored_tokens(settings)
    except Exception:  # an unreachable database is the store's line
        return False


def check_roots(settings: Settings, report: Report) -> None:
    if settings.org_roots:  # each organization's own (JUDGE_MCP_ORG_ROOTS; each checked to exist at start)
        report.ok("roots", "; ".join(f"{org}: {', '.join(str(r) for r in roots)}"
                                     for org, roots in settings.org_roots.items()))
        return
    if not settings.allowed_roots:
        report.lacks("roots", "none configured: file paths (images, root, path) work only with a host that offers "
                              "MCP roots (stdio); inline content always works. To fix: set JUDGE_MCP_ALLOWED_ROOTS="
                              "/path/to/project (judge-mcp config <host> --root DIR writes it)", asked=False)
        return
    absent = [str(r) for r in settings.allowed_roots if not r.is_dir()]
    if absent:
        report.lacks("roots", f"JUDGE_MCP_ALLOWED_ROOTS names {', '.join(absent)}, which "
                              f"{'is not a directory' if len(absent) == 1 else 'are not directories'}. To fix: "
                              "create it, or name an existing project directory", asked=True)
        return
    report.ok("roots", ", ".join(str(r) for r in settings.allowed_roots))


async def ask_model(registry: Any, client: Any) -> tuple[bool, str]:
    """(answered, what to say) after one tiny request to `client`, within the call deadline and retries."""
    import time

    from judges.errors import BackendError
    from judges.models.protocol import Message, ModelRequest

    started = time.monotonic()
    try:
        reply = await client.complete(ModelRequest(messages=[Message.user("Reply with the word OK.")], max_tokens=8))
    except BackendError as exc:
        return False, f"the model did not answer ({exc.kind}): {exc}"
    finally:
        await registry.aclose()
    return True, (f"the model answered in {(time.monotonic() - started) * 1000:.0f} ms "
                  f"({reply.model or client.name}: {reply.text.strip()[:40]!r})")
