"""The reading path's judging logic (repair, typed failures, terminal kinds) on the in-process
scripted model: no HTTP. The SDK paths are tested in test_backends.py against the loopback fake."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import BaseModel

from judges.errors import BackendError, FailureKind
from judges.models.protocol import Message, ModelReply, ModelRequest
from judges.reading.parsing import run_judge
from judges.reading.verdicts import VerdictError
from tests.scripted_model import ScriptedModel

pytestmark = pytest.mark.anyio


class Score(BaseModel):
    score: int
    reason: str


def ask(text: str = "Judge this.") -> ModelRequest:
    return ModelRequest(system="You are a judge.", messages=[Message.user(text)], max_tokens=256)


@pytest.mark.parametrize("kind", get_args(FailureKind))
async def test_a_backend_error_becomes_a_failure_of_its_own_kind(kind: FailureKind) -> None:
    error = BackendError(kind, f"backend says {kind}")
    error.requests = 3
    judged = await run_judge(ScriptedModel(lambda request: error), ask(), Score)
    assert judged.value is None and judged.failure is not None
    assert (judged.failure.kind, judged.failure.message) == (kind, f"backend says {kind}")
    assert judged.usage.requests == 3  # the guard's retries are counted, not lost


async def test_invalid_reply_gets_one_repair_round_with_the_error() -> None:
    model = ScriptedModel.queue(['{"score": "high"}', '{"score": 8, "reason": "fixed"}'])
    judged = await run_judge(model, ask(), Score)
    assert judged.value == Score(score=8, reason="fixed")
    assert (judged.attempts, judged.read_as) == (2, "repair")
    repair = model.requests[1].messages
    assert repair[-2] == Message.assistant('{"score": "high"}')
    assert "score" in model.last_text() and "reason" in model.last_text()


async def test_invalid_reply_twice_is_a_parse_error_keeping_the_raw_text() -> None:
    judged = await run_judge(ScriptedModel.queue(["no json here", "still none"]), ask(), Score)
    assert judged.failure is not None and judged.failure.kind == "parse_error"
    assert judged.failure.raw_text == "still none"
    assert judged.raw_texts == ["no json here", "still none"] and judged.value is None


async def test_a_refusal_in_prose_is_a_refusal_and_is_not_asked_again() -> None:
    model = ScriptedModel.queue(["I'm sorry, I can't grade this image."])
    judged = await run_judge(model, ask(), Score)
    assert judged.failure is not None and judged.failure.kind == "refusal"
    assert len(model.requests) == 1


async def test_a_value_off_its_scale_is_terminal_not_repaired() -> None:
    def on_scale(value: Score) -> None:
        if not 0 <= value.score <= 10:
            raise VerdictError(f"score {value.score} is off the 0–10 scale", "out_of_range")

    model = ScriptedModel.queue(['{"score": 11, "reason": "great"}'])
    judged = await run_judge(model, ask(), Score, check=on_scale)
    assert judged.failure is not None and judged.failure.kind == "out_of_range"
    assert len(model.requests) == 1


async def test_a_reply_cut_at_max_tokens_is_truncated_naming_the_limit() -> None:
    cut = ModelReply(text='{"score": 8, "reason": "the lab', stop_reason="max_tokens")
    judged = await run_judge(ScriptedModel(lambda request: cut), ask(), Score)
    assert judged.failure is not None and judged.failure.kind == "truncated"
    assert "max_tokens (256)" in judged.failure.message


async def test_the_output_schema_is_asked_for_as_structured_output() -> None:
    model = ScriptedModel.queue(['{"score": 5, "reason": "ok"}'])
    await run_judge(model, ask(), Score)
    schema = model.requests[0].json_schema
    assert schema is not None and schema["required"] == ["score", "reason"]
