"""The pieces under tests/test_caller_text.py, each alone: image URLs pinned and bounded, the store refusing NUL
bytes on both engines, JSON Schema references kept inside the schema, nesting and NUL checks, the sandbox."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import prompts
from judges.analysis.judge import _outside_references, d2_schema_compliance
from judges.errors import InputError
from judges.inputs import caller_values, images
from judges.inputs.images import ImagePolicy
from judges.store.agents import AgentStore
from tests.test_caller_text import Listener

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478"
                    "9c6360000002000154a24f5d0000000049454e44ae426082")


@pytest.fixture
def listener() -> Iterator[Listener]:
    found = Listener()
    yield found
    found.close()


# --- image URLs (operator-enabled) ----------------------------------------------------------------------------

def test_an_image_url_is_fetched_from_the_address_checked_not_a_second_lookup(
        monkeypatch: pytest.MonkeyPatch, listener: Listener) -> None:
    """DNS rebinding: the first answer is public, a second would be 127.0.0.1; only one lookup is made."""
    answers = iter([("93.184.216.34", listener.port)] + [("127.0.0.1", listener.port)] * 10)
    lookups: list[str] = []

    def getaddrinfo(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host.replace(".", "").isdigit():  # an address already: no lookup (as the real one)
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (host, int(port)))]
        lookups.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", next(answers))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    with pytest.raises(InputError, match="fetching the image failed"):
        images.read_image_bytes(f"http://rebind.example:{listener.port}/a.png",
                                ImagePolicy(allowed_roots=[], allow_urls=True, url_timeout_s=2))
    time.sleep(0.2)
    assert lookups == ["rebind.example"] and listener.received == []


@pytest.mark.parametrize("address", ["127.0.0.1", "::ffff:127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::", "169.254.169.254",
                                     "100.64.0.1", "224.0.0.1"])
def test_an_image_url_resolving_to_a_private_address_is_refused(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [(family, socket.SOCK_STREAM, 6, "", (address, 80))])
    with pytest.raises(InputError, match=r"image URLs must point to public addresses; host\.example resolves to"):
        images.read_image_bytes("http://host.example/a.png", ImagePolicy(allowed_roots=[], allow_urls=True))


@pytest.fixture
def dripping() -> Iterator[str]:
    """A server that sends an image's headers, then one byte every 0.2 s for a minute."""
    class Drip(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            try:
                for byte in (PNG * 1000)[:300]:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/slow.png"
    httpd.shutdown()


def test_a_slow_image_download_stops_at_its_total_deadline(monkeypatch: pytest.MonkeyPatch, dripping: str) -> None:
    monkeypatch.setattr(images, "_public", lambda ip: True)  # the dripping server is on loopback
    started = time.monotonic()
    with pytest.raises(InputError, match="fetching the image took longer than 1 s"):
        images.read_image_bytes(dripping, ImagePolicy(allowed_roots=[], allow_urls=True, url_timeout_s=1.0))
    assert time.monotonic() - started < 2.5


def test_image_downloads_in_flight_are_capped(monkeypatch: pytest.MonkeyPatch, dripping: str) -> None:
    monkeypatch.setattr(images, "_public", lambda ip: True)
    policy = ImagePolicy(allowed_roots=[], allow_urls=True, url_timeout_s=2.0)
    def slow() -> None:
        with pytest.raises(InputError):
            images.read_image_bytes(dripping, policy)

    threads = [threading.Thread(target=slow) for _ in range(images.MAX_FETCHES)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    started = time.monotonic()
    with pytest.raises(InputError, match=f"{images.MAX_FETCHES} image downloads are already in progress"):
        images.read_image_bytes(dripping, policy)
    assert time.monotonic() - started < 0.1
    for t in threads:
        t.join()


# --- the store refuses NUL bytes alike on both engines ---------------------------------------------------------

def test_the_store_refuses_a_nul_byte_on_both_engines(db: Any) -> None:
    agents = AgentStore(db)
    with pytest.raises(InputError, match=r"contains a NUL byte \(\\x00\) and cannot be stored"):
        agents.create("org", name="a\x00b", system_prompt="x")
    with pytest.raises(InputError, match="NUL byte"):
        db.query("SELECT id FROM agents WHERE name=?", ("\x00",))
    assert agents.list("org") == []


def test_a_message_the_server_writes_keeps_a_nul_byte_as_text_on_both_engines(db: Any) -> None:
    from judges.store.jobs import JobStore

    jobs = JobStore(db)
    job = jobs.create("org", "upload_guideline")
    jobs.progress(job.job_id, 1, 2, "read b'\x00\x01'")
    jobs.finish(job.job_id, "failed", error="parse failed at b'\x00'")
    stored = jobs.get("org", job.job_id)
    assert (stored.message, stored.error) == ("read b'\\x00\x01'", "parse failed at b'\\x00'")


# --- JSON Schema references stay inside the schema ---------------------------------------------------------------

@pytest.mark.parametrize("schema", [
    {"$defs": {"a": {"type": "string"}}, "$ref": "#/$defs/a"},
    {"$defs": {"a": {"$anchor": "here", "type": "string"}}, "$ref": "#here"},
    {"$id": "https://example.com/root.json", "$defs": {"a": {"$id": "a.json"}}, "$ref": "a.json"},
    {"$ref": "https://json-schema.org/draft/2020-12/schema"},
    {"const": {"$ref": "https://example.com/data-not-a-reference"}},
], ids=["pointer", "anchor", "a subschema's $id", "a shipped meta-schema", "data under const"])
def test_references_inside_the_schema_are_kept(schema: dict[str, Any]) -> None:
    assert list(_outside_references(schema)) == []
    d2_schema_compliance("x", schema)  # validates, nothing fetched


@pytest.mark.parametrize("schema, where, ref", [
    ({"$ref": "file:///etc/passwd"}, "schema.$ref", "file:///etc/passwd"),
    ({"items": [{"$ref": "other.json#/a"}]}, "schema.items[0].$ref", "other.json#/a"),
    ({"$id": "https://example.com/", "properties": {"a": {"$ref": "https://evil.example/x"}}},
     "schema.properties.a.$ref", "https://evil.example/x"),
])
def test_a_reference_outside_the_schema_is_named(schema: dict[str, Any], where: str, ref: str) -> None:
    assert list(_outside_references(schema)) == [(where, ref)]
    with pytest.raises(InputError, match=re.escape(f"{where}: the reference {ref!r} points outside the given schema")):
        d2_schema_compliance({}, schema)


# --- nesting and NUL bytes, checked without recursion ----------------------------------------------------------

def test_a_nul_byte_in_a_key_is_named() -> None:
    with pytest.raises(InputError, match=r"^data\.a\[1\]: the key 'k\\x00' contains a NUL byte"):
        caller_values.check_value({"a": [1, {"k\x00": 1}]}, "data")


@pytest.mark.parametrize("value", [True, 3, 2.5, None, "text", [], {}])
def test_a_plain_value_passes(value: Any) -> None:
    assert caller_values.check_value(value, "v", budget=10) is True


def test_a_large_argument_is_left_for_a_worker_thread_at_once() -> None:
    """The event loop's share (a budget of 2,000 items, as server/app.py asks) stays small however big the value."""
    value = {"rows": [{"a": "b", "c": [1, 2]} for _ in range(200_000)]}
    started = time.perf_counter()
    assert caller_values.check_value(value, "analysis", budget=2000) is False
    assert time.perf_counter() - started < 0.01
    caller_values.check_value(value, "analysis")  # and whole, it passes


def test_nesting_at_the_limit_passes_and_one_more_is_refused() -> None:
    value: Any = 1
    for _ in range(caller_values.MAX_DEPTH):
        value = [value]
    caller_values.check_value(value, "v")
    with pytest.raises(InputError, match="nested more than 64 levels deep"):
        caller_values.check_value([value], "v")


def test_json_text_too_deep_for_the_parser_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"^analysis: nested more than 64 levels deep"):
        caller_values.loads("{\"a\":" * 100_000 + "1" + "}" * 100_000, "analysis")


def test_a_lone_surrogate_escape_in_json_text_is_an_input_error() -> None:
    # "\ud800" alone decodes to no character: no encoder (SQLite, the JSON reply, a model's request) can send it.
    with pytest.raises(InputError) as refused:
        caller_values.loads('{"id": "q1", "text": "caf\\udc80 menu"}', "dataset line 3")
    assert str(refused.value) == ("dataset line 3.text: holds a lone UTF-16 surrogate escape (\\udc80 without its "
                                  "pair, after 'caf'): it is no character and cannot be stored or sent; remove "
                                  "it, or write the character itself")


def test_a_surrogate_pair_escape_reads_as_its_character() -> None:
    assert caller_values.loads('{"text": "\\ud83d\\ude00 and \\\\ud800"}', "dataset line 1") == \
        {"text": "\U0001f600 and \\ud800"}


# --- templates render sandboxed ---------------------------------------------------------------------------------

def test_a_template_cannot_reach_python_internals(tmp_path: Path) -> None:
    canary = tmp_path / "made"
    template = prompts.from_text("{{ cycler.__init__.__globals__.os.makedirs('" + str(canary) + "') }}", "t")
    with pytest.raises(prompts.PromptError, match="unsafe"):
        template.render()
    assert not canary.exists()


def test_a_shipped_asset_renders_in_the_sandbox_too() -> None:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from prompts.loader import _compiled

    assert isinstance(_compiled("code/judge@v1").environment, ImmutableSandboxedEnvironment)
