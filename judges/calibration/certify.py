"""certify_judge: a binary judgement checked against people's labels, certified only when the 95% Wilson lower
bounds of both its true-positive and true-negative rates reach a bar; the pass rate of an unlabelled run
corrected for the judge's errors (Rogan–Gladen).

The judgement is binary by construction: pairwise_compare's winner with A as the positive class (B negative, a
Tie in neither), judge_code's accept (revise and reject negative; the judge's own verdict, gates off unless
asked), one evaluate_analysis category's pass, or a score at or above `pass_at` (score_text's 0–100 total, viescore's own scale) against the
humans' mean at or above `human_pass_at`. Items the humans tie on, items the judge ties on and items the judge
failed are counted in `ties` and `failed` and left out of both rates, never dropped silently.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

from judges.call import JudgeCall
from judges.errors import InputError
from judges.models.protocol import Usage
from judges.progress import Progress, no_progress

from . import stats
from .core import Contexts, Judged, JudgeEnv, JudgeSpec, check_spec, judge_all
from .dataset import BINARY, Item

DEFAULT_THRESHOLD = 0.80
Outcome = Literal["pass", "fail", "tie", "failed"]


class Rate(BaseModel):
    value: float = Field(description="The observed rate.")
    low: float = Field(description="95% Wilson lower bound.")
    high: float = Field(description="95% Wilson upper bound.")


class Plan(BaseModel):
    positives: int | None = Field(description=(
        "More labelled positives needed for the TPR's lower bound to reach the threshold if the rate stays as "
        "observed; 0: enough; null: no number will (the rate is at or below the threshold)."))
    negatives: int | None = Field(description="The same for the TNR and labelled negatives.")


class Correction(BaseModel):
    n: int = Field(description="Verdicts of the unlabelled run that say pass or fail.")
    ties: int = Field(description="Verdicts that are a tie (left out of n).")
    raw: Rate = Field(description="The run's observed pass rate, with its 95% Wilson interval.")
    corrected: Rate | None = Field(description=(
        "Rogan–Gladen: (raw + TNR − 1) / (TPR + TNR − 1), clipped to 0–1, with a 95% delta-method interval "
        "carrying the error of the raw rate and of the TPR and TNR; null when TPR + TNR <= 1."))
    covered: bool = Field(description="The run's fingerprint (if given) is this certificate's fingerprint.")


class ItemOutcome(BaseModel):
    id: str
    human: Outcome
    judge: Outcome
    value: float | str | None = Field(description="The judge's score or winner; null when it failed.")
    failure: str | None = None


class Certificate(BaseModel):
    certified: bool = Field(description="Both lower bounds (tpr.low, tnr.low) reach the threshold.")
    threshold: float
    judge: str
    model: str
    positive: str = Field(description="What a positive (pass) is, for the humans and for the judge.")
    tpr: Rate | None = Field(description="Of the items the humans call positive, the share the judge passes.")
    tnr: Rate | None = Field(description="Of the items the humans call negative, the share the judge fails.")
    n_positive: int
    n_negative: int
    ties: int = Field(description="Items left out because the humans or the judge gave neither class.")
    failed: int = Field(description="Items the judge returned no verdict for (kept in results with the reason).")
    needed: Plan
    fingerprint: str = Field(description="sha256 of `pinned`: a judge with another fingerprint is not covered.")
    pinned: dict[str, Any] = Field(description="What the certificate covers: model, prompts and the hash of "
                                               "their text, rubric, settings, samples.")
    corrected: Correction | None = None
    results: list[ItemOutcome]
    usage: Usage = Field(default_factory=Usage)

    def no_result(self) -> str | None:
        """Why this certificate rests on nothing (the judge gave no verdict on any labelled item), or None."""
        if self.tpr is None and self.tnr is None and self.failed:
            return f"the judge gave no verdict on any labelled item ({self.failed} failed)"
        return None


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pin(spec: JudgeSpec, model: str, pass_at: float | None, human_pass_at: float | None) -> dict[str, Any]:
    """What a certificate covers: the model, each prompt it may use with the sha256 of its text, the criteria
    (a rubric's text included), the method and settings, the samples and the pass thresholds."""
    import prompts
    from judges.pairwise.judge import DEFAULT_PROMPTS

    if spec.judge == "judge_code":
        ids = ["code/judge@v1"]
    elif spec.judge == "evaluate_analysis":
        ids = [f"analysis/{part}/{spec.category}@v1" for part in ("system", "user")
               if spec.category_spec is not None and spec.category_spec.get("builtin")]
    elif spec.judge == "score_text":
        ids = ["text/score/criterion@v1"] + (["text/score/steps@v1"] if spec.method == "g_eval" else [])
    elif spec.prompt_id is not None:
        ids = [spec.prompt_id if "@" in spec.prompt_id else f"{spec.prompt_id}@{spec.prompt_version or 'v1'}"]
    else:
        method = "pairwise" if spec.judge == "pairwise_compare" else "viescore"
        ids = sorted(p for (m, _), p in DEFAULT_PROMPTS.items() if m == method)
    return {
        "judge": spec.judge, "model": model,
        "prompts": {p: _hash(prompts.source(p)) for p in ids},
        "criteria": [c.model_dump() for c in spec.criteria],
        "settings": {"method": spec.method, "candidate_type": spec.candidate_type,
                     "score_scale": list(spec.score_scale) if spec.score_scale else None,
                     "pass_at": pass_at, "human_pass_at": human_pass_at,
                     **({"run_gates": spec.run_gates} if spec.judge == "judge_code" else {}),
                     **({"category": spec.category, "category_spec": spec.category_spec}
                        if spec.judge == "evaluate_analysis" else {})},
        "samples": spec.samples,
        **({"rules": _hash(spec.rules)} if spec.rules is not None else {}),
    }


def fingerprint(pinned: dict[str, Any]) -> str:
    return _hash(json.dumps(pinned, sort_keys=True, separators=(",", ":")))


def default_pass_at(spec: JudgeSpec) -> float | None:
    """Scores: the middle of the judge's scale (score_text 0–100, viescore its scale); pairwise: none."""
    if spec.judge in BINARY:
        return None
    if spec.judge == "score_text":
        return 50.0
    if spec.judge == "viescore":
        from judges.pairwise.judge import VIESCORE_SCALE

        low, high = spec.score_scale or VIESCORE_SCALE
        return (low + high) / 2
    return None


def default_human_pass_at(items: Sequence[Item], spec: JudgeSpec) -> float | None:
    """Scores: the middle of the lowest and highest human score given."""
    if spec.judge == "pairwise_compare" or spec.judge in BINARY:
        return None
    values = [s for i in items for s in i.scores if s is not None]
    return (min(values) + max(values)) / 2


def human_class(item: Item, spec: JudgeSpec, human_pass_at: float | None) -> Outcome:
    if spec.judge == "pairwise_compare":
        return {"A": "pass", "B": "fail"}.get(str(item.human_winner()), "tie")  # type: ignore[return-value]
    if spec.judge in BINARY:
        return {"pass": "pass", "fail": "fail"}.get(str(item.human_verdict()), "tie")  # type: ignore[return-value]
    mean = item.human_score()
    assert mean is not None and human_pass_at is not None
    return "pass" if mean >= human_pass_at else "fail"


def judge_class(judged: Judged, spec: JudgeSpec, pass_at: float | None) -> Outcome:
    if judged.value is None:
        return "failed"
    if spec.judge == "pairwise_compare":
        return {"A": "pass", "B": "fail"}.get(str(judged.value), "tie")  # type: ignore[return-value]
    if spec.judge in BINARY:  # judge_code: accept is positive, revise and reject negative
        return {"accept": "pass", "pass": "pass", "revise": "fail", "reject": "fail",  # type: ignore[return-value]
                "fail": "fail"}.get(str(judged.value), "tie")
    assert pass_at is not None and isinstance(judged.value, float)
    return "pass" if judged.value >= pass_at else "fail"


def verdict_class(verdict: Any, spec: JudgeSpec, pass_at: float | None, where: str) -> Outcome:
    """One verdict of an unlabelled run: pass/fail/true/false, A/B/Tie, or a score (against pass_at)."""
    if isinstance(verdict, bool):
        return "pass" if verdict else "fail"
    if isinstance(verdict, int | float):
        if pass_at is None:
            raise InputError(f"{where}: {spec.judge} gives no score: a verdict is A, B or Tie (pairwise), accept, "
                             f"revise or reject (judge_code), pass or fail (got {verdict!r})")
        return "pass" if verdict >= pass_at else "fail"
    word = str(verdict).strip().lower()
    found = {"pass": "pass", "fail": "fail", "true": "pass", "false": "fail", "a": "pass", "b": "fail",
             "tie": "tie", "accept": "pass", "revise": "fail", "reject": "fail"}.get(word)
    if found is None:
        raise InputError(f"{where}: a verdict is pass or fail, true or false, A, B or Tie, accept, revise or "
                         f"reject, or a score "
                         f"(got {verdict!r}); e.g. verdicts: [\"pass\", \"fail\", 72]")
    return found  # type: ignore[return-value]


def check_verdicts(verdicts: Sequence[Any], spec: JudgeSpec) -> None:
    """Every verdict readable (a score needs a scoring judge), before any item is judged."""
    for i, v in enumerate(verdicts):
        verdict_class(v, spec, None if default_pass_at(spec) is None else 0.0, f"verdicts[{i}]")


def _rate(hits: int, n: int) -> Rate | None:
    interval = stats.wilson(hits, n)
    return None if interval is None else Rate(value=hits / n, low=interval[0], high=interval[1])


def certificate(spec: JudgeSpec, model: str, items: Sequence[Item], judged: Sequence[Judged], *, threshold: float,
                pass_at: float | None, human_pass_at: float | None, verdicts: Sequence[Any] | None = None,
                run_fingerprint: str | None = None) -> Certificate:
    """The statistics of a finished run (pure: the same items and verdicts give the same certificate)."""
    results = [ItemOutcome(id=item.id, human=human_class(item, spec, human_pass_at),
                           judge=judge_class(j, spec, pass_at), value=j.value, failure=j.failure)
               for item, j in zip(items, judged, strict=True)]
    failed = sum(r.judge == "failed" for r in results)
    decided = [r for r in results if r.human != "tie" and r.judge in ("pass", "fail")]
    ties = len(results) - failed - len(decided)
    positives = [r for r in decided if r.human == "pass"]
    negatives = [r for r in decided if r.human == "fail"]
    tp, tn = sum(r.judge == "pass" for r in positives), sum(r.judge == "fail" for r in negatives)
    tpr, tnr = _rate(tp, len(positives)), _rate(tn, len(negatives))
    certified = tpr is not None and tnr is not None and tpr.low >= threshold and tnr.low >= threshold
    needed = Plan(positives=stats.needed_for(tpr.value if tpr else 0.0, len(positives), threshold) if tpr else None,
                  negatives=stats.needed_for(tnr.value if tnr else 0.0, len(negatives), threshold) if tnr else None)
    pinned = pin(spec, model, pass_at, human_pass_at)
    print_ = fingerprint(pinned)
    corrected = None
    if verdicts is not None:
        classes = [verdict_class(v, spec, pass_at, f"verdicts[{i}]") for i, v in enumerate(verdicts)]
        said = [c for c in classes if c != "tie"]
        raw = _rate(sum(c == "pass" for c in said), len(said))
        if raw is None:
            raise InputError("verdicts: give at least one pass or fail verdict, e.g. [\"pass\", \"fail\", \"pass\"]")
        fixed = None
        if tpr is not None and tnr is not None:
            rg = stats.rogan_gladen(sum(c == "pass" for c in said), len(said), tpr.value, tnr.value,
                                    len(positives), len(negatives))
            fixed = None if rg is None else Rate(value=rg[0], low=rg[1], high=rg[2])
        corrected = Correction(n=len(said), ties=len(classes) - len(said), raw=raw, corrected=fixed,
                               covered=run_fingerprint is None or run_fingerprint == print_)
    positive = ("the humans' and the judge's winner is A (B is negative)" if spec.judge == "pairwise_compare" else
                "the humans' majority and the judge say accept (revise and reject are negative)"
                if spec.judge == "judge_code" else
                f"the humans' majority and the judge's category {spec.category} say pass"
                if spec.judge == "evaluate_analysis" else
                f"the humans' mean score >= {human_pass_at:g}; the judge's score >= {pass_at:g}")
    return Certificate(certified=certified, threshold=threshold, judge=spec.judge, model=model, positive=positive,
                       tpr=tpr, tnr=tnr, n_positive=len(positives), n_negative=len(negatives), ties=ties,
                       failed=failed, needed=needed, fingerprint=print_, pinned=pinned, corrected=corrected,
                       results=results, usage=sum((j.usage for j in judged), Usage()))


def check_pass_at(spec: JudgeSpec, pass_at: float | None) -> None:
    """A pass mark inside the judge's scale (score_text's 0–100 total, viescore's scale); pairwise has none."""
    if pass_at is None:
        return
    if spec.judge == "pairwise_compare":
        raise InputError("pass_at: pairwise_compare's positive class is A (no pass mark); leave pass_at out")
    if spec.judge in BINARY:
        raise InputError(f"pass_at: {spec.judge}'s verdict is already pass or fail (no pass mark); leave pass_at out")
    from judges.pairwise.judge import VIESCORE_SCALE

    low, high = (0.0, 100.0) if spec.judge == "score_text" else (spec.score_scale or VIESCORE_SCALE)
    if not low <= pass_at <= high:
        raise InputError(f"pass_at: a score on the judge's scale {low:g}–{high:g} (score_text: its 0–100 total), "
                         f"e.g. {(low + high) / 2:g} (got {pass_at:g})")


def check_threshold(threshold: float) -> None:
    if not 0 < threshold < 1:
        raise InputError(f"threshold: a rate strictly between 0 and 1, e.g. 0.8 (got {threshold:g})")


async def certify(call: JudgeCall, spec: JudgeSpec, items: Sequence[Item], *, policy: Any, retries: int,
                  threshold: float = DEFAULT_THRESHOLD, pass_at: float | None = None,
                  human_pass_at: float | None = None, verdicts: Sequence[Any] | None = None,
                  run_fingerprint: str | None = None, contexts: Contexts | None = None,
                  progress: Progress = no_progress, env: JudgeEnv | None = None) -> Certificate:
    """Judge every labelled item and certify (or not), correcting `verdicts`' pass rate when given."""
    check_spec(spec)
    check_threshold(threshold)
    check_pass_at(spec, pass_at)
    if spec.judge != "pairwise_compare" and spec.judge not in BINARY:
        pass_at = default_pass_at(spec) if pass_at is None else pass_at
        human_pass_at = default_human_pass_at(items, spec) if human_pass_at is None else human_pass_at
    client = await call.client()
    judged = await judge_all(call, spec, items, policy=policy, retries=retries, contexts=contexts,
                             progress=progress, env=env)

    def computed() -> Certificate:
        load_statistics()
        return certificate(spec, client.name, items, judged, threshold=threshold, pass_at=pass_at,
                           human_pass_at=human_pass_at, verdicts=verdicts, run_fingerprint=run_fingerprint)

    return await anyio.to_thread.run_sync(computed)  # statsmodels' first import and the statistics, off the loop


def load_statistics() -> None:
    """statsmodels under the heavy-import lock (rag/warmup.py), never beside the warm-up's own imports."""
    from rag.warmup import HEAVY, import_numpy

    import_numpy()
    with HEAVY:
        import statsmodels.stats.contingency_tables
        import statsmodels.stats.proportion  # noqa: F401
