"""Real judge replies replayed THROUGH THE TOOLS, and how their verdicts compare with upstream's.

Every record of ../shared/corpora/judge_outputs (or the folder given) is served verbatim by the
loopback fake model server (tests/fake_model_server.py, real OpenAI SDK) and read by the tool a
user would call, in-process through the MCP client:
- single ratings (`judgment` + `score`: MT-Bench, Arena-Hard v1, …) → evaluate_image, one judge
  agent whose declared score_scale is 1–10 (MT-Bench style); the verdict is the evaluation's raw_score;
- pairwise games (`g1_judgment`/`g2_judgment` + winners: MT-Bench pair) → pairwise_compare with
  swap, g1 as the original order and g2 as the swapped one, each order's verdict mapped back;
- Arena-Hard judgment files (`games`: game 1 baseline first, game 2 swapped, arena-hard's `score`
  label per game) → pairwise_compare with swap, compared as (winner, margin) as the judge saw them;
- VIEScore records (`stored_record` after VIEScore's parsing, `raw_output` it could not parse) →
  pairwise_compare method=viescore (visual_quality@v2: the lowest score, VIEScore's own rule, for
  parsed records; the v1 scalar prompt, which also tries every rating convention, for raw outputs).

Per source: records (verdicts: two per pairwise record), what upstream read, what the tools read,
agree / disagree with upstream where both read, typed failures, readings where upstream found none
(`beyond`), and `invented`: beyond-upstream readings that did not come from a reply consisting of the
verdict alone (a reply that is only "5.0"). Targets: read ≥ 99 % of what upstream read, disagree 0,
invented 0.

Usage: python bench/verdicts.py [corpus_dir] [--list]   (--list prints every record not in agreement)
"""

from __future__ import annotations

import base64
import io
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CORPUS = ROOT.parent / "shared" / "corpora" / "judge_outputs"
WHOLE_REPLY = {"convention:number_only"}  # the reply is the verdict and nothing else
COLUMNS = ("records", "upstream_read", "read", "agree", "typed_failure", "disagree", "beyond", "invented")


@dataclass
class Outcome:
    source: str
    record: str
    upstream: Any  # None: upstream found no verdict
    ours: Any  # None: a typed failure
    read_as: str | None = None
    failure: str | None = None
    raw: str = ""

    @property
    def verdict(self) -> str:
        if self.upstream is not None and self.ours is not None:
            return "agree" if self.ours == self.upstream else "disagree"
        if self.upstream is None and self.ours is not None:
            return "beyond"
        return "typed_failure"


def _png() -> str:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (8, 8), "gray").save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def _rating(value: Any) -> float | None:
    if value is None or str(value).strip() in ("", "-1", "None", "null"):
        return None
    return float(value)


def _lowest(score: Any) -> float:
    return min(float(x) for x in score) if isinstance(score, list) else float(score)


async def _call(client: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    if tool != "create_agent":  # every source numbers its records from 0: the same ask must be asked again
        args = {**args, "cache": False}
    result = await client.call_tool(tool, args)
    if result.is_error and result.structured_content is None:  # a verdict that failed is an error with its details
        raise RuntimeError(f"{tool} failed: {result.content[0].text}")
    return result.structured_content  # type: ignore[no-any-return]


async def replay_ratings(client: Any, fake: Any, source: str, records: list[dict[str, Any]], png: str,
                         agent_id: str) -> list[Outcome]:
    fake.replay_keyed({f"[replay:{i}]": r["judgment"] for i, r in enumerate(records)})
    out = []
    for i, r in enumerate(records):
        result = await _call(client, "evaluate_image", {"brief": f"[replay:{i}]", "images": [png],
                                                         "agent_ids": [agent_id]})
        e = result["evaluations"][0]
        out.append(Outcome(source, str(i), _rating(r.get("score")), e["raw_score"], e.get("read_as"),
                           e.get("failure_kind"), r["judgment"]))
    return out


async def replay_pairs(client: Any, fake: Any, source: str, records: list[dict[str, Any]]) -> list[Outcome]:
    replies = {}
    for i, r in enumerate(records):
        replies[f"<response_a>\n[answer:{i}:model_1]"] = r["g1_judgment"]
        replies[f"<response_a>\n[answer:{i}:model_2]"] = r["g2_judgment"]
    fake.replay_keyed(replies)
    model = {"Response A": "model_1", "Response B": "model_2", "Tie": "tie"}
    out = []
    for i, r in enumerate(records):
        result = await _call(client, "pairwise_compare", {
            "instruction": f"question {i}", "candidates": [f"[answer:{i}:model_1]", f"[answer:{i}:model_2]"],
            "candidate_type": "text", "swap": True})
        for game, order in zip(("g1", "g2"), result["meta"]["orders"], strict=True):
            upstream = r[f"{game}_winner"]
            out.append(Outcome(source, f"{i}:{game}", None if upstream == "error" else upstream,
                               model.get(order["mapped"]), order.get("read_as"), order.get("failure_kind"),
                               r[f"{game}_judgment"]))
    return out


_ARENA_LABELS = {"A>>B": ("A", "strong"), "A>B": ("A", "slight"), "A=B": ("tie", "tie"), "B>A": ("B", "slight"),
                 "B>>A": ("B", "strong")}


async def replay_arena_games(client: Any, fake: Any, source: str, records: list[dict[str, Any]]) -> list[Outcome]:
    """Arena-Hard judgment files: `games` [game 1: A = baseline, B = model; game 2 swapped], each with the
    judge's `judgment` and arena-hard's reading `score` ("A>>B" … or null). Compared as (winner, margin)
    in the order the judge saw."""
    replies = {}
    for i, r in enumerate(records):
        for g, game in enumerate(r["games"][:2]):
            first = "baseline" if g == 0 else "model"
            replies[f"<response_a>\n[answer:{i}:{first}]"] = game["judgment"]
    fake.replay_keyed(replies)
    shown = {"Response A": "A", "Response B": "B", "Tie": "tie"}
    out = []
    for i, r in enumerate(records):
        result = await _call(client, "pairwise_compare", {
            "instruction": f"question {i}", "candidates": [f"[answer:{i}:baseline]", f"[answer:{i}:model]"],
            "candidate_type": "text", "swap": len(r["games"]) > 1})
        for g, (game, order) in enumerate(zip(r["games"], result["meta"]["orders"], strict=False)):
            label = (game.get("score") or "").strip()
            upstream = _ARENA_LABELS.get(label)
            ours = None if order["verdict"] == "Failed" else (shown[order["verdict"]], order.get("margin"))
            out.append(Outcome(source, f"{i}:game{g + 1}", upstream, ours, order.get("read_as"),
                               order.get("failure_kind"), game["judgment"]))
    return out


async def replay_viescore(client: Any, fake: Any, source: str, records: list[dict[str, Any]], png: str) -> list[Outcome]:
    parsed = "stored_record" in records[0]
    texts = [json.dumps(r["stored_record"]) if parsed else r["raw_output"] for r in records]
    fake.replay_keyed({f"[replay:{i}]": t for i, t in enumerate(texts)})
    prompt = "vlm/assessment/visual_quality/viescore@v2" if parsed else "vlm/assessment/visual_consistency/viescore@v1"
    out = []
    for i, r in enumerate(records):
        result = await _call(client, "pairwise_compare", {"instruction": f"[replay:{i}]", "candidates": [png],
                                                           "method": "viescore", "prompt_id": prompt})
        value = result["value"]
        failures = result.get("failures") or [{}]
        out.append(Outcome(source, str(i), _lowest(r["stored_record"]["score"]) if parsed else None,
                           None if value == "Failed" else value, result["read_as"][0], failures[0].get("kind"),
                           texts[i]))
    return out


Sources = list[tuple[str, list[dict[str, Any]]]]


def load_sources(corpus: Path) -> Sources:
    """(source name, records) for every .jsonl file in `corpus`, in name order."""
    sources = []
    for path in sorted(corpus.glob("*.jsonl")):
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if records:
            sources.append((path.stem, records))
    return sources


async def replay_corpus(sources: Sources, fake: Any, home: Path) -> list[Outcome]:
    """Every record of every source, through the tools of one in-process server."""
    from mcp import Client

    from server.app import create_server
    from server.settings import Settings

    settings = Settings(home=home, model="openai:replayed-judge", openai_api_key="sk-replay",
                        openai_base_url=fake.openai_url, warm_embeddings=False, log_level="WARNING",
                        max_retries=0, concurrency=4)
    async with Client(create_server(settings)) as client:
        return await replay_with(client, fake, sources)


async def replay_with(client: Any, fake: Any, sources: Sources) -> list[Outcome]:
    """Every record of every source, through the tools of a connected MCP client whose server's model
    is the fake server."""
    png = _png()
    outcomes: list[Outcome] = []
    agent = await _call(client, "create_agent", {
        "name": "MT-Bench style judge", "score_scale": {"min": 1, "max": 10},
        "system_prompt": "Rate the response on a scale of 1 to 10.\nOUTPUT FORMAT: a short explanation, then "
                         "the rating strictly as \"Rating: [[5]]\"."})
    for source, records in sources:
        first = records[0]
        if "g1_judgment" in first:
            outcomes += await replay_pairs(client, fake, source, records)
        elif "games" in first:
            outcomes += await replay_arena_games(client, fake, source, records)
        elif "stored_record" in first or "raw_output" in first:
            outcomes += await replay_viescore(client, fake, source, records, png)
        elif "judgment" in first:
            outcomes += await replay_ratings(client, fake, source, records, png, agent["id"])
    return outcomes


def table(outcomes: list[Outcome]) -> dict[str, Counter[str]]:
    rows: dict[str, Counter[str]] = {}
    for o in outcomes:
        row = rows.setdefault(o.source, Counter())
        row["records"] += 1
        row["upstream_read"] += o.upstream is not None
        row["read"] += o.ours is not None
        row[o.verdict] += 1
        row["invented"] += o.verdict == "beyond" and o.read_as not in WHOLE_REPLY
    rows["TOTAL"] = sum(rows.values(), Counter())
    return rows


def render(rows: dict[str, Counter[str]]) -> str:
    width = max(len(s) for s in rows)
    lines = [f"{'source':<{width}}  " + "  ".join(f"{c:>13}" for c in COLUMNS)]
    for source, row in rows.items():
        lines.append(f"{source:<{width}}  " + "  ".join(f"{row[c]:>13}" for c in COLUMNS))
    return "\n".join(lines)


def read_share(rows: dict[str, Counter[str]]) -> float:
    """Of the verdicts upstream read, the share the tools read too."""
    total = rows["TOTAL"]
    return (total["agree"] + total["disagree"]) / total["upstream_read"] if total["upstream_read"] else 1.0


def main() -> None:
    from tests.fake_model_server import FakeModelServer

    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    corpus = Path(args[0]) if args else CORPUS
    if not corpus.is_dir():
        raise SystemExit(f"no corpus folder at {corpus}")
    fake = FakeModelServer().start()
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as home:
            outcomes = anyio.run(replay_corpus, load_sources(corpus), fake, Path(home))
    finally:
        fake.stop()
    elapsed = time.perf_counter() - started
    rows = table(outcomes)
    print(render(rows))
    print(f"\nread {read_share(rows):.2%} of the verdicts upstream read; {len(outcomes)} verdicts, "
          f"{len(fake.requests)} model requests, {elapsed:.1f} s through the tools")
    if "--list" in sys.argv:
        for o in outcomes:
            if o.verdict != "agree" and not (o.verdict == "typed_failure" and o.upstream is None):
                print(f"\n[{o.verdict}] {o.source} #{o.record}: upstream={o.upstream!r} ours={o.ours!r} "
                      f"read_as={o.read_as} failure={o.failure}\n  {o.raw[-300:]!r}")


if __name__ == "__main__":
    main()
