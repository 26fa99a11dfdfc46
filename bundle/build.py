"""`make bundle`: the Claude Desktop extension, dist/judge-mcp-<version>.mcpb (a zip: manifest.json and the wheel).

The host runs the wheel it carries with `uvx` (bundle/manifest.json's mcp_config). The version is pyproject.toml's:
the manifest must say the same, and name the wheel of that version, or this stops saying which line to change.
"""

from __future__ import annotations

import json
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(dist: Path) -> Path:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    manifest_path = ROOT / "bundle" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    wheel = f"judge_mcp-{version}-py3-none-any.whl"
    entry = f"server/{wheel}"
    if manifest["version"] != version or manifest["server"]["entry_point"] != entry \
            or f"${{__dirname}}/{entry}" not in manifest["server"]["mcp_config"]["args"]:
        raise SystemExit(f"{manifest_path}: version, entry_point and mcp_config.args must name version {version} "
                         f"(pyproject.toml) and {entry}")
    built = dist / wheel
    if not built.is_file():
        raise SystemExit(f"{built} is missing: `make wheel` builds it")
    out = dist / f"judge-mcp-{version}.mcpb"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.write(manifest_path, "manifest.json")
        bundle.write(built, entry)
    return out


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "dist"), file=sys.stderr)
