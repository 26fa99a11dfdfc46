"""`judge-mcp eval TOOL DATASET`: run a judging tool over a JSONL dataset through the server itself (an in-process
MCP client on the server `judge-mcp` builds, so admission, strict arguments, the result cache, budgets, cost
accounting and the concurrency limits all apply), check each result against its expectations and the suite's
assertions, and write JSON, JUnit XML and HTML reports. Exit 0 when the run passes, 1 when it does not, 2 when it
could not be done."""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from judges.errors import ConfigError, InputError, JudgeError

from .settings import Settings

# The judging tools eval runs (issue 32); every other tool manages state or reads it.
JUDGING_TOOLS = ("score_text", "pairwise_compare", "rank_texts", "compare_to_reference", "evaluate_rag_answer",
                 "evaluate_trajectory", "judge_code", "evaluate_analysis", "evaluate_image")
MAX_DATASET_BYTES = 50 * 1024 * 1024
MAX_ITEMS = 10_000
MAX_ASSERTIONS = 100
MAX_ASSERTION_CHARS = 2000
OWN_KEYS = ("id", "expect")  # a dataset line's keys that are eval's, not the tool's arguments
EXAMPLE_LINE = '{"id": "q1", "text": "Paris.", "instruction": "Capital of France?", "rubric": ["correctness"], ' \
               '"expect": {"failed": 0}}'
EXAMPLE_ASSERTIONS = "'total >= 70', 'verdict in [accept, revise]', 'value == Response A', 'no judge failures'"
NO_JUDGE_FAILURES = "no judge failures"
EXIT_PASSED, EXIT_FAILED, EXIT_NOT_RUN = 0, 1, 2


class EvalInterrupted(Exception):
    """Ctrl-C (SIGINT) stopped the run: the items answered so far, out of all of them."""

    def __init__(self, answered: int, total: int):
        super().__init__(f"interrupted after {answered} of {total} items")
        self.answered, self.total = answered, total


# --- assertions -------------------------------------------------------------------------------------------------

_COMPARISON = re.compile(r"^\s*(?P<path>[^\s=!<>]+)\s*(?P<op>==|!=|>=|<=|>|<)\s*(?P<value>.+?)\s*$")
_MEMBERSHIP = re.compile(r"^\s*(?P<path>\S+)\s+(?P<op>not in|in|contains)\s+(?P<value>.+?)\s*$")
_MISSING = object()


@dataclass(frozen=True)
class Assertion:
    """One check on a result: `path op value` (a dot path into the result; list items by index), or the check
    that no judge failed."""

    name: str
    path: str = ""
    op: str = "=="
    value: Any = None

    def check(self, result: Any, is_error: bool) -> dict[str, Any]:
        """{name, passed, expected, actual} for this result."""
        if self.op == NO_JUDGE_FAILURES:
            found = [] if result is None else judge_failures(result)
            if is_error:
                found.insert(0, "the call returned an error")
            return {"name": self.name, "passed": not found, "expected": "no judge failures", "actual": found}
        actual = lookup(result, self.path)
        shown = None if actual is _MISSING else actual
        return {"name": self.name, "passed": actual is not _MISSING and _holds(self.op, actual, self.value),
                "expected": self.value if self.op == "==" else f"{self.op} {json.dumps(self.value)}",
                "actual": shown if actual is not _MISSING else _no_field(result, self.path)}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _holds(op: str, actual: Any, expected: Any) -> bool:
    if op == "==":
        return bool(_same(actual, expected))
    if op == "!=":
        return not _same(actual, expected)
    if op in (">=", "<=", ">", "<"):
        if not (_number(actual) and _number(expected)):
            return False
        return {">=": actual >= expected, "<=": actual <= expected, ">": actual > expected,
                "<": actual < expected}[op]
    if op in ("in", "not in"):
        inside = any(_same(actual, e) for e in expected)
        return inside if op == "in" else not inside
    # contains: a list holding the value, or a text holding the text
    if isinstance(actual, list):
        return any(_same(a, expected) for a in actual)
    return isinstance(actual, str) and isinstance(expected, str) and expected in actual


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def lookup(result: Any, path: str) -> Any:
    """The value at a dot path (`meta.orders.0.verdict`; a negative index counts from the end), or _MISSING."""
    node = result
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and re.fullmatch(r"-?\d{1,9}", part) and -len(node) <= int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node


def _no_field(result: Any, path: str) -> str:
    """What a path that finds nothing says, with the nearest key where it stopped ('consistnt' -> 'consistent')."""
    from judges.errors import closest

    node, parts = result, path.split(".")
    for i, part in enumerate(parts):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and re.fullmatch(r"-?\d{1,9}", part) and -len(node) <= int(part) < len(node):
            node = node[int(part)]
        else:
            near = closest(part, [str(k) for k in node]) if isinstance(node, dict) else None
            meant = ".".join([*parts[:i], near, *parts[i + 1:]]) if near else None
            return f"no field {path!r} in the result" + (f"; did you mean {meant!r}?" if meant else "")
    return f"no field {path!r} in the result"


# Keys that hold the judged project's own findings (gate runs, lint errors, failing tests), not a judge's failure.
_NOT_JUDGES = frozenset({"signals", "gates", "brief", "arguments"})


def judge_failures(result: Any, where: str = "", depth: int = 0) -> list[str]:
    """Where in a result a judge (a model call, a sample, a jury member, an order, a game, a check) failed: a
    `failure`, `failure_kind` or `error` that is set, a non-empty `failures` list, a `status` of failed or
    model_failed, a positive `failed` or `judges_failed` count. Each as `path: what`."""
    found: list[str] = []
    if depth > 64:
        return found
    if isinstance(result, dict):
        for key, value in result.items():
            here = f"{where}.{key}" if where else str(key)
            if key in _NOT_JUDGES:
                continue
            if key in ("failure", "failure_kind", "error") and value not in (None, "", {}):
                found.append(f"{here}: {_short(value)}")
            elif key == "failures" and isinstance(value, list) and value:
                found.append(f"{here}: {len(value)} failure(s)")
            elif key == "status" and value in ("failed", "model_failed"):
                found.append(f"{here}: {value}")
            elif key in ("failed", "judges_failed") and _number(value) and value > 0:
                found.append(f"{here}: {value}")
            else:
                found.extend(judge_failures(value, here, depth + 1))
    elif isinstance(result, list):
        for i, value in enumerate(result):
            found.extend(judge_failures(value, f"{where}.{i}" if where else str(i), depth + 1))
    return found


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 200 else text[:200] + "…"


def parse_assertion(text: Any, where: str) -> Assertion:
    """An assertion written in a suite: `total >= 70`, `verdict in [accept, revise]`, `no judge failures`, or
    `{path: value}` (equality, as a dataset line's `expect`)."""
    import yaml

    if isinstance(text, dict) and len(text) == 1:
        (path, value), = text.items()
        return expectation(str(path), value)
    if not isinstance(text, str):
        raise InputError(f"{where}: an assertion is a text such as {EXAMPLE_ASSERTIONS}, or {{path: value}} "
                         f"(got {_short(text)})")
    if text.strip().lower() == NO_JUDGE_FAILURES:
        return Assertion(name=NO_JUDGE_FAILURES, op=NO_JUDGE_FAILURES)
    if len(text) > MAX_ASSERTION_CHARS:
        raise InputError(f"{where}: an assertion of {len(text):,} characters; at most {MAX_ASSERTION_CHARS:,}")
    match = _COMPARISON.match(text) or _MEMBERSHIP.match(text)
    if match is None:
        raise InputError(f"{where}: cannot read the assertion {text!r}: write `PATH OP VALUE` with OP one of "
                         f"==, !=, >=, <=, >, <, in, not in, contains, e.g. {EXAMPLE_ASSERTIONS}")
    path, op, raw = match["path"], match["op"], match["value"]
    try:
        value = load_yaml(raw, where)  # `[accept, revise]`, `70`, `Response A`, `"quoted"`, `null`
    except yaml.YAMLError:
        value = raw
    if isinstance(value, dict | set):
        value = raw
    if op in ("in", "not in") and not isinstance(value, list):
        raise InputError(f"{where}: `{op}` takes a list, e.g. 'verdict {op} [accept, revise]' (got {raw!r})")
    if op in (">=", "<=", ">", "<") and not _number(value):
        raise InputError(f"{where}: `{op}` compares with a number, e.g. 'total {op} 70' (got {raw!r})")
    return Assertion(name=text.strip(), path=path, op=op, value=value)


def load_yaml(text: str, where: str) -> Any:
    """YAML without aliases: `*name` could make a structure refer to itself (`&a [*a]`, which no comparison
    ends on) or, nested, expand to billions of elements once serialised (a billion laughs)."""
    import yaml

    from judges.inputs.caller_values import MAX_DEPTH, refuse_lone_surrogates

    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):  # the events, read without recursion
        if isinstance(event, yaml.AliasEvent):
            raise InputError(f"{where}: YAML aliases (*name) are not supported; write the value out")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:  # yaml's composer recurses per level: a deeper one ends in a RecursionError
                raise InputError(f"{where}: nested more than {MAX_DEPTH} levels deep; write it flatter (at most "
                                 f"{MAX_DEPTH} levels of lists and mappings)")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    value = yaml.safe_load(text)
    refuse_lone_surrogates(value, where)  # "\ud800" in double quotes: no report could be written with it
    return value


def expectation(path: str, value: Any) -> Assertion:
    """A dataset line's `expect` entry: the field at `path` equals `value`."""
    return Assertion(name=f"{path} == {json.dumps(value, ensure_ascii=False)}", path=path, op="==", value=value)


# --- the suite and the dataset ------------------------------------------------------------------------------------

SUITE_KEYS = ("arguments", "assert", "min_pass_rate", "description")


@dataclass
class Suite:
    """A suite file: arguments every item shares (an item's own win), assertions every item must meet, the share
    of items that must pass."""

    path: Path | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    assertions: list[Assertion] = field(default_factory=list)
    min_pass_rate: float | None = None


def load_suite(path: Path) -> Suite:
    """A YAML (.yaml, .yml) or JSON suite file, refused with what is wrong."""
    import yaml

    from judges.inputs.caller_values import loads

    text = _read(path, "suite")
    try:
        data = load_yaml(text, f"suite {path}") if path.suffix.lower() in (".yaml", ".yml") else \
            loads(text, f"suite {path}")
    except InputError:
        raise
    except (yaml.YAMLError, ValueError) as exc:
        raise InputError(f"suite {path}: not valid {'YAML' if path.suffix.lower() in ('.yaml', '.yml') else 'JSON'}: "
                         f"{' '.join(str(exc).split())[:300]}") from None
    if not isinstance(data, dict):
        raise InputError(f"suite {path}: must be a mapping with any of {', '.join(SUITE_KEYS)}, e.g. "
                         "{\"arguments\": {\"rubric\": [\"correctness\"]}, \"assert\": [\"total >= 70\"], "
                         "\"min_pass_rate\": 0.9}")
    for key in data:
        if key not in SUITE_KEYS:
            from .errors import _closest

            close = _closest(str(key), list(SUITE_KEYS))
            raise InputError(f"suite {path}: unknown key {key!r}; {f'did you mean {close!r}? ' if close else ''}"
                             f"valid: {', '.join(SUITE_KEYS)}")
    arguments = data.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise InputError(f"suite {path}: arguments must be a mapping of the tool's arguments, e.g. "
                         "{\"rubric\": [\"correctness\"]}")
    raw = data.get("assert") or []
    raw = [raw] if isinstance(raw, str) else raw
    if not isinstance(raw, list) or len(raw) > MAX_ASSERTIONS:
        raise InputError(f"suite {path}: assert must be a list of at most {MAX_ASSERTIONS} assertions, e.g. "
                         f"[{EXAMPLE_ASSERTIONS}]")
    rate = data.get("min_pass_rate")
    if rate is not None and not (_number(rate) and 0 <= rate <= 1):
        raise InputError(f"suite {path}: min_pass_rate must be a number from 0 to 1, e.g. 0.9 (got {rate!r})")
    return Suite(path=path, arguments=arguments,
                 assertions=[parse_assertion(a, f"suite {path}, assert[{i}]") for i, a in enumerate(raw)],
                 min_pass_rate=rate)


@dataclass
class Item:
    index: int  # the dataset line, from 1
    id: str | None
    arguments: dict[str, Any]
    assertions: list[Assertion]


def load_dataset(path: Path, suite: Suite) -> list[Item]:
    """The items of a JSONL dataset (blank lines skipped): each line the tool's arguments, with an optional `id`
    and `expect` ({dot path: value}), merged over the suite's arguments."""
    from judges.inputs.caller_values import loads

    items: list[Item] = []
    for number, line in enumerate(_read(path, "dataset").splitlines(), 1):
        if not line.strip():
            continue
        where = f"dataset {path} line {number}"
        try:
            data = loads(line, where)
        except JudgeError as exc:
            raise InputError(f"{exc}; each line is one JSON object, e.g. {EXAMPLE_LINE}") from None
        except ValueError as exc:
            raise InputError(f"{where}: not JSON ({exc}); each line is one JSON object, e.g. {EXAMPLE_LINE}") \
                from None
        if not isinstance(data, dict):
            raise InputError(f"{where}: must be a JSON object of the tool's arguments, e.g. {EXAMPLE_LINE}")
        expect = data.pop("expect", None) or {}
        if not isinstance(expect, dict):
            raise InputError(f"{where}: expect must be an object {{dot path: value}}, e.g. "
                             "{\"verdict\": \"accept\"} or {\"meta.orders.0.verdict\": \"Response A\"}")
        ident = data.pop("id", None)
        if ident is not None and not isinstance(ident, str | int):
            raise InputError(f"{where}: id must be a text or a number, e.g. \"q1\"")
        if data.get("background"):
            raise InputError(f"{where}: background: true would only start a job; eval waits for each result, "
                             "so leave background out")
        if len(items) == MAX_ITEMS:
            raise InputError(f"dataset {path}: more than {MAX_ITEMS} items; split it into several runs")
        items.append(Item(index=number, id=None if ident is None else str(ident),
                          arguments={**suite.arguments, **data},
                          assertions=[expectation(str(k), v) for k, v in expect.items()] + suite.assertions))
    if not items:
        raise InputError(f"dataset {path} has no items; each line is one JSON object, e.g. {EXAMPLE_LINE}")
    return items


def _read(path: Path, what: str) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_DATASET_BYTES:
            raise InputError(f"{what} {path} is {size:,} bytes; at most {MAX_DATASET_BYTES:,}")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} {path}: no such file") from None
    except UnicodeDecodeError:
        raise InputError(f"{what} {path}: not UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot be read ({exc.strerror})") from None


def check_tool(tool: str) -> None:
    if tool in JUDGING_TOOLS:
        return
    from .errors import _closest

    close = _closest(tool, list(JUDGING_TOOLS))
    hint = f"did you mean {close!r}? " if close else ""
    raise InputError(f"{tool!r} is not a judging tool; {hint}eval runs one of {', '.join(JUDGING_TOOLS)}")


# --- the run ------------------------------------------------------------------------------------------------------


def item_record(item: Item, is_error: bool, result: dict[str, Any] | None, error: str | None) -> dict[str, Any]:
    """One item of the JSON report: its call, the tool's structured result, the checks and what it cost."""
    assertions = [a.check(result, is_error) for a in item.assertions]
    usage = (result or {}).get("usage") if isinstance(result, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    record: dict[str, Any] = {"index": item.index}
    if item.id is not None:
        record["id"] = item.id
    record.update({
        "arguments": item.arguments, "is_error": is_error, "result": result, "error": error,
        "assertions": assertions, "passed": not is_error and all(a["passed"] for a in assertions),
        "cached": bool(usage.get("cached", False)), "cost_usd": usage.get("cost_usd", 0.0),
        "model_requests": int(usage.get("requests", 0) or 0),
    })
    return record


def summarise(items: list[dict[str, Any]], min_pass_rate: float) -> dict[str, Any]:
    passed = sum(1 for i in items if i["passed"])
    errors = sum(1 for i in items if i["is_error"])
    costs = [i["cost_usd"] for i in items]
    rate = passed / len(items) if items else 0.0
    return {"items": len(items), "passed": passed, "failed": len(items) - passed - errors, "errors": errors,
            "pass_rate": round(rate, 6), "min_pass_rate": min_pass_rate, "ok": rate >= min_pass_rate,
            "cost_usd": None if any(c is None for c in costs) else round(sum(costs), 10),
            "model_requests": sum(i.pop("model_requests") for i in items)}


class Progress:
    """A progress bar on a terminal (tqdm, on stderr); one plain line per item otherwise (CI logs)."""

    def __init__(self, total: int, stream: Any = None):
        self.stream = stream or sys.stderr
        self.total, self.done = total, 0
        self.bar: Any = None
        if getattr(self.stream, "isatty", lambda: False)():
            import os

            from tqdm import tqdm

            # The terminal's size, 80x24 when it says none: a pseudo-terminal nobody sized says 0x0, and tqdm
            # then hides the bar below the last of 0 rows.
            try:
                columns, rows = os.get_terminal_size(self.stream.fileno())
            except (AttributeError, OSError, ValueError):
                columns, rows = 0, 0
            self.bar = tqdm(total=total, file=self.stream, unit="item", desc="judge-mcp eval", ncols=columns or 80,
                            nrows=rows or 24)

    def item(self, record: dict[str, Any], seconds: float) -> None:
        self.done += 1
        state = "error" if record["is_error"] else "passed" if record["passed"] else "failed"
        if self.bar is not None:
            self.bar.update(1)
            return
        name = f"item {record['index']}" + (f" ({record['id']})" if "id" in record else "")
        extra = ", cached" if record["cached"] else ""
        failing = next((a for a in record["assertions"] if not a["passed"]), None)
        missing = failing is not None and isinstance(failing["actual"], str) and failing["actual"].startswith("no field ")
        why = f": {record['error'][:200]}" if record["is_error"] and record["error"] else \
            f": {failing['name']}" + (f" ({failing['actual']})" if missing else "") \
            if failing and state == "failed" else ""
        self.stream.write(f"judge-mcp eval: [{self.done}/{self.total}] {name} {state} ({seconds:.2f} s{extra}){why}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


async def run_items(settings: Settings, tool: str, items: list[Item], *, roots: list[Path], concurrency: int,
                    progress: Progress | None = None) -> list[dict[str, Any]]:
    """Each item called through an in-process MCP client on the server judge-mcp builds from `settings`
    (the client offers `roots` as its MCP roots, used when no roots are configured), at most `concurrency`
    at once; the records in dataset order."""
    import anyio
    from mcp import Client
    from mcp.types import ListRootsResult, Root, TextContent

    from .app import create_server

    async def offered_roots(context: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=root.as_uri(), name=root.name or str(root))  # type: ignore[arg-type]
                                      for root in roots])

    records: list[dict[str, Any] | None] = [None] * len(items)
    limit = anyio.CapacityLimiter(concurrency)
    if "warm_embeddings" not in settings.model_fields_set:
        # A run is over in seconds: the embedding model and parse worker load when an item first needs them
        # (an agent's guidelines), not in a warm-up that competes with the run for the CPU.
        settings = settings.model_copy(update={"warm_embeddings": False})
    server = create_server(settings, client_roots=True)
    async with Client(server, list_roots_callback=offered_roots) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        if tool not in listed:
            raise ConfigError(f"the tool {tool} is not enabled on this server (JUDGE_MCP_TOOLSETS="
                              f"{','.join(settings.toolsets or [])})")

        async def run(position: int, item: Item) -> None:
            async with limit:
                started = time.monotonic()
                reply = await client.call_tool(tool, item.arguments)
                text = next((c.text for c in reply.content if isinstance(c, TextContent)), "")
                structured = reply.structured_content
                record = item_record(item, bool(reply.is_error), structured if isinstance(structured, dict) else None,
                                     text if reply.is_error else None)
                records[position] = record
                if progress is not None:
                    progress.item(record, time.monotonic() - started)

        interrupted = False

        async def stop_on_signal(scope: anyio.CancelScope) -> None:
            """Ctrl-C (or SIGTERM) cancels the calls in flight; the server then closes as it does at any end."""
            nonlocal interrupted
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    interrupted = True
                    scope.cancel()
                    return

        async with anyio.create_task_group() as watch:
            watch.start_soon(stop_on_signal, watch.cancel_scope)
            async with anyio.create_task_group() as tg:
                for position, item in enumerate(items):
                    tg.start_soon(run, position, item)
            watch.cancel_scope.cancel()  # every item answered: the watcher ends
    if interrupted:
        raise EvalInterrupted(sum(r is not None for r in records), len(items))
    return [r for r in records if r is not None]


def build_report(tool: str, dataset: Path, suite: Suite, records: list[dict[str, Any]], min_pass_rate: float,
                 started_at: datetime, finished_at: datetime) -> dict[str, Any]:
    report: dict[str, Any] = {"tool": tool, "dataset": str(dataset)}
    if suite.path is not None:
        report["suite"] = str(suite.path)
    report.update({"started_at": started_at.isoformat(), "finished_at": finished_at.isoformat(), "items": records})
    report["summary"] = summarise(records, min_pass_rate)
    return report


# --- the reports --------------------------------------------------------------------------------------------------


def junit_xml(report: dict[str, Any]) -> str:
    """JUnit XML as CI systems read it (Jenkins, GitLab, GitHub test reporters): one testsuite, per item one test
    case for the call (an <error> when it failed) and one per assertion (a <failure> when it does not hold;
    <skipped> when the call failed), with the counts."""
    import xml.etree.ElementTree as ET

    started = datetime.fromisoformat(report["started_at"])
    seconds = (datetime.fromisoformat(report["finished_at"]) - started).total_seconds()
    suite_name = f"judge-mcp eval {report['tool']} {Path(report['dataset']).name}"
    root = ET.Element("testsuites", name="judge-mcp eval")
    suite = ET.SubElement(root, "testsuite", name=suite_name, timestamp=started.replace(tzinfo=None).isoformat(),
                          hostname="localhost", time=f"{seconds:.3f}")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for item in report["items"]:
        classname = f"{report['tool']}.item_{item['index']}" + (f"_{_xml_name(item['id'])}" if "id" in item else "")
        call = ET.SubElement(suite, "testcase", classname=classname, name="call", time="0")
        counts["tests"] += 1
        if item["is_error"]:
            counts["errors"] += 1
            ET.SubElement(call, "error", message=_xml_text(item["error"] or "error")[:500],
                          type="ToolError").text = _xml_text(item["error"] or "")
        for check in item["assertions"]:
            case = ET.SubElement(suite, "testcase", classname=classname, name=_xml_text(check["name"]), time="0")
            counts["tests"] += 1
            if item["is_error"]:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message="the call returned an error")
            elif not check["passed"]:
                counts["failures"] += 1
                said = f"expected {_shown_expected(check)}, got {json.dumps(check['actual'], ensure_ascii=False, default=str)}"
                ET.SubElement(case, "failure", message=_xml_text(said)[:500], type="AssertionFailed").text = \
                    _xml_text(said)
    for key, value in counts.items():
        suite.set(key, str(value))
    for key in ("tests", "failures", "errors"):
        root.set(key, str(counts[key]))
    root.set("time", f"{seconds:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _shown_expected(check: dict[str, Any]) -> str:
    expected = check["expected"]
    equality = check["name"].endswith(f"== {json.dumps(expected, ensure_ascii=False)}")
    return json.dumps(expected, ensure_ascii=False, default=str) if equality or not isinstance(expected, str) \
        else expected


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: str) -> str:
    """Text XML 1.0 can carry (a judge's reply may hold control characters)."""
    return _XML_BAD.sub("\ufffd", text)


def _xml_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:80]


def html_report(report: dict[str, Any]) -> str:
    """The self-contained HTML report: the views' own eval page (server/views, the /ui/ pages' templates)."""
    from .views import render_eval_report

    return render_eval_report(report)


# --- the command --------------------------------------------------------------------------------------------------


def add_parser(sub: Any) -> None:
    """`judge-mcp eval`'s arguments (server/cli.py)."""
    p = sub.add_parser(
        "eval", help="run a judging tool over a JSONL dataset and check each result; exit 0 when the run passes, "
                     "1 when it does not, 2 when it could not be done",
        description="Run TOOL over each line of DATASET (JSONL: the tool's arguments, an optional id and an "
                    "optional expect {dot path: value}) through this server's own code paths: result cache, "
                    "budgets, cost accounting and concurrency limits apply, so a re-run reads the answered "
                    "items from the cache. Exit 0 when at least --min-pass-rate of the items meet every "
                    "expectation and assertion, 1 when fewer do, 2 when the run could not be done (bad dataset "
                    "or suite, no model, interrupted), each with a one-line reason on stderr.")
    p.add_argument("tool", help=f"the judging tool: {', '.join(JUDGING_TOOLS)}")
    p.add_argument("dataset", type=Path, help="a JSONL file, one item (the tool's arguments) a line")
    p.add_argument("--suite", type=Path, help="a YAML or JSON file: shared arguments, assertions "
                                              "(e.g. 'total >= 70', 'verdict in [accept, revise]', "
                                              "'no judge failures') and min_pass_rate")
    p.add_argument("--min-pass-rate", type=float, default=None, metavar="R",
                   help="the share of items (0-1) that must pass (default: the suite's, else 1.0)")
    p.add_argument("--json", dest="json_path", metavar="F", help="write the JSON result here ('-': stdout)")
    p.add_argument("--junit", dest="junit_path", metavar="F", help="write JUnit XML here (for CI test reports)")
    p.add_argument("--html", dest="html_path", metavar="F", help="write a self-contained HTML report here")
    p.add_argument("--concurrency", type=int, default=None, metavar="N",
                   help="items in flight at once (default JUDGE_MCP_CONCURRENCY; model calls stay within it)")
    p.add_argument("--root", action="append", dest="roots", metavar="DIR", type=Path,
                   help="a directory the dataset's paths may lie in, when JUDGE_MCP_ALLOWED_ROOTS is not set "
                        "(repeatable; default: the current directory)")


def run_eval_command(settings: Settings, args: argparse.Namespace,
                     say: Callable[[str], None] | None = None) -> int:
    """`judge-mcp eval`: the exit code; a one-line reason on stderr."""
    import anyio

    say = say or _say
    try:
        check_tool(args.tool)
        suite = load_suite(args.suite.absolute()) if args.suite is not None else Suite()
        rate = args.min_pass_rate if args.min_pass_rate is not None else \
            suite.min_pass_rate if suite.min_pass_rate is not None else 1.0
        if not 0 <= rate <= 1:
            raise InputError(f"--min-pass-rate must be from 0 to 1, e.g. 0.9 (got {rate})")
        if args.concurrency is not None and not 1 <= args.concurrency <= 256:
            raise InputError(f"--concurrency must be from 1 to 256 (got {args.concurrency})")
        dataset = args.dataset.absolute()
        items = load_dataset(dataset, suite)
        _model_or_refuse(settings)
        roots = [r.resolve() for r in args.roots] if args.roots else [Path.cwd()]
    except JudgeError as exc:
        say(str(exc))
        return EXIT_NOT_RUN
    started = datetime.now(UTC)
    progress = Progress(len(items))
    try:
        records = anyio.run(lambda: run_items(settings, args.tool, items, roots=roots, progress=progress,
                                              concurrency=args.concurrency or settings.concurrency))
    except (EvalInterrupted, KeyboardInterrupt) as exc:
        progress.close()
        done = f" after {exc.answered} of {exc.total} items" if isinstance(exc, EvalInterrupted) else ""
        say(f"interrupted{done}; no report written; run the same command again to resume (answered items "
            "are read from the result cache)")
        return EXIT_NOT_RUN
    except JudgeError as exc:
        progress.close()
        say(str(exc))
        return EXIT_NOT_RUN
    progress.close()
    report = build_report(args.tool, dataset, suite, records, rate, started, datetime.now(UTC))
    try:
        _write_reports(report, args)
    except OSError as exc:
        say(f"cannot write a report: {exc}")
        return EXIT_NOT_RUN
    s = report["summary"]
    cost = "cost unknown" if s["cost_usd"] is None else f"${s['cost_usd']:.4f}"
    verdict = "passed" if s["ok"] else "FAILED"
    say(f"{verdict}: {s['passed']} of {s['items']} items passed ({s['pass_rate']:.1%}, at least "
        f"{s['min_pass_rate']:.1%} needed); {s['failed']} failed, {s['errors']} errors; "
        f"{s['model_requests']} model requests, {cost}")
    return EXIT_PASSED if s["ok"] else EXIT_FAILED


def _say(line: str) -> None:
    sys.stderr.write(f"judge-mcp eval: {line}\n")


def _model_or_refuse(settings: Settings) -> None:
    """ConfigError (naming what to set) when no model backend is configured: a run without one judges nothing."""
    from .context import build_registry

    try:
        build_registry(settings).resolve()
    except ConfigError as exc:
        raise ConfigError(f"no model: {exc}") from None


def _write_reports(report: dict[str, Any], args: argparse.Namespace) -> None:
    if args.json_path:
        text = json.dumps(report, ensure_ascii=False, indent=2, default=str) + "\n"
        if args.json_path == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            Path(args.json_path).write_text(text, encoding="utf-8")
    if args.junit_path:
        Path(args.junit_path).write_text(junit_xml(report), encoding="utf-8")
    if args.html_path:
        Path(args.html_path).write_text(html_report(report), encoding="utf-8")
