"""Units of long work, recorded as they finish, so a job can be continued by another process without asking
the model again: one calibrate_judge item, one rank_texts game, one evaluate_image judge x image.

A loop runs each unit through `once(key, Model, run)`. Outside a background job (no record in UNITS) that is
just `await run()`. In a job, the server's record (server/jobs.py JobUnits, stored in judges/store/jobs.py)
is asked first: a unit finished before a takeover is read back (the model is not asked), any other one runs
and its result is recorded when it finishes. Keys name the unit within its job and are the same every time the
same call is made again (its arguments are the job's own), e.g. "item 17", "game 2-5", "agent <id> image 0".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Protocol, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


class UnitRecord(Protocol):
    def finished(self, key: str) -> str | None:
        """The recorded result (JSON) of a unit finished earlier, else None."""

    async def start(self, key: str) -> None: ...

    async def finish(self, key: str, result: str) -> None: ...


UNITS: ContextVar[UnitRecord | None] = ContextVar("judge_mcp_units", default=None)


async def once(key: str, model: type[M], run: Callable[[], Awaitable[M]]) -> M:
    """The unit's result: read back when the job recorded it before, else `run()` (recorded when in a job)."""
    record = UNITS.get()
    if record is None:
        return await run()
    found = record.finished(key)
    if found is not None:
        return model.model_validate_json(found)
    await record.start(key)
    value = await run()
    await record.finish(key, value.model_dump_json())
    return value
