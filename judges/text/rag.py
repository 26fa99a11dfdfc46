"""evaluate_rag_answer: faithfulness (each claim of the answer supported, contradicted or not found in
the contexts, with the context that settles it), answer relevance and context relevance. Claims are
split deterministically (claims.split_claims); three model calls, asked at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import anyio
import anyio.to_thread
from pydantic import BaseModel, Field, field_validator

from judges.call import JudgeCall
from judges.errors import InputError
from judges.models.protocol import Usage
from judges.progress import Progress, no_progress
from judges.reading.parsing import JudgeFailure, JudgeModel, OutputError
from judges.reading.verdicts import VerdictError
from judges.store.guidelines import Guidelines

from .asking import ask, verdict_word
from .claims import split_claims

ClaimVerdict = Literal["supported", "contradicted", "not_found"]
_VERDICT_WORDS = {"supported": "supported", "supports": "supported", "entailed": "supported",
                  "contradicted": "contradicted", "contradicts": "contradicted", "contradiction": "contradicted",
                  "not_found": "not_found", "not_supported": "not_found", "unsupported": "not_found",
                  "not_in_context": "not_found", "unknown": "not_found"}


class RagContext(BaseModel):
    text: str
    source: str | None = Field(default=None, description="Where it came from: filename#chunk for guideline chunks.")


class ClaimReading(JudgeModel):
    claim: int
    verdict: ClaimVerdict
    context: int | None = None
    reason: str = ""

    @field_validator("verdict", mode="before")
    @classmethod
    def _spelling(cls, value: Any) -> Any:
        return verdict_word(value, _VERDICT_WORDS)


class FaithfulnessReading(JudgeModel):
    claims: list[ClaimReading]


class RelevanceReading(JudgeModel):
    score: float
    reasoning: str = ""


class ContextReading(JudgeModel):
    context: int
    relevant: bool
    reason: str = ""


class ContextRelevanceReading(JudgeModel):
    contexts: list[ContextReading]


def _check_claims(n_claims: int, n_contexts: int) -> Callable[[FaithfulnessReading], None]:
    def check(value: FaithfulnessReading) -> None:
        seen = sorted(c.claim for c in value.claims)
        if seen != list(range(1, n_claims + 1)):
            raise OutputError(f"give exactly one entry for each claim 1..{n_claims} (got claims {seen})")
        for c in value.claims:
            if c.verdict != "not_found" and (c.context is None or not 1 <= c.context <= n_contexts):
                raise OutputError(f"claim {c.claim} is {c.verdict}: give the number (1..{n_contexts}) of the "
                                  "context that settles it")
    return check


def _check_contexts(n_contexts: int) -> Callable[[ContextRelevanceReading], None]:
    def check(value: ContextRelevanceReading) -> None:
        seen = sorted(c.context for c in value.contexts)
        if seen != list(range(1, n_contexts + 1)):
            raise OutputError(f"give exactly one entry for each context 1..{n_contexts} (got {seen})")
    return check


def _check_relevance(value: RelevanceReading) -> None:
    if not 1 <= value.score <= 5:
        raise VerdictError(f"score {value.score:g} is outside the declared scale 1–5", "out_of_range")


class ClaimResult(BaseModel):
    index: int = Field(description="1-based, in the answer's order.")
    claim: str
    verdict: ClaimVerdict | None = Field(default=None, description="null when the judge failed (see "
                                                                   "faithfulness.failure).")
    context: int | None = Field(default=None, description="1-based index into contexts of the chunk that settles it.")
    chunk: str | None = Field(default=None, description="That chunk's text.")
    source: str | None = None
    reason: str = ""


class Faithfulness(BaseModel):
    score: float | None = Field(description="Supported claims / all claims, 0–1; null when the judge failed.")
    supported: int = 0
    contradicted: int = 0
    not_found: int = 0
    read_as: str | None = None
    failure: JudgeFailure | None = None


class AnswerRelevance(BaseModel):
    score: float | None = Field(description="1–5; null when the judge failed.")
    normalised: float | None = Field(default=None, description="0–100.")
    reasoning: str = ""
    read_as: str | None = None
    failure: JudgeFailure | None = None


class ContextVerdict(BaseModel):
    context: int
    relevant: bool
    reason: str = ""


class ContextRelevance(BaseModel):
    score: float | None = Field(description="Relevant contexts / all contexts, 0–1; null when the judge failed.")
    contexts: list[ContextVerdict] = []
    read_as: str | None = None
    failure: JudgeFailure | None = None


class RagEvaluation(BaseModel):
    claims: list[ClaimResult]
    faithfulness: Faithfulness
    answer_relevance: AnswerRelevance
    context_relevance: ContextRelevance
    contexts: list[RagContext] = Field(description="The contexts judged against, numbered from 1 in that order.")
    planned_model_calls: int
    model: str = ""
    usage: Usage = Field(default_factory=Usage)

    def no_result(self) -> str | None:
        """Why this result holds no usable figure (all three judgements failed), or None."""
        parts = (self.faithfulness, self.answer_relevance, self.context_relevance)
        if any(p.score is not None or p.failure is None for p in parts):
            return None
        return "no judgement could be read (" + "; ".join(f"{p.failure.kind}" for p in parts if p.failure) + ")"


async def guideline_contexts(guidelines: Guidelines, org: str, agent_id: str, question: str) -> list[RagContext]:
    """The agent's guideline chunks for `question`, through the guideline search (the agent's rag_config)."""
    chunks = await guidelines.search(org, agent_id, question)
    if not chunks:
        raise InputError(f"agent_id {agent_id!r}: no guideline chunk matches the question (upload guidelines with "
                         "upload_guideline, or pass contexts: [\"...\"])")
    return [RagContext(text=c.text, source=f"{c.filename}#{c.chunk_index}") for c in chunks]


# Claims one faithfulness judgement takes: far more than an answer worth judging at once holds (a 92 KB answer of
# four-word sentences is 23,000), and few enough that the result's rows stay bounded.
MAX_CLAIMS = 25_000


def check_rag_inputs(question: str, answer: str, contexts: Sequence[RagContext]) -> None:
    """What evaluate_rag_answer refuses before any model call (also before a background call's job starts)."""
    if not question.strip():
        raise InputError("question must not be empty, e.g. \"When was the Eiffel Tower built?\"")
    if not answer.strip():
        raise InputError("answer must not be empty, e.g. \"It was built from 1887 to 1889.\"")
    if not contexts or any(not c.text.strip() for c in contexts):
        raise InputError("contexts: give at least one non-empty passage, e.g. [\"The tower was built 1887–1889.\"], "
                         "or agent_id")


async def evaluate_rag_answer(call: JudgeCall, *, question: str, answer: str, contexts: Sequence[RagContext],
                              progress: Progress = no_progress) -> RagEvaluation:
    client = await call.client()
    check_rag_inputs(question, answer, contexts)
    claims = await anyio.to_thread.run_sync(split_claims, answer)  # linear, but off the loop for a long answer
    if len(claims) > MAX_CLAIMS:  # one faithfulness prompt lists them all; each is a row of the result
        raise InputError(f"answer splits into {len(claims):,} claims; the limit is {MAX_CLAIMS:,} for one call. "
                         "Judge the answer in parts, e.g. one paragraph per call")
    texts = [c.text for c in contexts]
    planned = 3 if claims else 2
    await progress(0, planned, f"{len(claims)} claims, {len(contexts)} contexts: {planned} model calls planned")
    done = 0
    usage = Usage()
    results: dict[str, Any] = {}

    async def run(name: str, coro: Any) -> None:
        nonlocal done, usage
        judged = await coro
        results[name] = judged
        usage = usage + judged.usage
        done += 1
        await progress(done, planned, f"{name.replace('_', ' ')} judged ({done} of {planned})")

    async with anyio.create_task_group() as tg:
        if claims:
            tg.start_soon(run, "faithfulness", ask(client, "text/rag/faithfulness@v1", FaithfulnessReading,
                                                   check=_check_claims(len(claims), len(contexts)), max_tokens=2048,
                                                   question=question, contexts=texts, claims=claims))
        tg.start_soon(run, "answer_relevance", ask(client, "text/rag/answer_relevance@v1", RelevanceReading,
                                                   check=_check_relevance, question=question, answer=answer))
        tg.start_soon(run, "context_relevance", ask(client, "text/rag/context_relevance@v1", ContextRelevanceReading,
                                                    check=_check_contexts(len(contexts)), question=question,
                                                    contexts=texts))
    claim_results = [ClaimResult(index=i + 1, claim=c) for i, c in enumerate(claims)]
    faith = Faithfulness(score=None)
    if claims:
        judged = results["faithfulness"]
        faith.read_as, faith.failure = judged.read_as, judged.failure
        if judged.value is not None:
            for reading in judged.value.claims:
                r = claim_results[reading.claim - 1]
                r.verdict, r.reason = reading.verdict, reading.reason
                if reading.verdict != "not_found" and reading.context is not None:
                    r.context = reading.context
                    r.chunk, r.source = contexts[reading.context - 1].text, contexts[reading.context - 1].source
            supported = sum(r.verdict == "supported" for r in claim_results)
            faith = Faithfulness(score=round(supported / len(claims), 4), supported=supported,
                                 contradicted=sum(r.verdict == "contradicted" for r in claim_results),
                                 not_found=sum(r.verdict == "not_found" for r in claim_results), read_as=judged.read_as)
    rel = results["answer_relevance"]
    relevance = AnswerRelevance(score=None, read_as=rel.read_as, failure=rel.failure)
    if rel.value is not None:
        relevance = AnswerRelevance(score=rel.value.score, normalised=round((rel.value.score - 1) / 4 * 100, 4),
                                    reasoning=rel.value.reasoning, read_as=rel.read_as)
    ctx = results["context_relevance"]
    context_relevance = ContextRelevance(score=None, read_as=ctx.read_as, failure=ctx.failure)
    if ctx.value is not None:
        verdicts = sorted((ContextVerdict(context=c.context, relevant=c.relevant, reason=c.reason)
                           for c in ctx.value.contexts), key=lambda v: v.context)
        context_relevance = ContextRelevance(score=round(sum(v.relevant for v in verdicts) / len(verdicts), 4),
                                             contexts=verdicts, read_as=ctx.read_as)
    return RagEvaluation(claims=claim_results, faithfulness=faith, answer_relevance=relevance,
                         context_relevance=context_relevance, contexts=list(contexts), planned_model_calls=planned,
                         model=client.name, usage=usage)
