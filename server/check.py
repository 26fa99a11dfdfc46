"""`judge-mcp check`: validate the configuration the way the server will use it, say what each part
resolves to, and exit (1 when something a tool needs is wrong)."""

from __future__ import annotations

import sys
from typing import Any

from judges.errors import ConfigError

from .settings import Settings


def run_check(settings: Settings, *, model: bool = False) -> int:
    """Print one line per part on stderr; 0 when the server can start and its tools can run. With `model`,
    also send the model one tiny request (a problem when it does not answer)."""
    problems = 0

    def say(part: str, text: str) -> None:
        print(f"{part:8} {text}", file=sys.stderr)

    say("settings", "ok (a bad value would have stopped here, naming its variable)")
    say("home", str(settings.home))
    if settings.allowed_roots:
        say("roots", ", ".join(str(r) for r in settings.allowed_roots))
    elif settings.org_roots:
        say("roots", "; ".join(f"{org}: {', '.join(str(r) for r in roots)}" for org, roots in settings.org_roots.items()))
    else:
        say("roots", "none configured: file paths work only with a host that offers MCP roots; set "
                     "JUDGE_MCP_ALLOWED_ROOTS=/path/to/project to allow a directory")
    from .context import build_registry

    try:
        registry = build_registry(settings)
        client = registry.resolve()
        say("model", f"{settings.model} -> {getattr(client, 'name', type(client).__name__)}")
        if model:
            import anyio

            answered, text = anyio.run(ask_model, registry, client)
            problems += 0 if answered else 1
            say("reach", text)
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


async def ask_model(registry: Any, client: Any) -> tuple[bool, str]:
    """(answered, what to say) after one tiny request to `client`, within the call deadline and retries."""
    import time

    from judges.errors import BackendError
    from judges.models.protocol import Message, ModelRequest

    started = time.monotonic()
    try:
        reply = await client.complete(ModelRequest(messages=[Message.user("Reply with the word OK.")], max_tokens=8))
    except BackendError as exc:
        return False, f"ERROR: the model did not answer ({exc.kind}): {exc}"
    finally:
        await registry.aclose()
    return True, (f"the model answered in {(time.monotonic() - started) * 1000:.0f} ms "
                  f"({reply.model or client.name}: {reply.text.strip()[:40]!r})")
