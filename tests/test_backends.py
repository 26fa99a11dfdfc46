"""Model backends through the real anthropic and openai SDKs, against the loopback fake server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import pytest
from pydantic import BaseModel

from judges.errors import ConfigError
from judges.models.guard import CallPolicy
from judges.models.protocol import ImagePart, Message, ModelClient, ModelRequest
from judges.models.registry import BackendConfig, ModelRegistry
from judges.reading.parsing import run_judge
from tests.fake_model_server import FakeModelServer, Scripted

pytestmark = pytest.mark.anyio

PNG_1x1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


class Score(BaseModel):
    score: int
    reason: str


def registry(fake: FakeModelServer, **policy: float) -> ModelRegistry:
    return ModelRegistry(
        "auto",
        BackendConfig(
            anthropic_api_key="sk-ant-test", anthropic_base_url=fake.anthropic_url,
            openai_api_key="sk-test", openai_base_url=fake.openai_url,
        ),
        CallPolicy(**{"deadline_s": 20.0, "max_retries": 2, "max_retry_wait_s": 5.0, "backoff_base_s": 0.01, **policy}),
        concurrency=4,
    )


def ask(text: str = "Judge this.") -> ModelRequest:
    return ModelRequest(system="You are a judge.", messages=[Message.user(text)], temperature=0.3, max_tokens=256)


BACKENDS = ["anthropic:claude-fake", "openai:gpt-fake", "openai-compatible:local-fake"]


@pytest.fixture
async def client_for(fake_server: FakeModelServer) -> AsyncIterator[Callable[..., ModelClient]]:
    """Builds clients on the fake server; closes their HTTP pools in the test's own event loop."""
    built: list[ModelRegistry] = []

    def make(fake: FakeModelServer, model: str, **policy: float) -> ModelClient:
        built.append(registry(fake, **policy))
        return built[-1].resolve(model)

    yield make
    for reg in built:
        await reg.aclose()


@pytest.mark.parametrize("model", BACKENDS)
async def test_json_reply_parses_and_records_usage(fake_server: FakeModelServer, model: str, client_for: Callable[..., ModelClient]) -> None:
    fake_server.enqueue(Scripted(text='{"score": 7, "reason": "fine"}', input_tokens=120, output_tokens=9, cached_tokens=4))
    judged = await run_judge(client_for(fake_server, model), ask(), Score)
    assert judged.value == Score(score=7, reason="fine")
    assert (judged.usage.input_tokens, judged.usage.output_tokens, judged.usage.cached_tokens) == (120, 9, 4)
    assert judged.latency_ms > 0
    assert judged.attempts == 1


@pytest.mark.parametrize("model", BACKENDS)
async def test_json_wrapped_in_prose_parses(fake_server: FakeModelServer, model: str, client_for: Callable[..., ModelClient]) -> None:
    fake_server.enqueue('Here is my verdict:\n```json\n{"score": 4, "reason": "blurry"}\n```\nHope this helps.')
    judged = await run_judge(client_for(fake_server, model), ask(), Score)
    assert judged.value == Score(score=4, reason="blurry")


@pytest.mark.parametrize("model", ["anthropic:claude-fake", "openai:gpt-fake"])
async def test_refusal_is_a_typed_failure_keeping_the_text(fake_server: FakeModelServer, model: str, client_for: Callable[..., ModelClient]) -> None:
    fake_server.enqueue(Scripted(text="I can't help with that.", stop="refusal"))
    judged = await run_judge(client_for(fake_server, model), ask(), Score)
    assert judged.value is None
    assert judged.failure is not None and judged.failure.kind == "refusal"
    assert judged.failure.raw_text == "I can't help with that."
    assert len(fake_server.requests) == 1


@pytest.mark.parametrize("model", BACKENDS)
async def test_reply_cut_at_max_tokens_is_truncated(fake_server: FakeModelServer, model: str, client_for: Callable[..., ModelClient]) -> None:
    fake_server.enqueue(Scripted(text='{"score": 8, "reason": "the lab', stop="max_tokens"))
    judged = await run_judge(client_for(fake_server, model), ask(), Score)
    assert judged.failure is not None and judged.failure.kind == "truncated"
    assert judged.failure.raw_text == '{"score": 8, "reason": "the lab'
    assert judged.value is None


@pytest.mark.parametrize("model", ["anthropic:claude-fake", "openai:gpt-fake"])
async def test_429_with_retry_after_is_waited_then_succeeds(fake_server: FakeModelServer, model: str, client_for: Callable[..., ModelClient]) -> None:
    fake_server.enqueue(
        Scripted(status=429, text="slow down", headers={"retry-after": "1"}),
        '{"score": 9, "reason": "ok"}',
    )
    judged = await run_judge(client_for(fake_server, model), ask(), Score)
    assert judged.value == Score(score=9, reason="ok")
    first, second = fake_server.requests
    assert second.at - first.at >= 0.95


@pytest.mark.parametrize("model", ["anthropic:claude-fake", "openai:gpt-fake"])
async def test_500_three_times_fails_after_bounded_retries(fake_server: FakeModelServer, model: str, client_for: Callable[..., ModelClient]) -> None:
    fake_server.enqueue(*[Scripted(status=500, text="boom")] * 3)
    judged = await run_judge(client_for(fake_server, model), ask(), Score)
    assert judged.failure is not None and judged.failure.kind == "backend_error"
    assert "500" in judged.failure.message
    assert len(fake_server.requests) == 3


async def test_529_overloaded_is_retried(fake_server: FakeModelServer, client_for: Callable[..., ModelClient]) -> None:
    fake_server.enqueue(Scripted(status=529, text="overloaded"), '{"score": 5, "reason": "meh"}')
    judged = await run_judge(client_for(fake_server, "anthropic:claude-fake"), ask(), Score)
    assert judged.value == Score(score=5, reason="meh")
    assert len(fake_server.requests) == 2


@pytest.mark.parametrize("model", ["anthropic:claude-fake", "openai:gpt-fake"])
async def test_authentication_error_is_not_retried(fake_server: FakeModelServer, model: str, client_for: Callable[..., ModelClient]) -> None:
    fake_server.enqueue(Scripted(status=401, text="bad key"), '{"score": 1, "reason": "x"}')
    judged = await run_judge(client_for(fake_server, model), ask(), Score)
    assert judged.failure is not None and f"the API key was rejected by {fake_server.anthropic_url if model.startswith('anthropic') else fake_server.openai_url}" in judged.failure.message
    assert len(fake_server.requests) == 1


async def test_spend_limit_429_is_not_retried(fake_server: FakeModelServer, client_for: Callable[..., ModelClient]) -> None:
    fake_server.enqueue(Scripted(status=429, text="quota", error_code="insufficient_quota"))
    judged = await run_judge(client_for(fake_server, "openai:gpt-fake"), ask(), Score)
    assert judged.failure is not None and "spend limit" in judged.failure.message
    assert len(fake_server.requests) == 1


async def test_retry_after_longer_than_allowed_fails_without_waiting(fake_server: FakeModelServer, client_for: Callable[..., ModelClient]) -> None:
    fake_server.enqueue(Scripted(status=429, text="later", headers={"retry-after": "3600"}))
    judged = await run_judge(client_for(fake_server, "openai:gpt-fake"), ask(), Score)
    assert judged.failure is not None and judged.failure.kind == "rate_limited"
    assert len(fake_server.requests) == 1


async def test_slow_reply_past_the_deadline_is_a_timeout(fake_server: FakeModelServer, client_for: Callable[..., ModelClient]) -> None:
    fake_server.enqueue(Scripted(text='{"score": 1, "reason": "late"}', delay_s=2.0))
    judged = await run_judge(client_for(fake_server, "openai:gpt-fake", deadline_s=0.5), ask(), Score)
    assert judged.failure is not None and judged.failure.kind == "timeout"


async def test_image_is_sent_as_an_anthropic_image_block(fake_server: FakeModelServer, client_for: Callable[..., ModelClient]) -> None:
    fake_server.enqueue('{"score": 6, "reason": "ok"}')
    request = ModelRequest(messages=[Message.user("Rate it.", ImagePart(media_type="image/png", data_base64=PNG_1x1))])
    await run_judge(client_for(fake_server, "anthropic:claude-fake"), request, Score)
    blocks = fake_server.requests[0].body["messages"][0]["content"]
    assert blocks[1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_1x1}}


async def test_image_is_sent_as_an_openai_image_url_part(fake_server: FakeModelServer, client_for: Callable[..., ModelClient]) -> None:
    fake_server.enqueue('{"score": 6, "reason": "ok"}')
    request = ModelRequest(messages=[Message.user("Rate it.", ImagePart(media_type="image/png", data_base64=PNG_1x1))])
    await run_judge(client_for(fake_server, "openai:gpt-fake"), request, Score)
    parts = fake_server.requests[0].body["messages"][0]["content"]
    assert parts[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_1x1}"}}


async def test_openai_request_asks_for_json_schema_structured_output(fake_server: FakeModelServer, client_for: Callable[..., ModelClient]) -> None:
    fake_server.enqueue('{"score": 6, "reason": "ok"}')
    await run_judge(client_for(fake_server, "openai:gpt-fake"), ask(), Score)
    fmt = fake_server.requests[0].body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["required"] == ["score", "reason"]


async def test_anthropic_request_asks_for_structured_output(fake_server: FakeModelServer, client_for: Callable[..., ModelClient]) -> None:
    fake_server.enqueue('{"score": 6, "reason": "ok"}')
    await run_judge(client_for(fake_server, "anthropic:claude-fake"), ask(), Score)
    assert fake_server.requests[0].body["output_config"]["format"]["type"] == "json_schema"


async def test_compatible_server_rejecting_json_schema_falls_back_to_json_object(fake_server: FakeModelServer, client_for: Callable[..., ModelClient]) -> None:
    # llama.cpp's server answers 500 to response_format json_schema but accepts json_object + schema.
    def llama_cpp(rec: object) -> Scripted:
        fmt = rec.body.get("response_format", {})  # type: ignore[attr-defined]
        if fmt.get("type") == "json_schema":
            return Scripted(status=500, text="json_schema is not supported")
        return Scripted(text='{"score": 3, "reason": "ok"}')

    fake_server.respond_with(llama_cpp)
    client = client_for(fake_server, "openai-compatible:local-fake")
    judged = await run_judge(client, ask(), Score)
    assert judged.value == Score(score=3, reason="ok")
    assert [r.body["response_format"]["type"] for r in fake_server.requests] == ["json_schema", "json_object"]
    assert fake_server.requests[1].body["response_format"]["schema"]["required"] == ["score", "reason"]
    await run_judge(client, ask(), Score)
    assert fake_server.requests[2].body["response_format"]["type"] == "json_object"  # remembered


async def test_concurrency_cap_bounds_calls_in_flight(fake_server: FakeModelServer, client_for: Callable[..., ModelClient]) -> None:
    import anyio

    reg = ModelRegistry("openai:gpt-fake", BackendConfig(openai_api_key="k", openai_base_url=fake_server.openai_url),
                        CallPolicy(), concurrency=2)
    request = ask()
    fake_server.respond_with(lambda rec: Scripted(text=json.dumps({"score": 1, "reason": "r"}), delay_s=0.3))
    client = reg.resolve()
    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(run_judge, client, request, Score)
    await reg.aclose()
    starts = sorted(r.at for r in fake_server.requests)
    assert starts[2] - starts[0] >= 0.25  # the third call waited for a slot


def test_auto_without_any_backend_names_the_variables() -> None:
    reg = ModelRegistry("auto", BackendConfig(), CallPolicy(), concurrency=1)
    with pytest.raises(ConfigError, match=r"ANTHROPIC_API_KEY.*OPENAI_API_KEY"):
        reg.resolve()


def test_auto_prefers_anthropic_then_openai_then_compatible() -> None:
    def pick(**cfg: str) -> str:
        return ModelRegistry("auto", BackendConfig(**cfg), CallPolicy(), 1).resolve().name

    assert pick(anthropic_api_key="a", openai_api_key="o") == "anthropic:claude-sonnet-4-5"
    assert pick(openai_api_key="o") == "openai:gpt-4.1-mini"
    assert pick(openai_base_url="http://127.0.0.1:1/v1") == "openai-compatible:default"


def test_explicit_backend_without_its_key_names_the_variable() -> None:
    reg = ModelRegistry("anthropic:claude-x", BackendConfig(openai_api_key="o"), CallPolicy(), 1)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        reg.resolve()


def test_unknown_model_string_is_rejected() -> None:
    with pytest.raises(ValueError, match="openai-compatible:<model>"):
        ModelRegistry("gemini:flash", BackendConfig(), CallPolicy(), 1)


@pytest.mark.parametrize(("call", "agent", "chosen"), [
    ("openai:call-model", "openai:agent-model", "call-model"),
    (None, "openai:agent-model", "agent-model"),
    (None, None, "default-model"),
    (None, "", "default-model"),  # '' is an agent whose override was cleared
])
def test_the_call_s_model_wins_then_the_agent_s_then_the_server_default(call: str | None, agent: str | None,
                                                                        chosen: str) -> None:
    reg = ModelRegistry("openai:default-model", BackendConfig(openai_api_key="o"), CallPolicy(), 1)
    client = reg.resolve(call, agent_model=agent)
    assert client.inner.model == chosen  # type: ignore[attr-defined]


async def test_a_first_call_waiting_for_the_warm_ups_lock_leaves_the_event_loop_serving(
        client_for: Callable[..., ModelClient], fake_server: FakeModelServer) -> None:
    """The SDK is built under HEAVY, which the warm-up holds while it loads the embedding model: the first
    call waits for it in a worker thread, and the event loop keeps answering other work meanwhile."""
    import itertools
    import threading
    import time

    import anyio

    from rag.warmup import HEAVY

    fake_server.enqueue(Scripted(text="fine"))
    client = client_for(fake_server, "openai:gpt-fake")
    held, release = threading.Event(), threading.Event()

    def warm_up() -> None:
        with HEAVY:
            held.set()
            release.wait(5)

    thread = threading.Thread(target=warm_up)
    thread.start()
    held.wait(5)
    ticks: list[float] = []
    reply = None

    async def first_call() -> None:
        nonlocal reply
        reply = await client.complete(ask())

    async with anyio.create_task_group() as tg:
        tg.start_soon(first_call)
        for _ in range(20):  # the loop keeps running while the call waits for the lock
            ticks.append(time.monotonic())
            await anyio.sleep(0.01)
        assert reply is None  # still waiting: the lock is held
        release.set()
    thread.join()
    assert reply is not None and reply.text == "fine"
    assert max(b - a for a, b in itertools.pairwise(ticks)) < 0.15


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_a_built_sdk_client_leaves_httpx_wholly_imported_for_the_sdks_later_requests(backend: str) -> None:
    """openai 3 reads sys.modules["httpx"] on each request without importing it: half imported by the warm-up's
    chromadb at that moment, a request failed. Building the SDK (under the heavy-import lock) imports it whole."""
    import subprocess
    import sys

    code = ("import sys\n"
            f"from judges.models.{backend}_client import {'OpenAIChatClient' if backend == 'openai' else 'AnthropicClient'}"
            " as C\n"
            "assert 'httpx' not in sys.modules\n"
            "C('m', api_key='k', base_url='http://127.0.0.1:9')._client()\n"
            "m = sys.modules['httpx']\n"
            "print(getattr(m.__spec__, '_initializing', False), m.Response.__name__)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "False Response"), done.stderr[-2000:]
