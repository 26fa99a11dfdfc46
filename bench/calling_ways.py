"""How each judge the tools call receives its model (issue 30, goal 1): its model parameters' annotations,
grouped; one group is one way.

    python bench/calling_ways.py [checkout]    (default: this folder)
"""

import ast
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
entries = {"judges/text/scoring.py": ["score_text"], "judges/text/reference.py": ["compare_to_reference"],
           "judges/text/ranking.py": ["rank_texts"], "judges/text/rag.py": ["evaluate_rag_answer"],
           "judges/text/trajectory.py": ["evaluate_trajectory"], "judges/image/service.py": ["evaluate_image", "optimize"],
           "judges/analysis/judge.py": ["evaluate_analysis"], "judges/pairwise/judge.py": ["compare", "compare_jury"],
           "judges/code/judge.py": ["judge_code", "propose_patch"], "judges/calibration/core.py": ["calibrate"]}
ways = {}
for path, names in entries.items():
    for node in ast.walk(ast.parse((root / path).read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in names:
            args = node.args.args + node.args.kwonlyargs
            model = [f"{a.arg}: {ast.unparse(a.annotation)}" for a in args
                     if a.annotation is not None and any(k in ast.unparse(a.annotation) for k in ("ModelClient", "JudgeCall"))]
            sig = "; ".join(model)
            ways.setdefault(sig, []).append(node.name)
for sig, names in ways.items():
    print(f"{sig}  <- {', '.join(names)}")
print(len(ways), "ways")
