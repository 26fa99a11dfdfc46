"""The warm parse-worker pool: reused between documents, capped, killed on timeout, never reused after a bomb."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from rag.formats import DocumentError, Limits
from rag.worker import ParsePool
from tests import documents
from tests.test_formats import flate_bomb_pdf

LIMITS = Limits()


@pytest.fixture
def pool() -> Iterator[ParsePool]:
    p = ParsePool(1, memory_mb=512)
    yield p
    p.close()


def worker_pids(p: ParsePool) -> list[int | None]:
    return [w.proc.pid for w in p._idle]


def test_a_worker_stays_warm_for_the_next_document(pool: ParsePool) -> None:
    first = pool.parse(b"first text", "a.txt", LIMITS, timeout_s=30)
    pid = worker_pids(pool)
    second = pool.parse(documents.pdf([["Hello World"]]), "h.pdf", LIMITS, timeout_s=30)
    assert (first.text, second.text) == ("first text", "Hello World") and worker_pids(pool) == pid != []


def test_a_parse_past_its_budget_is_killed_and_the_next_one_gets_a_fresh_worker(pool: ParsePool) -> None:
    pool.parse(b"warm", "a.txt", LIMITS, timeout_s=30)
    (old,) = pool._idle
    with pytest.raises(DocumentError, match=r"longer than 0\.01 s"):
        pool.parse(documents.pdf([[f"line {n} of page {p}" for n in range(40)] for p in range(200)]), "long.pdf",
                   LIMITS, timeout_s=0.01)
    assert not old.proc.is_alive() and pool._idle == []
    assert pool.parse(b"after", "b.txt", LIMITS, timeout_s=30).text == "after"


def test_the_pool_still_parses_after_a_bomb(pool: ParsePool) -> None:
    with pytest.raises(DocumentError, match="decompression bomb"):
        pool.parse(flate_bomb_pdf(300_000_000), "bomb.pdf", LIMITS, timeout_s=20)
    assert pool.parse(b"after", "b.txt", LIMITS, timeout_s=30).text == "after"


def test_parses_beyond_the_pool_size_wait_their_turn(pool: ParsePool) -> None:
    results: list[str] = []

    def one(i: int) -> None:
        results.append(pool.parse(f"text {i}".encode(), f"{i}.txt", LIMITS, timeout_s=60).text)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["text 0", "text 1", "text 2"] and len(pool._idle) == 1
