"""Size limits of the arguments the text and analysis judges take: checked before any work, so an oversized
argument is a clear input error instead of seconds of CPU (and a prompt no model accepts)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from judges.errors import InputError


@dataclass(frozen=True)
class SizeLimits:
    """The defaults of JUDGE_MCP_MAX_TEXT_CHARS, JUDGE_MCP_MAX_LIST_ITEMS and JUDGE_MCP_MAX_ANALYSIS_CHARS."""

    text_chars: int = 200_000  # about 50,000 tokens: more than one judge prompt holds anyway
    list_items: int = 10_000  # steps of a trajectory, contexts, expected tools
    analysis_chars: int = 1_000_000  # an analysis (or its schema) as JSON text

    def text(self, name: str, value: str | None) -> None:
        """`value` at most `text_chars` characters, else an InputError naming `name`."""
        if value is not None and len(value) > self.text_chars:
            raise InputError(
                f"{name} is {len(value):,} characters; the limit is {self.text_chars:,} (JUDGE_MCP_MAX_TEXT_CHARS). "
                "Shorten it or judge it in parts, e.g. one section per call")

    def texts(self, name: str, values: Sequence[str] | None) -> None:
        """At most `list_items` texts, each within `text_chars`."""
        if values is None:
            return
        self.items(name, values, "e.g. the most relevant ones")
        for i, value in enumerate(values):
            self.text(f"{name}[{i}]", value)

    def items(self, name: str, values: Sequence[Any] | None, example: str) -> None:
        """At most `list_items` entries, else an InputError naming `name` with what to do (`example`)."""
        if values is not None and len(values) > self.list_items:
            raise InputError(
                f"{name} has {len(values):,} entries; the limit is {self.list_items:,} (JUDGE_MCP_MAX_LIST_ITEMS). "
                f"Give fewer, {example}")

    def json(self, name: str, value: Any) -> None:
        """`value` (JSON text, or a JSON value measured as compact JSON) at most `analysis_chars` characters."""
        if value is None:
            return
        if isinstance(value, str):
            size = len(value)
        else:
            try:
                size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str))
            except (RecursionError, ValueError):
                return  # nesting too deep to measure: the check that reads it refuses it with its own reason
        if size > self.analysis_chars:
            raise InputError(
                f"{name} is {size:,} characters as JSON; the limit is {self.analysis_chars:,} "
                "(JUDGE_MCP_MAX_ANALYSIS_CHARS). Leave out what no check reads, e.g. raw page text or long quotes")
