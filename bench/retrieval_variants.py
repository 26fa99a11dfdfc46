"""The retrieval variants tried on the dev questions for issue 31, in this process: the server's own pieces
(rag.formats.parse, rag.chunking.chunk_text, the int8 MiniLM, the store's BM25 tokenizer and its fusion by
reciprocal rank), each variant changing one thing. Its first row reproduces bench/retrieval.py's hybrid row
(which goes through a real judge-mcp); the others are what was tried and dropped (none moved dev by more
than two of its 77 questions). Same scoring as bench/retrieval.py: answer passage in a chunk of its document;
briefs counted when the rule's chunk is in the top 5 for brief + prompt.
Usage: python bench/retrieval_variants.py [--corpora ../shared/corpora] [--split dev]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.retrieval import norm, rows  # noqa: E402

HEADING = re.compile(r"^\s*(\d+(\.\d+)*\.?|Chapter \d+\.|[IVX]+\.|Appendix [A-Z]|//)\s*[A-Za-z][^.;:]{2,70}$")
QUESTION_OPENING = re.compile(r"^\s*((what|which|how|when|where|who|why)( \w+)?|(can|could|should|must|may|do|does|"
                              r"is|are|am|will|would)) (i|we|you|our|a|an|the|it|they|there)\b\s*", re.I)
PAGE_NUMBER = re.compile(r"^(page\s*)?[#ivxlc]+(\s*(of|/)\s*#)?$", re.I)


class Corpus:
    def __init__(self, documents: Path):
        from rag.embedding import OnnxInt8Embedder
        from rag.formats import Limits, parse

        self.parsed = {f.name: parse(f.read_bytes(), f.name, Limits())
                       for f in sorted(documents.iterdir()) if f.suffix in (".pdf", ".docx")}
        self.embedder = OnnxInt8Embedder()  # the packaged int8 MiniLM, as the server's default
        self.vectors: dict[str, Any] = {}
        self.token_rows: dict[str, Any] = {}

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        missing = list(dict.fromkeys(t for t in texts if t not in self.vectors))
        for text, vector in zip(missing, self.embedder.embed(missing), strict=True):
            self.vectors[text] = np.asarray(vector, dtype=np.float32)
        return np.stack([self.vectors[t] for t in texts])

    def tokens(self, texts: list[str]) -> list[Any]:
        missing = list(dict.fromkeys(t for t in texts if t not in self.token_rows))
        self.token_rows.update(zip(missing, self.embedder.token_vectors(missing), strict=True))
        return [self.token_rows[t] for t in texts]


def pages(doc: Any) -> list[str]:
    if not doc.page_starts:
        return [doc.text]
    ends = [*doc.page_starts[1:], len(doc.text) + 2]
    return [doc.text[s:e].strip("\n") for s, e in zip(doc.page_starts, ends, strict=True)]


def without_furniture(page_texts: list[str], edge: int = 3) -> str:
    """Lines at the top or bottom of at least half the pages (digits ignored), and bare page numbers, removed."""
    def key(line: str) -> str:
        return re.sub(r"\d+", "#", " ".join(line.split())).lower()

    if len(page_texts) < 3:
        return "\n\n".join(page_texts)
    seen: Counter[str] = Counter()
    for page in page_texts:
        lines = [line for line in page.split("\n") if line.strip()]
        seen.update({key(line) for line in lines[:edge] + lines[-edge:]})
    need, kept = max(3, len(page_texts) // 2), []
    for page in page_texts:
        lines = page.split("\n")
        filled = [i for i, line in enumerate(lines) if line.strip()]
        edges = set(filled[:edge] + filled[-edge:])
        kept.append("\n".join(line for i, line in enumerate(lines) if not (
            i in edges and (seen[key(line)] >= need or PAGE_NUMBER.match(key(line).strip())))))
    return "\n\n".join(kept)


def title(name: str) -> str:
    return " ".join(w for w in re.split(r"[-_ ]+", name.rsplit(".", 1)[0]) if not re.fullmatch(r"v?[\d.]+", w))


Chunker = Callable[[str, Any], list[str]]


def seed_chunks(name: str, doc: Any) -> list[str]:
    from rag.chunking import chunk_text

    return [c.text for c in chunk_text(doc.text, 1000, 200, doc.page_starts or None)]


def furniture_removed(name: str, doc: Any) -> list[str]:
    from rag.chunking import chunk_text

    return [c.text for c in chunk_text(without_furniture(pages(doc)), 1000, 200)]


def titled(name: str, doc: Any) -> list[str]:
    from rag.chunking import chunk_text

    head = title(name) + "\n"
    return [head + c.text for c in chunk_text(without_furniture(pages(doc)), 1000 - len(head), 200)]


def headings_carried(name: str, doc: Any) -> list[str]:
    from rag.chunking import chunk_text

    text = without_furniture(pages(doc))
    first = next((line.strip() for line in text.split("\n") if len(line.strip()) > 3), "")[:80]
    heads = [(m.start(), m.group(0).strip()) for m in re.finditer(r"(?m)^.*$", text) if HEADING.match(m.group(0))]
    out = []
    for c in chunk_text(text, 900, 200):
        above = [h for at, h in heads if at <= c.start]
        out.append(first + (" > " + above[-1] if above else "") + "\n" + c.text)
    return out


def evaluate(corpus: Corpus, chunker: Chunker, queries: list[dict[str, Any]], *, k: int, dense_w: float = 0.8,
             rrf_k: int = 60, bm25: dict[str, Any] | None = None, window: int = 0, neighbours: float = 0.0,
             rewrite: bool = False, lexical_window: int = 0, maxsim: str = "", depth: int = 20) -> list[int | None]:
    """The rank (of the first k) of each row's answer (questions) or rule (briefs, queried by brief + prompt).
    neighbours: each chunk's fused score plus that share of its neighbours' (same document) mean fused score.
    rewrite: the question's opening interrogative words dropped (both rankings). lexical_window: BM25 over windows
    of that many characters, each chunk scored by its best window. maxsim: the first 20 reread by MiniLM token
    vectors (MaxSim: mean over query tokens of the best cosine against the chunk's), ordered by MaxSim alone
    ("alone") or by the reciprocal-rank fusion of both orders ("fused", the server's hybrid-maxsim)."""
    import bm25s
    import numpy as np

    from rag.chunking import chunk_text
    from rag.store import _tokenize, _tokens

    texts, docs = [], []
    for name, doc in corpus.parsed.items():
        for text in chunker(name, doc):
            texts.append(text)
            docs.append(name)
    vectors = corpus.embed(texts)
    if window:  # each chunk's dense score: 0.3 × its cosine + 0.7 × the best of its windows'
        owners = [i for i, t in enumerate(texts) for _ in chunk_text(t, window, window // 4)]
        parts = corpus.embed([c.text for t in texts for c in chunk_text(t, window, window // 4)])
    lexical = bm25s.BM25(**(bm25 or {}))
    lexical_owner = None
    if lexical_window:
        wins = [(i, c.text) for i, t in enumerate(texts) for c in chunk_text(t, lexical_window, lexical_window // 4)]
        lexical_owner = np.array([i for i, _ in wins])
        lexical.index(_tokenize([w for _, w in wins], return_ids=True), show_progress=False)
    else:
        lexical.index(_tokenize(texts, return_ids=True), show_progress=False)
    ranks = []
    for row in queries:
        query = row["question"] if "question" in row else f"{row['brief']}\n{row['prompt']}"
        if rewrite and "question" in row:
            query = QUESTION_OPENING.sub("", query).rstrip("?") or query
        answer = norm(row.get("answer") or row["rule"])
        qv = corpus.embed([query])[0]
        sims = vectors @ qv
        if window:
            best = np.full(len(texts), -1.0, dtype=np.float32)
            np.maximum.at(best, np.array(owners), parts @ qv)
            sims = 0.3 * sims + 0.7 * best
        fused: dict[int, float] = {}
        keep = np.flatnonzero(sims >= 0.3)
        for rank, i in enumerate(keep[np.argsort(-sims[keep], kind="stable")][:50]):
            fused[int(i)] = fused.get(int(i), 0.0) + dense_w / (rrf_k + rank + 1)
        scores = np.asarray(lexical.get_scores(_tokens(query)))
        if lexical_owner is not None:
            best_lex = np.zeros(len(texts), dtype=np.float64)
            np.maximum.at(best_lex, lexical_owner, scores)
            scores = best_lex
        keep = np.flatnonzero(scores > 0)
        for rank, i in enumerate(keep[np.argsort(-scores[keep], kind="stable")][:50]):
            fused[int(i)] = fused.get(int(i), 0.0) + 1.0 / (rrf_k + rank + 1)
        if neighbours:
            own = dict(fused)
            for i in own:
                near = [own.get(j, 0.0) for j in (i - 1, i + 1) if 0 <= j < len(texts) and docs[j] == docs[i]]
                fused[i] = own[i] + neighbours * (sum(near) / len(near) if near else 0.0)
        top = sorted(fused, key=lambda i: (-fused[i], -sims[i], i))[:max(k, depth) if maxsim else k]
        if maxsim:
            q, *chunk_tokens = corpus.tokens([query, *(texts[i] for i in top)])
            late = [float((q @ t.T).max(axis=1).mean()) for t in chunk_tokens]
            by_late = sorted(range(len(top)), key=lambda n: (-late[n], n))
            if maxsim == "alone":
                top = [top[n] for n in by_late]
            else:
                again = {top[n]: 1 / (rrf_k + n + 1) for n in range(len(top))}
                for r, n in enumerate(by_late):
                    again[top[n]] += 1 / (rrf_k + r + 1)
                top = sorted(top, key=lambda i: (-again[i], top.index(i)))
            top = top[:k]
        ranks.append(next((n for n, i in enumerate(top, 1) if docs[i] == row["document"] and answer in norm(texts[i])),
                          None))
    return ranks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpora", type=Path, default=ROOT.parent / "shared" / "corpora")
    parser.add_argument("--split", choices=("dev", "test", "all"), default="dev")
    parser.add_argument("--only", default="", help="comma-separated words: only the variants naming one (and the first)")
    args = parser.parse_args()
    from rag.warmup import import_numpy

    import_numpy()
    corpus = Corpus((args.corpora / "retrieval").resolve())
    questions, briefs = rows("questions.jsonl", args.split), rows("briefs.jsonl", args.split)
    variants: list[tuple[str, Chunker, dict[str, Any]]] = [
        ("as the server: seed chunks, hybrid, dense weight 0.8, RRF k 60", seed_chunks, {}),
        *[(f"dense weight {w}, RRF k {rk}", seed_chunks, {"dense_w": w, "rrf_k": rk})
          for w, rk in ((0.5, 60), (1.0, 60), (1.5, 60), (0.8, 5), (1.5, 5))],
        *[(f"BM25 {p}", seed_chunks, {"bm25": p}) for p in ({"k1": 1.2}, {"k1": 0.9, "b": 0.4}, {"k1": 2.0},
                                                           {"method": "bm25+"})],
        ("page furniture removed", furniture_removed, {}),
        ("furniture removed + document title in each chunk", titled, {}),
        ("furniture removed + title and nearest numbered heading carried", headings_carried, {}),
        ("dense: best of 160-character windows (0.7) + chunk cosine (0.3)", seed_chunks, {"window": 160}),
        *[(f"neighbours' evidence: + {w} × their mean fused score", seed_chunks, {"neighbours": w})
          for w in (-0.5, 0.25, 0.5)],
        ("question openings dropped from the query", seed_chunks, {"rewrite": True}),
        *[(f"BM25 over {n}-character windows, a chunk scored by its best", seed_chunks, {"lexical_window": n})
          for n in (200, 400)],
        ("BM25 over 300-character windows + dense best of 160-character windows", seed_chunks,
         {"lexical_window": 300, "window": 160}),
        ("top 20 reread by MiniLM token vectors (MaxSim) alone", seed_chunks, {"maxsim": "alone"}),
        ("top 20: hybrid rank and MaxSim rank fused (the server's hybrid-maxsim)", seed_chunks, {"maxsim": "fused"}),
        ("top 10: hybrid rank and MaxSim rank fused (half hybrid-maxsim's cost)", seed_chunks,
         {"maxsim": "fused", "depth": 10}),
    ]
    if args.only:
        variants = [variants[0], *[v for v in variants[1:] if any(w in v[0] for w in args.only.split(","))]]
    print(f"{len(questions)} questions, {len(briefs)} briefs ({args.split}), in process")
    print("| variant | recall@1 | recall@5 | MRR@10 | briefs: rule in top 5 |\n|---|---|---|---|---|")
    for label, chunker, options in variants:
        ranks = evaluate(corpus, chunker, questions, k=10, **options)
        cited = evaluate(corpus, chunker, briefs, k=5, **options)
        n = max(1, len(ranks))
        print(f"| {label} | {sum(r == 1 for r in ranks) / n:.3f} | {sum(r is not None and r <= 5 for r in ranks) / n:.3f}"
              f" | {sum(1 / r for r in ranks if r) / n:.3f} | {sum(r is not None for r in cited) / max(1, len(cited)):.3f} |",
              flush=True)


if __name__ == "__main__":
    main()
