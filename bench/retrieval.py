"""Retrieval quality on a labelled query set: recall@1 and recall@5 for dense only, BM25 only and
hybrid (dense + BM25, reciprocal rank fusion), measured through the search_guidelines tool.

Every document of ../shared/corpora/pdf and docx that has text is uploaded to one agent (the
agent's defaults: top_k 5, the server's similarity threshold 0.3); each query is labelled with a
phrase that only the chunk(s) answering it contain. A query counts as found at k when one of the
first k chunks holds its phrase. One server per mode (JUDGE_MCP_RETRIEVAL), same documents.
Usage: python bench/retrieval.py [-v]
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
CORPORA = ROOT.parent / "shared" / "corpora"
CACHE = Path(tempfile.gettempdir()) / "judge-mcp-test-models"

# (query, a phrase only the answering chunk(s) hold)
QUERIES: list[tuple[str, str]] = [
    # zowe_conformance_brand_guidelines.pdf
    ("What are the HEX codes of the brand color palette?", "HEX#488EFF"),
    ("Which Pantone colours should be used for print?", "2718 C"),
    ("What is the RGB value of the dark blue?", "R50 G116 B249"),
    ("CMYK breakdown of the light blue", "C66 M43 Y0 K0"),
    ("How much clear space must surround the logo?", "breathing room"),
    ("Can I add a drop shadow to the mark?", "drop shadow"),
    ("May the logo be rotated?", "rotating"),
    ("What backgrounds should the mark not be placed on?", "too complex or too dark"),
    ("When were the Zowe conformant brand guidelines published?", "April 2020"),
    ("What does the color palette represent?", "vibrant"),
    ("Can I change the proportions of the logotype?", "PROPORTIONS"),
    # Seige_of_Vicksburg_Sample_OCR.pdf
    ("What rumour about Johnston reached the camp?", "Johnston is coming"),
    ("Where are the inhabitants of the besieged city living?", "living in caves"),
    ("How is the fuse of a mortar shell set?", "fuse is so gauged"),
    ("How large was the hole left by the exploding shell?", "bury a horse"),
    ("How much is a soldier paid per month?", "thirteen dollars a month"),
    ("What is canister shot made of?", "tin cylinder"),
    ("How many oxen did it take to haul the siege guns?", "ten yoke of oxen"),
    ("What calibre are the big siege guns?", "nine-inch calibre"),
    ("Were there church bells on Sunday in camp?", "No bells to ring us to church"),
    ("How close were the soldiers to Fort Hill?", "hard tack was tossed"),
    ("Whom did the soldier think of while watching the stars?", "bedridden"),
    ("What were the rebel prisoners eating in the garrison?", "mule meat"),
    ("How does the projectile's wad expand into the rifling?", "papier-mache wad"),
    ("What flag flies from the court house?", "Confederate flag"),
    ("What were the catch phrases about the eastern army?", "Bull Run"),
    ("Which visitor was hit in the arm by a rebel bullet?", "96th Ohio"),
    ("What would Lincoln have to do for the army to move forward?", "commissions Grant commander"),
    # the other PDFs
    ("What is the password in the pdf encryption test?", "asdfzxcv"),
    ("How do you say hello world in Japanese?", "こんにちは世界"),
    ("Here's to the misfits, the rebels, the troublemakers", "troublemakers"),
    ("Which operators does the toy PDF list?", "quote operator"),
    ("Is there a PDF with a JPEG image?", "JPEG image"),
    ("A blind text that tells you nothing about its content", "text without a meaning"),
    # the DOCX files
    ("What is today's special?", "Salmon"),
    ("Which fruits are in the list?", "Banana"),
    ("What is in the top right cell of the table?", "Top right"),
    ("What is the title of the sunset song?", "Sunset Tree"),
    ("What does the text box name?", "Datum plane"),
    ("Which document has a byte order mark?", "byte order mark"),
    ("Walking on what kind of air?", "imported air"),
]


async def run_mode(mode: str, files: list[Path]) -> tuple[list[bool], list[bool], list[str]]:
    from mcp import Client

    from server.app import create_server
    from server.settings import Settings

    home = Path(tempfile.mkdtemp())
    settings = Settings(home=home, model_cache=CACHE, warm_embeddings=False, log_level="WARNING",
                        allowed_roots=[CORPORA], retrieval=mode)
    at1, at5, misses = [], [], []
    async with Client(create_server(settings)) as c:
        agent = (await c.call_tool("create_agent", {"name": "bench", "system_prompt": "p"})).structured_content["id"]
        for f in files:
            await c.call_tool("upload_guideline", {"agent_id": agent, "path": str(f)})
        for query, phrase in QUERIES:
            got: Any = (await c.call_tool("search_guidelines", {"agent_id": agent, "query": query})).structured_content
            texts = [ch["text"] for ch in got["chunks"]]
            at1.append(any(phrase in t for t in texts[:1]))
            at5.append(any(phrase in t for t in texts[:5]))
            if not at5[-1]:
                misses.append(query)
    return at1, at5, misses


def main() -> None:
    files = sorted((CORPORA / "pdf").glob("*.pdf")) + sorted((CORPORA / "docx").glob("*.docx"))
    print(f"{len(QUERIES)} labelled queries over {len(files)} corpus files in one agent (top_k 5, threshold 0.3)")
    print("| mode | recall@1 | recall@5 |\n|---|---|---|")
    for mode in ("dense", "bm25", "hybrid"):
        at1, at5, misses = anyio.run(run_mode, mode, files)
        print(f"| {mode} | {sum(at1) / len(at1):.3f} | {sum(at5) / len(at5):.3f} |", flush=True)
        if "-v" in sys.argv:
            print(f"  missed at 5: {misses}")


if __name__ == "__main__":
    main()
