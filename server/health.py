"""/healthz and /readyz on the HTTP transports, for a load balancer: unauthenticated, and saying nothing but
status (each component's name and ok or fail; no versions, paths or error texts)."""

from __future__ import annotations

import logging
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

log = logging.getLogger("judge_mcp")
CHECK_TIMEOUT_S = 2.0


def _import_httpx() -> Any:
    from rag.warmup import HEAVY

    with HEAVY:
        import httpx
    return httpx


async def _reachable(url: str) -> bool:
    """True when `url` answers HTTP at all (any status): the address is up."""
    # httpx is imported under the heavy-import lock, in a worker thread (never beside the warm-up's imports).
    httpx = await anyio.to_thread.run_sync(_import_httpx)

    try:
        async with httpx.AsyncClient(timeout=CHECK_TIMEOUT_S, trust_env=False) as client:
            await client.get(url)
        return True
    except Exception as exc:
        log.warning("readyz: %s did not answer: %s", url, type(exc).__name__)
        return False


def _model_url(settings: Any) -> str | None:
    """The base URL of the configured model backend (None for demo, sampling or no backend)."""
    model = settings.model
    if model.startswith("anthropic") or (model == "auto" and settings.anthropic_api_key):
        return str(settings.anthropic_base_url or "https://api.anthropic.com")
    if model.startswith("openai-compatible"):
        return str(settings.compatible_base_url or settings.openai_base_url or "") or None
    if model.startswith("openai") or (model == "auto" and settings.openai_api_key):
        return str(settings.openai_base_url or "https://api.openai.com/v1")
    if model == "auto" and (settings.compatible_base_url or settings.openai_base_url):
        return str(settings.compatible_base_url or settings.openai_base_url)
    return None


async def readiness(server: Any) -> dict[str, str]:
    """Each configured component: 'ok' or 'fail'."""
    app = server.app
    if app is None:
        return {"server": "fail"}
    checks: dict[str, str] = {}
    try:
        with anyio.fail_after(CHECK_TIMEOUT_S):
            # Abandoned at the timeout: a stopped database must not hold the answer for the pool's wait.
            await anyio.to_thread.run_sync(app.db.query, "SELECT 1", abandon_on_cancel=True)
        checks["database"] = "ok"
    except Exception as exc:
        log.warning("readyz: database check failed: %s", type(exc).__name__)
        checks["database"] = "fail"
    settings = app.settings
    if settings.chroma_url:
        ok = await _reachable(settings.chroma_url.rstrip("/") + "/api/v2/heartbeat")
        checks["chroma"] = "ok" if ok else "fail"
    if settings.readyz_check_model:
        url = _model_url(settings)
        if url is not None:
            checks["model"] = "ok" if await _reachable(url) else "fail"
    return checks


def scrape(server: Any) -> bytes:
    """The metrics in Prometheus' text format: the counters (judges/telemetry.py; every worker's, with
    PROMETHEUS_MULTIPROC_DIR) and, read now from the database, jobs by state and budget remaining per organization."""
    import os

    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import REGISTRY, GaugeMetricFamily

    registry: Any = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    app = server.app
    jobs = GaugeMetricFamily("judge_mcp_jobs", "Background jobs, by state.", labels=["status"])
    budget = GaugeMetricFamily("judge_mcp_budget_remaining_usd", "Today's budget left (UTC day), by organization.",
                               labels=["organization"])
    if app is not None:
        counts = {r["status"]: int(r["n"]) for r in app.db.query("SELECT status, COUNT(*) AS n FROM jobs GROUP BY status")}
        for status in ("working", "completed", "failed", "cancelled", "interrupted"):
            jobs.add_metric([status], counts.get(status, 0))
        ledger = app.metering.ledger if app.metering is not None else None
        if ledger is not None:
            from judges.store.usage import today

            orgs = set(ledger.budgets)
            if ledger.daily_budget_usd is not None:
                orgs |= {r["organization_id"] for r in app.db.query(
                    "SELECT DISTINCT organization_id FROM usage_daily WHERE day=?", (today(),))}
            for org in sorted(orgs):
                limit = ledger.budget_of(org)
                if limit is not None:
                    budget.add_metric([org], max(0.0, limit - ledger.spent(org)))
    extra = CollectorRegistry()
    extra.register(_Fixed([jobs, budget]))
    return generate_latest(registry) + generate_latest(extra)


class _Fixed:
    def __init__(self, families: list[Any]):
        self.families = families

    def collect(self) -> Any:
        return iter(self.families)


def metrics_allowed(settings: Any, header: str | None, has_tokens: bool, host: str | None = None) -> bool:
    """JUDGE_MCP_METRICS_TOKEN asked for when set; else open only on a server without tokens, to a request whose
    Host is a loopback name (a page rebinding its own DNS name to 127.0.0.1 reads nothing, as /mcp refuses it)."""
    import hmac

    if settings.metrics_token:
        given = (header or "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), settings.metrics_token.encode())
    name = (host or "").lower()
    name = name.rpartition(":")[0] if name.rpartition(":")[2].isdigit() else name
    return not has_tokens and name in ("127.0.0.1", "localhost", "[::1]")


def register(mcp: Any) -> None:
    @mcp.custom_route("/healthz", methods=["GET"], include_in_schema=False)
    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    @mcp.custom_route("/readyz", methods=["GET"], include_in_schema=False)
    async def readyz(_: Request) -> Response:
        checks = await readiness(mcp)
        ready = all(v == "ok" for v in checks.values())
        return JSONResponse({"status": "ok" if ready else "fail", "checks": checks}, status_code=200 if ready else 503)

    @mcp.custom_route("/metrics", methods=["GET"], include_in_schema=False)
    async def metrics(request: Request) -> Response:
        from judges import telemetry

        app = mcp.app
        if not telemetry.metrics_on() or app is None:
            return JSONResponse({"error": "metrics are off (JUDGE_MCP_METRICS=false, or not the HTTP transport)"},
                                status_code=404)
        has_tokens = getattr(mcp, "_token_verifier", None) is not None  # /mcp asks for bearer tokens
        if not metrics_allowed(app.settings, request.headers.get("authorization"), has_tokens,
                               request.headers.get("host")):
            return JSONResponse({"error": "/metrics needs the bearer token set in JUDGE_MCP_METRICS_TOKEN (a server "
                                          "with tokens never shows every organization's figures to any caller)"},
                                status_code=403)
        body = await anyio.to_thread.run_sync(scrape, mcp)
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")
