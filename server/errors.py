"""The one place that maps failures to MCP tool errors (isError results): every failure is first read as a
`JudgeFailure` (`failure_of`), then said by its kind (`tool_error`)."""

from __future__ import annotations

import functools
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from types import SimpleNamespace
from typing import Any, ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from judges import telemetry
from judges.errors import MODEL_KINDS, SECRETS, JudgeError, JudgeFailure, closest
from prompts import PromptError
from rag.formats import DocumentError
from rag.store import StoreError

P = ParamSpec("P")
R = TypeVar("R")
log = logging.getLogger("judge_mcp")
WRAPPED = "__judge_mcp_tool_errors__"


def tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Turn every failure into an isError result that says what went wrong and what to do: the caller's,
    configuration and backend errors as such; anything unexpected as an incident whose id is in the
    message and, with the traceback, in the log on stderr. Every tool goes through this one wrapper."""

    tool = fn.__name__.removesuffix("_tool")

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        started = time.monotonic()
        outcome = "ok"
        result: Any = None
        # The call's trace span (judges/telemetry.py; None unless OTEL_EXPORTER_OTLP_ENDPOINT is set).
        span = telemetry.tool_span(tool, _organization(args, kwargs)) if telemetry.tracing() else nullcontext()
        current = span.__enter__()
        try:
            result = await fn(*args, **kwargs)
            return result
        except (JudgeError, PromptError, DocumentError, StoreError) as exc:
            failure = failure_of(exc)
            outcome = _OUTCOME.get(failure.kind, f"backend_{failure.kind}")
            raise tool_error(failure) from exc
        except ToolError:
            outcome = "error"
            raise
        except BaseException as exc:
            if not isinstance(exc, Exception):  # cancelled: logged, not mapped
                outcome = "cancelled"
                raise
            incident = uuid.uuid4().hex[:12]
            outcome = f"incident {incident}"
            log.error("incident %s: tool %s failed unexpectedly", incident, fn.__name__, exc_info=exc)
            raise ToolError(
                f"internal error, incident {incident}: {type(exc).__name__}: "
                f"{SECRETS.scrub(str(exc))[:300] or 'no message'}. "
                "This is not a problem with your input. Retry once; if it happens again, give the server's "
                "operator the incident id (the traceback is in the server's log on stderr)."
            ) from exc
        finally:
            log_call(tool, args, kwargs, time.monotonic() - started, outcome, result)
            telemetry.end_tool_span(current, outcome, _job_of(tool, kwargs, result))
            span.__exit__(None, None, None)

    setattr(wrapper, WRAPPED, True)
    return wrapper


def failure_of(exc: BaseException) -> JudgeFailure:
    """Any failure of ours as the one shape (rag/ and prompts/ import nothing of judges/, so theirs are read here)."""
    if isinstance(exc, JudgeError):
        return exc.failure
    if isinstance(exc, StoreError):
        return JudgeFailure("store_error", str(exc))
    return JudgeFailure("invalid_input", str(exc))  # PromptError, DocumentError: the caller's input


# How each kind opens its tool error, and its outcome in the call log.
_PREFIX = {"invalid_input": "invalid input: ", "not_found": "invalid input: ", "cancelled": "",
           "configuration": "server configuration: ", "store_error": "guideline store: ", "budget_exceeded": "",
           "forbidden": "permission denied: ", "over_limit": "limit reached: ", "unavailable": "unavailable: "}
_OUTCOME = {"invalid_input": "invalid_input", "not_found": "invalid_input", "cancelled": "cancelled",
            "configuration": "configuration", "store_error": "store_error", "budget_exceeded": "budget_exceeded",
            "forbidden": "forbidden", "over_limit": "over_limit", "unavailable": "unavailable"}


def tool_error(failure: JudgeFailure) -> ToolError:
    """The one mapping from a failure to the tool error the caller reads: a model or backend failure names its
    kind; the caller's, the configuration's and the store's say whose it is; a hint, when there is one, follows."""
    if failure.kind in MODEL_KINDS:
        text = f"model backend ({failure.kind}): {failure.message}"
    else:
        text = _PREFIX[failure.kind] + failure.message
    if failure.hint:
        text = f"{text} ({failure.hint})"
    return ToolError(SECRETS.scrub(text))  # a JudgeFailure is scrubbed already; rag's and prompts' errors are not


def log_call(tool: str, args: Any, kwargs: dict[str, Any], seconds: float, outcome: str, result: Any) -> None:
    """One line per tool call on stderr: tool, organization, duration, outcome, model requests, tokens, the cost in
    USD (null when a model's price is unknown) and whether the result came from the cache."""
    telemetry.count_call(tool, outcome, seconds)  # Prometheus, when /metrics is on
    if not log.isEnabledFor(logging.INFO):
        return
    org = _organization(args, kwargs)
    structured = getattr(result, "structured_content", None)  # a CallToolResult (tools that may run as jobs)
    usage = getattr(result, "usage", None)
    if usage is None and isinstance(structured, dict) and isinstance(structured.get("usage"), dict):
        usage = SimpleNamespace(**structured["usage"])
    requests = getattr(usage, "requests", getattr(usage, "model_calls", None))
    spent = (f" requests={requests} tokens={getattr(usage, 'input_tokens', 0)}/{getattr(usage, 'output_tokens', 0)}"
             if requests is not None else "")
    if requests is not None and hasattr(usage, "cost_usd"):
        cost = getattr(usage, "cost_usd", None)
        spent += f" cost_usd={'null' if cost is None else f'{cost:.6f}'} cached={str(bool(getattr(usage, 'cached', False))).lower()}"
    job = _job_of(tool, kwargs, result)
    spent += f" job={job}" if job else ""
    log.info("tool=%s org=%s duration_ms=%.0f outcome=%s%s", tool, org, seconds * 1000, outcome, spent)


def _organization(args: Any, kwargs: dict[str, Any]) -> str:
    from .context import organization_of

    ctx = kwargs.get("ctx", args[0] if args else None)
    try:
        return organization_of(ctx)
    except Exception:  # no request context (a direct call in a test)
        return "-"


def _job_of(tool: str, kwargs: dict[str, Any], result: Any) -> str | None:
    """The job id: a background job's own run (job_id passed by the runner), or the call that started it."""
    if tool in ("get_job", "cancel_job"):
        return None
    job = kwargs.get("job_id")
    structured = getattr(result, "structured_content", None)
    if job is None and isinstance(structured, dict) and "status" in structured:
        job = structured.get("job_id")
    return str(job) if job else None


# --- the SDK's argument validation, in words ------------------------------------------------

_EXPECTED = {"string": "text", "integer": "a whole number", "number": "a number", "boolean": "true or false",
             "array": "a list", "object": "an object", "null": "null"}
_SAMPLE: dict[str, Any] = {"string": "text", "integer": 5, "number": 0.5, "boolean": True, "array": [], "object": {}}


def _node(schema: dict[str, Any], node: Any) -> dict[str, Any]:
    while isinstance(node, dict) and "$ref" in node:
        node = schema.get("$defs", {}).get(node["$ref"].rsplit("/", 1)[-1], {})
    return node if isinstance(node, dict) else {}


def _options(schema: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    """The non-null alternatives of a node (anyOf branches, or the node itself)."""
    node = _node(schema, node)
    if "anyOf" in node:
        return [_node(schema, o) for o in node["anyOf"] if _node(schema, o).get("type") != "null"]
    return [node]


def _child(schema: dict[str, Any], node: dict[str, Any], part: str | int) -> dict[str, Any] | None:
    """The schema node at `part` below `node`; None when `part` is not a place (a union branch's type tag)."""
    options = _options(schema, node)
    if isinstance(part, str) and len(options) > 1 and not any(part in o.get("properties", {}) for o in options):
        return None
    for option in options:
        if isinstance(part, int) and "items" in option:
            return _node(schema, option["items"])
        if isinstance(part, str) and part in option.get("properties", {}):
            found = _node(schema, option["properties"][part])
            return {**found, "description": option["properties"][part].get("description", found.get("description"))}
        if isinstance(part, str) and isinstance(option.get("additionalProperties"), dict):
            return _node(schema, option["additionalProperties"])
    return None


def _sample(schema: dict[str, Any], node: dict[str, Any], depth: int = 0) -> Any:
    option = _options(schema, node)[0] if _options(schema, node) else {}
    if "enum" in option:
        return option["enum"][0]
    kind = option.get("type", "string")
    if kind == "array" and isinstance(option.get("items"), dict) and depth < 3:
        return [_sample(schema, _node(schema, option["items"]), depth + 1)]
    if kind == "object" and option.get("properties") and depth < 3:
        required = option.get("required") or list(option["properties"])
        return {k: _sample(schema, _node(schema, option["properties"][k]), depth + 1) for k in required}
    if kind in ("integer", "number"):
        low = option.get("minimum", option.get("exclusiveMinimum"))
        high = option.get("maximum", option.get("exclusiveMaximum"))
        if low is not None and high is not None and kind == "number":  # 0.5 would read as a 0..1 scale on 0..100
            middle = round((low + high) / 2, 2)
            return int(middle) if middle == int(middle) else middle
        return low if low is not None and kind == "integer" else _SAMPLE[kind]
    return _SAMPLE.get(kind, "text")


# Examples for the arguments people most often get wrong, where the schema alone would only say "text".
EXAMPLES = {
    "root": '"/home/me/project"', "agent_id": '"3f2c…" (an id from list_agents)', "images": '["/home/me/project/render.png"]',
    "candidates": '["/home/me/project/a.png", "/home/me/project/b.png"]', "brief": '"A red bicycle on a beach at dawn"',
    "spec": '"add(a, b) returns the sum of two integers"', "instruction": '"Make the sky blue"',
    "query": '"logo placement"', "patch": '{"ops": [{"kind": "add", "path": "notes.txt", "content": "hello\\n"}]}',
    "content": '"def add(a, b):\\n    return a + b\\n"', "path": '"src/app.py"', "prompt": '"a red bicycle, golden hour"',
    "run_id": '"5b1e…" (the run_id evaluate_image returned)', "document_id": '"9d0a…" (an id from list_guidelines)',
    "cardinality": '{"insights": [3, 5]}', "text": '"Paris is the capital of France."',
}


def _example(schema: dict[str, Any], node: dict[str, Any] | None, name: str = "") -> str:
    """An example of a valid value: the description's own 'e.g. …' when it has one, else one built from the schema."""
    if node is None:
        return ""
    if name in EXAMPLES:
        return EXAMPLES[name]
    described = re.search(r"\be\.g\. (.+?)(?:\)|\.$|\. |;|$)", node.get("description") or "")
    if described:
        return described.group(1).strip()
    return json.dumps(_sample(schema, node))


def _what(error: Any, node: dict[str, Any] | None, schema: dict[str, Any]) -> str:
    kind = error["type"]
    if kind == "missing":
        return "is required"
    bounded = [o for o in _options(schema, node) if "minimum" in o and "maximum" in o] if node is not None else []
    if kind in ("greater_than_equal", "less_than_equal") and bounded:  # the range says what a valid value is
        return f"must be between {bounded[0]['minimum']:g} and {bounded[0]['maximum']:g}"
    if kind in ("literal_error", "enum"):
        return f"must be one of {error.get('ctx', {}).get('expected', '')}"
    if kind.endswith(("_type", "_parsing")) and node is not None:
        kinds = [_EXPECTED.get(o.get("type", ""), "") for o in _options(schema, node)]
        return "must be " + " or ".join(k for k in kinds if k)
    return str(error["msg"]).replace("Input should be", "must be").replace("Value error, ", "")


def _closest_value(schema: dict[str, Any], node: dict[str, Any] | None, error: Any) -> str | None:
    """The allowed value nearest a misspelt one ("score_txt" -> "score_text"), or None."""
    got = error.get("input")
    if node is None or not isinstance(got, str):
        return None
    allowed = [str(v) for o in _options(schema, node) for v in (o.get("enum") or ([o["const"]] if "const" in o else []))]
    return closest(got, allowed)


def arguments_error(schema: dict[str, Any], exc: Any) -> str:
    """The SDK's argument ValidationError as one or two sentences: which argument, what was wrong, an example."""
    sentences: list[str] = []
    seen: dict[str, list[Any]] = {}
    for error in exc.errors():
        loc, node = [], {"properties": schema.get("properties", {})}
        for part in error["loc"]:
            child = _child(schema, node, part)
            if child is None:
                break  # a union branch's type tag, not a place
            loc.append(part)
            node = child
        where = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(loc))
        seen.setdefault(where or "the arguments", [error, node if loc else None, loc])
    for where, (error, node, loc) in list(seen.items())[:2]:
        got = "" if error["type"] == "missing" else f" (got {json.dumps(error.get('input'), default=str)[:60]})"
        what = _what(error, node, schema)
        example = "" if what.startswith("must be between") else \
            _example(schema, node, str(next((p for p in reversed(loc) if isinstance(p, str)), "")))
        near = _closest_value(schema, node, error) if error["type"] in ("literal_error", "enum") else None
        sentences.append(f"{where} {what}{got}" + (f"; did you mean {json.dumps(near)}?" if near else
                                                  (f", e.g. {example}" if example else "") + "."))
    return "invalid input: " + " ".join(sentences)


# Names callers reach for that no difflib ratio links to ours.
_SYNONYMS = {"search": "query", "q": "query", "filter": "query", "id": "agent_id", "agent": "agent_id",
             "image": "images", "file": "path", "filepath": "path", "directory": "root", "dir": "root",
             "project": "root", "model_name": "model", "n": "samples", "k": "top_k", "texts": "candidates",
             "answers": "candidates", "responses": "candidates", "options": "candidates"}


def _closest(name: str, valid: list[str]) -> str | None:
    import difflib

    if _SYNONYMS.get(name.lower()) in valid:  # said outright: upload_guideline's 'file' is its path, not its filename
        return _SYNONYMS[name.lower()]
    close = closest(name, valid)
    if close or len(name) > 200:
        return close
    near = difflib.get_close_matches(name.lower(), list(_SYNONYMS), n=1, cutoff=0.75)  # "serch" -> "search"
    synonym = _SYNONYMS.get(name.lower()) or (_SYNONYMS[near[0]] if near else None)
    return synonym if synonym in valid else None


def unknown_tool(name: str, names: list[str]) -> str:
    """A call of a tool this server does not offer: the closest tool name it does offer, if one is close."""
    close = closest(name, names)
    return f"Unknown tool: {name}" + (f"; did you mean '{close}'? (tools/list lists them)" if close else "")


def _unknown_key(schema: dict[str, Any], node: dict[str, Any], value: Any, where: str,
                 depth: int = 0) -> tuple[str, str, list[str]] | None:
    """The first key of `value` that no object option of `node` declares: (where, key, the declared keys).
    Objects that declare no properties, or allow other keys, take any key."""
    if depth > 12:
        return None
    options = _options(schema, node)
    if isinstance(value, dict):
        objects = [o for o in options if o.get("type", "object") == "object" and "properties" in o]
        if not objects or len(objects) != len(options) or \
                any(o.get("additionalProperties") not in (None, False) for o in objects):
            return None
        declared = list(dict.fromkeys(k for o in objects for k in o["properties"]))
        for key, item in value.items():
            if key not in declared:
                return where, key, declared
            for option in objects:
                if key in option["properties"]:
                    found = _unknown_key(schema, option["properties"][key], item,
                                         f"{where}.{key}" if where else key, depth + 1)
                    if found:
                        return found
                    break
    elif isinstance(value, list):
        items = [o["items"] for o in options if isinstance(o.get("items"), dict)]
        if len(items) == 1:
            for i, item in enumerate(value[:100]):  # a misspelt field repeats; 10^5 rows cost the loop nothing
                found = _unknown_key(schema, items[0], item, f"{where}[{i}]", depth + 1)
                if found:
                    return found
    return None


def unknown_argument(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """A sentence for the first argument (or field of an object argument) the tool's input schema does not
    declare, with the closest valid name; None when every name is known. A misspelt option is never ignored."""
    found = _unknown_key(schema, schema, arguments, "")
    if found is None:
        return None
    where, key, declared = found
    close = _closest(key, declared)
    place = f"argument '{key}'" if not where else f"field '{key}' in {where}"
    hint = f"did you mean '{close}'? " if close else ""
    return f"invalid input: unknown {place}; {hint}valid: {', '.join(declared)}"
