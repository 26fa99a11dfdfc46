"""The result cache's table (judges/store/results.py): keys, organizations, the size cap and the time to live
(the table's tests on both engines: the `db` fixture)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from judges.models.protocol import ImagePart, Message, ModelReply, ModelRequest
from judges.store.database import Database, open_database
from judges.store.results import ResultCache, cache_key


def request(text: str = "judge this", sample: int = 0, image: bytes | None = None) -> ModelRequest:
    parts: list[str | ImagePart] = [text] + ([ImagePart.from_bytes(image, "image/png")] if image else [])
    return ModelRequest(system="You are a judge.", messages=[Message.user(*parts)], sample=sample)


def test_the_sample_index_is_part_of_the_key() -> None:
    assert cache_key("openai:m", request(sample=0)) != cache_key("openai:m", request(sample=1))


def test_another_images_bytes_give_another_key() -> None:
    assert cache_key("openai:m", request(image=b"\x89PNG one")) != cache_key("openai:m", request(image=b"\x89PNG two"))


def test_the_same_request_gives_the_same_key() -> None:
    assert cache_key("openai:m", request(image=b"x")) == cache_key("openai:m", request(image=b"x"))


def test_another_organization_does_not_read_the_entry(db: Database) -> None:
    cache = ResultCache(db, ttl_s=60, max_entries=10)
    cache.put("org-a", "k", "openai:m", ModelReply(text="7"))
    assert (cache.get("org-a", "k").text, cache.get("org-b", "k")) == ("7", None)  # type: ignore[union-attr]


def test_past_the_cap_the_oldest_entries_go(db: Database) -> None:
    cache = ResultCache(db, ttl_s=60, max_entries=2)
    for key in ("k1", "k2", "k3"):
        cache.put("org", key, "openai:m", ModelReply(text=key))
        time.sleep(0.002)  # distinct created_at (milliseconds)
    assert [cache.get("org", k) is not None for k in ("k1", "k2", "k3")] == [False, True, True]


def test_an_entry_older_than_the_ttl_is_not_reused(db: Database) -> None:
    ResultCache(db, ttl_s=60, max_entries=10).put("org", "k", "openai:m", ModelReply(text="7"))
    with db.transaction() as conn:
        conn.execute("UPDATE result_cache SET created_at='2000-01-01T00:00:00.000Z'")
    assert ResultCache(db, ttl_s=60, max_entries=10).get("org", "k") is None


def test_two_puts_of_one_key_at_once_keep_one_entry_without_an_error(db: Database, database_url: str | None,
                                                                      tmp_path: Path) -> None:
    """Two replicas (two connections to one database) store the same reply at once: the second put waits for
    the first's transaction, then replaces its entry."""
    other = open_database(database_url, tmp_path / "judge.sqlite3")
    errors: list[BaseException] = []

    def racing_put() -> None:
        try:
            ResultCache(other, ttl_s=60, max_entries=10).put("org", "k", "openai:m", ModelReply(text="second"))
        except BaseException as exc:
            errors.append(exc)

    racer = threading.Thread(target=racing_put)
    with db.transaction() as conn:  # the first put, inside its transaction
        conn.execute("INSERT INTO result_cache (organization_id, cache_key, model, reply, created_at) "
                     "VALUES (?,?,?,?,?)", ("org", "k", "openai:m", ModelReply(text="first").model_dump_json(),
                                            "2099-01-01T00:00:00.000Z"))
        racer.start()
        racer.join(timeout=1.0)  # the second put meets the first's uncommitted row (and waits for it)
    racer.join()
    other.close()
    rows = db.query("SELECT reply FROM result_cache WHERE organization_id=? AND cache_key=?", ("org", "k"))
    assert errors == []
    assert [ModelReply.model_validate_json(r["reply"]).text for r in rows] == ["second"]


def test_a_cache_write_that_fails_leaves_the_reading_standing_and_is_logged(
        db: Database, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    import anyio

    from judges.store.metering import Metering
    from judges.store.usage import UsageLedger
    from tests.scripted_model import ScriptedModel

    cache = ResultCache(db, ttl_s=3600, max_entries=100)
    metering = Metering(cache=cache, ledger=UsageLedger(db, None, {}))

    def broken_put(*args: object) -> None:
        raise ValueError("disk full")

    async def ask_and_accept() -> None:
        client = await metering.client(ScriptedModel.queue(["a verdict"]), "acme", "openai:gpt-x")
        reply = await client.complete(request())
        monkeypatch.setattr(cache, "put", broken_put)
        await client.accept([(request(), reply)])  # no exception: the verdict was read

    anyio.run(ask_and_accept)
    assert "the result cache could not keep a reply of openai:gpt-x: ValueError: disk full" in caplog.text
