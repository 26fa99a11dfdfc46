"""The views as web pages under /ui/ on the HTTP transports: the organization's recent runs and calibrations,
a run, a calibration. Behind the same bearer-token check as /mcp (any role: these are what get_run and
get_calibration, member tools, return), each page showing only the caller's organization: another
organization's run reads as not found, exactly as through get_run."""

from __future__ import annotations

import logging
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from judges.errors import InputError, JudgeError, OverLimitError

from . import View, content_security_policy, render_page

log = logging.getLogger("judge_mcp")
MAX_ID = 100  # run and calibration ids are UUIDs: a longer path segment is no id


def _headers() -> dict[str, str]:
    # frame-ancestors only works as a header: the pages are not to be framed by another site.
    return {"Content-Security-Policy": content_security_policy() + "; frame-ancestors 'none'",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


def _page(view: View, title: str, data: Any, status: int = 200) -> Response:
    return HTMLResponse(render_page(view, title, data), status_code=status, headers=_headers())


def _message(status: int, text: str, **headers: str) -> Response:
    return Response(text + "\n", status_code=status, media_type="text/plain; charset=utf-8",
                    headers={**_headers(), **headers})


def _organization(mcp: Any, request: Request) -> str | None:
    """The caller's organization: the bearer token's when the server checks tokens; the server's own otherwise
    (an HTTP server without tokens listens on loopback only)."""
    if mcp.settings.auth is None:
        return str(mcp.app.settings.org)
    user = request.scope.get("user")
    token = getattr(user, "access_token", None)
    return None if token is None else str(token.client_id)


def run_page_data(app: Any, org: str, run_id: str) -> dict[str, Any]:
    """A stored run as the image_run view draws it: its report, each iteration with its evaluations."""
    report = app.images.report(org, run_id)
    data: dict[str, Any] = report.model_dump(mode="json")
    for iteration in data["iterations"]:
        _, evaluations = app.images.runs.evaluations(org, run_id, iteration["iteration"])
        iteration["evaluations"] = [e.model_dump(mode="json") for e in evaluations]
    return data


def register(mcp: Any) -> None:
    """GET /ui/, /ui/runs/{run_id}, /ui/calibrations/{calibration_id}."""

    async def serve(request: Request, build: Any) -> Response:
        app = mcp.app
        if app is None:
            return _message(503, "the server is starting")
        org = _organization(mcp, request)
        if org is None:
            return _message(401, "a bearer token is needed: Authorization: Bearer <token>, as for /mcp",
                            **{"WWW-Authenticate": 'Bearer error="invalid_token"'})
        try:
            if app.limiter is not None:
                await app.store(app.limiter.take, org)
            # The store reads and the page's rendering (a calibration may hold thousands of items) in a worker
            # thread: the event loop keeps serving /mcp meanwhile.
            return await anyio.to_thread.run_sync(build, app, org)
        except OverLimitError as exc:
            return _message(429, str(exc))
        except InputError as exc:  # not found in this organization (or no such id): the store's own sentence
            return _message(404, str(exc))
        except JudgeError as exc:
            return _message(500, str(exc))

    def index(app: Any, org: str) -> Response:
        from judges.calibration.store import CalibrationStore

        data = {"organization": org, "runs": [r.model_dump(mode="json") for r in app.images.runs.summaries(org)],
                "calibrations": CalibrationStore(app.db).summaries(org)}
        return _page("recent", f"judge-mcp: {org}", data)

    @mcp.custom_route("/ui", methods=["GET"], include_in_schema=False)
    async def ui_root(_: Request) -> Response:
        return RedirectResponse("/ui/", status_code=308)

    @mcp.custom_route("/ui/", methods=["GET"], include_in_schema=False)
    async def ui_index(request: Request) -> Response:
        return await serve(request, index)

    @mcp.custom_route("/ui/runs/{run_id}", methods=["GET"], include_in_schema=False)
    async def ui_run(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        if len(run_id) > MAX_ID:
            return _message(404, "no such run")

        def build(app: Any, org: str) -> Response:
            data = run_page_data(app, org, run_id)
            return _page("image_run", f"judge-mcp run: {data['brief'][:80]}", data)

        return await serve(request, build)

    @mcp.custom_route("/ui/calibrations/{calibration_id}", methods=["GET"], include_in_schema=False)
    async def ui_calibration(request: Request) -> Response:
        calibration_id = request.path_params["calibration_id"]
        if len(calibration_id) > MAX_ID:
            return _message(404, "no such calibration")

        def build(app: Any, org: str) -> Response:
            from judges.calibration.store import CalibrationStore

            report = CalibrationStore(app.db).get(org, calibration_id)
            return _page("calibration", f"judge-mcp calibration: {report.judge}, {report.model}",
                         report.model_dump(mode="json"))

        return await serve(request, build)
