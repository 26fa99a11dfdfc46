"""The one place that maps core errors to MCP tool errors (isError results)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from judges.errors import BackendError, ConfigError, InputError
from prompts import PromptError

P = ParamSpec("P")
R = TypeVar("R")
log = logging.getLogger("judge_mcp")


def tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Turn the caller's, configuration and backend errors into isError results that say what to do."""

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

    return wrapper
