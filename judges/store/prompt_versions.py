"""An organization's own prompt versions: a shipped prompt asset (`base`) with judging rules put before it,
kept by align_judge as `<name>@v<N>` (N past every shipped and stored version of that name). The rules are
text, never a template: they reach the model as written, before the base asset's rendered text. Another
organization never sees them; `JudgeCall.prompt` resolves an id to its shipped asset and rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import prompts
from judges.store.database import Database, timestamp


@dataclass(frozen=True)
class PromptVersion:
    id: str  # <name>@v<N>
    base: str  # the shipped asset it builds on, <name>@v<M>
    rules: str


# The one spelling of a stored version's number: ASCII digits, no leading zero, within SQL's 64-bit integers (an id
# such as `…@v02`, `…@v²`, `…@v٣` or `…@v99999999999999999999` names no stored version: the loader then names it).
_NUMBER = re.compile(r"[1-9][0-9]{0,17}")


def _shipped_versions(name: str) -> list[int]:
    return [int(p.split("@v")[1]) for p in prompts.list_templates() if p.split("@")[0] == name]


class PromptVersions:
    def __init__(self, db: Database):
        self.db = db

    def get(self, org: str, prompt_id: str) -> PromptVersion | None:
        """The organization's version `prompt_id` (<name>@v<N>), or None (a shipped asset, or none such)."""
        name, _, version = prompt_id.partition("@v")
        if not _NUMBER.fullmatch(version):
            return None
        rows = self.db.query("SELECT base, rules FROM prompt_versions WHERE organization_id=? AND name=? AND "
                             "version=?", (org, name, int(version)))
        return PromptVersion(id=prompt_id, base=rows[0]["base"], rules=rows[0]["rules"]) if rows else None

    def save(self, org: str, base: str, rules: str) -> PromptVersion:
        """A new version of `base`'s name for `org`: the shipped asset `base` with `rules` before it."""
        name = base.split("@")[0]
        for _ in range(5):  # another replica may take the same number at once: its row stays, this one numbers again
            with self.db.transaction() as conn:
                if self.db.kind == "postgresql":  # savers of one name number one at a time, each after the last commits
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (f"prompt_versions:{org}:{name}",))
                rows = conn.execute("SELECT MAX(version) AS v FROM prompt_versions WHERE organization_id=? AND name=?",
                                    (org, name)).fetchall()
                stored = rows[0]["v"] if rows and rows[0]["v"] is not None else 0
                version = max([int(stored), *_shipped_versions(name)]) + 1
                added = conn.execute("INSERT INTO prompt_versions (organization_id, name, version, base, rules, "
                                     "created_at) VALUES (?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                                     (org, name, version, base, rules, timestamp())).rowcount
            if added:
                return PromptVersion(id=f"{name}@v{version}", base=base, rules=rules)
        raise RuntimeError(f"could not number a new version of {name}: five others were kept at the same time")
