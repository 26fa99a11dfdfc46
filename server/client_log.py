"""MCP logging notifications (notifications/message) for clients that ask for them.

Handshake-era clients ask with logging/setLevel (served here; the SDK dropped it with the 2026 revision and
says to re-provide it through the low-level server); 2026-07-28 clients put the level in each request's
`_meta`, and the SDK filters those itself. A client that asked for nothing gets no log notifications.
"""

from __future__ import annotations

import logging
import warnings
import weakref
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import EmptyResult, SetLevelRequestParams

from . import sdk

log = logging.getLogger("judge_mcp")
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

_levels: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def _connection(session: Any) -> Any:
    """The connection a session belongs to: a level set once holds for every later request on it."""
    return sdk.connection_of(session)


async def set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
    """logging/setLevel: log notifications at this level and above, for this connection."""
    _levels[_connection(ctx.session)] = params.level
    return EmptyResult()


def register(mcp: MCPServer[Any]) -> None:
    sdk.lowlevel(mcp).add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)


def _modern(ctx: Any) -> bool:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return ctx.request_context.protocol_version in MODERN_PROTOCOL_VERSIONS


async def client_log(ctx: Any, level: str, message: str) -> None:
    """Send `message` to the client as a log notification if it asked for `level` (never raises)."""
    try:
        session = ctx.request_context.session
        if not _modern(ctx):
            wanted = _levels.get(_connection(session))
            if wanted is None or LEVELS.index(level) < LEVELS.index(wanted):
                return
        with warnings.catch_warnings():  # warned at the call, before any await: nothing else runs in between
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            sending = session.send_log_message(level=level, data=message, logger="judge_mcp",
                                               related_request_id=ctx.request_id)
        await sending
    except Exception as exc:  # a closed stream or a finished request: the log on stderr has it anyway
        log.debug("log notification not sent: %s", exc)
