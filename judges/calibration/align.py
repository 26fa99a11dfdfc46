"""align_judge: revise an agent's judging instructions from its disagreements with people, and keep the revision
only when it agrees with them significantly better on held-out items.

The agent judges as score_text with one criterion, its system prompt, on its score scale; a score at or above
`pass_at` is a pass (the binary judgement certify_judge reads). Or it judges as pairwise_compare (both orders):
its system prompt is the judging rules put before the pairwise prompt asset, and the judge agrees with an item
when its winner is the people's (A or B; a judge's Tie is a disagreement; pairs the people tie on are left out,
counted in human_ties). The labelled items are split once, stratified by the humans' class, with a fixed seed. The revision writer sees only training items (their disagreements, a few
agreements and the people's critiques); candidates are chosen on training agreement; the chosen one and the
current judge are then judged on the test items, each once, and compared: pairwise winners by McNemar's exact
test, scores by a seeded paired bootstrap interval of the drop in mean absolute error (kept only when the whole
interval is above 0).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Hashable, Sequence
from typing import Any

import anyio
from pydantic import BaseModel, Field

from judges.call import JudgeCall
from judges.errors import InputError
from judges.models.protocol import Usage
from judges.progress import Progress, no_progress
from judges.reading.parsing import JudgeModel
from judges.text.scoring import Criterion, Scale

from . import stats
from .certify import (
    Outcome,
    Rate,
    check_pass_at,
    default_human_pass_at,
    default_pass_at,
    human_class,
    judge_class,
    load_statistics,
)
from .core import Contexts, Judged, JudgeSpec, judge_all
from .dataset import Item

ALPHA = 0.05
MAX_CANDIDATES = 4
MAX_SHOWN = 20  # disagreements shown to the writer per candidate (and agreements, at most a quarter of it)
MAX_CRITIQUE = 2000
FOCUS = ("sharpen the decision rules where the judge and the people disagree.",
         "add short worked examples of the disagreements, with the right verdict and why.",
         "rewrite the rubric's wording so each level is unambiguous.",
         "state what must never pass and what must never fail.")


class Revision(JudgeModel):
    instructions: str = Field(min_length=1, max_length=20000)
    rationale: str = ""


class JudgeAgreement(BaseModel):
    train: Rate | None = Field(description="Agreement with the people's pass/fail (pairwise: winner) on training "
                                           "items, with its 95% Wilson interval.")
    test: Rate | None = Field(default=None, description="The same on the held-out test items.")
    failed: int = Field(default=0, description="Items the judge returned no score for (left out of the rates).")


class Candidate(BaseModel):
    rationale: str
    train: Rate | None
    failed: int
    failure: str | None = Field(default=None, description="Why the writer gave no revision (it is not tried).")


class TestPairs(BaseModel):
    both_right: int
    only_current: int = Field(description="Test items only the current judge got right.")
    only_revised: int = Field(description="Test items only the revised judge got right.")
    both_wrong: int
    left_out: int = Field(description="Test items either judge failed on.")


class ScoreGain(BaseModel):
    measure: str = Field(default="the drop in mean absolute error of the scores against the people's mean "
                                 "(both on 0–1), current minus revised: above 0 the revision scores closer")
    n: int = Field(description="Test items both judges scored.")
    value: float
    low: float = Field(description="95% paired bootstrap lower bound (scipy, percentile, seeded with seed).")
    high: float


class Alignment(BaseModel):
    kept: bool = Field(description="The revision agrees significantly better on the test items and was kept "
                                   "as a new agent (new_agent_id) or prompt version (new_prompt_id); otherwise "
                                   "nothing changed.")
    conclusion: str
    agent_id: str | None = Field(description="The agent aligned; null when a prompt asset is (prompt_id).")
    new_agent_id: str | None = None
    prompt_id: str | None = Field(default=None, description="Pairwise: the prompt asset (or version) judged.")
    new_prompt_id: str | None = Field(default=None, description=(
        "Kept from a prompt asset: the organization's new version, <name>@v<N>, as pairwise_compare's prompt_id."))
    judge: str = Field(default="score_text", description="The judged tool: score_text or pairwise_compare.")
    seed: int
    pass_at: float | None = Field(description="score_text: the judge's pass mark; pairwise: null (A passes).")
    human_pass_at: float | None
    human_ties: int = Field(default=0, description="Pairwise: items the people tie on, left out of the split.")
    train_ids: list[str]
    test_ids: list[str]
    current: JudgeAgreement
    revised: JudgeAgreement | None = Field(description="The candidate chosen on train; null when none was written.")
    candidates: list[Candidate]
    chosen: int | None = Field(description="Index in candidates of the one scored on test.")
    test_pairs: TestPairs | None = None
    p_value: float | None = Field(default=None, description=(
        "McNemar's exact test, two-sided, on the test pairs (pairwise: the keep-rule; scores: pass/fail, reported)."))
    score_gain: ScoreGain | None = Field(default=None, description=(
        "The scores themselves on test: the revision's gain with a paired bootstrap interval (score_text: "
        "kept only when low > 0); null with fewer than 6 items both scored, or pairwise."))
    keep_rule: str = Field(default="", description=(
        "What decided: 'bootstrap' (scores: score_gain.low > 0) or 'mcnemar' (pairwise: p_value < alpha)."))
    alpha: float = ALPHA
    instructions: str | None = Field(default=None, description="The revised judge's instructions.")
    diff: str = Field(default="", description="Unified diff of the judge's instructions, current to revised.")
    usage: Usage = Field(default_factory=Usage)

    def no_result(self) -> str | None:
        """Why nothing could be compared (the current judge scored no training item), or None."""
        if self.current.train is None and self.current.failed:
            return f"the current judge scored no training item; it failed on {self.current.failed} items in all"
        return None


def agent_criterion(text: str, scale: tuple[float, float]) -> Criterion:
    """An agent's system prompt as the one criterion score_text judges by, on the agent's scale."""
    return Criterion(name="verdict", description=text, scale=Scale(min=scale[0], max=scale[1]))


def split(classes: Sequence[Outcome], seed: int, test_fraction: float,
          same: Sequence[Hashable] | None = None) -> tuple[list[int], list[int]]:
    """Item indices (train, test): within each human class the same share goes to test (at least one item of a
    class with two or more), drawn with `seed`. Items with equal `same` keys (the same text judged twice) go
    to the same side, with the class of the first: a test item's text never reaches the writer through its
    copy on train."""
    rng = random.Random(seed)
    keys = list(range(len(classes))) if same is None else list(same)
    copies: dict[Hashable, list[int]] = {}
    for i, key in enumerate(keys):
        copies.setdefault(key, []).append(i)
    train: list[int] = []
    test: list[int] = []
    for label in ("pass", "fail"):
        members = [group[0] for group in copies.values() if classes[group[0]] == label]
        rng.shuffle(members)
        k = round(len(members) * test_fraction)
        k = max(1, k) if len(members) >= 2 else 0
        test += [i for first in members[:k] for i in copies[keys[first]]]
        train += [i for first in members[k:] for i in copies[keys[first]]]
    return sorted(train), sorted(test)


def judge_spec(judge: str, text: str, scale: tuple[float, float], prompt_id: str | None = None) -> JudgeSpec:
    """The judge a text makes: score_text's one criterion on the agent's scale, or pairwise_compare's judging
    rules before the prompt asset (`prompt_id`, default the text pairwise prompt; no text: no rules)."""
    if judge == "pairwise_compare":
        return JudgeSpec(judge="pairwise_compare", prompt_id=prompt_id, rules=text or None)
    return JudgeSpec(judge="score_text", criteria=[agent_criterion(text, scale)])


def split_items(items: Sequence[Item], spec: JudgeSpec, human_pass_at: float | None, seed: int,
                test_fraction: float) -> tuple[list[Item], list[Outcome], list[int], list[int], int]:
    """The items the people decided (pairs they tie on left out, counted), their classes and the split (train
    and test indices into them); refused when a side would be empty. Pure: a tool checks it before its job. A pair
    labelled again in the other order is the same pair: both copies fall on one side."""
    labelled = [(i, human_class(i, spec, human_pass_at)) for i in items]
    decided = [i for i, t in labelled if t != "tie"]
    truth: list[Outcome] = [t for _, t in labelled if t != "tie"]
    pairwise = spec.judge == "pairwise_compare"
    train_i, test_i = split(truth, seed, test_fraction,
                            [(i.inputs["instruction"], *sorted(i.inputs["candidates"])) if pairwise else
                             (i.inputs["text"], i.inputs.get("instruction") or "") for i in decided])
    if not train_i or not test_i:
        raise InputError("dataset: the split left no training or no test items; give at least two labelled items "
                         "of each class (pass and fail; pairwise: won by A and by B, ties left out)")
    return decided, truth, train_i, test_i, len(items) - len(decided)


def _right(judged: Judged, truth: Outcome, spec: JudgeSpec, pass_at: float | None) -> bool | None:
    said = judge_class(judged, spec, pass_at)
    return None if said == "failed" else said == truth


def _agreement(judged: Sequence[Judged], truth: Sequence[Outcome], spec: JudgeSpec,
               pass_at: float | None) -> tuple[Rate | None, int]:
    right = [_right(j, t, spec, pass_at) for j, t in zip(judged, truth, strict=True)]
    decided = [r for r in right if r is not None]
    interval = stats.wilson(sum(decided), len(decided))
    rate = None if interval is None else Rate(value=sum(decided) / len(decided), low=interval[0], high=interval[1])
    return rate, len(right) - len(decided)


def _shown(items: Sequence[Item], judged: Sequence[Judged], truth: Sequence[Outcome], spec: JudgeSpec,
           pass_at: float | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    wrong, right = [], []
    pairwise = spec.judge == "pairwise_compare"
    for item, j, t in zip(items, judged, truth, strict=True):
        verdict = _right(j, t, spec, pass_at)
        if pairwise:
            a, b = item.inputs["candidates"]
            shown = {"instruction": item.inputs["instruction"], "response_a": a, "response_b": b,
                     "human": "A" if t == "pass" else "B"}
        else:
            shown = {"text": item.inputs["text"], "instruction": item.inputs.get("instruction") or "", "human": t}
        if verdict is False:
            critique = item.inputs.get("human_critique")
            wrong.append({**shown, "judge": j.value if pairwise else judge_class(j, spec, pass_at),
                          "score": "" if pairwise else f"{j.value:g}",
                          "critique": critique[:MAX_CRITIQUE] if isinstance(critique, str) else ""})
        elif verdict:
            right.append(shown)
    return wrong[:MAX_SHOWN], right[:MAX_SHOWN // 4]


async def _asset(call: JudgeCall, prompt_id: str | None) -> str:
    """The pairwise prompt the rules go before, as the judge reads it, with placeholders for the item: an
    organization's own version is its shipped asset with the version's rules first."""
    import prompts
    from judges.pairwise.judge import DEFAULT_PROMPTS

    base, own = await call.prompt(prompt_id or DEFAULT_PROMPTS[("pairwise", "text")])
    text = prompts.render(base, instruction="(the instruction)", response_a="(response A)",
                          response_b="(response B)")
    return text if own is None else f"{own}\n\n{text}"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def keeps(judge: str, pairs: TestPairs, p_value: float, gain: ScoreGain | None) -> bool:
    """The keep-rule: scores (score_text) when the 95% paired bootstrap interval of the drop in mean absolute
    error lies wholly above 0; pairwise winners when the revision gets more test items right and McNemar's
    exact p is below ALPHA."""
    if judge == "score_text":
        return gain is not None and gain.low > 0
    return pairs.only_revised > pairs.only_current and p_value < ALPHA


def check_align(items: Sequence[Item], test_fraction: float, candidates: int) -> None:
    if not 0 < test_fraction < 1:
        raise InputError(f"test_fraction: strictly between 0 and 1, e.g. 0.3 (got {test_fraction:g})")
    if not 1 <= candidates <= MAX_CANDIDATES:
        raise InputError(f"candidates: 1 to {MAX_CANDIDATES} revisions tried on train (got {candidates})")
    for item in items:
        critique = item.inputs.get("human_critique")
        if critique is not None and not isinstance(critique, str):
            raise InputError(f"dataset item {item.id!r}: human_critique is text (got {type(critique).__name__}), "
                             "e.g. \"human_critique\": \"misses the refund policy\"")


def checked_alignment(items: Sequence[Item], spec: JudgeSpec, *, pass_at: float | None, human_pass_at: float | None,
                      seed: int, test_fraction: float, candidates: int) -> tuple[float | None, float | None]:
    """What `align` would refuse, checked before its job starts (the split's settings, the judge's pass mark, the
    split itself). Returns the judge's pass mark and the humans' (default: the middle of each scale)."""
    check_align(items, test_fraction, candidates)
    check_pass_at(spec, pass_at)
    judge_pass = default_pass_at(spec) if pass_at is None else pass_at
    human_pass = default_human_pass_at(items, spec) if human_pass_at is None else human_pass_at
    split_items(items, spec, human_pass, seed, test_fraction)
    return judge_pass, human_pass


async def align(call: JudgeCall, text: str, scale: tuple[float, float], items: Sequence[Item], *,
                agent_id: str | None, pass_at: float | None, human_pass_at: float | None, judge: str = "score_text",
                prompt_id: str | None = None, seed: int = 0, test_fraction: float = 0.3,
                candidates: int = 2, policy: Any = None, retries: int = 1, contexts: Contexts | None = None,
                progress: Progress = no_progress) -> Alignment:
    """Split, revise on train, choose on train, score once on test; `kept` when the revision wins significantly."""
    from judges.patches.linediff import unified_diff
    from judges.text.asking import ask

    check_align(items, test_fraction, candidates)
    pairwise = judge == "pairwise_compare"
    current = judge_spec(judge, text, scale, prompt_id)
    items, truth, train_i, test_i, human_ties = split_items(items, current, human_pass_at, seed, test_fraction)
    train, test = [items[i] for i in train_i], [items[i] for i in test_i]
    train_t, test_t = [truth[i] for i in train_i], [truth[i] for i in test_i]
    total = len(train) * (1 + candidates) + candidates + 2 * len(test)
    done = 0

    def stage(start: int) -> Progress:
        async def report(progressed: float, _total: float | None, message: str) -> None:
            await progress(start + progressed, total, message)
        return report

    usage = Usage()

    async def judged(spec: JudgeSpec, part: list[Item], part_truth: list[Outcome], unit: str
                     ) -> tuple[list[Judged], Rate | None, int]:
        """One pass of a judge over train or test (its own units in a job), its usage counted, its agreement."""
        nonlocal done, usage
        verdicts = await judge_all(call, spec, part, policy=policy, retries=retries, contexts=contexts, unit=unit,
                                   progress=stage(done))
        done += len(part)
        usage += sum((j.usage for j in verdicts), Usage())
        return (verdicts, *_agreement(verdicts, part_truth, spec, pass_at))

    cur_train, cur_rate, cur_failed = await judged(current, train, train_t, "current train")
    wrong, right = _shown(train, cur_train, train_t, current, pass_at)
    tried: list[Candidate] = []
    texts: list[str | None] = []
    specs: list[JudgeSpec] = []
    if wrong:
        for k in range(candidates):
            await progress(done, total, f"writing revision {k + 1} of {candidates}")
            on_scale: dict[str, Any] = {} if pass_at is None else {  # score_text's scale and pass mark; pairwise has neither
                "low": f"{scale[0]:g}", "high": f"{scale[1]:g}",
                "pass_at": f"{scale[0] + (scale[1] - scale[0]) * pass_at / 100:g}"}
            written = await ask(await call.client(), f"calibration/{'revise_pairwise' if pairwise else 'revise'}@v1",
                                Revision, max_tokens=4096, judge=text, disagreements=wrong, agreements=right,
                                candidate=k + 1, candidates=candidates, focus=FOCUS[k],
                                **(on_scale if not pairwise else {"asset": await _asset(call, prompt_id)}))
            done += 1
            usage += written.usage
            if written.value is None:
                assert written.failure is not None
                tried.append(Candidate(rationale="", train=None, failed=0,
                                       failure=f"{written.failure.kind}: {written.failure.message}"))
                texts.append(None)
                specs.append(current)
                done += len(train)
                continue
            spec = judge_spec(judge, written.value.instructions, scale, prompt_id)
            _, rate, failed = await judged(spec, train, train_t, f"revision {k + 1} train")
            tried.append(Candidate(rationale=written.value.rationale, train=rate, failed=failed))
            texts.append(written.value.instructions)
            specs.append(spec)
    usable = [k for k, c in enumerate(tried) if c.train is not None]
    chosen = max(usable, key=lambda k: (tried[k].train.value, -k)) if usable else None  # type: ignore[union-attr]
    # The test items are judged only now, after the choice: nothing about them reaches the writer or the choice.
    cur_test, cur_test_rate, cur_test_failed = await judged(current, test, test_t, "current test")
    base = dict(agent_id=agent_id, prompt_id=prompt_id if pairwise else None, judge=judge, seed=seed, pass_at=pass_at, human_pass_at=human_pass_at,
                human_ties=human_ties,
                train_ids=[i.id for i in train], test_ids=[i.id for i in test], candidates=tried, chosen=chosen)
    current_agreement = JudgeAgreement(train=cur_rate, test=cur_test_rate, failed=cur_failed + cur_test_failed)
    if chosen is None:
        why = (f"the current judge scored no training item ({cur_failed} failed)" if cur_rate is None
               else "the current judge agrees with every training item it scored: nothing to revise" if not wrong
               else "no candidate revision could be read ("
               + ", ".join(sorted({(c.failure or "").split(":")[0] for c in tried})) + ")")
        return Alignment(kept=False, conclusion=f"no change: {why}", current=current_agreement, revised=None,
                         usage=usage, **base)  # type: ignore[arg-type]
    best_text = texts[chosen]
    assert best_text is not None
    new_test, new_test_rate, new_test_failed = await judged(specs[chosen], test, test_t, f"revision {chosen + 1} test")

    humans = [v for i in items for v in i.scores if v is not None]
    low, high = (min(humans), max(humans)) if humans else (0.0, 0.0)  # pairwise: no scores (no score_gain)

    def errors(judged: Judged, item: Item) -> float | None:
        mean = item.human_score()
        if not isinstance(judged.value, float) or mean is None or high <= low:
            return None
        return abs(judged.value / 100 - (mean - low) / (high - low))

    def score_gain() -> ScoreGain | None:
        both = [(a, b) for a, b in (
            (errors(x, i), errors(y, i)) for x, y, i in zip(cur_test, new_test, test, strict=True))
            if a is not None and b is not None]
        found = stats.paired_bootstrap([a for a, _ in both], [b for _, b in both], seed)
        return None if found is None else ScoreGain(n=len(both), value=found[0], low=found[1], high=found[2])

    def compared() -> tuple[TestPairs, float]:
        load_statistics()
        pairs = [(_right(a, t, current, pass_at), _right(b, t, specs[chosen], pass_at))
                 for a, b, t in zip(cur_test, new_test, test_t, strict=True)]
        both = [(a, b) for a, b in pairs if a is not None and b is not None]
        counted = TestPairs(both_right=sum(a and b for a, b in both), only_current=sum(a and not b for a, b in both),
                            only_revised=sum(b and not a for a, b in both),
                            both_wrong=sum(not a and not b for a, b in both), left_out=len(pairs) - len(both))
        return counted, stats.mcnemar_exact(counted.only_current, counted.only_revised)

    pairs, p_value = await anyio.to_thread.run_sync(compared)
    gain = None if pairwise else await anyio.to_thread.run_sync(score_gain)  # scipy's bootstrap, off the loop
    kept = keeps(judge, pairs, p_value, gain)
    if pairwise:
        conclusion = (f"kept: the revision agrees better on the test items (McNemar exact p = {p_value:.4g} < {ALPHA})"
                      if kept else f"no significant gain on the test items (McNemar exact p = {p_value:.4g}, "
                                   f"{pairs.only_revised} items only the revision got right, {pairs.only_current} "
                                   "only the current judge): nothing changed")
    elif gain is None:
        conclusion = (f"no significant gain: fewer than {stats.MIN_BOOTSTRAP_PAIRS} test items scored by both judges "
                      "(with fewer, even every one closer is not significant at 5%): nothing changed")
    else:
        interval = f"{gain.value:.4g}, 95% paired bootstrap interval [{gain.low:.4g}, {gain.high:.4g}]"
        conclusion = (f"kept: the revision scores closer to the people on the test items (mean absolute error "
                      f"down by {interval}, above 0)" if kept else
                      f"no significant gain on the test items (mean absolute error down by {interval}, not "
                      "above 0): nothing changed")
    diff = "".join(unified_diff([f"{line}\n" for line in text.splitlines()],
                                [f"{line}\n" for line in best_text.splitlines()],
                                f"current {_sha(text)[:12]}", f"revised {_sha(best_text)[:12]}"))
    revised = JudgeAgreement(train=tried[chosen].train, test=new_test_rate, failed=tried[chosen].failed + new_test_failed)
    return Alignment(kept=kept, conclusion=conclusion, current=current_agreement, revised=revised,
                     test_pairs=pairs, p_value=p_value, score_gain=gain, keep_rule="mcnemar" if pairwise else "bootstrap",
                     instructions=best_text, diff=diff, usage=usage, **base)  # type: ignore[arg-type]
