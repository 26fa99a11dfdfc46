"""The packaged embedding model (issue 35): int8 ONNX in rag/minilm/, built at wheel build time, loaded by
onnxruntime with no torch, its Apache-2.0 license beside it; every non-Python file of the packages in the wheel."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rag.embedding import MINILM_DIR, OnnxInt8Embedder, SentenceTransformerEmbedder

REPO = Path(__file__).resolve().parents[1]


def test_the_onnx_backend_embeds_with_the_packaged_model_into_unit_384_vectors() -> None:
    (vector,) = OnnxInt8Embedder().embed(["Never stretch the logo."])
    assert len(vector) == 384
    assert sum(x * x for x in vector) == pytest.approx(1.0, abs=1e-5)


def test_a_missing_packaged_model_says_how_to_build_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as raised:
        OnnxInt8Embedder(model_dir=tmp_path).embed(["x"])
    assert str(raised.value) == (
        f"the packaged embedding model {tmp_path / 'model.onnx'} is missing: in a checkout, `make install` builds it "
        "(or `python -m rag.onnx_export` with the sentence-transformers extra installed); an installed judge-mcp "
        "carries it in its wheel (reinstall it)")


def test_the_sentence_transformers_backend_without_its_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if the extra were not installed
    with pytest.raises(ValueError) as raised:
        SentenceTransformerEmbedder("packaged").embed(["x"])
    assert str(raised.value) == (
        "JUDGE_MCP_EMBEDDING_BACKEND=sentence-transformers needs the sentence-transformers extra: pip install "
        "'judge-mcp[sentence-transformers]' (uvx --from 'judge-mcp[sentence-transformers]' judge-mcp)")


def test_the_packaged_model_has_its_apache_license_and_notice_beside_it() -> None:
    license_text = (MINILM_DIR / "LICENSE").read_text()
    assert license_text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "all-MiniLM-L6-v2" in (MINILM_DIR / "NOTICE").read_text()


def test_the_wheel_carries_the_model_its_license_and_every_tracked_non_python_file(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path), str(REPO)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("judge_mcp-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    model = {f"rag/minilm/{n}" for n in ("model.onnx", "tokenizer.json", "config.json", "sentence_bert_config.json",
                                         "LICENSE", "NOTICE")}
    assert model <= names
    tracked = subprocess.run(["git", "ls-files", "server", "judges", "rag", "prompts"], cwd=REPO, check=True,
                             capture_output=True, text=True).stdout.split()
    data = [t for t in tracked if not t.endswith(".py")]
    assert data and [t for t in data if t not in names] == []


def test_the_sentence_transformers_backend_without_its_extra_stops_the_start_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from server.settings import load_settings

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if the extra were not installed
    monkeypatch.setenv("JUDGE_MCP_EMBEDDING_BACKEND", "sentence-transformers")
    with pytest.raises(SystemExit) as stopped:
        load_settings()
    assert str(stopped.value) == (
        "judge-mcp: bad setting\n  JUDGE_MCP_EMBEDDING_BACKEND: Value error, sentence-transformers is not installed: it comes "
        "with the extra, pip install 'judge-mcp[sentence-transformers]' (uvx --from "
        "'judge-mcp[sentence-transformers]' judge-mcp); or leave it unset (minilm-onnx-int8, the packaged model)")
