"""The guideline store: exact in-memory search agrees with Chroma's query, and follows writes."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rag.chunking import Chunk
from rag.store import GuidelineStore, StoreError, collection_name

# Chroma cannot rebuild this test double from its config, and says so; that is expected here.
pytestmark = pytest.mark.filterwarnings("ignore:legacy embedding function config")


class TinyEmbedder:
    """Deterministic 3-d vectors, so similarities are known exactly."""

    id = "tiny"
    config = {"backend": "tiny", "model": "tiny", "cache_dir": ""}

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for t in texts:
            v = [float(t.count("red")), float(t.count("blue")), float(t.count("green")) + 0.1]
            n = math.sqrt(sum(x * x for x in v))
            out.append([x / n for x in v])
        return out


def chunks(*texts: str) -> list[Chunk]:
    return [Chunk(i, t, 0, len(t)) for i, t in enumerate(texts)]


@pytest.fixture
def store(tmp_path: Path) -> GuidelineStore:
    return GuidelineStore(TinyEmbedder(), path=tmp_path / "chroma")


def add(store: GuidelineStore, doc: str, *texts: str) -> None:
    store.add("agent-1", doc, f"{doc}.txt", chunks(*texts), store.embedder.embed(list(texts)))


def test_exact_search_agrees_with_chromas_query(store: GuidelineStore) -> None:
    add(store, "d1", "red red", "blue", "red blue", "green", "red green blue")
    exact = store.search("agent-1", "red", 3, 0.0)
    (vector,) = store.embedder.embed(["red"])
    with store._use() as client:
        chroma = store._query(store._collection(client, "agent-1", create=False), vector, 3, 0.0, None)
    assert [h.text for h in exact] == [h.text for h in chroma]
    assert [h.similarity for h in exact] == pytest.approx([h.similarity for h in chroma], abs=1e-3)


def test_new_chunks_are_found_after_a_search_was_cached(store: GuidelineStore) -> None:
    add(store, "d1", "blue")
    assert [h.text for h in store.search("agent-1", "red", 5, 0.5)] == []
    add(store, "d2", "red red")
    assert [h.text for h in store.search("agent-1", "red", 5, 0.5)] == ["red red"]


def test_deleted_document_is_not_found_after_a_search_was_cached(store: GuidelineStore) -> None:
    add(store, "d1", "red")
    assert store.search("agent-1", "red", 5, 0.5)
    store.delete_document("agent-1", "d1")
    assert store.search("agent-1", "red", 5, 0.5) == []


def test_only_the_allowed_documents_are_searched(store: GuidelineStore) -> None:
    add(store, "d1", "red")
    add(store, "d2", "red red")
    hits = store.search("agent-1", "red", 5, 0.0, document_ids=["d2"])
    assert [h.document_id for h in hits] == ["d2"]


def test_threshold_and_top_k_apply(store: GuidelineStore) -> None:
    add(store, "d1", "red", "red blue", "blue", "green")
    hits = store.search("agent-1", "red", 1, 0.5)
    assert [h.text for h in hits] == ["red"] and hits[0].similarity == pytest.approx(1.0, abs=1e-3)


def test_unknown_agent_has_no_chunks(store: GuidelineStore) -> None:
    assert store.search("nobody", "red", 5, 0.0) == []


def test_collection_names_are_valid_for_any_agent_id() -> None:
    assert collection_name("0b6a0f43-5d1c-4a6e-9a53-5bd1c1a8f9a2") == "agent-0b6a0f43-5d1c-4a6e-9a53-5bd1c1a8f9a2"
    odd = collection_name("../weird id!")
    assert odd.startswith("agent-") and odd.replace("-", "").isalnum()


class OtherEmbedder(TinyEmbedder):
    id = "other"


def test_a_collection_written_by_another_embedder_names_both_and_how_to_reindex(tmp_path: Path) -> None:
    add(GuidelineStore(TinyEmbedder(), path=tmp_path / "chroma"), "d1", "red")
    other = GuidelineStore(OtherEmbedder(), path=tmp_path / "chroma")
    with pytest.raises(StoreError) as caught:
        other.search("agent-1", "red", 5, 0.0)
    message = str(caught.value)
    assert "embedded with tiny (3 dimensions)" in message and "this server embeds with other" in message
    assert "delete_guideline each of the agent's documents and upload them again" in message


def test_a_collection_of_another_dimension_is_refused(store: GuidelineStore) -> None:
    add(store, "d1", "red")
    with pytest.raises(StoreError, match=r"\(3 dimensions\).*\(4 dimensions\)"):
        store.search_vector("agent-1", [0.5, 0.5, 0.5, 0.5], 5, 0.0)


def test_documents_of_another_embedder_can_still_be_deleted(tmp_path: Path) -> None:
    add(GuidelineStore(TinyEmbedder(), path=tmp_path / "chroma"), "d1", "red")
    other = GuidelineStore(OtherEmbedder(), path=tmp_path / "chroma")
    other.delete_document("agent-1", "d1")
    assert other.count("agent-1") == 0


def test_vectors_are_read_in_pages(tmp_path: Path) -> None:
    store = GuidelineStore(TinyEmbedder(), path=tmp_path / "chroma")
    store.PAGE = 2
    add(store, "d1", "red", "blue", "green", "red blue", "red green")
    hits = store.search("agent-1", "red", 10, 0.0)
    assert sorted(h.text for h in hits) == ["blue", "green", "red", "red blue", "red green"]


def test_an_agent_past_the_memory_budget_is_searched_through_chromas_index(tmp_path: Path) -> None:
    store = GuidelineStore(TinyEmbedder(), path=tmp_path / "chroma", cache_vectors=2)
    add(store, "d1", "red", "blue", "green", "red blue")
    hits = store.search("agent-1", "red", 2, 0.0)
    assert [h.text for h in hits] == ["red", "red blue"] and store._matrices == {}


WRITER = """
import math, sys
sys.path.insert(0, {root!r})
from rag.chunking import Chunk
from rag.store import GuidelineStore
from tests.test_store import TinyEmbedder
from pathlib import Path
store = GuidelineStore(TinyEmbedder(), path=Path({path!r}))
store.add("agent-1", "d2", "d2.txt", [Chunk(0, "red red", 0, 7)], TinyEmbedder().embed(["red red"]))
"""


def test_a_write_by_another_process_is_seen_by_the_next_search(store: GuidelineStore, tmp_path: Path) -> None:
    import subprocess
    import sys

    add(store, "d1", "blue")
    assert [h.text for h in store.search("agent-1", "red", 5, 0.5)] == []  # cached in memory now
    root = str(Path(__file__).resolve().parents[1])
    subprocess.run([sys.executable, "-c", WRITER.format(root=root, path=str(tmp_path / "chroma"))], check=True)
    assert [h.text for h in store.search("agent-1", "red", 5, 0.5)] == ["red red"]
    with store._use() as client:  # and Chroma's own index, reopened, has it too
        chroma = store._query(store._collection(client, "agent-1", create=False), store.embedder.embed(["red"])[0],
                              5, 0.5, None)
    assert [h.text for h in chroma] == ["red red"]
