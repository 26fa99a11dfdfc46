"""Start fast: nothing heavy is imported by what the server loads to answer `initialize`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HEAVY = ("torch", "sentence_transformers", "chromadb", "anthropic", "openai", "transformers")

PROBE = f"""
import sys
from server.cli import main
from server.app import create_server
from server.settings import Settings
create_server(Settings(home={{home!r}}))
print(",".join(m for m in {HEAVY!r} if m in sys.modules))
"""


def test_building_the_server_imports_no_heavy_library(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(home=str(tmp_path))], capture_output=True, text=True, check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert out.stdout.strip() == ""
