"""The opt-in `hybrid-maxsim` retrieval (JUDGE_MCP_RETRIEVAL): the hybrid ranking's first 20 read again by the
packaged MiniLM's token vectors (MaxSim), fused with the hybrid order by reciprocal rank; `similarity` stays the
dense cosine."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rag.chunking import Chunk
from rag.store import GuidelineStore
from tests.mcp_helpers import call
from tests.test_store import TinyEmbedder
from tests.test_store_as_used import clean, files_of, judge_mcp, new_agent

pytestmark = pytest.mark.filterwarnings("ignore:legacy embedding function config")


class TokenEmbedder(TinyEmbedder):
    """TinyEmbedder with one token vector per text: a text holding the marker `mK` is at cosine K/10 from the
    query's token (the first axis); any other text is the query's token."""

    def token_vectors(self, texts: list[str]) -> list[object]:
        import numpy as np

        out = []
        for t in texts:
            k = next((int(w[1:]) for w in t.split() if w[:1] == "m" and w[1:].isdigit()), 10)
            out.append(np.array([[k / 10, math.sqrt(1 - (k / 10) ** 2), 0.0]], dtype=np.float32))
        return out


def searched(tmp_path: Path, mode: str) -> list[tuple[str, float]]:
    store = GuidelineStore(TokenEmbedder(), path=tmp_path / mode, mode=mode)
    texts = ["red red red m1", "red red m2 blue", "red m9 blue blue"]
    store.add("agent-1", "d1", "d1.txt", [Chunk(i, t, 0, len(t)) for i, t in enumerate(texts)],
              store.embedder.embed(texts))
    return [(h.text, h.similarity) for h in store.search("agent-1", "red", top_k=3, threshold=0.3)]


def test_hybrid_maxsim_fuses_the_hybrid_order_with_the_maxsim_order(tmp_path: Path) -> None:
    # Hybrid ranks the chunks 1, 2, 3 (most "red" first); MaxSim ranks them 3, 2, 1 (m9 > m2 > m1). Fused by
    # reciprocal rank: 1/61+1/63 for the first and the third, 2/62 for the second; the tie keeps hybrid's order.
    assert [t for t, _ in searched(tmp_path, "hybrid")] == ["red red red m1", "red red m2 blue", "red m9 blue blue"]
    assert [t for t, _ in searched(tmp_path, "hybrid-maxsim")] == [
        "red red red m1", "red m9 blue blue", "red red m2 blue"]


def test_hybrid_maxsim_keeps_similarity_the_dense_cosine(tmp_path: Path) -> None:
    assert dict(searched(tmp_path, "hybrid-maxsim")) == dict(searched(tmp_path, "hybrid"))


def test_hybrid_maxsim_with_an_embedder_without_token_vectors_is_refused_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"hybrid-maxsim needs the packaged MiniLM embedder .* tiny has none: "
                                         r"use hybrid"):
        GuidelineStore(TinyEmbedder(), path=tmp_path / "chroma", mode="hybrid-maxsim")


def test_token_vectors_are_unit_rows_one_per_token_without_special_tokens() -> None:
    from rag.embedding import OnnxInt8Embedder

    rows = OnnxInt8Embedder().token_vectors(["blue logo", "", "the clear space around the logo"])
    assert [r.shape for r in rows] == [(2, 384), (0, 384), (6, 384)]
    assert all(abs(float(n) - 1.0) < 1e-5 for r in rows for n in (r * r).sum(axis=1))


@pytest.mark.anyio
@pytest.mark.e2e
async def test_a_judge_mcp_with_hybrid_maxsim_finds_the_answering_chunk_first(tmp_path: Path) -> None:
    home = tmp_path / "home"
    guide = files_of(home) / "brand.txt"
    guide.parent.mkdir(parents=True)
    guide.write_text("\n\n".join([
        "Logo. Never stretch, rotate or recolour the logo. " * 12,
        "Clear space. Keep clear space around the logo equal to the height of the logo mark. " * 10,
        "Colour palette. The primary brand blue is HEX#488EFF and the dark blue is HEX#3274F9. " * 10,
        "Typography. Headings use a geometric sans serif and body text a humanist sans. " * 10]))
    async with judge_mcp(home, "maxsim", JUDGE_MCP_RETRIEVAL="hybrid-maxsim") as s:
        agent = await new_agent(s.client)
        await call(s.client, "upload_guideline", agent_id=agent, path=str(guide))
        found = (await call(s.client, "search_guidelines", agent_id=agent,
                            query="How much empty room must surround our mark?", top_k=3))["chunks"]
    assert len(found) == 3 and "Clear space" in found[0]["text"]
    assert all(0.0 <= c["similarity"] <= 1.0 for c in found)
    assert clean(s.stderr())


def test_hybrid_maxsim_with_the_sentence_transformers_backend_is_a_bad_setting_naming_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from tests.conftest import make_settings

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",  # the extra counts as installed: this check is the one tested
                        lambda name, *a: object() if name == "sentence_transformers" else found(name, *a))
    with pytest.raises(ValueError, match=r"JUDGE_MCP_RETRIEVAL=hybrid-maxsim reads the packaged MiniLM's token "
                                         r"vectors: it needs JUDGE_MCP_EMBEDDING_BACKEND=minilm-onnx-int8 \(the "
                                         r"default\); with sentence-transformers use JUDGE_MCP_RETRIEVAL=hybrid"):
        make_settings(tmp_path / "home", retrieval="hybrid-maxsim", embedding_backend="sentence-transformers")
