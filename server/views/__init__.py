"""The views: one self-contained HTML page per kind of result (an evaluate_image run, a pairwise verdict, a
rank_texts leaderboard, a calibration, a `judge-mcp eval` report, the list of recent runs and calibrations).

Each page is one template (templates/page.html.j2) rendered by jinja2's ImmutableSandboxedEnvironment with
autoescape, carrying its own CSS and script inline and a Content-Security-Policy that allows nothing else: no
request leaves the page (no fetch, no external font, script or image; images are data: URIs). The data rides in
the page as JSON (a `<script type="application/json">` block, escaped by `tojson`) and the one script draws it
with DOM calls (textContent, never innerHTML), so caller text is shown, never parsed as markup.

The same page serves three ways: as an MCP Apps `ui://` view (no data inside; the host sends the tool's result
by postMessage, `ui/notifications/tool-result`, SEP-1865), as a web page under `/ui/` on the HTTP transport (the
stored run or calibration inside), and as the eval report file (`render_eval_report`).
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import jinja2

View = Literal["image_run", "pairwise", "ranking", "calibration", "eval", "recent"]
VIEWS: tuple[View, ...] = ("image_run", "pairwise", "ranking", "calibration", "eval", "recent")

# The MCP Apps views: a tool's `_meta.ui.resourceUri` names one (server/views/apps.py links them).
APP_VIEWS: dict[str, View] = {
    "ui://judge-mcp/image-run.html": "image_run",
    "ui://judge-mcp/pairwise.html": "pairwise",
    "ui://judge-mcp/ranking.html": "ranking",
    "ui://judge-mcp/calibration.html": "calibration",
}


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")


def _hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode() + "'"


@cache
def _assets() -> tuple[str, str, str]:
    """The script, the style sheet, and the page's Content-Security-Policy: only these two inline blocks (by
    their hashes) may run and style the page; nothing may be fetched, framed, posted or navigated to."""
    script, style = _asset("views.js"), _asset("views.css")
    assert "</script" not in script.lower() and "</style" not in style.lower()
    csp = ("default-src 'none'; "
           f"script-src {_hash(script)}; style-src {_hash(style)}; img-src data:; "
           "connect-src 'none'; font-src 'none'; frame-src 'none'; form-action 'none'; base-uri 'none'")
    return script, style, csp


@cache
def _environment() -> jinja2.Environment:
    """The sandboxed environment (as prompts/loader.py's): a template cannot reach Python internals, and with
    autoescape every value is escaped for HTML."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    return ImmutableSandboxedEnvironment(loader=jinja2.FunctionLoader(_asset), undefined=jinja2.StrictUndefined,
                                         autoescape=True)


def content_security_policy() -> str:
    """The policy every page carries (also sent as a header by the /ui/ pages)."""
    return _assets()[2]


def render_page(view: View, title: str, data: Any | None = None) -> str:
    """One view as a whole HTML page; `data` None: an MCP Apps view, waiting for the host's tool result."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; one of {', '.join(VIEWS)}")
    script, style, csp = _assets()
    template = _environment().get_template("page.html.j2")
    return template.render(view=view, title=title, data=data, has_data=data is not None, script=script,
                           style=style, csp=csp)


def render_eval_report(report: dict[str, Any]) -> str:
    """The self-contained HTML report of a `judge-mcp eval` run (its JSON result, as written by --json)."""
    summary = report.get("summary") or {}
    title = f"judge-mcp eval: {report.get('tool', '?')} on {report.get('dataset', '?')}"
    if summary:
        title += f" ({summary.get('passed', 0)}/{summary.get('items', 0)} passed)"
    return render_page("eval", title, report)


def app_view(uri: str) -> str:
    """The HTML of an MCP Apps view (`ui://judge-mcp/...`)."""
    view = APP_VIEWS[uri]
    return render_page(view, f"judge-mcp: {view.replace('_', ' ')}")
