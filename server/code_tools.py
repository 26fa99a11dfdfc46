"""Code judging tools: judge_code (gates + verdict, tournament) and propose_patch (the fixer)."""

from __future__ import annotations

import logging
import math
import threading
from typing import Annotated

import anyio.to_thread
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from judges.call import JudgeCall
from judges.code import judge as core
from judges.code import sandbox
from judges.code.gates import GateSettings, SourceFile, parse_gates
from judges.code.judge import CodeVerdict, ProposedPatch
from judges.errors import ConfigError

from .context import ClientRoots, JuryModels, Samples, UseCache, app_of, roots_for
from .declare import TEXT, Judging, judge
from .jobs import Background
from .settings import Settings
from .startup import LISTED_AS

log = logging.getLogger("judge_mcp")

Root = Annotated[str | None, Field(description="The project directory (in the allowed roots).")]
Files = Annotated[list[SourceFile] | None, Field(description="Or the files themselves: [{path, content}].",
                                                 json_schema_extra={LISTED_AS: {
                                                     "type": "array", "items": {"type": "object"},
                                                     "description": "Or the files: [{path, content}]."}})]


def gate_sandbox(settings: Settings) -> tuple[sandbox.Bwrap | None, str]:
    """The sandbox gates run in (None: unsandboxed) and a one-line description or reason."""
    if settings.gate_sandbox == "none":
        return None, "JUDGE_MCP_GATE_SANDBOX=none (auto, the default, isolates them with bubblewrap where it works)"
    return sandbox.detect()


def gate_settings(settings: Settings) -> GateSettings:
    bwrap, why = gate_sandbox(settings)
    limits = sandbox.Limits(cpu_s=max(1, math.ceil(settings.gate_timeout_s)), memory_mb=settings.gate_memory_mb,
                            processes=settings.gate_max_processes, work_mb=settings.gate_disk_mb)
    return GateSettings(timeout_s=settings.gate_timeout_s, sandbox=bwrap, no_sandbox_reason=why, limits=limits)


def check_gates_may_run(settings: Settings, gates: GateSettings) -> None:
    """Over HTTP with bearer tokens (several organizations) gates never run unsandboxed unless the
    operator said so."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    if gates.sandbox is None and get_access_token() is not None and not settings.unsandboxed_gates:
        _, why = gate_sandbox(settings)
        raise ConfigError(
            f"gates run the caller's code and there is no sandbox for them here: {why}. So this server with "
            "several organizations refuses to run them. Fix that, or set JUDGE_MCP_UNSANDBOXED_GATES=1 to run "
            "gates without a sandbox (any organization's code could then read the server's data and secrets). "
            "judge_code with run_gates=false still works.")


def log_gate_sandbox(settings: Settings) -> None:
    """At start: which sandbox gates use; JUDGE_MCP_GATE_SANDBOX=bwrap stops the server without one."""
    bwrap, why = gate_sandbox(settings)
    if bwrap is not None:
        log.info("gate sandbox: %s", why)
    elif settings.gate_sandbox == "bwrap":
        raise SystemExit(f"judge-mcp: JUDGE_MCP_GATE_SANDBOX=bwrap but the sandbox cannot be used: {why}")
    else:
        log.warning("gate sandbox: none (%s); judge_code gates run unisolated%s", why,
                    "" if not settings.tokens or settings.unsandboxed_gates
                    else ", and are refused over HTTP with tokens unless JUDGE_MCP_UNSANDBOXED_GATES=1")


def probe_gate_sandbox(settings: Settings) -> None:
    """At start (server/app.py, when this module is loaded): which sandbox gates use, logged; with
    JUDGE_MCP_GATE_SANDBOX=bwrap, a server without it stops now."""
    if settings.gate_sandbox == "bwrap":
        log_gate_sandbox(settings)  # required: a server without it must not start
    else:
        # Probing bwrap starts a sandbox (~50 ms): off the start-up path, and like the warm-up a moment
        # after start so it does not compete with the host's handshake. It imports nothing heavy.
        probe = threading.Timer(settings.warm_delay_s, log_gate_sandbox, args=(settings,))
        probe.daemon = True
        probe.start()


class JudgeCodeInput(BaseModel):
    spec: Annotated[str, Field(description="What the code must do."), TEXT]
    root: Root = None
    files: Files = None
    diff: Annotated[str | None, Field(description="The change under review (unified diff)."), TEXT] = None
    run_gates: Annotated[bool, Field(description="Run ruff, mypy and pytest on a copy.")] = True
    gates: Annotated[list[str] | dict[str, list[str]] | None, Field(
        description="Names (lint, types, tests), or {name: [arguments]}: test ids, relative paths, allowlisted "
                    "flags, e.g. {\"tests\": [\"-x\", \"tests/test_a.py::test_b\"]}. "
                    "Default: all.")] = None
    model_notes: Annotated[str | None, TEXT] = None
    candidates: Annotated[list[list[SourceFile]] | None, Field(
        description="Several file sets: the gates pick the one judged.", json_schema_extra={LISTED_AS: {
            "type": "array", "items": {"type": "array"},
            "description": "Several file sets, as files: the gates pick the one judged."}})] = None
    cache: UseCache = True
    samples: Samples = 1
    models: JuryModels = None
    background: Background = False


@judge(toolset="code")
async def judge_code(ctx: Context, args: JudgeCodeInput, client_roots: ClientRoots = None) -> Judging[CodeVerdict]:
    """Review code against a spec: accept / revise / reject with 8 scores and a fix plan, consistent with the gates
    (lint, types, tests); no model: the gates' verdict."""
    app = app_of(ctx)
    chosen = parse_gates(args.gates)
    settings = gate_settings(app.settings)
    if args.run_gates or args.candidates:
        check_gates_may_run(app.settings, settings)
    roots = roots_for(ctx, client_roots)

    async def check(call: JudgeCall) -> None:
        await anyio.to_thread.run_sync(core.check_sources, args.root, args.files, args.candidates, roots)

    return Judging(lambda call, progress: core.judge_code(
        call, spec=args.spec, root=args.root, files=args.files, diff=args.diff, run_gates_=args.run_gates,
        gates=chosen, model_notes=args.model_notes, candidates=args.candidates, allowed_roots=roots,
        settings=settings, progress=progress), resolve=False, check=check)


class ProposePatchInput(BaseModel):
    spec: Annotated[str, TEXT]
    root: Root = None
    files: Files = None
    diagnostics: Annotated[str | None, Field(description="Lint/type/test output; default: run the gates."),
                           TEXT] = None
    fix_plan: Annotated[list[dict[str, str]] | None, Field(description="judge_code's fix_plan.")] = None
    max_rounds: Annotated[int, Field(ge=1, le=5, description="Judge/fix rounds when apply_and_rejudge.")] = 1
    apply_and_rejudge: Annotated[bool, Field(
        description="Apply each patch to a copy and re-run the gates.")] = False
    cache: UseCache = True
    background: Background = False


@judge(toolset="code")
async def propose_patch(ctx: Context, args: ProposePatchInput,
                        client_roots: ClientRoots = None) -> Judging[ProposedPatch]:
    """Propose a fix for code: minimal patch ops, validated against the files."""
    app = app_of(ctx)
    settings = gate_settings(app.settings)
    if args.diagnostics is None or args.apply_and_rejudge:
        check_gates_may_run(app.settings, settings)
    roots = roots_for(ctx, client_roots)

    async def check(call: JudgeCall) -> None:
        await anyio.to_thread.run_sync(core.check_sources, args.root, args.files, None, roots)

    return Judging(lambda call, progress: core.propose_patch(
        call, spec=args.spec, root=args.root, files=args.files, diagnostics=args.diagnostics,
        fix_plan=args.fix_plan, max_rounds=args.max_rounds, apply_and_rejudge=args.apply_and_rejudge,
        allowed_roots=roots, settings=settings, limits=app.settings.patch_limits(), progress=progress), check=check)


TOOLS = (judge_code, propose_patch)
