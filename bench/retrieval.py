"""Retrieval quality on held-out questions and briefs (issue 31), through a real `judge-mcp` (its console
script, started from `/`, default settings, the demo model) and the real MCP client.

The 14 documents of `<corpora>/retrieval/` are uploaded to one agent. Then:
- questions (bench/data/retrieval/questions.jsonl): each asked with search_guidelines (top_k 10); the answer
  is found at rank r when the r-th chunk is of the question's document and holds its answer passage
  (whitespace collapsed). recall@1, recall@5 and MRR (over the first 10) per split; each search's time as the
  client sees it (p50 / p95, the agent's first search left out: it builds the BM25 index).
- briefs (bench/data/retrieval/briefs.jsonl): evaluate_image with the brief and the prompt (what the seeds
  search with), one 8×8 image; counted when the evaluation's guidelines_used (the agent's top_k 5) holds a
  chunk of the rule's document that holds the rule. The rule's chunks are found through search_guidelines
  (the rule itself as the query, top_k 50) in another agent that holds the rule's document alone.
One server per method (`--methods`); a method is a name from METHODS (its environment for the server).
Usage: python bench/retrieval.py [--corpora ../shared/corpora] [--split dev|test|all] [--methods hybrid,dense]
       [-v: the questions missed at 5 and the briefs missed]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "retrieval"
CACHE = Path(tempfile.gettempdir()) / "judge-mcp-test-models"
JUDGE_MCP = str(Path(sys.executable).with_name("judge-mcp"))

# Each method is the server's environment beyond the defaults (the default method has none).
METHODS: dict[str, dict[str, str]] = {
    "hybrid": {},
    "dense": {"JUDGE_MCP_RETRIEVAL": "dense"},
    "bm25": {"JUDGE_MCP_RETRIEVAL": "bm25"},
    "hybrid-maxsim": {"JUDGE_MCP_RETRIEVAL": "hybrid-maxsim"},
}


def norm(text: str) -> str:
    return " ".join(text.split())


def rows(name: str, split: str) -> list[dict[str, Any]]:
    out = [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]
    return [r for r in out if split == "all" or r["split"] == split]


def png_b64() -> str:
    """An 8×8 grey PNG: evaluate_image needs an image; the demo model does not look at it."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")
    raw = b"".join(b"\x00" + b"\x80" * 8 for _ in range(8))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", (8).to_bytes(4, "big") * 2 + b"\x08\x00\x00\x00\x00")
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    return base64.b64encode(png).decode()


def server_env(home: Path, documents: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    env.update(JUDGE_MCP_HOME=str(home), JUDGE_MCP_ALLOWED_ROOTS=str(documents), JUDGE_MCP_MODEL_CACHE=str(CACHE),
               JUDGE_MCP_MODEL="demo", HF_HUB_OFFLINE="1", **extra)
    return env


async def call(client: Any, tool: str, args: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, args)
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content[0].text}")
    return result.structured_content


async def run_method(method: str, documents: Path, questions: list[dict[str, Any]],
                     briefs: list[dict[str, Any]], verbose: bool, home: Path, errlog: Any) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=JUDGE_MCP, args=[], env=server_env(home, documents, METHODS[method]),
                                   cwd="/")
    async with Client(stdio_client(params, errlog=errlog)) as client:
        agent = (await call(client, "create_agent", {"name": "bench", "system_prompt": "Judge brand use."}))["id"]
        names = sorted({r["document"] for r in questions} | {r["document"] for r in briefs})
        ids: dict[str, str] = {}
        started = time.perf_counter()
        for name in names:
            doc = await call(client, "upload_guideline", {"agent_id": agent, "path": str(documents / name)})
            ids[name] = doc["id"]
        ingest_s = time.perf_counter() - started
        ranks: list[tuple[dict[str, Any], int | None]] = []
        search_ms: list[float] = []
        for q in questions:
            began = time.perf_counter()
            got = await call(client, "search_guidelines", {"agent_id": agent, "query": q["question"], "top_k": 10})
            search_ms.append((time.perf_counter() - began) * 1000)
            rank = next((i for i, ch in enumerate(got["chunks"], 1)
                         if ch["document_id"] == ids[q["document"]] and norm(q["answer"]) in norm(ch["text"])), None)
            ranks.append((q, rank))
        # The rule's chunks, found in an agent holding the rule's document alone (so any method finds them): the
        # same document chunks the same way, so a chunk index there is the chunk index in the bench's agent.
        alone: dict[str, str] = {}
        for name in sorted({b["document"] for b in briefs}):
            alone[name] = (await call(client, "create_agent", {"name": f"rules {name}", "system_prompt": "-"}))["id"]
            await call(client, "upload_guideline", {"agent_id": alone[name], "path": str(documents / name)})
        cited: list[tuple[dict[str, Any], bool]] = []
        image = png_b64()
        for b in briefs:
            found = await call(client, "search_guidelines", {"agent_id": alone[b["document"]], "query": b["rule"],
                                                             "top_k": 50, "similarity_threshold": 0})
            rule = {(ids[b["document"]], ch["chunk_index"]) for ch in found["chunks"]
                    if norm(b["rule"]) in norm(ch["text"])}
            if not rule:
                raise RuntimeError(f"brief {b['id']}: no chunk holds its rule")
            ev = await call(client, "evaluate_image", {"brief": b["brief"], "prompt": b["prompt"], "images": [image],
                                                       "agent_ids": [agent], "cache": False})
            used = {(u["document_id"], u["chunk_index"]) for u in ev["evaluations"][0]["guidelines_used"]}
            cited.append((b, bool(used & rule)))
    ordered = sorted(search_ms[1:] or search_ms)  # the first search also builds the agent's BM25 index
    out: dict[str, Any] = {"method": method, "ingest_s": ingest_s, "splits": {},
                           "search_ms": (ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))])}
    for split in sorted({q["split"] for q in questions} | {b["split"] for b in briefs}):
        rs = [r for q, r in ranks if q["split"] == split]
        cs = [c for b, c in cited if b["split"] == split]
        out["splits"][split] = {
            "questions": len(rs), "recall@1": sum(r == 1 for r in rs) / max(1, len(rs)),
            "recall@5": sum(r is not None and r <= 5 for r in rs) / max(1, len(rs)),
            "mrr": sum(1 / r for r in rs if r) / max(1, len(rs)),
            "briefs": len(cs), "cited": sum(cs) / max(1, len(cs)),
        }
    if verbose:
        out["missed"] = [f"{q['id']} ({q['split']}) r={r}: {q['question']}" for q, r in ranks if r is None or r > 1]
        out["briefs_missed"] = [f"{b['id']} ({b['split']}): {b['brief'][:70]}" for b, c in cited if not c]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpora", type=Path, default=ROOT.parent / "shared" / "corpora")
    parser.add_argument("--split", choices=("dev", "test", "all"), default="dev")
    parser.add_argument("--methods", default="hybrid,dense,bm25")
    parser.add_argument("-v", action="store_true", dest="verbose")
    args = parser.parse_args()
    documents = (args.corpora / "retrieval").resolve()
    questions, briefs = rows("questions.jsonl", args.split), rows("briefs.jsonl", args.split)
    print(f"{len(questions)} questions and {len(briefs)} briefs ({args.split}) over "
          f"{len({q['document'] for q in questions})} documents of {documents}, one agent")
    print("| method | split | questions | recall@1 | recall@5 | MRR@10 | briefs | rule cited | ingest s "
          "| search_guidelines p50 / p95 ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for method in args.methods.split(","):
        home = Path(tempfile.mkdtemp(prefix="bench-retrieval-"))
        with open(home / "server.log", "w") as errlog:  # the server's stderr
            res = anyio.run(run_method, method, documents, questions, briefs, args.verbose, home, errlog)
        for split, m in res["splits"].items():
            print(f"| {method} | {split} | {m['questions']} | {m['recall@1']:.3f} | {m['recall@5']:.3f} | "
                  f"{m['mrr']:.3f} | {m['briefs']} | {m['cited']:.3f} | {res['ingest_s']:.1f} | "
                  f"{res['search_ms'][0]:.0f} / {res['search_ms'][1]:.0f} |", flush=True)
        for line in res.get("missed", []) + res.get("briefs_missed", []):
            print("   ", line)


if __name__ == "__main__":
    main()
