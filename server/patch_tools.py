"""Patch tools: validate_patch (read-only) and apply_patch (destructive, all-or-nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ListRootsResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, WithJsonSchema

from judges.inputs.paths import resolve_root
from judges.patches.formats import PatchFormat, to_ops
from judges.patches.ops import (
    DEFAULT_LIMITS,
    PATCH_SCHEMA,
    ApplyReport,
    PatchLimits,
    ValidationReport,
    apply_patch,
    validate_patch,
)

from .context import ClientRoots, app_of, roots_for
from .declare import READ_ONLY, tool
from .startup import LISTED_AS

PatchArg = Annotated[
    dict[str, Any] | str,
    WithJsonSchema({"anyOf": [PATCH_SCHEMA, {"type": "string", "description": (
        "Or text: SEARCH/REPLACE blocks (a path line, <<<<<<< SEARCH, =======, >>>>>>> REPLACE) or a unified "
        "diff.")}]}),
    Field(description='{"ops": [...]}, SEARCH/REPLACE blocks or a unified diff.'),
]
# apply_patch's patch is listed short: validate_patch, always listed beside it (toolset patches), shows it whole.
ApplyPatchArg = Annotated[PatchArg, Field(json_schema_extra={LISTED_AS: {
    "type": ["object", "string"], "description": "The patch, in any form validate_patch's patch takes."}})]


FormatArg = Annotated[PatchFormat, Field(description="auto (detect), ops, search_replace or unified_diff.")]
PathArg = Annotated[str | None, Field(description="File for SEARCH/REPLACE blocks that name none.")]
ReadOnlyArg = Annotated[bool, Field(description="Also change read-only files (kept read-only).")]
# A caller may raise the limits for one call, up to these ceilings (a caller's 10^9 ops kept a server busy 41 s).
MAX_OPS_CEILING, MAX_BYTES_CEILING = 10_000, 20 * 1024 * 1024
MaxOpsArg = Annotated[int | None, Field(ge=1, le=MAX_OPS_CEILING, description=(
    f"Default {DEFAULT_LIMITS.max_ops} (JUDGE_MCP_PATCH_MAX_OPS)."))]
MaxBytesArg = Annotated[int | None, Field(ge=1, le=MAX_BYTES_CEILING, description=(
    f"Most patch bytes; default {DEFAULT_LIMITS.max_bytes} (JUDGE_MCP_PATCH_MAX_BYTES)."))]


def _as_validated(**listed: Any) -> Any:
    """An apply_patch argument listed without its description: its description says "as in validate_patch"."""
    return Field(json_schema_extra={LISTED_AS: listed})

DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)


class ValidatePatchInput(BaseModel):
    patch: PatchArg
    root: Annotated[str | None, Field(description="Project directory in the allowed roots: ops are checked "
                                                  "against its files, with the diff.")] = None
    max_ops: MaxOpsArg = None
    max_bytes: MaxBytesArg = None
    format: FormatArg = "auto"
    path: PathArg = None
    allow_read_only: ReadOnlyArg = False


class ApplyPatchInput(BaseModel):
    patch: ApplyPatchArg
    root: Annotated[str, Field(description="Project directory (in the allowed roots).")]
    dry_run: Annotated[bool, Field(description="Compute and return the diff, write nothing.")] = False
    max_ops: Annotated[MaxOpsArg, _as_validated(type="integer")] = None
    max_bytes: Annotated[MaxBytesArg, _as_validated(type="integer")] = None
    format: Annotated[FormatArg, _as_validated(type="string")] = "auto"
    path: Annotated[PathArg, _as_validated(type="string")] = None
    allow_read_only: Annotated[ReadOnlyArg, _as_validated(type="boolean")] = False


async def prepare(ctx: Context, client_roots: ListRootsResult | None, args: ValidatePatchInput | ApplyPatchInput
                  ) -> tuple[dict[str, Any], Path | None, PatchLimits]:
    """What both patch tools start from: the patch as ops, the root (inside the allowed roots), the limits."""
    ops = await anyio.to_thread.run_sync(  # megabytes of diff text
        lambda: to_ops(args.patch, args.format, default_path=args.path))
    base = resolve_root(args.root, roots_for(ctx, client_roots)) if args.root is not None else None
    return ops, base, app_of(ctx).settings.patch_limits(args.max_ops, args.max_bytes)


@tool(role="member", toolset="patches", annotations=READ_ONLY)
async def validate_patch_tool(ctx: Context, args: ValidatePatchInput,
                              client_roots: ClientRoots = None) -> ValidationReport:
    """Check a patch without writing: shape, limits, paths, and (with a root) each op against the files."""
    ops, base, limits = await prepare(ctx, client_roots, args)
    return await anyio.to_thread.run_sync(
        lambda: validate_patch(ops, base, limits=limits, allow_read_only=args.allow_read_only))


@tool(role="member", toolset="patches", annotations=DESTRUCTIVE)
async def apply_patch_tool(ctx: Context, args: ApplyPatchInput,
                           client_roots: ClientRoots = None) -> Annotated[CallToolResult, ApplyReport]:
    """Write a patch all-or-nothing (nothing changes if any op fails), keeping CRLF and BOMs; a failed one is an
    isError result with errors and diff. Other arguments as in validate_patch."""
    ops, base, limits = await prepare(ctx, client_roots, args)
    assert base is not None
    report = await anyio.to_thread.run_sync(
        lambda: apply_patch(ops, base, dry_run=args.dry_run, limits=limits, allow_read_only=args.allow_read_only,
                            register=app_of(ctx).settings.patch_journal_dir))
    return report_result(report)


def report_result(report: ApplyReport) -> CallToolResult:
    """apply_patch's result: isError when the patch failed (nothing was changed), with the report either way."""
    text = report.model_dump_json(indent=2)
    if report.errors:
        more = f" (and {len(report.errors) - 1} more, in `errors`)" if len(report.errors) > 1 else ""
        text = f"The patch was not applied and no file changed: {report.errors[0]}{more}."
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=report.model_dump(mode="json"), is_error=bool(report.errors))


TOOLS = (validate_patch_tool, apply_patch_tool)
