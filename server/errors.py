"""The one place that maps core errors to MCP tool errors (isError results)."""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from judges.errors import BackendError, ConfigError, InputError
from prompts import PromptError

P = ParamSpec("P")
R = TypeVar("R")
log = logging.getLogger("judge_mcp")
WRAPPED = "__judge_mcp_tool_errors__"


def tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Turn every failure into an isError result that says what went wrong and what to do: the caller's,
    configuration and backend errors as such; anything unexpected as an incident whose id is in the
    message and, with the traceback, in the log on stderr. Every tool goes through this one wrapper."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except (InputError, PromptError) as exc:
            raise ToolError(f"invalid input: {exc}") from exc
        except ConfigError as exc:
            raise ToolError(f"server configuration: {exc}") from exc
        except BackendError as exc:
            raise ToolError(f"model backend ({exc.kind}): {exc}") from exc
        except ToolError:
            raise
        except Exception as exc:
            incident = uuid.uuid4().hex[:12]
            log.error("incident %s: tool %s failed unexpectedly", incident, fn.__name__, exc_info=exc)
            raise ToolError(
                f"internal error, incident {incident}: {type(exc).__name__}: {str(exc)[:300] or 'no message'}. "
                "This is not a problem with your input. Retry once; if it happens again, give the server's "
                "operator the incident id (the traceback is in the server's log on stderr)."
            ) from exc

    setattr(wrapper, WRAPPED, True)
    return wrapper

