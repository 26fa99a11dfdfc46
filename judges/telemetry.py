"""A view inside: OpenTelemetry traces and Prometheus metrics, both off (and free: nothing imported, each hook one
`is None` test) until the server switches them on.

Traces (`start_tracing`, on when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; the
official opentelemetry-sdk with its OTLP/HTTP exporter, configured by the standard OTEL_* variables): a span per
tool call (`tool_span`: tool, organization, outcome, job id), a child span per model request following the GenAI
semantic conventions (`model_span`: gen_ai.system, gen_ai.request.model, gen_ai.usage.input_tokens/output_tokens,
the cost), and a `gen_ai.evaluation.result` event per verdict naming the judge (`evaluation`).

Metrics (`start_metrics`, on the HTTP transport; prometheus-client, multiprocess-safe when
PROMETHEUS_MULTIPROC_DIR is set): tool calls by tool and outcome, their latency, model requests, tokens, cost and
cache hits by model (`count_call`, `count_model`); jobs by state and budget remaining per organization are read
from the database when /metrics is scraped (server/health.py).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

_tracer: Any = None
_provider: Any = None
_metrics: Any = None


def tracing_configured() -> bool:
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def start_tracing(version: str) -> bool:
    """Traces to the OTLP/HTTP collector the OTEL_* variables name; False (nothing imported) when none is set."""
    global _tracer, _provider
    if _tracer is not None or not tracing_configured():
        return _tracer is not None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "judge-mcp"),
                                "service.version": version})
    _provider = TracerProvider(resource=resource)
    _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _tracer = _provider.get_tracer("judge_mcp", version)
    log.info("OpenTelemetry traces on: OTLP/HTTP to %s", os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
             or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    return True


def stop_tracing() -> None:
    """Send the spans still buffered (at shutdown)."""
    if _provider is not None:
        _provider.shutdown()


def tracing() -> bool:
    return _tracer is not None


@contextmanager
def tool_span(tool: str, organization: str) -> Iterator[Any]:
    """The span of one tool call (None when tracing is off); the caller sets outcome and job id on it."""
    if _tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    with _tracer.start_as_current_span(f"execute_tool {tool}", kind=SpanKind.SERVER, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
            "judge_mcp.organization": organization}) as span:
        yield span


def end_tool_span(span: Any, outcome: str, job_id: str | None) -> None:
    if span is None:
        return
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("judge_mcp.outcome", outcome)
    if job_id:
        span.set_attribute("judge_mcp.job_id", job_id)
    if outcome != "ok":
        span.set_status(Status(StatusCode.ERROR, outcome))


def system_of(model_id: str | None) -> str:
    """gen_ai.system for a model string such as openai:gpt-4o (openai-compatible servers report as openai)."""
    backend = (model_id or "sampling").split(":", 1)[0]
    return {"anthropic": "anthropic", "openai": "openai", "openai-compatible": "openai"}.get(backend, backend)


@contextmanager
def model_span(model_id: str | None) -> Iterator[Any]:
    """The span of one model request, a child of the tool call's (None when tracing is off)."""
    if _tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    model = (model_id or "sampling").split(":", 1)[-1]
    with _tracer.start_as_current_span(f"chat {model}", kind=SpanKind.CLIENT, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.system": system_of(model_id),
            "gen_ai.request.model": model}) as span:
        yield span


def model_usage(span: Any, usage: Any, response_model: str | None = None) -> None:
    if span is None:
        return
    span.set_attribute("gen_ai.usage.input_tokens", int(usage.input_tokens))
    span.set_attribute("gen_ai.usage.output_tokens", int(usage.output_tokens))
    if usage.cost_usd is not None:
        span.set_attribute("judge_mcp.cost_usd", float(usage.cost_usd))
    if response_model:
        span.set_attribute("gen_ai.response.model", response_model)


def evaluation(name: str, score: float | None, label: str, explanation: str | None, **judge: str | None) -> None:
    """A `gen_ai.evaluation.result` event on the current span: one verdict, naming its judge (agent id, prompt
    id and version, model; the keys of `judge`, each as judge_mcp.judge.<key>)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    attributes: dict[str, Any] = {"gen_ai.evaluation.name": name, "gen_ai.evaluation.score.label": label}
    if score is not None:
        attributes["gen_ai.evaluation.score.value"] = float(score)
    if explanation:
        attributes["gen_ai.evaluation.explanation"] = explanation[:1000]
    attributes.update({f"judge_mcp.judge.{k}": v for k, v in judge.items() if v})
    trace.get_current_span().add_event("gen_ai.evaluation.result", attributes)


# --- Prometheus ---------------------------------------------------------------------------------------------


# Model label values are bounded: the models the server was configured with and those it knows prices for
# keep their names; a caller may name any model (a jury, an agent), so other names get a label of their own only
# for the first OTHER_MODELS of them in this process, and count as "other" after that.
OTHER_MODELS = 16


class _Metrics:
    def __init__(self, known: Iterable[str] = ()) -> None:
        from prometheus_client import Counter, Histogram

        from judges.models.prices import DEFAULT_PRICES

        self.known = {m for m in known if m} | set(DEFAULT_PRICES)
        self.others: set[str] = set()
        self._lock = threading.Lock()

        self.calls = Counter("judge_mcp_tool_calls_total", "Tool calls, by tool and outcome.", ["tool", "outcome"])
        self.latency = Histogram("judge_mcp_tool_call_seconds", "Tool call duration.", ["tool"],
                                 buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
        self.requests = Counter("judge_mcp_model_requests_total", "Model requests sent, by model.", ["model"])
        self.tokens = Counter("judge_mcp_model_tokens_total", "Model tokens, by model and direction (input, output).",
                              ["model", "direction"])
        self.cost = Counter("judge_mcp_model_cost_usd_total", "What the model requests cost, USD, by model.",
                            ["model"])
        self.cache_hits = Counter("judge_mcp_cache_hits_total", "Replies answered from the result cache, by model.",
                                  ["model"])

    def model(self, model: str) -> str:
        """The label value for `model`: its name when configured, priced or among the first others; else other."""
        if model in self.known or model.split(":", 1)[-1] in self.known:
            return model
        with self._lock:
            if model in self.others or len(self.others) < OTHER_MODELS:
                self.others.add(model)
                return model
        return "other"


def start_metrics(known_models: Iterable[str] = ()) -> None:
    """The metrics (in the default registry; with PROMETHEUS_MULTIPROC_DIR each worker writes its own files);
    `known_models`: the models this server is configured with (labelled by name whatever else is called)."""
    global _metrics
    if _metrics is None:
        _metrics = _Metrics(known_models)


def metrics_on() -> bool:
    return _metrics is not None


def count_call(tool: str, outcome: str, seconds: float) -> None:
    if _metrics is None:
        return
    kind = outcome.split(" ", 1)[0]  # "incident <id>" counts as incident: one series per kind, not per call
    _metrics.calls.labels(tool, kind).inc()
    _metrics.latency.labels(tool).observe(seconds)


def count_model(model: str, usage: Any, requests: int, cached: bool) -> None:
    if _metrics is None:
        return
    model = _metrics.model(model)
    if cached:
        _metrics.cache_hits.labels(model).inc()
        return
    _metrics.requests.labels(model).inc(requests)
    _metrics.tokens.labels(model, "input").inc(int(usage.input_tokens))
    _metrics.tokens.labels(model, "output").inc(int(usage.output_tokens))
    if usage.cost_usd:
        _metrics.cost.labels(model).inc(float(usage.cost_usd))
