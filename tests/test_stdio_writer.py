"""The stdio server's writer: a message that cannot be written as JSON answers its request with an error instead
of ending the server (the SDK's writer task died on it, and with it the process)."""

from __future__ import annotations

from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, JSONRPCNotification, JSONRPCResponse

from server.stdio import writable


def test_a_result_that_cannot_be_written_as_json_answers_its_request_with_an_internal_error() -> None:
    answer = writable(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=7, result={"text": "a\ud800b"})))
    assert isinstance(answer.message, JSONRPCError)
    assert (answer.message.id, answer.message.error.code) == (7, -32603)
    assert answer.message.error.message.startswith("Internal error: the result could not be written as JSON (")
    assert "surrogates not allowed" in answer.message.error.message
    answer.message.model_dump_json(by_alias=True, exclude_unset=True)  # and the answer itself can be written


def test_a_notification_that_cannot_be_written_as_json_is_dropped() -> None:
    note = SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/message",
                                              params={"data": "a\ud800b", "level": "info"}))
    assert writable(note) is None


def test_a_message_that_can_be_written_is_passed_on_unchanged() -> None:
    message = SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=1, result={"text": "é ✓"}))
    assert writable(message) is message
