"""The one loader for prompt assets: `prompts/assets/<id>/<version>.j2`, StrictUndefined.

A template starts with Jinja comments that declare its metadata, one `{# key: value #}` each:
`description` (shown to hosts as the MCP prompt's description) and, for judges that check their
inputs, `input` (the name of the input schema). Its arguments are the variables it uses.

Jinja2 is imported on the first render, not at start-up: the variables of the shipped assets are read
from `assets/index.json` (written by `write_index()`, each entry keyed by its asset's sha256, so an
entry that no longer matches its asset is never used: that asset is parsed instead).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

_ID = re.compile(r"[a-z0-9_]+(?:/[a-z0-9_]+)*@v[0-9]+")  # the whole id (fullmatch: no trailing newline)
MAX_ID = 200  # characters; a longer id names no file the system could open (a path component is <= 255 bytes)
_META = re.compile(r"\{#\s*([a-z_]+):\s*(.*?)\s*#\}\s*", re.S)
_PROVIDED: dict[str, Any] = {}  # values every template may use by name (`provide`)


class PromptError(ValueError):
    """A prompt id that does not exist, or a render with a missing variable."""


# Any tag-like name after '<' or '</'; whether it is the fence's own tag is decided per match. One compiled
# pattern for every tag: a prompt with thousands of numbered fences (step_1..step_9000) compiled a regex
# per fence, about a second of the event loop's time.
_TAG_NAME = re.compile(r"<(/?)\s*([\w.-]++)(?=[\s>/])")
_WORD_TAG = re.compile(r"[\w.-]+")


@lru_cache(maxsize=256)
def _same_tag(tag: str) -> re.Pattern[str]:
    return re.compile(re.escape(tag), re.I)


def fence(text: Any, tag: str) -> str:
    """Wrap untrusted text in <tag>...</tag>, neutralising any <tag> or </tag> inside it (case-insensitively).

    The judged text cannot close the fence early and smuggle instructions after it.
    """
    body = str(text)
    if not _WORD_TAG.fullmatch(tag):
        body = re.sub(rf"<(/?)\s*({re.escape(tag)})(?=[\s>/])", r"&lt;\1\2", body, flags=re.I)
        return f"<{tag}>\n{body}\n</{tag}>"
    folded = tag.lower()

    def neutralise(m: re.Match[str]) -> str:
        name = m.group(2)
        same = name.lower() == folded if name.isascii() else bool(_same_tag(tag).fullmatch(name))
        return f"&lt;{m.group(1)}{name}" if same else m.group(0)

    body = _TAG_NAME.sub(neutralise, body)
    return f"<{tag}>\n{body}\n</{tag}>"


def _environment() -> jinja2.Environment:
    """Every template renders sandboxed, shipped or not: `ImmutableSandboxedEnvironment` refuses internals
    (`__class__`, `__globals__`, ...) and mutating methods, so a template (an operator's custom category, or an
    asset in an install a caller can write to) can shape text but never run Python in the server. Caller text
    only ever enters as a variable's value: data, never parsed as a template."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(
        loader=jinja2.FunctionLoader(_source),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fence"] = fence
    return env


@cache
def _env() -> jinja2.Environment:
    """The one environment every template renders in (built on first use), with the provided globals."""
    env = _environment()
    env.globals.update(_PROVIDED)
    return env


@cache
def _bare_env() -> jinja2.Environment:
    """The same without the provided globals, for reading the names a template uses (jinja2 leaves globals out)."""
    return _environment()


def _asset_path(prompt_id: str) -> tuple[str, str]:
    if len(prompt_id) > MAX_ID:
        raise PromptError(f"prompt id of {len(prompt_id)} characters is too long (at most {MAX_ID}), e.g. "
                          "'agents/brand_compliance@v1'")
    if not _ID.fullmatch(prompt_id):
        raise PromptError(f"prompt id {prompt_id!r} is not of the form '<id>@v<N>', e.g. 'agents/brand_compliance@v1'")
    name, version = prompt_id.split("@")
    return name, version


def _source(prompt_id: str) -> str:
    name, version = _asset_path(prompt_id)
    node = resources.files("prompts").joinpath("assets", *name.split("/"), f"{version}.j2")
    if not node.is_file():
        import difflib

        known = list_templates()
        close = difflib.get_close_matches(prompt_id, known, n=3, cutoff=0.5)
        hint = f"the closest: {', '.join(close)}" if close else f"e.g. {known[0]}" if known else "none are installed"
        raise PromptError(f"no prompt asset {prompt_id!r}; {hint}. prompts/list names all {len(known)}.")
    return node.read_text(encoding="utf-8")


@dataclass(frozen=True)
class PromptTemplate:
    id: str
    description: str
    variables: tuple[str, ...]
    template: jinja2.Template | None  # compiled on first render: start-up lists prompts, it renders none
    meta: dict[str, str]

    def render(self, **variables: Any) -> str:
        missing = [v for v in self.variables if v not in variables and v not in _PROVIDED]
        if missing:
            raise PromptError(f"prompt {self.id} needs {', '.join(sorted(missing))}")
        template = self.template or _compiled(self.id)
        import jinja2

        try:
            return template.render(**variables).strip()
        except jinja2.TemplateError as exc:  # a missing variable, or the sandbox refusing an unsafe access
            raise PromptError(f"prompt {self.id}: {exc}") from exc


@cache
def _compiled(prompt_id: str) -> jinja2.Template:
    return _env().get_template(prompt_id)


@cache
def load(prompt_id: str) -> PromptTemplate:
    source = _source(prompt_id)
    variables = _variables(source, prompt_id)
    meta: dict[str, str] = {}
    pos = 0
    while match := _META.match(source, pos):
        meta[match.group(1)] = match.group(2)
        pos = match.end()
    return PromptTemplate(
        id=prompt_id,
        description=meta.get("description", prompt_id),
        variables=variables,
        template=None,
        meta=meta,
    )


def compile_all() -> None:
    """Compile every shipped prompt asset now (e.g. in the warm-up), so no request pays a compile."""
    for prompt_id in list_templates():
        _compiled(prompt_id)


def from_text(source: str, name: str) -> PromptTemplate:
    """An operator's own template text (a custom analysis category, read once at start from a directory no
    caller can write), compiled and rendered exactly as the shipped assets are: the same sandboxed environment,
    StrictUndefined, `fence`, missing variables refused. Never call it with a caller's text."""
    variables = _variables(source)
    return PromptTemplate(id=name, description=name, variables=variables, template=_env().from_string(source), meta={})


def provide(name: str, value: Any) -> None:
    """A value every template may use by `name` (e.g. the patch ops' lines, defined by judges/patches/): part
    of the asset, so never a variable the caller passes. Call before the templates that use it are loaded."""
    _PROVIDED[name] = value
    if _env.cache_info().currsize:
        _env().globals[name] = value


def _used(source: str) -> set[str]:
    """Every name a template uses and does not set itself (jinja2's own reading)."""
    import jinja2.meta

    return set(jinja2.meta.find_undeclared_variables(_bare_env().parse(source)))


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


@cache
def _index() -> dict[str, Any]:
    node = resources.files("prompts").joinpath("assets", "index.json")
    try:
        index: dict[str, Any] = json.loads(node.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return index


def _variables(source: str, prompt_id: str | None = None) -> tuple[str, ...]:
    """The variables a template needs from its caller (what it uses, less what `provide` supplies); for a
    shipped asset from the index when its entry matches the asset, else by parsing."""
    entry = _index().get(prompt_id) if prompt_id is not None else None
    used = set(entry["uses"]) if entry and entry.get("sha256") == _digest(source) else _used(source)
    return tuple(sorted(v for v in used if v not in _PROVIDED))


def index_entries() -> dict[str, Any]:
    """What `assets/index.json` should hold: each shipped asset's sha256 and the names it uses."""
    entries: dict[str, Any] = {}
    for prompt_id in list_templates():
        source = _source(prompt_id)
        entries[prompt_id] = {"sha256": _digest(source), "uses": sorted(_used(source))}
    return entries


def write_index() -> None:
    """Rewrite `assets/index.json` (after adding or changing an asset):
    `python -c "import prompts.loader as l; l.write_index()"`."""
    path = resources.files("prompts").joinpath("assets", "index.json")
    with resources.as_file(path) as real:
        real.write_text(json.dumps(index_entries(), indent=1, sort_keys=True) + "\n", encoding="utf-8")


def source(prompt_id: str) -> str:
    """A prompt asset's template text, as shipped (metadata comments included)."""
    return _source(prompt_id)


def render(prompt_id: str, **variables: Any) -> str:
    """Render a prompt asset; a missing variable raises PromptError before any model call."""
    return load(prompt_id).render(**variables)


def list_templates() -> list[str]:
    """Every shipped prompt id, sorted."""
    root = resources.files("prompts").joinpath("assets")
    found: list[str] = []

    def walk(node: Any, parts: list[str]) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, [*parts, child.name])
            elif child.name.endswith(".j2") and parts:
                found.append("/".join(parts) + "@" + child.name[:-3])

    walk(root, [])
    return sorted(found)

