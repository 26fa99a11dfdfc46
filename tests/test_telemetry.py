"""A view inside, through a real HTTP `judge-mcp`: its traces reach a loopback OTLP/HTTP collector (protobuf decoded
with opentelemetry-proto) with a span per tool call, a GenAI child span per model request and an evaluation event
per verdict; /metrics is parsed by prometheus-client's own parser; both stay off (nothing imported) otherwise."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.fake_model_server import FakeModelServer
from tests.mcp_helpers import JUDGE_MCP, call, free_port, server_env, wait_for_port
from tests.test_long_work import png_b64, replies
from tests.test_transports import client_with_token

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


class Collector:
    """A loopback OTLP/HTTP trace collector: every span it receives, as (span, resource attributes)."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        collector.spans.extend(scope.spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


    async def received(self, name: str) -> None:
        """Until a span of this name arrived."""
        while True:
            if any(s.name == name for s in self.spans):
                return
            await anyio.sleep(0.1)


def attributes(item: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in item.attributes:
        value = kv.value
        out[kv.key] = getattr(value, value.WhichOneof("value"))
    return out


@pytest.fixture
def traced(tmp_path: Path, fake_server: FakeModelServer) -> Iterator[tuple[str, Collector]]:
    collector = Collector()
    port = free_port()
    proc = subprocess.Popen([JUDGE_MCP, "--transport", "http", "--port", str(port)], cwd="/", env=server_env(
        tmp_path / "home", JUDGE_MCP_TOKENS="tok-t=org-t", JUDGE_MCP_METRICS_TOKEN="scrape-me",
        JUDGE_MCP_MODEL="openai:gpt-fake", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake_server.openai_url,
        JUDGE_MCP_WARM_EMBEDDINGS="false", OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
        OTEL_BSP_SCHEDULE_DELAY="100"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for_port(port, 60), "the HTTP server did not start within 60 s"
        yield f"http://127.0.0.1:{port}", collector
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        collector.httpd.shutdown()


async def test_an_evaluate_image_call_reaches_the_collector_as_a_tool_span_with_model_spans_and_verdict_events(
        traced: tuple[str, Collector], fake_server: FakeModelServer) -> None:
    base, collector = traced
    fake_server.respond_with(replies)
    async with client_with_token(base + "/mcp", "tok-t") as client:
        agent = (await call(client, "create_agent", name="Judge-T", system_prompt="You are judge A."))["id"]
        run = await call(client, "evaluate_image", brief="a red square", images=[png_b64()])
    with anyio.fail_after(20):
        await collector.received("execute_tool evaluate_image")
    tool = next(s for s in collector.spans if s.name == "execute_tool evaluate_image")
    children = [s for s in collector.spans if s.parent_span_id == tool.span_id]
    model = attributes(children[0])
    event = tool.events[0]
    for span in (tool, *children):  # the trace as the collector received it (shown with -s)
        print(span.name, attributes(span), [(e.name, attributes(e)) for e in span.events])
    assert attributes(tool) == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "evaluate_image",
                                "judge_mcp.organization": "org-t", "judge_mcp.outcome": "ok"}
    assert [s.name for s in children] == ["chat gpt-fake"]
    assert {k: model[k] for k in ("gen_ai.operation.name", "gen_ai.system", "gen_ai.request.model")} == {
        "gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-fake"}
    assert model["gen_ai.usage.input_tokens"] > 0 and model["gen_ai.usage.output_tokens"] > 0
    assert event.name == "gen_ai.evaluation.result"
    assert {k: v for k, v in attributes(event).items() if k != "gen_ai.evaluation.explanation"} == {
        "gen_ai.evaluation.name": "Judge-T", "gen_ai.evaluation.score.value": run["ranking"][0]["aggregate_score"],
        "gen_ai.evaluation.score.label": "ok", "judge_mcp.judge.agent_id": agent,
        "judge_mcp.judge.prompt_id": "image_evaluation", "judge_mcp.judge.model": "gpt-fake",
        "judge_mcp.judge.image_index": "0"}


async def test_metrics_are_parsed_by_the_prometheus_parser_and_count_the_calls(
        traced: tuple[str, Collector], fake_server: FakeModelServer) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    base, _ = traced
    fake_server.respond_with(replies)
    async with client_with_token(base + "/mcp", "tok-t") as client:
        await call(client, "create_agent", name="Judge-M", system_prompt="You are judge A.")
        await call(client, "evaluate_image", brief="a red square", images=[png_b64()])
        await call(client, "evaluate_image", brief="a red square", images=[png_b64()])  # from the result cache
    async with httpx.AsyncClient(trust_env=False) as http:
        refused = await http.get(base + "/metrics", headers={"Authorization": "Bearer tok-t"})  # a caller's token
        scraped = await http.get(base + "/metrics", headers={"Authorization": "Bearer scrape-me"})
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(scraped.text) for s in family.samples}
    assert refused.status_code == 403
    assert samples[("judge_mcp_tool_calls_total", (("outcome", "ok"), ("tool", "evaluate_image")))] == 2
    assert samples[("judge_mcp_tool_call_seconds_count", (("tool", "evaluate_image"),))] == 2
    assert samples[("judge_mcp_model_requests_total", (("model", "openai:gpt-fake"),))] == 1
    assert samples[("judge_mcp_cache_hits_total", (("model", "openai:gpt-fake"),))] == 1
    assert samples[("judge_mcp_model_tokens_total", (("direction", "input"), ("model", "openai:gpt-fake")))] > 0
    assert samples[("judge_mcp_jobs", (("status", "working"),))] == 0


async def test_model_names_a_caller_invents_get_at_most_sixteen_labels_and_then_count_as_other(
        traced: tuple[str, Collector], fake_server: FakeModelServer) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from judges.telemetry import OTHER_MODELS

    base, _ = traced
    fake_server.respond_with(replies)
    invented = [f"openai:made-up-{i}" for i in range(24)]
    async with client_with_token(base + "/mcp", "tok-t") as client:
        await call(client, "create_agent", name="Judge-M", system_prompt="You are judge A.")
        for start in range(0, 24, 8):
            await call(client, "evaluate_image", brief="a red square", images=[png_b64()],
                       models=invented[start:start + 8])
        await call(client, "evaluate_image", brief="a blue square", images=[png_b64()])  # the configured model
    async with httpx.AsyncClient(trust_env=False) as http:
        scraped = await http.get(base + "/metrics", headers={"Authorization": "Bearer scrape-me"})
    requests = {s.labels["model"]: s.value for family in text_string_to_metric_families(scraped.text)
                for s in family.samples if s.name == "judge_mcp_model_requests_total"}
    assert requests == {**{m: 1 for m in invented[:OTHER_MODELS]}, "other": 24 - OTHER_MODELS,
                        "openai:gpt-fake": 1}


def test_without_an_otlp_endpoint_no_telemetry_package_is_imported() -> None:
    # (The opentelemetry API itself comes with the MCP SDK; the SDK, the exporter and prometheus-client are ours.)
    code = ("import sys, server.cli, server.app, server.errors, judges.store.metering; print(sorted(m for m in "
            "sys.modules if m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter', 'prometheus_client'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/",
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert out.stdout.strip() == "[]"


def test_a_tokenless_servers_metrics_answer_a_loopback_host_and_refuse_a_rebound_dns_name(tmp_path: Path) -> None:
    """Without tokens /metrics is open on loopback, but a page that rebinds its own name to 127.0.0.1 sends that name
    as Host: refused (403), as /mcp refuses it; 127.0.0.1 and localhost are served."""
    port = free_port()
    proc = subprocess.Popen([JUDGE_MCP, "--transport", "http", "--port", str(port)], cwd="/", env=server_env(
        tmp_path / "home", JUDGE_MCP_MODEL="demo", JUDGE_MCP_WARM_EMBEDDINGS="false"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for_port(port, 60)
        url = f"http://127.0.0.1:{port}/metrics"
        codes = [httpx.get(url, headers={"Host": host}).status_code
                 for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"evil.example:{port}", "evil.example")]
        assert codes == [200, 200, 403, 403]
    finally:
        proc.terminate()
        proc.wait(30)
