"""The project brief (seed 003's buildProjectBrief) for Python trees: naming conventions by kind,
a glossary of frequent domain terms, layers inferred from imports between top-level packages, and
imports that run against the inferred direction. Bounded in files, bytes and time."""

from __future__ import annotations

import ast
import re
import time
from collections import Counter, defaultdict
from pathlib import Path

from pydantic import BaseModel, Field

from judges.code.gates import SKIP_DIRS

_STOP = {"self", "cls", "get", "set", "init", "main", "test", "tests", "none", "true", "false", "value", "data",
         "args", "kwargs", "result", "name", "path", "file", "list", "dict", "str", "int", "return", "make", "new",
         "from", "with", "for", "the", "and", "to", "of", "in", "is", "by", "on", "at", "a", "an", "or", "not"}


class ProjectBrief(BaseModel):
    naming: dict[str, dict[str, int]] = Field(description="Per kind (function, class, constant, variable): casing counts.")
    conventions: dict[str, str] = Field(description="The dominant casing per kind.")
    glossary: list[str] = Field(description="Frequent words in identifiers, most frequent first.")
    layers: list[str] = Field(description="Top-level packages, highest layer first (imports point downwards).")
    imports: dict[str, list[str]] = Field(description="Which top-level packages each one imports.")
    boundaryErrors: list[str] = []
    files_scanned: int = 0
    truncated: bool = False


def casing(name: str) -> str:
    core = name.strip("_")
    if not core:
        return "other"
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", core):
        return "UPPER_CASE"
    if re.fullmatch(r"[a-z][a-z0-9_]*", core):
        return "snake_case"
    if re.fullmatch(r"[A-Z][a-zA-Z0-9]*", core):
        return "PascalCase"
    if re.fullmatch(r"[a-z][a-zA-Z0-9]*", core):
        return "camelCase"
    return "other"


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name).replace("_", " ").lower()
    return [w for w in spaced.split() if len(w) > 2 and w not in _STOP and not w.isdigit()]


def build_project_brief(root: Path, *, max_files: int = 2000, max_bytes: int = 20_000_000,
                        budget_s: float = 5.0) -> ProjectBrief:
    started = time.monotonic()
    naming: dict[str, Counter[str]] = defaultdict(Counter)
    words: Counter[str] = Counter()
    edges: Counter[tuple[str, str]] = Counter()
    where: dict[tuple[str, str], list[str]] = defaultdict(list)
    tops = {p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists() and p.name not in SKIP_DIRS}
    tops |= {p.stem for p in root.glob("*.py")}
    scanned = size = 0
    truncated = False
    for path in sorted(root.rglob("*.py")):
        if any(part in SKIP_DIRS for part in path.relative_to(root).parts):
            continue
        if scanned >= max_files or size >= max_bytes or time.monotonic() - started > budget_s:
            truncated = True
            break
        scanned += 1
        size += path.stat().st_size
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        rel = path.relative_to(root)
        here = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                naming["function"][casing(node.name)] += 1
                words.update(_words(node.name))
            elif isinstance(node, ast.ClassDef):
                naming["class"][casing(node.name)] += 1
                words.update(_words(node.name))
            elif isinstance(node, ast.Assign):
                for assigned in node.targets:
                    if isinstance(assigned, ast.Name):
                        kind = "constant" if casing(assigned.id) == "UPPER_CASE" else "variable"
                        naming[kind][casing(assigned.id)] += 1
                        words.update(_words(assigned.id))
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level:
                    continue  # relative imports stay inside their package
                for name in names:
                    imported = name.split(".")[0]
                    if imported in tops and imported != here:
                        edges[(here, imported)] += 1
                        where[(here, imported)].append(rel.as_posix())
    # Direction: between two packages, the one that imports the other more often is the higher
    # layer; the imports the other way (the minority) run against it. Ties decide nothing.
    above: dict[str, set[str]] = defaultdict(set)
    boundary = []
    for (a, b), count in edges.items():
        back = edges.get((b, a), 0)
        if count > back:
            above[a].add(b)
        elif count < back:
            boundary += [f"{file} imports {b}, against the inferred direction {b} → {a}"
                         for file in sorted(set(where[(a, b)]))[:5]]
    layers = sorted(tops, key=lambda p: (-_depth(p, above, set()), p))
    return ProjectBrief(
        naming={k: dict(v) for k, v in naming.items()},
        conventions={k: v.most_common(1)[0][0] for k, v in naming.items() if v},
        glossary=[w for w, _ in words.most_common(20)],
        layers=[p for p in layers if any(p in e for e in edges)] or sorted(tops),
        imports={a: sorted({b for (x, b) in edges if x == a}) for a in sorted({a for a, _ in edges})},
        boundaryErrors=sorted(boundary),
        files_scanned=scanned,
        truncated=truncated,
    )


def _depth(node: str, above: dict[str, set[str]], seen: set[str]) -> int:
    if node in seen:
        return 0
    seen = seen | {node}
    return 1 + max((_depth(child, above, seen) for child in above.get(node, ())), default=0)
