"""The code judge: the brief, the quality gates and their bubblewrap sandbox, the judge and the
fixer that proposes minimal patches.

May import: judges.store and every layer below it, prompts. Not the other judges.
"""
