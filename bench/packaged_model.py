"""The packaged embedding model's vectors on the shared corpora's text (PDF, DOCX and the retrieval documents,
chunked as uploads are): cosine to a reference int8 ONNX model (e.g. the one a previous version exported at
run time into its model cache) and to the fp32 sentence-transformers model (needs the extra).

Usage: python bench/packaged_model.py [reference.onnx]   (corpora: JUDGE_TEST_CORPORA or ../shared/corpora)
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
CORPORA = Path(os.environ.get("JUDGE_TEST_CORPORA") or ROOT.parent / "shared" / "corpora")
SKIPPED = ("LICENSE", "NOTICE", "README", "EXPECTED")


def corpus_chunks() -> list[str]:
    from rag.chunking import chunk_text
    from rag.formats import Limits, parse

    chunks = []
    for folder in ("pdf", "docx", "retrieval"):
        for path in sorted((CORPORA / folder).iterdir()):
            if path.suffix.lower() not in (".pdf", ".docx", ".md", ".txt", ".html") or path.name.startswith(SKIPPED):
                continue
            try:
                text = parse(path.read_bytes(), path.name, Limits()).text
            except Exception:  # the corpora hold files meant to fail (encrypted, image-only)
                continue
            chunks += [c.text for c in chunk_text(text, 1000, 200)]
    return chunks


def main() -> None:
    import numpy as np

    from rag.embedding import MINILM_DIR, OnnxInt8Embedder, SentenceTransformerEmbedder

    if not CORPORA.is_dir():
        raise SystemExit(f"no corpora at {CORPORA}: set JUDGE_TEST_CORPORA")
    chunks = corpus_chunks()
    packaged = np.array(OnnxInt8Embedder().embed(chunks))
    references = {"fp32 sentence-transformers": SentenceTransformerEmbedder}
    with tempfile.TemporaryDirectory() as work:
        if len(sys.argv) > 1:  # a reference model beside the packaged tokenizer files
            for name in ("tokenizer.json", "config.json", "sentence_bert_config.json"):
                os.symlink(MINILM_DIR / name, Path(work) / name)
            os.symlink(Path(sys.argv[1]).resolve(), Path(work) / "model.onnx")
            vectors = {sys.argv[1]: np.array(OnnxInt8Embedder(model_dir=Path(work)).embed(chunks))}
        else:
            vectors = {}
        vectors |= {name: np.array(make().embed(chunks)) for name, make in references.items()}
    for name, ref in vectors.items():
        cos = (packaged * ref).sum(axis=1)
        print(f"packaged int8 vs {name}: {len(chunks)} chunks, cosine min {cos.min():.4f}, mean {cos.mean():.4f}")


if __name__ == "__main__":
    main()
