"""compare_to_reference: equivalent / partially correct / incorrect against a known-correct reference.
An exact or normalised-string match decides without a model call."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from judges.call import JudgeCall
from judges.errors import InputError
from judges.models.protocol import Usage
from judges.progress import Progress, no_progress
from judges.reading.parsing import JudgeFailure, JudgeModel

from .asking import ask, verdict_word
from .claims import reference_match

Verdict = Literal["equivalent", "partially_correct", "incorrect"]


class ReferenceVerdict(JudgeModel):
    verdict: Verdict
    missing: list[str] = []
    wrong: list[str] = []
    reasoning: str = ""

    @field_validator("verdict", mode="before")
    @classmethod
    def _spelling(cls, value: Any) -> Any:
        # "Partially correct", "partially-correct", "EQUIVALENT" are the same verdicts.
        return verdict_word(value, {"correct": "equivalent", "partial": "partially_correct",
                                    "partly_correct": "partially_correct", "wrong": "incorrect"})


class ReferenceComparison(BaseModel):
    verdict: Verdict | None = Field(description="null when the judge could not be read (see failure); never a guess.")
    decided_by: Literal["exact_match", "normalised_match", "model"] | None = Field(
        description="exact_match / normalised_match: decided without a model call.")
    missing: list[str] = Field(default=[], description="What the reference holds that the text lacks.")
    wrong: list[str] = Field(default=[], description="What the text gets wrong against the reference.")
    reasoning: str = ""
    read_as: str | None = None
    failure: JudgeFailure | None = None
    planned_model_calls: int
    model: str = ""
    usage: Usage = Field(default_factory=Usage)

    def no_result(self) -> str | None:
        """Why this result holds no verdict (the judge's reply could not be read), or None."""
        if self.verdict is not None or self.failure is None:
            return None
        return f"the judge's verdict could not be read ({self.failure.kind}: {self.failure.message})"


def check_reference(reference: str) -> None:
    """What compare_to_reference refuses before anything (also before a background call's job starts)."""
    if not reference.strip():
        raise InputError("reference must not be empty, e.g. \"Paris\"")


async def compare_to_reference(call: JudgeCall, *, text: str, reference: str, instruction: str | None = None,
                               progress: Progress = no_progress) -> ReferenceComparison:
    """One model call, or none when the text equals the reference exactly or after normalisation."""
    client = await call.client()
    check_reference(reference)
    match = reference_match(text, reference)
    if match is not None:
        return ReferenceComparison(verdict="equivalent", decided_by=f"{match}_match",  # type: ignore[arg-type]
                                   reasoning=f"the text equals the reference ({match} match)", planned_model_calls=0)
    if not text.strip():
        raise InputError("text must not be empty, e.g. \"Paris\"")
    await progress(0, 1, "comparing with the reference: 1 model call planned")
    judged = await ask(client, "text/reference@v1", ReferenceVerdict, text=text, reference=reference,
                       instruction=instruction or "")
    await progress(1, 1, "compared")
    result = ReferenceComparison(verdict=None, decided_by=None, planned_model_calls=1, model=judged.model,
                                 usage=judged.usage, read_as=judged.read_as, failure=judged.failure)
    if judged.value is not None:
        v = judged.value
        result = result.model_copy(update={"verdict": v.verdict, "decided_by": "model", "missing": v.missing,
                                           "wrong": v.wrong, "reasoning": v.reasoning})
    return result
