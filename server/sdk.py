"""The one module that reaches into the mcp SDK past its public API, and why each seam is needed.

Everything else in server/ uses the SDK's public names only: MCPServer's constructor, `add_tool`/`tool`,
`list_tools`, `call_tool`, the resource and prompt methods, `middleware`, and the exported `Tool` class (its
`from_function`, `run`, `parameters`, `output_schema`). tests/test_sdk_seams.py checks that every name used
here still exists and still behaves as relied on, so an SDK upgrade that moves one fails there, loudly,
naming it, instead of somewhere at run time.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# The private names this module uses, for the test that fails on an SDK upgrade: (object path, attribute).
SEAMS = (
    ("mcp.server.mcpserver.server", "configure_logging"),
    ("mcp.server.mcpserver.server.MCPServer", "_lowlevel_server"),
    ("mcp.server.lowlevel.server.Server", "add_request_handler"),
    ("mcp.server.lowlevel.server.Server", "run"),
    ("mcp.server.lowlevel.server.Server", "create_initialization_options"),
)


@contextmanager
def logging_left_alone(ours: bool) -> Iterator[None]:
    """While an MCPServer is built, with `ours` (our logging is configured: server/cli.py): the SDK's
    `configure_logging`, which MCPServer.__init__ calls unconditionally, does nothing. It would only import rich
    (~60-120 ms of the start) for a handler that basicConfig then ignores. There is no constructor flag for it."""
    if not ours:
        yield
        return
    import mcp.server.mcpserver.server as sdk_server

    original = sdk_server.configure_logging
    sdk_server.configure_logging = lambda *args, **kwargs: None
    try:
        yield
    finally:
        sdk_server.configure_logging = original


def lowlevel(server: Any) -> Any:
    """The low-level Server under an MCPServer. Needed twice: stdio answers an unreadable line with a JSON-RPC
    parse error instead of dropping it (server/stdio.py runs the low-level server on its own streams, as
    `MCPServer.run_stdio_async` does without that), and logging/setLevel has no MCPServer method to register
    its handler with (server/client_log.py)."""
    return server._lowlevel_server


def connection_of(session: Any) -> Any:
    """The connection a session belongs to (a logging level set once holds for every later request on it);
    the session itself where the SDK has no such object."""
    return getattr(session, "_connection", session)
