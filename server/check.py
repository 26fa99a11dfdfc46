"""`judge-mcp check`: validate the configuration the way the server will use it, say what each part
resolves to, and exit (1 when something a tool needs is wrong)."""

from __future__ import annotations

import sys

from judges.errors import ConfigError

from .settings import Settings


def run_check(settings: Settings) -> int:
    """Print one line per part on stderr; 0 when the server can start and its tools can run."""
    problems = 0

    def say(part: str, text: str) -> None:
        print(f"{part:8} {text}", file=sys.stderr)

    say("settings", "ok (a bad value would have stopped here, naming its variable)")
    say("home", str(settings.home))
    if settings.allowed_roots:
        say("roots", ", ".join(str(r) for r in settings.allowed_roots))
    else:
        say("roots", "none configured: file paths work only with a host that offers MCP roots; set "
                     "JUDGE_MCP_ALLOWED_ROOTS=/path/to/project to allow a directory")
    from .context import build_registry

    try:
        client = build_registry(settings).resolve()
        say("model", f"{settings.model} -> {getattr(client, 'name', type(client).__name__)}")
    except ConfigError as exc:
        if settings.model == "auto":
            say("model", f"none from the environment; host sampling is used when the client offers it. {exc}")
        else:
            problems += 1
            say("model", f"ERROR: {exc}")
    from .code_tools import gate_sandbox

    bwrap, why = gate_sandbox(settings)
    if bwrap is None and settings.gate_sandbox == "bwrap":
        problems += 1
        say("sandbox", f"ERROR: JUDGE_MCP_GATE_SANDBOX=bwrap but {why}")
    else:
        say("sandbox", why if bwrap is not None else f"none ({why}); judge_code gates run unisolated")
    say("result", "ok" if problems == 0 else f"{problems} problem(s)")
    return 0 if problems == 0 else 1
