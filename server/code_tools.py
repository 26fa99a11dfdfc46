"""Code judging tools: judge_code (gates + verdict, tournament) and propose_patch (the fixer)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from judges.code_judge import CodeVerdict, ProposedPatch, judge_code, propose_patch
from judges.errors import ConfigError
from judges.gates import GateSettings, SourceFile, check_custom_gates

from .context import ClientRoots, app_of, roots_for
from .errors import tool_errors

Root = Annotated[str | None, Field(description="The project directory (inside the allowed roots); gates run on a copy.")]
Files = Annotated[list[SourceFile] | None, Field(description="Or the files themselves: [{path, content}].")]


def register(mcp: MCPServer) -> None:
    # The functions carry a suffix only so they do not shadow the core functions they call.
    @mcp.tool(name="judge_code", annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=False,
                                                             open_world_hint=True))
    @tool_errors
    async def judge_code_tool(
        ctx: Context,
        spec: Annotated[str, Field(description="The task specification the code must meet.")],
        root: Root = None,
        files: Files = None,
        diff: Annotated[str | None, Field(description="The change under review, as a unified diff.")] = None,
        run_gates: Annotated[bool, Field(description="Run ruff, mypy and pytest on a copy of the code.")] = True,
        gates: Annotated[dict[str, list[str]] | None, Field(
            description="Override gates by name (lint/types/tests) as argument lists starting with ruff, mypy or pytest.")] = None,
        model_notes: str | None = None,
        candidates: Annotated[list[list[SourceFile]] | None, Field(
            description="Several file sets: the gates pick a winner, which is then judged.")] = None,
        client_roots: ClientRoots = None,
    ) -> CodeVerdict:
        """accept / revise / reject with 8 scores, explanations and a fix plan, kept consistent with the gates.
        Without a model backend, the gates' own verdict (status no_model)."""
        app = app_of(ctx)
        try:
            client: Any = app.model_for(ctx)
        except ConfigError:
            client = None
        return await judge_code(
            client, spec=spec, root=root, files=files, diff=diff, run_gates_=run_gates,
            gates=check_custom_gates(gates) if gates else None, model_notes=model_notes, candidates=candidates,
            allowed_roots=roots_for(ctx, client_roots), settings=GateSettings(timeout_s=app.settings.gate_timeout_s),
        )

    @mcp.tool(name="propose_patch", annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=False,
                                                                open_world_hint=True))
    @tool_errors
    async def propose_patch_tool(
        ctx: Context,
        spec: str,
        root: Root = None,
        files: Files = None,
        diagnostics: Annotated[str | None, Field(description="Lint/type/test output; default: run the gates.")] = None,
        fix_plan: Annotated[list[dict[str, str]] | None, Field(description="judge_code's fix_plan.")] = None,
        max_rounds: Annotated[int, Field(description="Judge/fix rounds when apply_and_rejudge (1-5).")] = 1,
        apply_and_rejudge: Annotated[bool, Field(
            description="Apply each patch to a sandbox copy and re-run the gates; the caller's files stay as they are.")] = False,
        client_roots: ClientRoots = None,
    ) -> ProposedPatch:
        """Minimal patch ops from the seed's fixer prompt, validated against the files (one repair round)."""
        app = app_of(ctx)
        return await propose_patch(
            app.model_for(ctx), spec=spec, root=root, files=files, diagnostics=diagnostics,
            fix_plan=fix_plan, max_rounds=max_rounds, apply_and_rejudge=apply_and_rejudge,
            allowed_roots=roots_for(ctx, client_roots), settings=GateSettings(timeout_s=app.settings.gate_timeout_s),
        )
