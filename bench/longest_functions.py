"""The longest functions in the given folders (default: judges and server), by lines, longest first.

    python bench/longest_functions.py [--most 10] [folder ...]
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path


def functions(folder: Path) -> list[tuple[int, str]]:
    """(lines, "path:line name") for every function and method below `folder`."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                found.append((lines, f"{path}:{node.lineno} {node.name}"))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", default=["judges", "server"])
    parser.add_argument("--most", type=int, default=10)
    args = parser.parse_args()
    every = sorted((f for folder in args.folders for f in functions(Path(folder))), key=lambda f: -f[0])
    for lines, where in every[:args.most]:
        print(f"{lines:5d}  {where}")


if __name__ == "__main__":
    main()
