"""evaluate_trajectory: deterministic checks of an agent's tool calls first (expected tools used, in
order, as often as listed; repeated identical calls; failed calls and whether they were retried), then
one model call for whether the goal was reached, unnecessary steps and ignored failures. Steps are
numbered from 1 everywhere."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import anyio.to_thread
from pydantic import BaseModel, Field

from judges.call import JudgeCall
from judges.errors import InputError
from judges.models.protocol import Usage
from judges.progress import Progress, no_progress
from judges.reading.parsing import JudgeFailure, JudgeModel, OutputError
from judges.reading.verdicts import VerdictError

from .asking import ask


class Step(BaseModel):
    tool: str = Field(min_length=1, description="The tool called, e.g. 'search'.")
    arguments: dict[str, Any] = Field(default={}, description="Its arguments.")
    result: Any = Field(default=None, description="What it returned (text or JSON).")


class CheckResult(BaseModel):
    name: str
    passed: bool
    detail: str


class FailedCall(BaseModel):
    step: int
    tool: str
    retried: bool = Field(description="A later step called the same tool.")


class TrajectoryFacts(BaseModel):
    checks: list[CheckResult] = Field(description="expected_tools_used, expected_order, expected_counts (with "
                                                  "expected_tools), no_repeated_calls, failures_retried.")
    missing_tools: list[str] = []
    unexpected_tools: list[str] = Field(default=[], description="Tools called that expected_tools does not list.")
    repeated_calls: list[int] = Field(default=[], description="Steps that repeat an earlier call exactly (tool and "
                                                              "arguments).")
    failed_calls: list[FailedCall] = []


_ERROR_PREFIXES = ("error", "traceback", "exception", "failed", "fatal")


def looks_failed(result: Any) -> bool:
    """A result that reports a failure: {"error": …}, {"is_error"/"isError": true}, {"status": "error"|"failed"},
    or text starting with Error / Traceback / Exception / Failed / Fatal."""
    if isinstance(result, dict):
        if result.get("error") or result.get("is_error") is True or result.get("isError") is True:
            return True
        return str(result.get("status", "")).lower() in ("error", "failed", "failure")
    if isinstance(result, str):
        return result.strip().lower().startswith(_ERROR_PREFIXES)
    return False


def _is_subsequence(expected: Sequence[str], used: Sequence[str]) -> bool:
    it = iter(used)
    return all(any(u == e for u in it) for e in expected)


def _call_key(step: Step) -> str:
    return step.tool + "\0" + json.dumps(step.arguments, sort_keys=True, default=str)


def check_trajectory(steps: Sequence[Step], expected_tools: Sequence[str] | None) -> TrajectoryFacts:
    """The deterministic checks, no model."""
    used = [s.tool for s in steps]
    checks: list[CheckResult] = []
    missing: list[str] = []
    unexpected: list[str] = []
    if expected_tools is not None:
        used_counts, wanted = Counter(used), Counter(expected_tools)
        missing = [t for t in dict.fromkeys(expected_tools) if t not in used_counts]
        unexpected = [t for t in dict.fromkeys(used) if t not in wanted]
        checks.append(CheckResult(name="expected_tools_used", passed=not missing,
                                  detail="every expected tool was called" if not missing
                                  else f"never called: {', '.join(missing)}"))
        in_order = _is_subsequence(expected_tools, used)
        checks.append(CheckResult(name="expected_order", passed=in_order,
                                  detail=f"the calls {'contain' if in_order else 'do not contain'} "
                                         f"{' → '.join(expected_tools)} in that order"))
        short = {t: (used_counts[t], k) for t, k in wanted.items() if used_counts[t] < k}
        checks.append(CheckResult(name="expected_counts", passed=not short,
                                  detail="each expected tool was called at least as often as listed" if not short
                                  else "; ".join(f"{t}: {u} of {k}" for t, (u, k) in short.items())))
    seen: set[str] = set()
    repeated: list[int] = []
    for i, s in enumerate(steps, 1):
        key = _call_key(s)
        if key in seen:
            repeated.append(i)
        seen.add(key)
    checks.append(CheckResult(name="no_repeated_calls", passed=not repeated,
                              detail="no call repeats an earlier one exactly" if not repeated
                              else f"steps {', '.join(map(str, repeated))} repeat an earlier call exactly"))
    last_call = {s.tool: i for i, s in enumerate(steps, 1)}  # one pass: "called again later" is a lookup
    failed = [FailedCall(step=i, tool=s.tool, retried=last_call[s.tool] > i)
              for i, s in enumerate(steps, 1) if looks_failed(s.result)]
    not_retried = [f.step for f in failed if not f.retried]
    checks.append(CheckResult(name="failures_retried", passed=not not_retried,
                              detail="no failed call" if not failed else
                              "every failed call was retried" if not not_retried else
                              f"failed and never retried: steps {', '.join(map(str, not_retried))}"))
    return TrajectoryFacts(checks=checks, missing_tools=missing, unexpected_tools=unexpected,
                           repeated_calls=repeated, failed_calls=failed)


class TrajectoryReading(JudgeModel):
    goal_reached: bool
    unnecessary_steps: list[int] = []
    ignored_failures: list[int] = []
    reasoning: str = ""
    score: float


def _check_reading(n_steps: int) -> Callable[[TrajectoryReading], None]:
    def check(value: TrajectoryReading) -> None:
        if not 1 <= value.score <= 5:
            raise VerdictError(f"score {value.score:g} is outside the declared scale 1–5", "out_of_range")
        bad = [i for i in [*value.unnecessary_steps, *value.ignored_failures] if not 1 <= i <= n_steps]
        if bad:
            raise OutputError(f"step numbers {bad} do not exist; steps are numbered 1..{n_steps}")
    return check


class TrajectoryJudgement(BaseModel):
    goal_reached: bool | None = Field(default=None, description="null when the judge failed.")
    unnecessary_steps: list[int] = []
    ignored_failures: list[int] = []
    score: float | None = Field(default=None, description="1–5; null when the judge failed.")
    normalised: float | None = None
    reasoning: str = ""
    read_as: str | None = None
    failure: JudgeFailure | None = None


class TrajectoryEvaluation(BaseModel):
    checks: TrajectoryFacts
    judgement: TrajectoryJudgement
    passed_checks: bool = Field(description="Every deterministic check passed.")
    planned_model_calls: int
    model: str = ""
    usage: Usage = Field(default_factory=Usage)


def _findings(facts: TrajectoryFacts) -> list[str]:
    return [f"{c.name}: {'passed' if c.passed else 'FAILED'} ({c.detail})" for c in facts.checks]


MAX_RESULT_CHARS = 4000  # per step's result, and its arguments, in the prompt; longer ones are cut and marked


def _cut(text: str) -> str:
    if len(text) > MAX_RESULT_CHARS:
        return text[:MAX_RESULT_CHARS] + f"… [{len(text) - MAX_RESULT_CHARS} more characters]"
    return text


def _shown(step: Step) -> str:
    result = step.result if isinstance(step.result, str) else json.dumps(step.result, default=str, ensure_ascii=False)
    # The arguments are cut like the result: neither is bounded by the text limits (a step's arguments reached the
    # prompt whole, megabytes of them).
    args = json.dumps(step.arguments, default=str, ensure_ascii=False)
    return f"tool: {_cut(step.tool)}\narguments: {_cut(args)}\nresult: {_cut(result)}"


def check_trajectory_inputs(goal: str, steps: Sequence[Step]) -> None:
    """What evaluate_trajectory refuses before any model call (also before a background call's job starts)."""
    if not goal.strip():
        raise InputError("goal must not be empty, e.g. \"Book a table for two on Friday\"")
    if not steps:
        raise InputError("steps: give at least one step, e.g. [{\"tool\": \"search\", \"arguments\": {\"q\": \"x\"}, "
                         "\"result\": \"...\"}]")


async def evaluate_trajectory(call: JudgeCall, *, goal: str, steps: Sequence[Step],
                              expected_tools: Sequence[str] | None = None,
                              progress: Progress = no_progress) -> TrajectoryEvaluation:
    client = await call.client()
    check_trajectory_inputs(goal, steps)
    # Off the event loop: linear, but thousands of steps (each JSON-encoded twice) take a while.
    facts, shown = await anyio.to_thread.run_sync(lambda: (check_trajectory(steps, expected_tools),
                                                           [_shown(s) for s in steps]))
    await progress(0, 1, f"{len(facts.checks)} deterministic checks done; 1 model call planned")
    judged = await ask(client, "text/trajectory@v1", TrajectoryReading,
                       check=_check_reading(len(steps)), max_tokens=2048, goal=goal,
                       steps=shown, findings=_findings(facts))
    await progress(1, 1, "trajectory judged")
    judgement = TrajectoryJudgement(read_as=judged.read_as, failure=judged.failure)
    if judged.value is not None:
        v = judged.value
        judgement = TrajectoryJudgement(goal_reached=v.goal_reached, unnecessary_steps=sorted(set(v.unnecessary_steps)),
                                        ignored_failures=sorted(set(v.ignored_failures)), score=v.score,
                                        normalised=round((v.score - 1) / 4 * 100, 4), reasoning=v.reasoning,
                                        read_as=judged.read_as)
    return TrajectoryEvaluation(checks=facts, judgement=judgement, passed_checks=all(c.passed for c in facts.checks),
                                planned_model_calls=1, model=judged.model or client.name, usage=judged.usage)
