"""Listed where people look (issue 35): server.json for the MCP registry and the Claude Desktop extension's
manifest, each checked against the fields its published schema documents as required, and one version number
(pyproject.toml) in both and in `judge-mcp --version`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import AliasChoices

from server.settings import Settings

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
SERVER_JSON = json.loads((REPO / "server.json").read_text())
MANIFEST = json.loads((REPO / "bundle" / "manifest.json").read_text())
JUDGE_MCP = str(Path(sys.executable).with_name("judge-mcp"))

# What the registry's server.schema.json (2025-09-29, modelcontextprotocol/registry
# docs/reference/server-json/server.schema.json) requires of a server with a PyPI package, restated.
INPUT = {"type": "object", "required": ["name", "description"],
         "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "isRequired": {"type": "boolean"},
                        "isSecret": {"type": "boolean"}, "default": {"type": "string"},
                        "format": {"enum": ["string", "number", "boolean", "filepath"]}}}
SERVER_SCHEMA = {
    "type": "object", "required": ["name", "description", "version"],
    "properties": {
        "$schema": {"const": "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json"},
        "name": {"type": "string", "minLength": 3, "maxLength": 200, "pattern": "^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$"},
        "title": {"type": "string", "minLength": 1, "maxLength": 100},
        "description": {"type": "string", "minLength": 1, "maxLength": 100},
        "version": {"type": "string", "maxLength": 255, "not": {"pattern": r"^[\^~<>=]|\.x$|\*"}},
        "packages": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["registryType", "identifier", "version", "transport"],
            "properties": {"registryType": {"enum": ["npm", "pypi", "nuget", "oci", "mcpb"]},
                           "identifier": {"type": "string", "minLength": 1},
                           "version": {"type": "string", "minLength": 1, "not": {"const": "latest"}},
                           "runtimeHint": {"type": "string"},
                           "transport": {"type": "object", "required": ["type"],
                                         "properties": {"type": {"enum": ["stdio", "streamable-http", "sse"]}}},
                           "environmentVariables": {"type": "array", "items": INPUT}}}},
    },
}
# What the MCPB manifest schema v0.4 (modelcontextprotocol/mcpb schemas/mcpb-manifest-v0.4.schema.json) requires
# of a python server, restated; like the published schema, no key it does not know.
MANIFEST_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["manifest_version", "name", "version", "description", "author", "server"],
    "properties": {
        "$schema": {"type": "string"}, "manifest_version": {"const": "0.4"}, "name": {"type": "string"},
        "display_name": {"type": "string"}, "version": {"type": "string"}, "description": {"type": "string"},
        "long_description": {"type": "string"}, "license": {"type": "string"},
        "keywords": {"type": "array", "items": {"type": "string"}}, "tools_generated": {"type": "boolean"},
        "author": {"type": "object", "required": ["name"], "additionalProperties": False,
                   "properties": {"name": {"type": "string"}, "email": {"type": "string"}, "url": {"type": "string"}}},
        "server": {"type": "object", "required": ["type", "entry_point", "mcp_config"], "additionalProperties": False,
                   "properties": {"type": {"enum": ["python", "node", "binary", "uv"]},
                                  "entry_point": {"type": "string"},
                                  "mcp_config": {"type": "object", "required": ["command"], "additionalProperties": False,
                                                 "properties": {"command": {"type": "string"},
                                                                "args": {"type": "array", "items": {"type": "string"}},
                                                                "env": {"type": "object",
                                                                        "additionalProperties": {"type": "string"}}}}}},
        "compatibility": {"type": "object", "additionalProperties": False, "properties": {
            "claude_desktop": {"type": "string"},
            "platforms": {"type": "array", "items": {"enum": ["darwin", "win32", "linux"]}},
            "runtimes": {"type": "object", "additionalProperties": False,
                         "properties": {"python": {"type": "string"}, "node": {"type": "string"}}}}},
        "user_config": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["type", "title", "description"], "additionalProperties": False,
            "properties": {"type": {"enum": ["string", "number", "boolean", "directory", "file"]},
                           "title": {"type": "string"}, "description": {"type": "string"},
                           "required": {"type": "boolean"}, "sensitive": {"type": "boolean"},
                           "multiple": {"type": "boolean"}, "min": {"type": "number"}, "max": {"type": "number"},
                           "default": {"type": ["string", "number", "boolean", "array"]}}}},
    },
}


def _setting_variables() -> set[str]:
    names = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names.add(alias.choices[0] if isinstance(alias, AliasChoices) else f"JUDGE_MCP_{name.upper()}")
    return names


def test_server_json_has_every_field_the_registry_schema_requires() -> None:
    jsonschema.validate(SERVER_JSON, SERVER_SCHEMA)


def test_server_json_names_pyprojects_package_description_and_version() -> None:
    (package,) = SERVER_JSON["packages"]
    assert (SERVER_JSON["description"], SERVER_JSON["version"]) == (PROJECT["description"], PROJECT["version"])
    assert (package["registryType"], package["identifier"], package["version"], package["transport"]) == (
        "pypi", PROJECT["name"], PROJECT["version"], {"type": "stdio"})


def test_server_json_lists_only_real_settings_and_marks_exactly_the_api_keys_secret() -> None:
    variables = SERVER_JSON["packages"][0]["environmentVariables"]
    assert [v["name"] for v in variables if v["name"] not in _setting_variables()] == []
    assert sorted(v["name"] for v in variables if v["isSecret"]) == ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]


def test_the_readme_carries_the_registry_name_pypi_ownership_is_checked_by() -> None:
    assert f"mcp-name: {SERVER_JSON['name']}" in (REPO / "README.md").read_text()


def test_the_bundle_manifest_has_every_field_the_mcpb_schema_requires() -> None:
    jsonschema.validate(MANIFEST, MANIFEST_SCHEMA)


def test_the_bundle_manifest_names_pyprojects_version_and_its_wheel() -> None:
    wheel = f"server/judge_mcp-{PROJECT['version']}-py3-none-any.whl"
    assert (MANIFEST["name"], MANIFEST["version"], MANIFEST["description"]) == (
        PROJECT["name"], PROJECT["version"], PROJECT["description"])
    assert MANIFEST["server"]["entry_point"] == wheel
    assert MANIFEST["server"]["mcp_config"]["args"] == ["--from", "${__dirname}/" + wheel, "judge-mcp"]


def test_the_bundle_passes_only_real_settings_and_keeps_the_api_keys_sensitive() -> None:
    env: dict[str, Any] = MANIFEST["server"]["mcp_config"]["env"]
    assert [name for name in env if name not in _setting_variables()] == []
    fields = {re.fullmatch(r"\$\{user_config\.(\w+)\}", value).group(1): name  # type: ignore[union-attr]
              for name, value in env.items()}
    assert set(fields) == set(MANIFEST["user_config"])
    assert sorted(fields[k] for k, v in MANIFEST["user_config"].items() if v.get("sensitive")) == [
        "ANTHROPIC_API_KEY", "OPENAI_API_KEY"]
    assert MANIFEST["user_config"]["allowed_directory"]["type"] == "directory"
    assert fields["allowed_directory"] == "JUDGE_MCP_ALLOWED_ROOTS"


def test_the_command_says_pyprojects_version() -> None:
    shown = subprocess.run([JUDGE_MCP, "--version"], capture_output=True, text=True, check=True, cwd="/")
    assert shown.stdout == f"judge-mcp {PROJECT['version']}\n"


def test_the_bundle_build_zips_the_manifest_and_the_wheel_it_names(tmp_path: Path) -> None:
    wheel = tmp_path / f"judge_mcp-{PROJECT['version']}-py3-none-any.whl"
    wheel.write_bytes(b"a wheel")
    subprocess.run([sys.executable, str(REPO / "bundle" / "build.py"), str(tmp_path)], check=True, capture_output=True)
    with zipfile.ZipFile(tmp_path / f"judge-mcp-{PROJECT['version']}.mcpb") as bundle:
        assert sorted(bundle.namelist()) == ["manifest.json", MANIFEST["server"]["entry_point"]]
        assert json.loads(bundle.read("manifest.json")) == MANIFEST


def test_the_bundle_build_without_the_wheel_says_how_to_build_it(tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, str(REPO / "bundle" / "build.py"), str(tmp_path)], capture_output=True,
                           text=True)
    wheel = tmp_path / f"judge_mcp-{PROJECT['version']}-py3-none-any.whl"
    assert (built.returncode, built.stderr) == (1, f"{wheel} is missing: `make wheel` builds it\n")
