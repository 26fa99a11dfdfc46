"""SEARCH/REPLACE blocks and unified diffs measured on real model edits (aider's recorded cases)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from judges.patches.formats import search_replace_ops, to_ops
from judges.patches.ops import PatchLimits, apply_patch
from tests_corpora.conftest import corpus


def cases() -> list[dict[str, Any]]:
    path = corpus("patches", "aider_searchreplace_cases.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def render_blocks(path: str, blocks: list[dict[str, str]]) -> str:
    """Blocks as aider writes them: the path line, a fence, SEARCH / ======= / REPLACE."""
    out = []
    for b in blocks:
        out.append(f"{path}\n```python\n<<<<<<< SEARCH\n{b['search']}=======\n{b['replace']}>>>>>>> REPLACE\n```\n\n")
    return "Here are the changes:\n\n" + "".join(out)


def apply_to_before(case: dict[str, Any], patch: Any, tmp: Path) -> bytes:
    target = tmp / case["path"]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(case["before"].encode("utf-8"))
    report = apply_patch(patch, tmp, limits=PatchLimits(max_ops=100, max_bytes=1_000_000))
    assert report.applied, report.errors
    return target.read_bytes()


def test_exact_cases_turn_before_into_after_through_search_replace_import(tmp_path: Path) -> None:
    exact = [c for c in cases() if c["status"] == "exact"]
    passing = 0
    for i, case in enumerate(exact):
        patch = to_ops(render_blocks(case["path"], case["blocks"]))
        passing += apply_to_before(case, patch, tmp_path / str(i)) == case["after"].encode("utf-8")
    assert (passing, len(exact)) == (17, 17)


def test_every_case_turns_before_into_after_through_unified_diff_import(tmp_path: Path) -> None:
    all_cases = cases()
    passing = 0
    for i, case in enumerate(all_cases):
        patch = to_ops(case["unified_diff"])
        passing += apply_to_before(case, patch, tmp_path / str(i)) == case["after"].encode("utf-8")
    assert (passing, len(all_cases)) == (19, 19)


def test_raw_model_chat_yields_the_upstream_blocks(tmp_path: Path) -> None:
    """The model's own chat text, prose and all, parsed: the blocks for the case's file start the upstream list."""
    for case in (c for c in cases() if c["status"] == "exact"):
        ops = [o for o in search_replace_ops(case["raw_llm_chat_section"]) if o["path"] == case["path"]]
        parsed = [(o["find"], o["replace"]) for o in ops]
        upstream = [(b["search"], b["replace"]) for b in case["blocks"]]
        assert parsed and parsed == upstream[: len(parsed)], case["case_id"]
