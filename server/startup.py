"""What keeps start-up fast: tool modules imported, tools and resource templates built, and resources and
prompts registered, when first needed; and the tools/list answer kept in the data home between starts.

Building a tool (the SDK's `Tool.from_function`: pydantic builds its argument model and its input and
output JSON schemas) costs 5–15 ms per tool, ~120 ms for all of them, and was the largest part of the
time from spawn to the first tools/list. So a tool is registered as a recipe and built on its first
call; tools/list is answered from `<home>/cache/tools-<key>.json`, written by the first start that had
to build them all. The key hashes every source file of the server and the judges (and the Python, mcp
and pydantic versions): any change to the code gives a new key, so a stale listing is never served.

The next largest part was importing the tool modules (server/*_tools.py and the judges they import, ~60
modules of pydantic models). The cached listing also says which module registers which tool, so a start
that has it imports none of them: a tool's module is imported (in a worker thread, off the event loop)
when the tool is first called, and every module a moment after start (`warm_delay_s`, in the background).
Tool modules import nothing heavy (tests/test_startup.py checks), so importing one beside the warm-up's
heavy imports needs no `rag.warmup.HEAVY`; one lock keeps two threads from loading modules at once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.tools import Tool
from mcp.types import Tool as MCPTool

from .views.apps import tool_meta

log = logging.getLogger("judge_mcp")
PACKAGES = ("server", "judges", "rag", "prompts")


def listing_key(root: Path | None = None) -> str:
    """A digest of what the tool schemas are made from: our sources (under `root`, default this checkout or
    install) and the versions that build them."""
    import mcp
    import pydantic

    digest = hashlib.sha256(f"{sys.version}|{getattr(mcp, '__version__', '')}|{pydantic.VERSION}".encode())
    root = root or Path(__file__).resolve().parents[1]
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:24]


class ToolCatalog:
    """Every tool of the server: declared by its module (through `MCPServer.add_tool`, which JudgeServer
    records here), built (the SDK's public `Tool.from_function`) on first use (a call, or a tools/list with no
    cached answer); and the tool modules, when a cached listing names their tools, imported on first use too.
    Not an SDK manager: JudgeServer lists and calls the tools it holds through the public `Tool` API."""

    def __init__(self, warn_on_duplicate_tools: bool = True) -> None:
        self.warn_on_duplicate_tools = warn_on_duplicate_tools
        self._tools: dict[str, Tool] = {}
        self._recipes: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {}
        self.names: list[str] = []  # in registration order, built or not (and, from a cached listing, loaded or not)
        self.module_of: dict[str, str | None] = {}  # tool name → the module that registers it
        self._unloaded: dict[str, Callable[[], None]] = {}  # module → what registers its tools, not run yet
        self._promised: set[str] = set()  # names a cached listing gave modules not loaded yet
        self._from_listing: set[str] = set()  # the modules whose names came from a cached listing
        self._loading: str | None = None  # the module whose registration runs now
        self.stale = False  # a module registered other tools than the cached listing said: list from the code
        self._build_lock = threading.Lock()
        self._load_lock = threading.RLock()

    def add_module(self, module: str, register: Callable[[], None], tools: list[str] | None = None) -> None:
        """The tools `register()` registers (it imports `module` and registers them): registered now, or,
        given the names it registers (from a cached listing), listed now and registered on first use."""
        self._unloaded[module] = register
        if tools is None:
            self.load_module(module)
            return
        self._from_listing.add(module)
        for name in tools:
            if name not in self.module_of:
                self.module_of[name] = module
                self._promised.add(name)
                self.names.append(name)

    def add_tool(self, fn: Callable[..., Any], name: str | None = None, **kwargs: Any) -> None:
        """Declare a tool (`Tool.from_function`'s arguments): built on first use."""
        key = name or fn.__name__
        if key in self._promised and self.module_of.get(key) == self._loading:
            self._promised.discard(key)  # the slot a cached listing kept for it
        elif key in self.names:  # as the SDK's ToolManager: the first registration stays
            if self.warn_on_duplicate_tools:
                log.warning("Tool already exists: %s", key)
            return
        else:
            self.names.append(key)
            self.module_of[key] = self._loading
            if self._loading in self._from_listing:
                self.stale = True  # a tool the cached listing does not have
        self._recipes[key] = (fn, {"name": name, **kwargs, "meta": tool_meta(key, kwargs.get("meta"))})

    def remove_tool(self, name: str) -> None:
        """Forget a tool (as `MCPServer.remove_tool`: ToolError when there is none)."""
        from mcp.server.mcpserver.exceptions import ToolError

        self.get_tool(name)
        with self._build_lock:
            if name not in self.names:
                raise ToolError(f"Unknown tool: {name}")
            self.names.remove(name)
            self._tools.pop(name, None)
            self._recipes.pop(name, None)
            self.module_of.pop(name, None)

    def load_module(self, module: str) -> None:
        """Import `module` and register its tools, once (the other threads wait for it meanwhile)."""
        with self._load_lock:
            register = self._unloaded.pop(module, None)
            if register is None:
                return
            started = time.perf_counter()
            self._loading = module
            try:
                register()
            except BaseException:
                self._unloaded[module] = register  # the next use meets the same error, not "unknown tool"
                raise
            finally:
                self._loading = None
            missing = [n for n in self.names if n in self._promised and self.module_of.get(n) == module]
            if missing:
                log.warning("the cached tool listing names %s, which %s does not register: listing from the code",
                            ", ".join(missing), module)
                self.stale = True
                for name in missing:
                    self._promised.discard(name)
                    self.names.remove(name)
                    del self.module_of[name]
            log.debug("tool module %s loaded in %.0f ms", module, (time.perf_counter() - started) * 1000)

    def load_all(self) -> None:
        """Every tool module not loaded yet (the tools themselves are still built on first use)."""
        with self._load_lock:  # and none half loaded by another thread
            for module in list(self._unloaded):
                self.load_module(module)

    @property
    def unloaded(self) -> list[str]:
        return list(self._unloaded)

    def modules(self) -> dict[str, list[str]] | None:
        """Each module's tools in registration order; None when a tool was registered by no module."""
        modules: dict[str, list[str]] = {}
        for name in self.names:
            module = self.module_of.get(name)
            if module is None:
                return None
            modules.setdefault(module, []).append(name)
        return modules

    def ready(self, name: str) -> bool:
        """True when getting `name` neither imports a module nor builds a tool."""
        return name not in self._promised and name not in self._recipes

    def _build(self, name: str) -> None:
        with self._build_lock:
            # The recipe stays until the tool is in place: a concurrent first call that finds it waits here for
            # the build (popped first, that call found neither and answered "Unknown tool").
            recipe = self._recipes.get(name)
            if recipe is not None:
                fn, kwargs = recipe
                self._tools[name] = Tool.from_function(fn, **kwargs)
                del self._recipes[name]

    def get_tool(self, name: str) -> Tool | None:
        """The tool, its module imported and the tool built first if need be; None when there is no such tool."""
        module = self.module_of.get(name)
        if name in self._promised and module is not None:
            self.load_module(module)  # or wait while another thread loads it
        if name in self._recipes or name not in self._tools:
            self._build(name)  # or wait while another thread (the background build) builds it
        return self._tools.get(name)

    def list_tools(self) -> list[Tool]:
        """Every tool, in registration order, each module imported and each tool built."""
        self.load_all()
        for name in list(self._recipes):
            self._build(name)
        return [self._tools[name] for name in self.names]


_PLAIN = frozenset({"type", "items", "additionalProperties"})


def lean_schema(schema: Any) -> Any:
    """The same schema in the form a client checks fastest (the SDK's client checks every result against its
    tool's output schema, with jsonschema, in Python): each `$ref` to a definition that does not refer back to
    itself is replaced by the definition (a reference costs the checker a resolver lookup and a new validator
    object per use: ~30% of checking an agent), and each `anyOf` of plain types (pydantic's `X | None`:
    `{"anyOf": [{"type": "string"}, {"type": "null"}]}`) is written as one type list (`{"type": ["string",
    "null"]}`), so no error is built for every branch that does not match. It admits exactly the same values."""
    return _type_lists(_inlined(schema))


# A field's short form in the listing, declared beside the field (Field(json_schema_extra={LISTED_AS: {...}})):
# for an argument another tool of the same toolset lists in full (apply_patch's patch, as validate_patch's).
# The server still validates against the full schema.
LISTED_AS = "x-listed-as"
# The short form of a {min, max} scale: an object, whose listed description names min and max.
MIN_MAX: dict[str, Any] = {"type": "object"}


def listed_input(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema as tools/list shows it (a host puts it into its model's context): no automatic
    titles; an optional argument whose default is null shown as its value's types alone (leaving it out is
    how a caller says null; the server still accepts an explicit null); plain-type alternatives as one type
    list; no `additionalProperties: true` (JSON Schema's default); a field declared with a short form
    (LISTED_AS) in that form; and the options many tools share
    (server/options.py) without their description and usual default, which the server's instructions give once."""
    from .options import LISTED, SHARED_DEFAULTS, SHARED_OPTIONS

    schema = _type_lists(_without_default_additional(untitled(schema)))
    required = set(schema.get("required", []))
    properties = {}
    for name, node in schema.get("properties", {}).items():
        options = node.get("anyOf") if isinstance(node, dict) else None
        if name not in required and node.get("default", 0) is None and isinstance(options, list) and \
                {"type": "null"} in options:
            values = [o for o in options if o != {"type": "null"}]
            rest = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
            node = {**values[0], **rest} if len(values) == 1 else {"anyOf": values, **rest}
        elif name not in required and node.get("default", 0) is None and isinstance(node.get("type"), list) and \
                "null" in node["type"]:
            kinds = [k for k in node["type"] if k != "null"]
            node = {k: v for k, v in node.items() if k != "default"} | {"type": kinds[0] if len(kinds) == 1 else kinds}
        if isinstance(node, dict) and isinstance(node.get(LISTED_AS), dict):
            node = node[LISTED_AS]
        if name in SHARED_OPTIONS and node.get("description") == SHARED_OPTIONS[name]:
            usual = name in SHARED_DEFAULTS and node.get("default", ...) == SHARED_DEFAULTS[name]
            node = {k: v for k, v in node.items() if k != "description" and not (k == "default" and usual)} | (
                {"description": LISTED[name]} if name in LISTED else {})
        properties[name] = node
    if "properties" not in schema:
        return schema
    listed = {**schema, "properties": properties}
    if isinstance(schema.get("$defs"), dict):  # the definitions only a short form's full schema used: gone
        used = _used_definitions(listed)
        listed["$defs"] = {k: v for k, v in schema["$defs"].items() if k in used}
        if not listed["$defs"]:
            del listed["$defs"]
    return listed


def listed_description(description: str | None) -> str | None:
    """A tool's description as tools/list shows it: its docstring's line breaks and indentation as single
    spaces."""
    return None if description is None else " ".join(description.split())


def _used_definitions(schema: dict[str, Any]) -> set[str]:
    """The `$defs` names reachable from the schema's properties."""
    defs = schema.get("$defs", {})
    used: set[str] = set()
    todo: list[Any] = [schema.get("properties", {})]
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            todo.extend(node)
        elif isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref.removeprefix("#/$defs/")
                if name not in used and name in defs:
                    used.add(name)
                    todo.append(defs[name])
            todo.extend(v for k, v in node.items() if k not in ("default", "examples", "const", "enum"))
    return used


def _without_default_additional(node: Any) -> Any:
    """`node` without `additionalProperties: true`, which says what JSON Schema does anyway."""
    if isinstance(node, list):
        return [_without_default_additional(n) for n in node]
    if not isinstance(node, dict):
        return node
    return {k: (v if k in ("default", "examples", "const", "enum") else _without_default_additional(v))
            for k, v in node.items() if not (k == "additionalProperties" and v is True)}


def untitled(schema: Any) -> Any:
    """`schema` without the `title` keywords pydantic writes on every model and field ("Agent Id" for agent_id):
    a host puts each tool's input schema into its model's context, where they repeat the names at a cost.
    Property names are kept, even one called "title"; values (defaults, enums, examples) are left as they are."""
    if isinstance(schema, list):
        return [untitled(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
            out[key] = {name: untitled(sub) for name, sub in value.items()}
        elif key in ("default", "examples", "const", "enum"):
            out[key] = value
        else:
            out[key] = untitled(value)
    return out


# Keywords that only annotate (a reference's siblings with these may be merged into its definition).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"})


def _inlined(schema: Any) -> Any:
    """`schema` with its local references (`#/$defs/X`) replaced by the definitions, except a definition that
    reaches itself (recursive) or one whose reference has a sibling keyword that is not an annotation; the
    definitions still referred to stay in `$defs`."""
    defs = schema.get("$defs") if isinstance(schema, dict) else None
    if not isinstance(defs, dict) or not defs:
        return schema

    def refs_in(node: Any) -> set[str]:
        if isinstance(node, list):
            return set().union(*(refs_in(n) for n in node))
        if not isinstance(node, dict):
            return set()
        found = {node["$ref"].removeprefix("#/$defs/")} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(refs_in(v) for v in node.values()))

    def reaches(name: str) -> set[str]:
        seen: set[str] = set()
        todo = list(refs_in(defs.get(name)))
        while todo:
            n = todo.pop()
            if n not in seen and n in defs:
                seen.add(n)
                todo.extend(refs_in(defs[n]))
        return seen

    recursive = {name for name in defs if name in reaches(name)}

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(n) for n in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        name = ref.removeprefix("#/$defs/") if isinstance(ref, str) and ref.startswith("#/$defs/") else None
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if name in defs and name not in recursive and isinstance(defs[name], dict) and set(siblings) <= _ANNOTATIONS:
            return {**inline(defs[name]), **siblings}  # the use's own description and default say more
        return {k: inline(v) for k, v in node.items() if k != "$defs" or node is not schema}

    out = inline(schema)
    kept = set().union(*(reaches(n) | {n} for n in refs_in(out)))
    if kept:
        out["$defs"] = {name: inline(defs[name]) for name in defs if name in kept}
    return out


def _type_lists(node: Any) -> Any:
    if isinstance(node, list):
        return [_type_lists(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: _type_lists(v) for k, v in node.items()}
    branches = node.get("anyOf")
    if (isinstance(branches, list) and len(branches) > 1 and "type" not in node
            and all(isinstance(b, dict) and isinstance(b.get("type"), str) and set(b) <= _PLAIN for b in branches)
            and len({b["type"] for b in branches}) == len(branches) and sum(len(b) > 1 for b in branches) <= 1
            and not any(k in node for b in branches for k in b if k != "type")):
        del node["anyOf"]
        for branch in branches:
            node.update({k: v for k, v in branch.items() if k != "type"})
        node["type"] = [b["type"] for b in branches]
    return node


class Registrations:
    """Registrations (functions adding resources or prompts) run when resources or prompts are first used, not at start."""

    def __init__(self) -> None:
        self._pending: list[Callable[[], None]] = []
        self._lock = threading.RLock()

    def later(self, register: Callable[[], None]) -> None:
        self._pending.append(register)

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def run(self) -> None:
        with self._lock:
            while self._pending:
                self._pending[0]()
                del self._pending[0]  # once it has run: one that failed fails again at the next use


@dataclass
class Listing:
    """A cached tools/list answer, which module registers each of its tools, and each tool's role and toolset (as
    its declaration says: server/declare.py)."""

    tools: list[MCPTool]
    modules: dict[str, list[str]]
    access: dict[str, tuple[Any, Any]]


class ListingCache:
    """The tools/list answer of one code version, in the data home, sealed with an HMAC whose key (random, made
    by the first start, mode 0600) lives beside it: a listing edited by anyone without the key is ignored (and
    rebuilt from the code), so a tampered file never changes what the tools say. The data home is also never
    inside an allowed root (server/settings.py), so no caller reaches either file."""

    def __init__(self, directory: Path):
        self.directory = directory
        self._key: str | None = None

    @property
    def path(self) -> Path:
        if self._key is None:
            self._key = listing_key()
        return self.directory / f"tools-{self._key}.json"

    def _secret(self, create: bool) -> bytes | None:
        """The sealing key; made (atomically: a complete file or none) when `create` and there is none yet."""
        path = self.directory / "listing.key"
        try:
            secret = path.read_bytes()
            return secret if len(secret) == 32 else None
        except FileNotFoundError:
            if not create:
                return None
        except OSError:
            return None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".listing.key.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(32))
            try:
                os.link(tmp, path)  # fails when another process made the key first: then that one is read
            except FileExistsError:
                pass
            finally:
                tmp.unlink()
            return self._secret(create=False)
        except OSError as exc:
            log.debug("no key to seal the tool listing: %s", exc)
            return None

    # The file is JSON that starts with its seal: {"seal":"<HMAC-SHA256 of everything after this prefix>",...}.
    # Sealing the bytes as written costs ~0.3 ms a start (a canonical re-dump of the parsed listing cost ~10).
    _PREFIX = re.compile(r'\{"seal":"([0-9a-f]{64})",')

    def read(self) -> Listing | None:
        """The cached listing, if there is a well-formed one for this code, sealed with this home's key."""
        try:
            text = self.path.read_text(encoding="utf-8")
            secret, sealed = self._secret(create=False), self._PREFIX.match(text)
            rest = text[sealed.end():] if sealed else ""
            if secret is None or sealed is None or not hmac.compare_digest(
                    sealed.group(1), hmac.new(secret, rest.encode(), hashlib.sha256).hexdigest()):
                log.warning("the cached tool listing %s fails its check (edited?); listing from the code", self.path)
                return None
            data = json.loads(text)
            tools = [MCPTool.model_validate(t) for t in data["tools"]]
            modules = {str(m): [str(n) for n in names] for m, names in data["modules"].items()}
            access = {str(name): (role, toolset) for name, (role, toolset) in data["access"].items()}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None
        from judges.store.access import ROLES

        from .roles import TOOLSET_NAMES

        names = sorted(t.name for t in tools)
        if names != sorted(n for names in modules.values() for n in names) or names != sorted(access) or \
                any(role not in ROLES or toolset not in TOOLSET_NAMES for role, toolset in access.values()):
            return None
        return Listing(tools, modules, access)

    def save(self, listing: Listing) -> None:
        """Write atomically (several processes may share the home); a failure only costs the next start time."""
        try:
            secret = self._secret(create=True)
            if secret is None:
                return
            self.directory.mkdir(parents=True, exist_ok=True)
            rest = json.dumps({"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True)
                                         for t in listing.tools],
                               "modules": listing.modules, "access": listing.access})[1:]
            seal = hmac.new(secret, rest.encode(), hashlib.sha256).hexdigest()
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(f'{{"seal":"{seal}",{rest}', encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as exc:
            log.debug("tool listing not cached: %s", exc)

    def drop(self) -> None:
        """Remove this code's listing (it proved wrong); the next start lists from the code and writes it anew."""
        try:
            self.path.unlink()
        except OSError:
            pass
