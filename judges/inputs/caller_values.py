"""The shape every caller value must have before any judge or store sees it: no NUL byte in any text (neither
SQLite nor PostgreSQL keeps one the same way: PostgreSQL refuses it), and JSON nested at most MAX_DEPTH levels
(our code, jsonschema and the JSON encoder recurse per level: a deeper value would end in a RecursionError).

Both are checked by walking the value with an explicit stack, never by recursion, so the check itself cannot
be the thing that overflows; JSON text is parsed by `loads`, whose C parser stops at the interpreter's recursion
limit, and its result is then checked the same way.
"""

from __future__ import annotations

import json
import re
from typing import Any

from judges.errors import InputError

MAX_DEPTH = 64  # levels of objects and arrays in any caller value; real analyses, schemas and patches use < 20


def _path(parts: tuple[Any, ...] | None) -> str:
    """`("patch", ("ops", 0))`-style linked parts as `patch.ops[0]`."""
    names: list[str | int] = []
    while parts is not None:
        parts, name = parts
        names.append(name)
    names.reverse()
    if len(names) > 8:  # a deep path: its first and last steps say where
        names = [*names[:4], f"…{len(names) - 7} more…", *names[-3:]]
    text = ""
    for name in names:
        text += f"[{name}]" if isinstance(name, int) else (f".{name}" if text else str(name))
    return text or "the value"


_SCALARS = frozenset({int, float, bool, type(None)})
_CONTAINERS = (dict, list, tuple)
_CONTAINER_TYPES = frozenset(_CONTAINERS)
_TEXT = frozenset({str})


def _nul_at(where: tuple[Any, ...] | None, text: str) -> InputError:
    return InputError(f"{_path(where)}: contains a NUL byte (\\x00) at character {text.index(chr(0))}; text may not "
                      "contain NUL bytes (they cannot be stored): remove it")


def check_value(value: Any, what: str | None = None, *, nul: bool = True, max_depth: int = MAX_DEPTH,
                budget: int | None = None) -> bool:
    """InputError naming where `value` (a caller's argument, or everything a tool was given when `what` is None)
    holds text with a NUL byte (`nul`), or is nested more than `max_depth` levels deep. True when checked whole;
    False when `budget` (items read) would run out first: then check it again, without one, in a worker thread.

    Each container's items are read by type in C (`set(map(type, ...))`, `str.join`): a list of a million numbers
    or strings costs milliseconds; only containers are walked item by item in Python."""
    top: tuple[Any, ...] | None = None if what is None else (None, what)
    if isinstance(value, str):
        if nul and "\x00" in value:
            raise _nul_at(top, value)
        return True
    if not isinstance(value, _CONTAINERS):
        return True
    spent = 0
    key: Any
    stack: list[tuple[Any, int, tuple[Any, ...] | None]] = [(value, 0, top)]
    while stack:
        item, depth, where = stack.pop()
        if depth >= max_depth:
            raise InputError(f"{_path(where)}: nested more than {max_depth} levels deep; send flatter JSON (at most "
                             f"{max_depth} levels of objects and arrays, e.g. {{\"a\": {{\"b\": [1, 2]}}}} is 3)")
        spent += len(item) + 1
        if budget is not None and spent > budget:
            return False
        pairs: Any = item.items() if type(item) is dict else enumerate(item)
        if type(item) is dict:
            if nul:
                try:
                    bad = "\x00" in "".join(item)  # JSON keys are text
                except TypeError:
                    bad = any(isinstance(k, str) and "\x00" in k for k in item)
                if bad:
                    key = next(k for k in item if isinstance(k, str) and "\x00" in k)
                    raise InputError(f"{_path(where)}: the key {key!r} contains a NUL byte (\\x00); remove it")
            children: Any = item.values()
        else:
            children = item
        if len(item) > 8:  # many items: read their types in C first
            kinds = set(map(type, children))
            if kinds <= _SCALARS:
                continue
            if kinds == _TEXT:
                if nul and "\x00" in "".join(children):
                    key, child = next((k, c) for k, c in pairs if "\x00" in c)
                    raise _nul_at((where, key), child)
                continue
        for key, child in pairs:
            kind = type(child)
            if kind is str:
                if nul and "\x00" in child:
                    raise _nul_at((where, key), child)
            elif kind in _CONTAINER_TYPES:  # JSON's own types (what a transport or json.loads gives)
                stack.append((child, depth + 1, (where, key)))
    return True


def loads(text: str, what: str, *, strict: bool = True, nul: bool = False) -> Any:
    """JSON text from a caller, parsed: ValueError when it is not JSON (as json.loads), InputError naming `what`
    when it is nested more than MAX_DEPTH levels deep (checked right after the C parser, before any recursion of
    ours; a text too deep for the parser itself is refused the same way)."""
    try:
        value = json.loads(text, strict=strict)
    except RecursionError:
        raise InputError(f"{what}: nested more than {MAX_DEPTH} levels deep; send flatter JSON (at most "
                         f"{MAX_DEPTH} levels of objects and arrays)") from None
    check_value(value, what, nul=nul)
    if _SURROGATE_ESCAPE.search(text):  # rare: only then is the value walked for one
        refuse_lone_surrogates(value, what)
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def refuse_lone_surrogates(value: Any, what: str) -> None:
    """InputError naming where a JSON (or YAML) text's `\\ud800`-style escape without its pair left a lone surrogate: no
    encoder (the store, the tool's JSON reply, a model's request) can carry it, so it is refused here, as a NUL
    byte is, rather than failing later as an incident (or breaking the reply to the caller)."""
    stack: list[tuple[Any, tuple[Any, ...] | None]] = [(value, (None, what))]
    while stack:  # an explicit stack: loads has checked the depth, but no recursion is needed
        item, where = stack.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found is not None:
                raise InputError(f"{_path(where)}: holds a lone UTF-16 surrogate escape (\\u{ord(found.group()):04x} "
                                 f"without its pair, after {item[:found.start()][-40:]!r}): it is no character and "
                                 "cannot be stored or sent; remove it, or write the character itself")
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                if isinstance(key, str) and _SURROGATE.search(key):
                    raise InputError(f"{_path(where)}: the key {key!r} holds a lone UTF-16 surrogate escape; "
                                     "remove it, or write the character itself")
                stack.append((child, (where, key)))
        elif isinstance(item, list):
            stack.extend((child, (where, i)) for i, child in reversed(list(enumerate(item))))
