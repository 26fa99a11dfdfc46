"""Evaluation of JSON analyses (seed 004): deterministic checks D-1..D-5 first, fail-fast; then LLM
rubric categories, one model call per category returning one check per criterion."""

from __future__ import annotations

import functools
import json
import re
import statistics
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, create_model

import prompts
from judges.call import JudgeCall, Member
from judges.errors import ConfigError, InputError
from judges.inputs import caller_values
from judges.models.protocol import Message, ModelClient, ModelRequest, Usage
from judges.progress import Progress, no_progress
from judges.reading.expected import expected_ratings
from judges.reading.jury import Jury, jurors, score_jury
from judges.reading.parsing import Judged, JudgeModel, run_judge
from judges.reading.samples import SampleFailure, SampleStats, Votes, sample_stats, vote

Rating = Literal["poor", "sufficient", "impressive"]


class Evaluated(BaseModel):
    field: str
    value: Any = None


class Check(BaseModel):
    """The seed's standardized check."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    check_name: str
    description: str
    inputs_evaluated: list[Evaluated] = []
    passed: bool = Field(validation_alias=AliasChoices("pass", "passed"), serialization_alias="pass")
    rationale: str
    rating: Rating | None = None
    data: Any = None
    error: str | None = None


# --- the default company-analysis configuration ---------------------------------------------

DEFAULT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["company_name", "website_url", "product_overview", "market", "insights", "discovery_questions"],
    "properties": {
        "company_name": {"type": "string", "minLength": 1},
        "website_url": {"type": "string"},
        "product_overview": {
            "type": "object",
            "required": ["summary", "key_features", "target_customers", "value_proposition"],
            "properties": {
                "summary": {"type": "string"},
                "key_features": {"type": "array", "items": {"type": "string"}},
                "target_customers": {"type": "string"},
                "value_proposition": {"type": "string"},
            },
        },
        "market": {
            "type": "object",
            "required": ["industry", "competitors"],
            "properties": {"industry": {"type": "string"}, "competitors": {"type": "array", "items": {"type": "string"}}},
        },
        "insights": {"type": "array", "items": {"type": "string"}},
        "risks": {"type": "array", "items": {"type": "string"}},
        "discovery_questions": {"type": "array", "items": {"type": "string"}},
    },
}
DEFAULT_CARDINALITY: dict[str, tuple[int, int]] = {
    "product_overview.key_features": (3, 5), "market.competitors": (3, 5), "insights": (3, 5),
    "discovery_questions": (3, 5),
}
DEFAULT_INSIGHT_FIELDS = ["insights"]
DETERMINISTIC = {"D-1": "json_validation", "D-2": "schema_compliance", "D-3": "format_compliance",
                 "D-4": "field_cardinality", "D-5": "url_preservation"}
KEY_VALUE = re.compile(r"^[^:\n]{1,80}:\s+\S")


def _get(data: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def populated(value: Any) -> bool:
    """Populated: not null, not an empty (or blank) string, not an empty list or object."""
    if value is None:
        return False
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, list | dict):
        return bool(value)
    return True


def schema_fields(schema: dict[str, Any], prefix: str = "") -> list[str]:
    """Every property path the schema declares, nested objects included (an array is one field)."""
    paths = []
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}{name}"
        if isinstance(sub, dict) and sub.get("type") == "object" and sub.get("properties"):
            paths += schema_fields(sub, path + ".")
        else:
            paths.append(path)
    return paths


def d1_json_validation(analysis: Any) -> Check:
    name, desc = "json_validation", "Output is properly formatted JSON"
    if isinstance(analysis, dict | list):
        return Check(check_name=name, description=desc, passed=True, data=analysis,
                     rationale="The analysis was given as a JSON value.",
                     inputs_evaluated=[Evaluated(field="analysis", value="(object)")])
    text = str(analysis)
    note = ""
    fence = re.fullmatch(r"\s*```[a-zA-Z]*\n(.*)\n```\s*", text, re.S)
    if fence:
        text, note = fence.group(1), " One surrounding code fence was stripped first."
    try:
        data = caller_values.loads(text, "analysis")
    except InputError:
        raise
    except ValueError as exc:
        return Check(check_name=name, description=desc, passed=False,
                     rationale=f"The output is not strict JSON: {exc}.{note}",
                     inputs_evaluated=[Evaluated(field="analysis", value=text[:200])])
    return Check(check_name=name, description=desc, passed=True, data=data,
                 rationale=f"The output parses as strict JSON.{note}",
                 inputs_evaluated=[Evaluated(field="analysis", value=text[:200])])


def _schema_patterns(node: Any, where: str = "schema") -> Iterator[tuple[str, str]]:
    """(location, regex) of every `pattern` and `patternProperties` key in a schema."""
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            yield f"{where}.pattern", node["pattern"]
        if isinstance(node.get("patternProperties"), dict):
            for key in node["patternProperties"]:
                yield f"{where}.patternProperties", key
        for key, value in node.items():
            yield from _schema_patterns(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _schema_patterns(value, f"{where}[{i}]")


@functools.lru_cache(maxsize=512)
def _re2(pattern: str) -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
_DATA_KEYWORDS = ("const", "enum", "examples", "default")  # their values are data, not subschemas


def _outside_references(schema: Any) -> Iterator[tuple[str, str]]:
    """(location, reference) of every `$ref`/`$dynamicRef` that points outside the given schema: not at the
    schema itself, not at a subschema it names by `$id`, not at a JSON Schema meta-schema the library ships.
    Walked without recursion (a deep schema is refused before, by its nesting)."""
    import jsonschema_specifications

    refs: list[tuple[str, str, str]] = []
    ids: set[str] = {""}
    stack: list[tuple[Any, str, str]] = [(schema, "", "schema")]
    while stack:
        node, base, where = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("$id"), str):
                base = urllib.parse.urljoin(base, node["$id"])
                ids.add(urllib.parse.urldefrag(base).url)
            refs += [(f"{where}.{key}", node[key], base) for key in _REF_KEYWORDS if isinstance(node.get(key), str)]
            stack += [(value, base, f"{where}.{key}") for key, value in node.items() if key not in _DATA_KEYWORDS]
        elif isinstance(node, list):
            stack += [(value, base, f"{where}[{i}]") for i, value in enumerate(node)]
    for where, ref, base in refs:
        target = urllib.parse.urldefrag(urllib.parse.urljoin(base, ref)).url
        if target not in ids and target not in jsonschema_specifications.REGISTRY:
            yield where, ref


def _refuse_retrieval(uri: str) -> Any:
    """The schema registry's `retrieve`: a reference the given schema does not hold is never fetched."""
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs class: mypy does not see its fields


def _no_remote_references(schema: dict[str, Any]) -> None:
    for where, ref in _outside_references(schema):
        raise InputError(
            f"{where}: the reference {ref[:200]!r} points outside the given schema; references are resolved only "
            "inside it and never fetched (no URLs, no files). Put the definition under $defs and refer to it "
            "as '#/$defs/<name>', e.g. {\"$defs\": {\"url\": {\"type\": \"string\"}}, \"properties\": "
            "{\"website_url\": {\"$ref\": \"#/$defs/url\"}}}")


def _canonical(value: Any) -> Any:
    """A hashable form equal exactly when JSON Schema calls two values equal (1 == 1.0, true != 1, objects
    regardless of key order)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, int | float):
        return ("number", int(value) if isinstance(value, float) and value.is_integer() else value)
    if isinstance(value, dict):
        return ("object", frozenset((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("array", tuple(_canonical(v) for v in value))
    return ("other", repr(value))


def _hashed_keywords() -> dict[str, Any]:
    """uniqueItems and enum by hashing: jsonschema compares every pair of items (and every enum value with
    each instance), quadratic in a caller's array."""
    import jsonschema

    enum_sets: dict[int, tuple[Any, frozenset[Any]]] = {}  # per validator: each enum list hashed once

    def unique_items(validator: Any, unique: Any, instance: Any, _schema: Any) -> Iterator[Any]:
        if not unique or not validator.is_type(instance, "array"):
            return
        seen: dict[Any, int] = {}
        for i, item in enumerate(instance):
            first = seen.setdefault(_canonical(item), i)
            if first != i:
                yield jsonschema.ValidationError(f"the array has non-unique elements (item {i} repeats item {first})")
                return

    def enum(validator: Any, enums: Any, instance: Any, _schema: Any) -> Iterator[Any]:
        held = enum_sets.get(id(enums))
        if held is None or held[0] is not enums:
            held = enum_sets[id(enums)] = (enums, frozenset(_canonical(v) for v in enums))
        if _canonical(instance) not in held[1]:
            yield jsonschema.ValidationError(f"{repr(instance)[:200]} is not one of {enums!r}" if len(enums) <= 20 else
                                             f"{repr(instance)[:200]} is not one of the {len(enums)} allowed values")

    return {"uniqueItems": unique_items, "enum": enum}


def _linear_validator(schema: dict[str, Any]) -> Any:
    """A Draft 2020-12 validator whose regexes run on RE2 (linear time): a caller's pattern such as
    `^(a+)+$` cannot stall the server. Patterns RE2 cannot run are refused with the reason. References resolve
    only inside the schema: one pointing elsewhere is refused, and the registry's `retrieve` refuses any fetch."""
    import jsonschema
    import re2
    from referencing import Registry

    _no_remote_references(schema)

    for where, regex in _schema_patterns(schema):
        try:
            _re2(regex)
        except (re2.error, TypeError, ValueError) as exc:
            reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
            raise InputError(
                f"{where}: the regex {regex[:100]!r} cannot be checked in linear time ({reason}); backreferences "
                "and lookaround are not supported, e.g. use '^[a-z]+$' instead of '^(?=x)...' or '(a)\\1'"
            ) from None
    if any(where.endswith("patternProperties") for where, _ in _schema_patterns(schema)) and \
            "unevaluatedProperties" in json.dumps(schema):
        raise InputError("schema: unevaluatedProperties together with patternProperties is not supported in a "
                         "caller's schema; use additionalProperties instead")

    def pattern(validator: Any, patrn: str, instance: Any, _schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string") and not _re2(patrn).search(instance):
            yield jsonschema.ValidationError(f"{instance[:200]!r} does not match {patrn!r}")

    def pattern_properties(validator: Any, props: dict[str, Any], instance: Any, _schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "object"):
            for patrn, subschema in props.items():
                for key, value in instance.items():
                    if _re2(patrn).search(key):
                        yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    def additional_properties(validator: Any, extra: Any, instance: Any, schema_: dict[str, Any]) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        known = schema_.get("properties", {})
        patterns = [_re2(p) for p in schema_.get("patternProperties", {})]
        extras = [k for k in instance if k not in known and not any(p.search(k) for p in patterns)]
        if validator.is_type(extra, "object"):
            for key in extras:
                yield from validator.descend(instance[key], extra, path=key)
        elif extra is False and extras:
            yield jsonschema.ValidationError(f"Additional properties are not allowed ({', '.join(map(repr, sorted(extras)[:10]))} "
                                             "unexpected)")

    linear = jsonschema.validators.extend(jsonschema.Draft202012Validator, {
        "pattern": pattern, "patternProperties": pattern_properties, "additionalProperties": additional_properties,
        **_hashed_keywords(),
    })
    try:
        linear.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise InputError(f"schema is not a valid JSON Schema: {exc.message}") from None
    return linear(schema, registry=Registry(retrieve=_refuse_retrieval))  # type: ignore[call-arg]  # attrs class


def d2_schema_compliance(data: Any, schema: dict[str, Any], threshold: float = 0.9) -> Check:
    name, desc = "schema_compliance", f"Output matches the schema and at least {threshold:.0%} of fields are populated"
    from referencing.exceptions import Unresolvable

    validator = _linear_validator(schema)
    try:
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    except Unresolvable as exc:  # a reference into the schema that does not resolve (never fetched)
        ref = str(getattr(exc, "ref", exc))
        raise InputError(f"schema: the reference {('#' + ref if ref.startswith('/') else ref)[:200]!r} does not "
                         "resolve inside the given schema (references are never fetched); e.g. '#/$defs/<name>' with "
                         "the definition under $defs") from None
    except RecursionError:  # data is at most MAX_DEPTH deep: only references that loop in place get here
        raise InputError("schema: its references loop without descending into the data (e.g. {\"$ref\": \"#\"}, "
                         "or two $defs that refer to each other); make every cycle go through properties or items, "
                         "e.g. {\"items\": {\"$ref\": \"#\"}}") from None
    fields = schema_fields(schema)
    filled = [f for f in fields if populated(_get(data, f))]
    ratio = len(filled) / len(fields) if fields else 1.0
    problems = [f"{'.'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}" for e in errors[:10]]
    passed = not errors and ratio >= threshold
    filled_set = set(filled)
    empty = [f for f in fields if f not in filled_set]
    rationale = (f"{len(errors)} schema violation(s){': ' + '; '.join(problems) if problems else ''}. "
                 f"{len(filled)} of {len(fields)} fields populated ({ratio:.0%})"
                 + (f"; empty: {', '.join(empty[:10])}." if empty else "."))
    return Check(check_name=name, description=desc, passed=passed, rationale=rationale,
                 data={"populated_ratio": round(ratio, 4), "violations": problems},
                 inputs_evaluated=[Evaluated(field=f, value=_get(data, f)) for f in empty[:10]])


def d3_format_compliance(data: Any, insight_fields: Sequence[str]) -> Check:
    name, desc = "format_compliance", "Insight fields follow 'Key: Value'"
    bad, seen = [], 0
    for path in insight_fields:
        value = _get(data, path)
        items = value if isinstance(value, list) else [value] if value is not None else []
        for i, item in enumerate(items):
            seen += 1
            if not isinstance(item, str) or not KEY_VALUE.match(item):
                bad.append(Evaluated(field=f"{path}[{i}]", value=item))
    rationale = (f"All {seen} insight entries follow 'Key: Value'." if not bad else
                 f"{len(bad)} of {seen} insight entries do not follow 'Key: Value', e.g. {bad[0].value!r}.")
    return Check(check_name=name, description=desc, passed=not bad, rationale=rationale, inputs_evaluated=bad[:10])


def d4_field_cardinality(data: Any, cardinality: dict[str, tuple[int, int]]) -> Check:
    name, desc = "field_cardinality", "Array fields contain the expected number of items"
    bad = []
    for path, (low, high) in cardinality.items():
        value = _get(data, path)
        count = len(value) if isinstance(value, list) else None
        if count is None or not low <= count <= high:
            bad.append(Evaluated(field=path, value=f"{count if count is not None else 'no array'} (expected {low}–{high})"))
    rationale = ("Every array holds the expected number of items." if not bad else
                 "; ".join(f"{e.field}: {e.value}" for e in bad) + ".")
    return Check(check_name=name, description=desc, passed=not bad, rationale=rationale, inputs_evaluated=bad)


def normalize_url(url: str) -> str:
    """Scheme and host lower-cased, www. and default ports dropped, no fragment, no trailing slash."""
    raw = url.strip()
    parts = urllib.parse.urlsplit(raw if "://" in raw else "https://" + raw)
    host = (parts.hostname or "").lower().removeprefix("www.")
    port = f":{parts.port}" if parts.port and parts.port not in (80, 443) else ""
    path = parts.path.rstrip("/")
    query = f"?{parts.query}" if parts.query else ""
    return f"{host}{port}{path}{query}"


def _normalized(url: str) -> str | None:
    """normalize_url, or None for text that only looks like a URL (e.g. 'acme.io:99999')."""
    try:
        return normalize_url(url)
    except ValueError:
        return None


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


# A URL or bare domain inside text; \w spelled out as Unicode classes (RE2's \w is ASCII only).
_URL_PATTERN = r"(?i)(?:https?://)?[\p{L}\p{N}\p{M}_.-]+\.[a-z]{2,}[^\s\"'<>)]*"


def d5_url_preservation(data: Any, input_url: str | None) -> Check:
    name, desc = "url_preservation", "The input URL is preserved in the output"
    if not input_url:
        return Check(check_name=name, description=desc, passed=True, rationale="Skipped: no input_url was given.")
    try:
        want = normalize_url(input_url)
    except ValueError as exc:  # urllib: a port out of range, an unclosed IPv6 bracket
        raise InputError(f"input_url {input_url[:200]!r} is not a URL ({exc}); give one such as "
                         "\"https://acme.io\"") from None
    urls = _re2(_URL_PATTERN)  # linear: Python's re backtracked quadratically over a long run of word characters
    found = [u for s in _strings(data) for u in urls.findall(s) if _normalized(u) == want]
    return Check(check_name=name, description=desc, passed=bool(found),
                 rationale=(f"The output contains {found[0]!r}, which normalises to {want!r}." if found else
                            f"No URL in the output normalises to {want!r}."),
                 inputs_evaluated=[Evaluated(field="input_url", value=input_url)])


# --- LLM categories -------------------------------------------------------------------------

class Criterion(BaseModel):
    name: str
    description: str


class PassRule(BaseModel):
    min_sufficient: int | Literal["all"] = "all"
    min_impressive: int = 0


class CategorySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    criteria: list[Criterion] = Field(min_length=1)
    pass_rule: PassRule = Field(default_factory=PassRule)


BUILTIN: dict[str, CategorySpec] = {
    "general_quality": CategorySpec(criteria=[
        Criterion(name="evidence_support", description="Claims properly supported by evidence or marked as assumptions"),
        Criterion(name="context_handling", description="Appropriate incorporation/ignoring of user context based on type"),
        Criterion(name="content_distinctness", description="Sections provide unique value without excessive duplication"),
    ], pass_rule=PassRule(min_sufficient="all")),
    "founder_resonance": CategorySpec(criteria=[
        Criterion(name="industry_sophistication",
                  description="Nuanced understanding of industry dynamics and competitive landscape"),
        Criterion(name="strategic_depth", description="Non-obvious strategic implications and opportunities"),
        Criterion(name="authentic_voice_capture", description="Company's unique positioning vs generic business-speak"),
        Criterion(name="actionable_specificity",
                  description="Insights specific to company that lead to valuable discovery questions"),
    ], pass_rule=PassRule(min_sufficient=3, min_impressive=1)),
}


def category_passes(ratings: Sequence[Rating | None], rule: PassRule) -> bool:
    good = sum(r in ("sufficient", "impressive") for r in ratings)
    needed = len(ratings) if rule.min_sufficient == "all" else rule.min_sufficient
    return good >= needed and sum(r == "impressive" for r in ratings) >= rule.min_impressive


@dataclass(frozen=True)
class Category:
    name: str
    spec: CategorySpec
    system: prompts.PromptTemplate  # a shipped asset, or a template from the categories directory
    user: prompts.PromptTemplate


CATEGORY_VARIABLES = ("analysis", "user_context", "context_type", "product_overview", "criteria")
MAX_CATEGORY_FILE_BYTES = 256 * 1024


def _overlaps(path: Path, place: Path) -> bool:
    return path == place or path.is_relative_to(place) or place.is_relative_to(path)


def load_custom_categories(folder: Path, writable: Sequence[tuple[str, Path]] = ()) -> dict[str, Category]:
    """Every category of an operator's directory (`<folder>/<name>/{spec.json,system.j2,user.j2}`), read, compiled
    and test-rendered once, at start. `writable` names the places a caller can write ((setting, path): the allowed
    roots, the data home): the directory, and every file it gives (symlinks followed), must lie outside them all,
    or a caller could write the server's prompts. ConfigError says what is wrong; nothing is re-read per call."""
    real = folder.expanduser().resolve()
    where = "JUDGE_MCP_ANALYSIS_CATEGORIES_DIR"

    def outside_writable(path: Path, what: str) -> None:
        for setting, place in writable:
            place = place.expanduser().resolve()
            if _overlaps(path, place):
                raise ConfigError(
                    f"{where}: {what} {str(path)!r} overlaps {place} ({setting}), where callers can write files; "
                    "custom analysis categories are templates the server renders, so keep them in a directory only "
                    "the operator can write, outside every allowed root and the data home (e.g. "
                    "/etc/judge-mcp/categories)")

    if not real.is_dir():
        raise ConfigError(f"{where}: {str(folder)!r} is not a directory")
    outside_writable(real, "the directory")
    found: dict[str, Category] = {}
    for sub in sorted(real.iterdir()):
        if not sub.is_dir() or sub.name.startswith("."):
            continue
        name = sub.name
        if not re.fullmatch(r"[a-z0-9_]+", name):
            raise ConfigError(f"{where}: category folder {name!r} must be named with lower-case letters, digits and _")
        texts: dict[str, str] = {}
        for part in ("spec.json", "system.j2", "user.j2"):
            path = (sub / part).resolve()
            outside_writable(path, f"the category file {part} of {name!r} (through a symlink?) at")
            try:
                if path.stat().st_size > MAX_CATEGORY_FILE_BYTES:
                    raise ConfigError(f"{where}: {sub / part} is larger than {MAX_CATEGORY_FILE_BYTES} bytes")
                texts[part] = path.read_text(encoding="utf-8")
            except (OSError, ValueError) as exc:
                raise ConfigError(f"{where}: category {name!r} needs spec.json, system.j2 and user.j2 "
                                  f"({sub / part}: {exc})") from None
        found[name] = _compile_category(name, sub, texts)
    return found


def _compile_category(name: str, folder: Path, texts: dict[str, str]) -> Category:
    """One custom category, compiled in the sandboxed environment and rendered once with sample values, so a
    template that uses an unknown variable or an unsafe attribute stops the server at start, not a call."""
    import jinja2  # what compiling a template may raise (prompts imports jinja2 on first use)

    where = f"JUDGE_MCP_ANALYSIS_CATEGORIES_DIR: category {name!r} in {folder}"
    try:
        spec = CategorySpec.model_validate_json(texts["spec.json"])
        system, user = (prompts.from_text(texts[f"{part}.j2"], f"{folder}/{part}.j2") for part in ("system", "user"))
    except (ValueError, jinja2.TemplateError) as exc:
        raise ConfigError(f"{where} is invalid: {exc}") from None
    category = Category(name, spec, system, user)
    unknown = sorted({*system.variables, *user.variables} - set(CATEGORY_VARIABLES))
    if unknown:
        raise ConfigError(f"{where} uses {', '.join(unknown)}; a category's templates may use "
                          f"{', '.join(CATEGORY_VARIABLES)}")
    try:
        category_request(category, {"analysis": "{}", "user_context": "(none)", "context_type": "unspecified",
                                    "product_overview": "null"})
    except prompts.PromptError as exc:
        raise ConfigError(f"{where} cannot be rendered: {exc}") from None
    return category


def load_category(name: str, custom: Mapping[str, Category] | None = None) -> Category:
    """A category by name: one of the operator's `custom` categories (read at start by load_custom_categories),
    else a built-in one (prompt assets analysis/{system,user}/<name>@v1)."""
    if not re.fullmatch(r"[a-z0-9_]+", name):
        raise InputError(f"category name {name!r} must be lower-case letters, digits and _")
    if custom and name in custom:
        return custom[name]
    if name in BUILTIN:
        return Category(name, BUILTIN[name], prompts.load(f"analysis/system/{name}@v1"),
                        prompts.load(f"analysis/user/{name}@v1"))
    known = sorted({*BUILTIN, *(custom or {})})
    raise InputError(f"unknown LLM judge category {name!r}; known: {', '.join(known)} "
                     "(add your own in JUDGE_MCP_ANALYSIS_CATEGORIES_DIR)")


def _render(template: prompts.PromptTemplate, variables: dict[str, Any]) -> str:
    return template.render(**variables)


class CriterionReply(JudgeModel):
    rating: Rating
    rationale: str
    inputs_evaluated: list[Evaluated] = []


def _reply_model(spec: CategorySpec) -> type[BaseModel]:
    fields: dict[str, Any] = {c.name: (CriterionReply, ...) for c in spec.criteria}
    return create_model("CategoryReply", **fields)


RATING_VALUE: dict[str, float] = {"poor": 0.0, "sufficient": 1.0, "impressive": 2.0}


def category_request(category: Category, variables: dict[str, Any], sample: int = 0,
                     logprobs: bool = False) -> ModelRequest:
    context = {**variables, "criteria": [c.model_dump() for c in category.spec.criteria]}
    return ModelRequest(system=_render(category.system, context), messages=[Message.user(_render(category.user, context))],
                        temperature=0.0, max_tokens=2048, sample=sample, logprobs=logprobs)


def read_category(category: Category, judged: Judged[Any]) -> tuple[bool, dict[str, Check], float | None]:
    """One reply as the category's checks, its pass rule and its score (the mean rating, poor 0, sufficient 1,
    impressive 2); a failed reply fails every check, with the reason, and has no score."""
    spec = category.spec
    checks: dict[str, Check] = {}
    if judged.value is None:
        assert judged.failure is not None
        why = judged.failure.describe()
        for c in spec.criteria:
            checks[c.name] = Check(check_name=c.name, description=c.description, passed=False, error=why,
                                   rationale=f"The {category.name} judge gave no usable answer ({why}).")
        return False, checks, None
    for c in spec.criteria:
        reply: CriterionReply = getattr(judged.value, c.name)
        checks[c.name] = Check(check_name=c.name, description=c.description, rating=reply.rating,
                               passed=reply.rating in ("sufficient", "impressive"), rationale=reply.rationale,
                               inputs_evaluated=reply.inputs_evaluated)
    ratings = [ch.rating for ch in checks.values()]
    score = round(sum(RATING_VALUE[r] for r in ratings if r is not None) / len(ratings), 6)
    return category_passes(ratings, spec.pass_rule), checks, score


def expected_category_score(category: Category, judged: Judged[Any]) -> float | None:
    """The probability-weighted score: each criterion's expected rating from its rating token's
    log-probabilities, averaged; None when any criterion's token has none."""
    if judged.value is None or not judged.logprobs:
        return None
    found = expected_ratings(judged.logprobs, [c.name for c in category.spec.criteria], RATING_VALUE)
    if any(v is None for v in found.values()):
        return None
    return round(sum(v for v in found.values() if v is not None) / len(found), 6)


class CategorySample(BaseModel):
    sample: int
    model: str | None = Field(default=None, description="The jury member that gave it (models given).")
    passed: bool | None = Field(description="The pass rule over this sample's ratings; null when it failed.")
    score: float | None = Field(description="This sample's mean rating (poor 0, sufficient 1, impressive 2).")
    ratings: dict[str, Rating | None] = {}
    expected_score: float | None = None
    error: str | None = None


class CategoryResult(BaseModel):
    passed: bool = Field(description="The category's pass rule over its checks; false when it was skipped.")
    checks: dict[str, Check]
    skipped: str | None = Field(default=None, description="Why the category did not run, e.g. 'no model'; "
                                                          "then it has no checks and counts neither way.")
    read_as: str | None = Field(default=None, description="How the judge's reply was read: json or repair; "
                                                          "null when it failed.")
    score: float | None = Field(default=None, description="The mean rating over the criteria (poor 0, sufficient 1, "
                                                          "impressive 2); with samples or models, the mean of theirs.")
    expected_score: float | None = Field(
        default=None, description="expected_score asked: the probability-weighted score, each criterion's rating "
                                  "weighed by its token's top log-probabilities (G-Eval); null where the backend "
                                  "gave none (only OpenAI-compatible backends do). Mean over samples.")
    samples: list[CategorySample] | None = Field(
        default=None, description="samples > 1 (or models given): every sample's pass, score and ratings, in order "
                                  "(by model, then sample); a failed one with its error.")
    sample_stats: SampleStats | None = Field(
        default=None, description="samples > 1: the spread of the samples' scores; failed samples counted and "
                                  "left out.")
    votes: Votes | None = Field(
        default=None, description="samples > 1 or models: the samples' pass/fail votes; `passed` is the majority "
                                  "(a split vote is Tie, consistent false, and does not pass); `checks` are a "
                                  "sample's that voted with it.")
    jury: Jury | None = Field(
        default=None, description="models given: each model's per-criterion mean rating, the jury's (their mean "
                                  "per criterion) and Krippendorff's alpha over the criteria; a failing model is "
                                  "counted and left out.")


async def judge_category(call: JudgeCall, asked: Sequence[Member], category: Category,
                         variables: dict[str, Any], usage: list[Usage], logprobs: bool = False) -> CategoryResult:
    """One category by each model (`asked`: call.members), the call's samples times at once; with one model
    and one sample, exactly its reply."""
    reply_model = _reply_model(category.spec)
    samples = call.samples

    async def one(model: ModelClient, sample: int) -> Judged[Any]:
        return await run_judge(model, category_request(category, variables, sample, logprobs), reply_model)

    by_member = await call.ask(asked, one)
    sampled = [j for member in by_member for j in member]
    usage.extend(j.usage for j in sampled)
    read = [read_category(category, j) for j in sampled]
    expected = [expected_category_score(category, j) if logprobs else None for j in sampled]
    if len(sampled) == 1:
        passed, checks, score = read[0]
        return CategoryResult(passed=passed, checks=checks, read_as=sampled[0].read_as, score=score,
                              expected_score=expected[0])
    votes = vote(["Failed" if j.value is None else "pass" if p else "fail" for j, (p, _, _) in zip(sampled, read, strict=True)])
    passed = votes.majority == "pass"
    pick = next((k for k, j in enumerate(sampled) if j.value is not None and read[k][0] == passed),
                next((k for k, j in enumerate(sampled) if j.value is not None), 0))
    scores = [r[2] for r in read]
    names = [c.name for c in category.spec.criteria]

    def member_verdict(ok: list[Judged[Any]]) -> tuple[list[float], float]:
        """A model's mean rating per criterion, and its mean score."""
        mine = [read_category(category, j) for j in ok]
        return ([round(statistics.fmean(RATING_VALUE[r[1][c].rating or "poor"] for r in mine), 6) for c in names],
                statistics.fmean(r[2] for r in mine if r[2] is not None))

    members, verdicts = jurors([name for name, _ in asked], by_member, member_verdict, lambda v: v[0])
    member_means = [v[1] for v in verdicts]
    found_expected = [e for e in expected if e is not None]
    per = samples
    return CategoryResult(
        passed=passed, checks=read[pick][1], read_as=sampled[pick].read_as,
        score=round(statistics.fmean(member_means), 6) if member_means else None,
        expected_score=round(statistics.fmean(found_expected), 6) if found_expected else None,
        samples=[CategorySample(sample=k % per, model=asked[k // per][0], passed=r[0] if j.value is not None else None,
                                score=r[2], expected_score=expected[k],
                                ratings={c: ch.rating for c, ch in r[1].items()} if j.value is not None else {},
                                error=j.failure.describe() if j.failure is not None else None)
                 for k, (j, r) in enumerate(zip(sampled, read, strict=True))],
        sample_stats=sample_stats(scores, [SampleFailure(sample=k, kind=j.failure.kind, message=j.failure.message)
                                           for k, j in enumerate(sampled) if j.failure is not None])
        if samples > 1 else None,
        votes=votes, jury=score_jury(members) if asked[0][0] is not None else None)


class AnalysisUsage(BaseModel):
    model_calls: int = Field(default=0, description="Model requests sent, retries and repair rounds included.")
    input_tokens: int = 0
    output_tokens: int = 0
    cache_hits: int = Field(default=0, description="Replies answered from the result cache (no model request).")
    cost_usd: float | None = Field(default=0.0, description="USD at the configured prices; null when unknown.")
    cached: bool = Field(default=False, description="Every reply came from the result cache: nothing was asked.")


class AnalysisResult(BaseModel):
    passed: bool = Field(description="True only when every check passes.")
    checks: list[Check]
    categories: dict[str, CategoryResult] = {}
    stopped_at: str | None = Field(default=None, description="The deterministic check that failed and stopped the run.")
    usage: AnalysisUsage = Field(default_factory=AnalysisUsage)
    partial: bool = Field(default=False, description="True when some LLM categories were skipped (no model): "
                                                     "`passed` then covers only the checks that ran.")
    note: str | None = Field(default=None, description="Why the result is partial and how to make it whole.")


async def evaluate_analysis(
    call: JudgeCall, *, analysis: Any, input_url: str | None = None,
    user_context: str | None = None,
    context_type: str | None = None, schema: dict[str, Any] | None = None,
    cardinality: dict[str, tuple[int, int]] | None = None, insight_fields: Sequence[str] | None = None,
    deterministic_checks: Sequence[str] = tuple(DETERMINISTIC), llm_judges: Sequence[str] = tuple(BUILTIN),
    custom: Mapping[str, Category] | None = None, progress: Progress = no_progress, logprobs: bool = False,
) -> AnalysisResult:
    """D-checks in the given order, stopping at the first failure; then the LLM categories, concurrently
    (each with the call's samples, by each of its models). Without a model backend the categories are skipped
    (partial). Progress: each check and each category (total: both, as asked)."""
    unknown = [d for d in deterministic_checks if d not in DETERMINISTIC]
    if unknown:
        raise InputError(f"unknown deterministic checks {unknown}; use {', '.join(DETERMINISTIC)}")
    categories = [load_category(n, custom) for n in dict.fromkeys(llm_judges)]  # checked before any work
    if "D-1" not in deterministic_checks and not isinstance(analysis, dict | list):
        deterministic_checks = ["D-1", *deterministic_checks]  # later checks need the parsed JSON
    checks: list[Check] = []
    data: Any = analysis
    steps = float(len(deterministic_checks) + len(categories))
    await progress(0, steps, f"{len(deterministic_checks)} deterministic check(s), then {len(categories)} "
                             "model-judged categor(ies)")
    for key in deterministic_checks:
        # Each check runs off the event loop: they are linear, but a large analysis still takes a while.
        if key == "D-1":
            check = await anyio.to_thread.run_sync(d1_json_validation, analysis)
            data = check.data
        elif key == "D-2":
            check = await anyio.to_thread.run_sync(d2_schema_compliance, data, schema or DEFAULT_SCHEMA)
        elif key == "D-3":
            check = await anyio.to_thread.run_sync(
                d3_format_compliance, data, insight_fields if insight_fields is not None else DEFAULT_INSIGHT_FIELDS)
        elif key == "D-4":
            check = await anyio.to_thread.run_sync(
                d4_field_cardinality, data, cardinality if cardinality is not None else DEFAULT_CARDINALITY)
        else:
            check = await anyio.to_thread.run_sync(d5_url_preservation, data, input_url)
        checks.append(check)
        await progress(len(checks), steps, f"{key} {check.check_name} {'passed' if check.passed else 'failed'}")
        if not check.passed:
            if len(checks) < steps:
                await progress(steps, steps, f"stopped at {key} {check.check_name}")
            return AnalysisResult(passed=False, checks=checks, stopped_at=f"{key} {check.check_name}")
    results: dict[str, CategoryResult] = {}
    usage: list[Usage] = []
    asked: list[Member] = []
    note: str | None = None
    if categories:
        try:
            asked = await call.members()
        except ConfigError as exc:  # no model: the deterministic checks stand on their own
            note = f"The LLM categories were skipped: {exc}"
    if not asked:
        skipped = {c.name: CategoryResult(passed=False, checks={}, skipped="no model") for c in categories}
        return AnalysisResult(passed=all(c.passed for c in checks), checks=checks, categories=skipped,
                              partial=bool(skipped), note=note)
    if categories:
        variables = {"analysis": json.dumps(data, indent=1, ensure_ascii=False), "user_context": user_context or "(none)",
                     "context_type": context_type or "unspecified",
                     "product_overview": json.dumps(_get(data, "product_overview"), indent=1, ensure_ascii=False)}

        async def one(category: Category) -> None:
            results[category.name] = result = await judge_category(call, asked, category, variables, usage, logprobs)
            passed = result.passed
            await progress(len(checks) + len(results), steps, f"category {category.name} "
                           f"{'passed' if passed else 'failed'} ({len(results)} of {len(categories)} categories)")

        for category in categories:  # rendered once before any request: a template the sandbox refuses stops here
            try:
                category_request(category, variables)
            except prompts.PromptError as exc:
                raise ConfigError(f"the analysis category {category.name!r} cannot be rendered: {exc}") from None
        async with anyio.create_task_group() as tg:
            for category in categories:
                tg.start_soon(one, category)
    ordered = {c.name: results[c.name] for c in categories}
    all_checks = checks + [ch for r in ordered.values() for ch in r.checks.values()]
    total = sum(usage, Usage())
    return AnalysisResult(passed=all(c.passed for c in all_checks), checks=all_checks, categories=ordered,
                          usage=AnalysisUsage(model_calls=total.requests, input_tokens=total.input_tokens,
                                              output_tokens=total.output_tokens, cache_hits=total.cache_hits,
                                              cost_usd=total.cost_usd, cached=total.cached))
