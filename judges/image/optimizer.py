"""The seed's prompt optimizer: top issues by severity and optimization_weight, what worked kept,
every promptInstruction carried verbatim (checked, and added back when the model drops one)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

import prompts
from judges.call import JudgeCall
from judges.errors import BackendError
from judges.image.judge import SEVERITY_RANK, Evaluation, GuidelineUse
from judges.models.protocol import Message, ModelRequest, Usage
from judges.reading.parsing import JudgeModel, run_judge
from judges.store.agents import Agent


class NextPrompt(JudgeModel):
    prompt: str = Field(min_length=1)
    addressed: list[str] = []


class AgentContext(BaseModel):
    agent_name: str
    chunks: list[str]


class OptimizedPrompt(BaseModel):
    prompt: str
    addressed: list[str]
    preserved: list[str] = Field(description="What worked, passed on to keep.")
    instructions_included: list[str] = Field(description="Every promptInstruction; each is in `prompt` verbatim.")
    instructions_added: list[str] = Field(default=[], description="Instructions the model dropped and we appended.")
    issues: list[dict[str, str | float]] = Field(default=[], description="The top issues, in priority order.")
    guidelines_used: dict[str, list[GuidelineUse]] = Field(
        default={}, description="Per agent id: the guideline chunks given to the optimizer.")
    guidelines_errors: dict[str, str] = Field(
        default={}, description="Per agent id: why its guideline retrieval failed (it went on without them).")
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    read_as: str | None = Field(default=None, description="How the model's reply was read: json or repair.")


def _unique(items: Sequence[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        if item.strip():
            seen.setdefault(item.strip(), None)
    return list(seen)


def prioritise(evaluations: Sequence[Evaluation], agents: dict[str, Agent]) -> list[dict[str, str | float]]:
    """TOP_ISSUEs by severity, then by the agent's optimization_weight, heaviest first."""
    issues: list[dict[str, str | float]] = []
    for e in evaluations:
        if e.top_issue is None:
            continue
        agent = agents.get(e.agent_id)
        weight = agent.optimization_weight if agent else 50.0
        issues.append({"agent_name": e.agent_name, "weight": weight, "severity": e.top_issue.severity,
                       "problem": e.top_issue.problem, "fix": e.top_issue.fix})
    return sorted(issues, key=lambda i: (SEVERITY_RANK[str(i["severity"])], -float(i["weight"])))


async def optimize_prompt(call: JudgeCall, *, brief: str, prompt: str, evaluations: Sequence[Evaluation],
                          agents: dict[str, Agent], contexts: Sequence[AgentContext]) -> OptimizedPrompt:
    client = await call.client()
    scored = [e for e in evaluations if e.status == "ok"]
    issues = prioritise(scored, agents)
    preserved = _unique([w for e in scored for w in e.what_worked])
    instructions = _unique([p for e in scored for p in e.prompt_instructions])
    text = prompts.render("image/optimize@v1", brief=brief, prompt=prompt, issues=issues, preserved=preserved,
                          instructions=instructions, contexts=[c.model_dump() for c in contexts if c.chunks])
    judged = await run_judge(client, ModelRequest(messages=[Message.user(text)], temperature=0.3, max_tokens=2048),
                             NextPrompt)
    if judged.value is None:
        assert judged.failure is not None
        failure = judged.failure
        raise BackendError(failure.kind, f"the optimizer gave no usable prompt: {failure.message}; "
                                         f"raw reply: {failure.raw[:500]!r}")
    new = judged.value.prompt.strip()
    missing = [i for i in instructions if i not in new]
    if missing:
        new = new.rstrip() + "\n" + "\n".join(missing)
    return OptimizedPrompt(prompt=new, addressed=judged.value.addressed, preserved=preserved,
                           instructions_included=instructions, instructions_added=missing, issues=issues,
                           usage=judged.usage, model=judged.model, read_as=judged.read_as)
