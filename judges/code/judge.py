"""The code judging loop (seed 003): gates → judge verdict (validated, consistent with the gates)
→ fixer patch (validated, one repair round) → optional apply in a sandbox and re-run the gates."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

import prompts
from judges.call import JudgeCall, Member
from judges.code.brief import ProjectBrief, build_project_brief
from judges.code.gates import (
    GateRun,
    GateSettings,
    Signals,
    SourceFile,
    check_source,
    default_gates,
    discard,
    gate_score,
    run_gates,
    sandbox_from,
)
from judges.errors import ConfigError, InputError
from judges.models.protocol import Message, ModelClient, ModelRequest, Usage
from judges.patches.ops import DEFAULT_LIMITS, PatchLimits, ValidationReport, apply_patch, validate_patch
from judges.progress import Progress, no_progress
from judges.reading.jury import Jury, jurors, verdict_jury
from judges.reading.parsing import Judged, JudgeModel, run_judge
from judges.reading.samples import SampleFailure, SampleStats, Votes, sample_stats, vote

DIMENSIONS = ("compilation", "tests_functional", "tests_edge", "types", "style", "security", "boundaries", "schema")


class JudgeScores(JudgeModel):
    compilation: float = Field(ge=0, le=1)
    tests_functional: float = Field(ge=0, le=1)
    tests_edge: float = Field(ge=0, le=1)
    types: float = Field(ge=0, le=1)
    style: float = Field(ge=0, le=1)
    security: float = Field(ge=0, le=1)
    boundaries: float | None = Field(default=None, ge=0, le=1)
    schema_: float | None = Field(default=None, ge=0, le=1, alias="schema")


class Explanations(JudgeModel):
    root_cause: str
    minimal_fix: str


class FixStep(JudgeModel):
    file: str
    operation: Literal["edit", "add", "remove"]
    brief: str


class JudgeVerdict(JudgeModel):
    """The seed's JudgeVerdict with validateJudgeVerdict's rules as validation."""

    verdict: Literal["accept", "revise", "reject"]
    scores: JudgeScores
    explanations: Explanations
    fix_plan: list[FixStep] = []


class CodeSample(BaseModel):
    """One sample of the model's verdict (after the gates' overrides), or why it gave none."""

    sample: int
    model: str | None = Field(default=None, description="The jury member that gave it (models given).")
    verdict: Literal["accept", "revise", "reject"] | None = Field(description="null when the sample failed.")
    scores: dict[str, float | None] = {}
    read_as: str | None = None
    error: str | None = None


class CodeVerdict(BaseModel):
    verdict: Literal["accept", "revise", "reject"]
    scores: dict[str, float | None]
    explanations: dict[str, str]
    fix_plan: list[dict[str, str]]
    signals: Signals
    status: Literal["ok", "no_model", "model_failed"] = Field(
        description="ok: the model judged; no_model: gates only; model_failed: gates only, the model's failure in error")
    gates: list[GateRun] = []
    overrides: list[str] = Field(default=[], description="Where the gates overruled the model, and why.")
    brief: ProjectBrief | None = None
    error: str | None = None
    raw_response: str | None = None
    candidates: list[dict[str, Any]] | None = Field(default=None, description="Tournament reports, when candidates were given.")
    winner_index: int | None = None
    usage: Usage = Field(default_factory=Usage)
    read_as: str | None = Field(default=None, description="How the model's verdict was read: json or repair.")
    samples: list[CodeSample] | None = Field(
        default=None, description="samples > 1 (or models given): every sample's verdict and scores, in order "
                                  "(by model, then sample); a failed one with its error.")
    votes: Votes | None = Field(
        default=None, description="samples > 1: the samples' verdicts counted and their majority (the verdict); a "
                                  "split vote is Tie, consistent false, and the verdict is then the strictest tied; Failed when no "
                                  "sample gave one (status model_failed: the gates' verdict).")
    sample_stats: dict[str, SampleStats] | None = Field(
        default=None, description="samples > 1: per score dimension, the spread over the samples (the score is "
                                  "their mean); failed samples counted and left out.")
    jury: Jury | None = Field(
        default=None, description="models given: each model's verdict (the majority of its samples), the jury's "
                                  "(their majority: the verdict; split: Tie and the strictest tied) and their "
                                  "agreement; a failing model is counted and left out.")


STRICTNESS = {"accept": 0, "revise": 1, "reject": 2}


def patch_summary(diff: str | None) -> list[dict[str, Any]]:
    """[{path, added, removed}] from a unified diff."""
    summary: dict[str, dict[str, Any]] = {}
    current = None
    for line in (diff or "").splitlines():
        if line.startswith("+++ "):
            name = line[4:].split("\t")[0].strip()
            current = name[2:] if name.startswith(("a/", "b/")) else name
            summary.setdefault(current, {"path": current, "added": 0, "removed": 0})
        elif current and line.startswith("+") and not line.startswith("+++"):
            summary[current]["added"] += 1
        elif current and line.startswith("-") and not line.startswith("---"):
            summary[current]["removed"] += 1
    return list(summary.values())


def make_judge_input(spec: str, brief: ProjectBrief, signals: Signals, diff: str | None,
                     model_notes: str | None) -> dict[str, Any]:
    """The seed's makeJudgeInput."""
    data: dict[str, Any] = {"spec": spec, "brief": brief.model_dump(exclude={"naming"}), "signals": signals.model_dump()}
    if diff:
        data["patchSummary"] = patch_summary(diff)
    if model_notes:
        data["modelNotes"] = model_notes
    return data


def gate_dimensions(signals: Signals, runs: Sequence[GateRun]) -> dict[str, str]:
    """Which score dimension each failed gate forces to 0, with the reason."""
    failed: dict[str, str] = {}
    by_name = {r.name: r for r in runs}
    if signals.lintErrors or (by_name.get("lint") and not by_name["lint"].passed):
        failed["style"] = f"{len(signals.lintErrors)} lint error(s)"
    if any("syntax" in e.lower() for e in signals.lintErrors + signals.typeErrors):
        failed["compilation"] = "syntax errors"
    if signals.typeErrors or (by_name.get("types") and not by_name["types"].passed):
        failed["types"] = f"{len(signals.typeErrors)} type error(s)"
    tests = by_name.get("tests")
    if signals.test.failed or (tests and not tests.passed and tests.exit_code != 5):
        failed["tests_functional"] = f"{signals.test.failed} failing test(s)" + (" (timed out)" if tests and tests.timed_out else "")
    if signals.boundaryErrors:
        failed["boundaries"] = f"{len(signals.boundaryErrors)} import(s) against the inferred layers"
    return failed


def gates_only(signals: Signals, runs: Sequence[GateRun]) -> tuple[str, dict[str, float | None], list[dict[str, str]]]:
    failed = gate_dimensions(signals, runs)
    scores: dict[str, float | None] = {d: None for d in DIMENSIONS}
    for dim in ("compilation", "tests_functional", "types", "style", "boundaries"):
        scores[dim] = 0.0 if dim in failed else 1.0
    return ("revise" if failed else "accept"), scores, [
        {"file": "", "operation": "edit", "brief": f"fix {why} ({dim})"} for dim, why in failed.items()]


def overruled(v: JudgeVerdict, signals: Signals, runs: Sequence[GateRun]) -> tuple[str, dict[str, float | None], list[str]]:
    """The model's verdict and scores with the gates' overrides: a failed gate's dimension is 0, and an
    accept while a gate fails is a revise."""
    model_scores: dict[str, float | None] = v.scores.model_dump(by_alias=True)
    overrides = []
    failed = gate_dimensions(signals, runs)
    for dim, why in failed.items():
        if model_scores.get(dim) not in (0, 0.0):
            overrides.append(f"{dim} set to 0: {why}")
            model_scores[dim] = 0.0
    final: str = v.verdict
    if final == "accept" and failed:
        final = "revise"
        overrides.append("verdict 'accept' overridden to 'revise': a gate failed")
    return final, model_scores, overrides


def decided(votes: Votes) -> str:
    """The verdict a vote decides: its majority; a split vote's strictest tied verdict (a Tie is never read as
    accept)."""
    if votes.majority != "Tie":
        return votes.majority
    top = max(votes.counts.values())
    return max((v for v, c in votes.counts.items() if c == top), key=STRICTNESS.__getitem__)


async def judge(call: JudgeCall, asked: Sequence[Member], *, spec: str, signals: Signals, runs: list[GateRun],
                brief: ProjectBrief, diff: str | None, model_notes: str | None) -> CodeVerdict:
    """The verdict: the models' (`asked`: call.members; validated, overruled where the gates disagree) or, with
    none, the gates' alone. With the call's samples, n verdicts at once: the majority verdict and each score's
    mean; with a jury, each model's."""
    verdict, scores, plan = gates_only(signals, runs)
    base = dict(signals=signals, gates=runs, brief=brief)
    samples, jury = call.samples, bool(asked) and asked[0][0] is not None
    if not asked:
        return CodeVerdict(verdict=verdict, scores=scores, fix_plan=plan, status="no_model", **base,  # type: ignore[arg-type]
                           explanations={"root_cause": "no model backend: verdict from the gates alone",
                                         "minimal_fix": "; ".join(p["brief"] for p in plan) or "none needed"})
    payload = json.dumps(make_judge_input(spec, brief, signals, diff, model_notes), indent=1)
    request = ModelRequest(system=prompts.render("code/judge@v1"),
                           messages=[Message.user(prompts.fence(payload, "judge_input") + "\n\nReturn the verdict JSON.")],
                           temperature=0.0, max_tokens=2048)

    async def one(model: ModelClient, sample: int) -> Judged[JudgeVerdict]:
        return await run_judge(model, request.model_copy(update={"sample": sample}), JudgeVerdict)

    by_member = await call.ask(asked, one)
    sampled = [j for member in by_member for j in member]
    usage = sum((j.usage for j in sampled), Usage())
    readings = [overruled(j.value, signals, runs) if j.value is not None else None for j in sampled]
    ok = [(j, r) for j, r in zip(sampled, readings, strict=True) if r is not None]
    votes = vote([r[0] if r is not None else "Failed" for r in readings])
    if not ok:
        failure = sampled[0].failure
        assert failure is not None
        result = CodeVerdict(verdict=verdict, scores=scores, fix_plan=plan, status="model_failed", **base,  # type: ignore[arg-type]
                             explanations={"root_cause": "the model's verdict was unusable; verdict from the gates alone",
                                           "minimal_fix": "; ".join(p["brief"] for p in plan) or "none needed"},
                             error=failure.describe(), raw_response=failure.raw, usage=usage)
    else:
        final = decided(votes)
        def member_verdict(ok: list[Judged[JudgeVerdict]]) -> tuple[str, dict[str, float | None]]:
            mine = [overruled(j.value, signals, runs) for j in ok]  # type: ignore[arg-type]
            return decided(vote([r[0] for r in mine])), mean_scores([r[1] for r in mine])

        members, verdicts = jurors([name for name, _ in asked], by_member, member_verdict, lambda v: v[0])
        member_scores = [v[1] for v in verdicts]
        panel = verdict_jury(members) if jury else None
        if panel is not None:
            final = decided(vote([str(m.value) for m in members if m.value is not None]))
        chosen_judged = next((j for j, r in ok if r[0] == final), ok[0][0])
        v = chosen_judged.value
        assert v is not None
        overrides = list(dict.fromkeys(o for _, r in ok for o in r[2]))
        result = CodeVerdict(verdict=final, scores=mean_scores(member_scores), explanations=v.explanations.model_dump(),  # type: ignore[arg-type]
                             fix_plan=[s.model_dump() for s in v.fix_plan], status="ok", overrides=overrides,
                             usage=usage, read_as=chosen_judged.read_as, jury=panel, **base)  # type: ignore[arg-type]
    if samples > 1:
        result.votes = votes
    if samples > 1 or jury:
        per = samples
        result.samples = [
            CodeSample(sample=k % per, model=asked[k // per][0], verdict=r[0] if r else None,  # type: ignore[arg-type]
                       scores=r[1] if r else {}, read_as=j.read_as,
                       error=j.failure.describe() if j.failure is not None else None)
            for k, (j, r) in enumerate(zip(sampled, readings, strict=True))]
    if samples > 1:
        failures = [SampleFailure(sample=k, kind=j.failure.kind, message=j.failure.message)
                    for k, j in enumerate(sampled) if j.failure is not None]
        result.sample_stats = {dim: sample_stats([r[1].get(dim) if r else None for r in readings],
                                                 failures)
                               for dim in DIMENSIONS if any(r and r[1].get(dim) is not None for r in readings)}
    return result


def mean_scores(readings: Sequence[dict[str, float | None]]) -> dict[str, float | None]:
    """Each dimension's mean over the readings that scored it (None where none did)."""
    out: dict[str, float | None] = {}
    for dim in DIMENSIONS:
        found = [r[dim] for r in readings if r.get(dim) is not None]
        out[dim] = round(sum(found) / len(found), 6) if found else None  # type: ignore[arg-type]
    return out


def gate_count(gates: dict[str, list[str]] | None) -> int:
    """How many gates a run of `gates` (None: all) starts."""
    return len(default_gates("", gates))


def gate_reporter(progress: Progress, offset: float, total: float | None, label: str = "",
                  then: str = "") -> Callable[[int, int, GateRun], None]:
    """run_gates' per-gate callback (in its worker thread) as progress on the event loop; `then` is added to
    the last gate's message (what comes next: progress only ever increases, so it has no report of its own)."""
    def on_gate(done: int, count: int, run: GateRun) -> None:
        verdict = "timed out" if run.timed_out else "passed" if run.passed else "failed"
        message = (f"{label}gate {run.name} {verdict} in {run.duration_s:.1f} s ({done} of {count} gates)"
                   + (then if done == count else ""))

        async def report() -> None:
            await progress(offset + done, total, message)

        anyio.from_thread.run(report)
    return on_gate


async def gates_for(sandbox: Path, settings: GateSettings, gates: dict[str, list[str]] | None,
                    run_gates_: bool, on_gate: Callable[[int, int, GateRun], None] | None = None,
                    ) -> tuple[ProjectBrief, Signals, list[GateRun]]:
    brief = await anyio.to_thread.run_sync(build_project_brief, sandbox)
    if not run_gates_:
        return brief, Signals(boundaryErrors=brief.boundaryErrors), []
    signals, runs = await anyio.to_thread.run_sync(
        lambda: run_gates(sandbox, settings, gates, brief.boundaryErrors, on_gate))
    return brief, signals, runs


async def tournament(candidates: Sequence[Sequence[SourceFile]], settings: GateSettings,
                     gates: dict[str, list[str]] | None, parallel: int = 2,
                     progress: Progress = no_progress, total: float | None = None) -> list[dict[str, Any]]:
    """The seed's evaluateCandidates: gates per candidate, each in its own sandbox, concurrently (bounded)."""
    limiter = anyio.CapacityLimiter(parallel)
    reports: list[dict[str, Any]] = [{} for _ in candidates]
    gated: list[int] = []

    async def one(i: int) -> None:
        async with limiter:
            box = await anyio.to_thread.run_sync(sandbox_from, None, candidates[i], [], settings)
            try:
                _, signals, runs = await gates_for(box, settings, gates, True)
                reports[i] = {"index": i, "score": round(gate_score(runs, signals), 4), "signals": signals.model_dump(),
                              "gates": [r.model_dump() for r in runs]}
            finally:
                discard(box)
            gated.append(i)
            await progress(len(gated), total, f"candidate {i + 1} gated: score {reports[i]['score']:g} "
                                              f"({len(gated)} of {len(candidates)} candidates)")

    async with anyio.create_task_group() as tg:
        for i in range(len(candidates)):
            tg.start_soon(one, i)
    return reports


class ProposedPatch(BaseModel):
    patch: dict[str, Any]
    validation: ValidationReport
    rounds: int = Field(default=1, description="Judge/fix rounds run (apply_and_rejudge).")
    attempts: int = Field(default=1, description="Fixer calls in the last round: 2 when the repair round was needed.")
    applied: bool = False
    signals: Signals | None = Field(default=None, description="The gates after applying in a sandbox copy.")
    gates: list[GateRun] = []
    status: Literal["ok", "invalid", "model_failed"] = "ok"
    error: str | None = None
    raw_response: str | None = None
    usage: Usage = Field(default_factory=Usage)
    read_as: str | None = Field(default=None, description="How the fixer's last reply was read: json or repair.")


class FixerPatch(JudgeModel):
    ops: list[dict[str, Any]]


_PATH_RUN = re.compile(r"[\w./-]+")


def _python_paths(text: str) -> list[str]:
    """What `([\\w./-]+\\.py)` finds, in linear time: in each run of path characters, everything up to its last
    '.py' (that regex backtracked quadratically over a long run with no '.py' in a caller's diagnostics)."""
    found = []
    for m in _PATH_RUN.finditer(text):
        run = m.group()
        end = run.rfind(".py")
        if end >= 1:
            found.append(run[:end + 3])
    return found


def relevant_files(sandbox: Path, diagnostics: str, fix_plan: Sequence[dict[str, Any]], budget: int = 60_000) -> str:
    """The text of the files the diagnostics and fix plan name (bounded), else the Python files."""
    named = {p["file"] for p in fix_plan if p.get("file")}
    named |= set(_python_paths(diagnostics))
    inside = [n for n in sorted(named) if isinstance(n, str) and not Path(n).is_absolute() and ".." not in Path(n).parts]
    paths = [sandbox / n for n in inside if (sandbox / n).is_file()] or sorted(sandbox.rglob("*.py"))
    out, used = [], 0
    for path in paths:
        rel = path.relative_to(sandbox).as_posix()
        if rel.startswith("."):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if used + len(text) > budget:
            break
        used += len(text)
        out.append(prompts.fence(f"# {rel}\n{text}", "file"))
    return "\n".join(out)


async def propose(client: ModelClient, *, spec: str, sandbox: Path, brief: ProjectBrief, diagnostics: str,
                  fix_plan: Sequence[dict[str, Any]], limits: PatchLimits = DEFAULT_LIMITS) -> ProposedPatch:
    """FIXER_PROMPT → ops → validate against the sandbox → one repair round showing the errors."""
    payload = json.dumps({"spec": spec, "brief": brief.model_dump(exclude={"naming"}), "fix_plan": list(fix_plan)},
                         indent=1)
    text = (prompts.fence(payload, "fixer_input") + "\n\n" + prompts.fence(diagnostics or "(none)", "diagnostics")
            + "\n\n" + relevant_files(sandbox, diagnostics, fix_plan) + "\n\nReturn the patch JSON.")
    messages = [Message.user(text)]
    usage = Usage()
    for round_ in (1, 2):
        request = ModelRequest(system=prompts.render("code/fixer@v1"), messages=messages, temperature=0.0,
                               max_tokens=4096)
        judged = await run_judge(client, request, FixerPatch)
        usage = usage + judged.usage
        if judged.value is None:
            assert judged.failure is not None
            return ProposedPatch(patch={"ops": []}, validation=ValidationReport(ok=False, errors=[judged.failure.message]),
                                 attempts=round_, status="model_failed", error=judged.failure.describe(),
                                 raw_response=judged.failure.raw, usage=usage)
        patch = {"ops": judged.value.ops}
        report = validate_patch(patch, sandbox, limits=limits)
        if report.ok or round_ == 2:
            return ProposedPatch(patch=patch, validation=report, attempts=round_, status="ok" if report.ok else "invalid",
                                 usage=usage, read_as=judged.read_as)
        messages = [*messages, Message.assistant(judged.raw_text),
                    Message.user("The patch does not validate against the files:\n- " + "\n- ".join(report.errors)
                                 + "\nReturn a corrected patch JSON; copy every find text exactly from the files.")]
    raise AssertionError("unreachable")


def diagnostics_text(signals: Signals) -> str:
    return "\n".join([*signals.lintErrors, *signals.typeErrors, *signals.test.details, *signals.boundaryErrors])


def check_sources(root: str | Path | None, files: Sequence[SourceFile] | None,
                  candidates: Sequence[Sequence[SourceFile]] | None, allowed_roots: Sequence[Path]) -> None:
    """What judge_code and propose_patch refuse about the code they are given before any work (also before a
    background call's job starts): candidates beside root/files, else not exactly one of them, or a root outside
    the allowed roots. File I/O (the root's real path): call it off the event loop."""
    if candidates:
        if root is not None or files is not None:
            raise InputError("give candidates alone, or root/files, not both")
        return
    check_source(root, files, allowed_roots)


async def judge_code(call: JudgeCall, *, spec: str, root: str | Path | None, files: Sequence[SourceFile] | None,
                     diff: str | None, run_gates_: bool, gates: dict[str, list[str]] | None, model_notes: str | None,
                     candidates: Sequence[Sequence[SourceFile]] | None, allowed_roots: Sequence[Path],
                     settings: GateSettings, progress: Progress = no_progress) -> CodeVerdict:
    """Gates on a sandbox copy (never the caller's tree), then the verdict; with candidates, the
    tournament first and the winner judged. Without a model backend, the gates' verdict alone (no_model).
    Progress: each candidate, each gate, the model's verdict (its samples and the jury's models asked at once)."""
    try:
        asked = await call.members()
    except ConfigError:
        asked = []
    reports = None
    winner = None
    gated = gate_count(gates) if run_gates_ else 0
    steps = len(candidates or ()) + gated + (1 if asked else 0)
    total = float(max(steps, 1))
    await progress(0, total, f"copying the project into a sandbox; then {gated} gate(s)"
                             + (" and the model's verdict" if asked else ""))
    if candidates:
        check_sources(root, files, candidates, allowed_roots)
        reports = await tournament(candidates, settings, gates, progress=progress, total=total)
        winner = max(range(len(reports)), key=lambda i: (reports[i]["score"], -i))
        files, root = candidates[winner], None
    # Copying a project is file I/O of unbounded size: off the event loop, like the gates.
    sandbox = await anyio.to_thread.run_sync(sandbox_from, root, files, allowed_roots, settings)
    try:
        offset = len(candidates or ())
        brief, signals, runs = await gates_for(sandbox, settings, gates, run_gates_, gate_reporter(
            progress, offset, total, then="; asking the model for a verdict" if asked else ""))
        verdict = await judge(call, asked, spec=spec, signals=signals, runs=runs, brief=brief, diff=diff,
                              model_notes=model_notes)
    finally:
        discard(sandbox)
    verdict.candidates, verdict.winner_index = reports, winner
    if asked or steps == 0:  # otherwise the last gate was the last step
        await progress(total, total, f"verdict: {verdict.verdict}")
    return verdict


async def propose_patch(call: JudgeCall, *, spec: str, root: str | Path | None, files: Sequence[SourceFile] | None,
                        diagnostics: str | None, fix_plan: Sequence[dict[str, Any]] | None, max_rounds: int,
                        apply_and_rejudge: bool, allowed_roots: Sequence[Path], settings: GateSettings,
                        limits: PatchLimits = DEFAULT_LIMITS, progress: Progress = no_progress) -> ProposedPatch:
    """The fixer; with apply_and_rejudge, each round's patch is applied to a sandbox copy and the gates
    run again, until they pass or max_rounds is reached. The returned patch holds every round's ops.
    Progress: each gate and each fixer call; the total assumes every round runs (it ends early when done)."""
    if not 1 <= max_rounds <= 5:
        raise InputError(f"max_rounds must be between 1 and 5 (got {max_rounds})")
    client = await call.client()
    gates = gate_count(None)
    rounds = max_rounds if apply_and_rejudge else 1
    total = float((gates if diagnostics is None else 0) + rounds * (1 + (gates if apply_and_rejudge else 0)))
    done = 0.0
    await progress(done, total, "copying the project into a sandbox")
    # Copying a project is file I/O of unbounded size: off the event loop, like the gates.
    sandbox = await anyio.to_thread.run_sync(sandbox_from, root, files, allowed_roots, settings)
    try:
        brief = await anyio.to_thread.run_sync(build_project_brief, sandbox)
        if diagnostics is None:
            signals, _ = await anyio.to_thread.run_sync(lambda: run_gates(
                sandbox, settings, None, brief.boundaryErrors, gate_reporter(progress, done, total, "diagnostics: ")))
            diagnostics = diagnostics_text(signals)
            done += gates
        ops: list[dict[str, Any]] = []
        usage = Usage()
        result: ProposedPatch | None = None
        for round_ in range(1, max_rounds + 1):
            result = await propose(client, spec=spec, sandbox=sandbox, brief=brief, diagnostics=diagnostics,
                                   fix_plan=fix_plan or [], limits=limits)
            done += 1
            await progress(done, total, f"round {round_}: the fixer proposed {len(result.patch['ops'])} op(s), "
                                        f"{result.status}")
            usage = usage + result.usage
            if result.status != "ok":
                break
            ops += result.patch["ops"]
            if not apply_and_rejudge:
                break
            await anyio.to_thread.run_sync(functools.partial(apply_patch, result.patch, sandbox, limits=limits))
            signals, runs = await anyio.to_thread.run_sync(functools.partial(
                run_gates, sandbox, settings, None, brief.boundaryErrors,
                gate_reporter(progress, done, total, f"round {round_} re-judge: ")))
            done += gates
            result.applied, result.signals, result.gates = True, signals, runs
            if all(r.passed for r in runs) or round_ == max_rounds:
                break
            diagnostics = diagnostics_text(signals)
        assert result is not None
        result.patch = {"ops": ops} if ops else result.patch
        result.rounds, result.usage = round_, usage
        if done < total:  # it ended before the rounds it might have run
            await progress(total, total, f"patch ready: {len(result.patch['ops'])} op(s), {result.status}")
        return result
    finally:
        discard(sandbox)
