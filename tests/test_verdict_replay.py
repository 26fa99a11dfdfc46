"""The verdict replay's loaders (bench/verdicts.py) on records written here; every real judge reply of the
corpora is replayed in tests_corpora/test_verdict_replay.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.verdicts import replay_corpus
from tests.fake_model_server import FakeModelServer


@pytest.mark.anyio
async def test_arena_hard_games_are_replayed_as_two_orders_with_their_margin(fake_server: FakeModelServer,
                                                                          tmp_path: Path) -> None:
    """The loader for Arena-Hard judgment files (game 1: baseline shown first, game 2 swapped)."""
    records = [{"question_id": "q", "model": "m", "games": [
        {"judgment": "My answer first...\nMy final verdict is: [[B>A]]", "score": "B>A"},
        {"judgment": "Assistant A is far better.\nMy final verdict is: [[A>>B]]", "score": "A>>B"}]},
        {"question_id": "r", "model": "m", "games": [
            {"judgment": "[[A>B]] for style, but [[B>>A]] overall", "score": None},
            {"judgment": "cut off befo", "score": None}]}]
    outcomes = await replay_corpus([("arena_games", records)], fake_server, tmp_path / "home")
    assert [(o.upstream, o.ours, o.read_as, o.failure) for o in outcomes] == [
        (("B", "slight"), ("B", "slight"), "convention:arena_hard", None),
        (("A", "strong"), ("A", "strong"), "convention:arena_hard", None),
        (None, None, None, "ambiguous"),
        (None, None, None, "parse_error")]
