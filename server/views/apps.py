"""The MCP Apps side of the views (SEP-1865): the `ui://` resources, the tools that link them in
`_meta.ui.resourceUri`, and the extension the server advertises. A host without Apps still gets each tool's full
text and structured result; a host with Apps draws that result in the linked view."""

from __future__ import annotations

import functools
from typing import Any

from mcp.server.apps import APP_MIME_TYPE, Apps
from mcp.server.mcpserver.resources import FunctionResource

from . import APP_VIEWS, app_view

# The one table of which tool's result draws in which view.
TOOL_VIEWS: dict[str, str] = {
    "evaluate_image": "ui://judge-mcp/image-run.html",
    "get_run": "ui://judge-mcp/image-run.html",
    "pairwise_compare": "ui://judge-mcp/pairwise.html",
    "rank_texts": "ui://judge-mcp/ranking.html",
    "calibrate_judge": "ui://judge-mcp/calibration.html",
    "get_calibration": "ui://judge-mcp/calibration.html",
}
DESCRIPTIONS = {
    "image_run": "An evaluate_image run: the images side by side with each judge's score, TOP_ISSUE and feedback, "
                 "the ranking and the iteration chart.",
    "pairwise": "pairwise_compare: the two candidates side by side with the verdict of each order.",
    "ranking": "rank_texts: the leaderboard (Bradley–Terry, Elo, wins, losses, ties) and every game.",
    "calibration": "A calibration: confusion matrix, agreement and bias figures, the largest disagreements and every "
                   "item, browsable.",
}


def extension() -> Apps:
    """The Apps extension, advertised in the server's capabilities. It registers nothing itself: the views are
    registered with the other resources, on first use (`register`), and the tools link them (`tool_meta`)."""
    return Apps()


def tool_meta(name: str, meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """A tool's `_meta` with its view's link, when it has a view."""
    uri = TOOL_VIEWS.get(name)
    if uri is None:
        return meta
    return {**(meta or {}), "ui": {"resourceUri": uri}}


def register(mcp: Any) -> None:
    """The `ui://` views as resources (text/html;profile=mcp-app), each rendered when first read. Declaring no
    CSP domains asks the host for its most restrictive policy; the page carries its own that allows no request."""
    for uri, view in APP_VIEWS.items():
        mcp.add_resource(FunctionResource(
            uri=uri, name=f"{view}_view", title=f"judge-mcp {view.replace('_', ' ')} view",
            description=DESCRIPTIONS[view], mime_type=APP_MIME_TYPE,
            meta={"ui": {"csp": {}, "prefersBorder": True}},
            fn=functools.lru_cache(maxsize=1)(functools.partial(app_view, uri))))
