"""A jury: several models judge the same thing; each member's verdict, the jury's verdict (the mean of
scores, the majority of verdicts) and the members' agreement. A member that fails is counted and left out."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from judges.reading.agreement import fleiss_kappa, krippendorff_alpha_interval, percent_agreement
from judges.reading.samples import vote

V = TypeVar("V")


class JuryMember(BaseModel):
    model: str
    value: float | str | list[float | None] | None = Field(
        description="This model's verdict (its score, its scores per item, or its winner); null when it failed.")
    error: str | None = Field(default=None, description="Why this model gave no verdict (failure kind: message).")


class Agreement(BaseModel):
    krippendorff_alpha: float | None = Field(
        default=None, description="Scores: Krippendorff's alpha (interval) over the items, the models as raters; "
                                  "null when undefined (fewer than two items, or no variation at all).")
    percent_agreement: float | None = Field(
        default=None, description="Verdicts: the share of model pairs that gave the same verdict.")
    fleiss_kappa: float | None = Field(
        default=None, description="Verdicts: Fleiss' kappa over the models; null when undefined (one category).")


class Jury(BaseModel):
    members: list[JuryMember]
    verdict: float | str | list[float | None] | None = Field(
        description="The jury's verdict: the mean score (per item), or the majority winner (Tie when split).")
    scored: int = Field(description="Members that gave a verdict.")
    failed: int = Field(description="Members that failed (left out of the verdict and the agreement).")
    agreement: Agreement


def jurors(names: Sequence[str | None], by_member: Sequence[Sequence[Any]], read: Callable[[list[Any]], V],
           shown: Callable[[V], Any] = lambda verdict: verdict) -> tuple[list[JuryMember], list[V]]:
    """Each model's verdict from its samples that were read (`read` of their Judged replies, in sample order),
    `shown` on its JuryMember; a model none of whose samples was read is counted failed, with its first
    failure. Returns the members, and the verdicts of those that gave one, in order."""
    members: list[JuryMember] = []
    verdicts: list[V] = []
    for name, samples in zip(names, by_member, strict=True):
        ok = [j for j in samples if j.value is not None]
        if ok:
            verdicts.append(verdict := read(ok))
            members.append(JuryMember(model=str(name), value=shown(verdict)))
            continue
        failure = next((j.failure for j in samples if j.failure is not None), None)
        members.append(JuryMember(model=str(name), value=None, error=None if failure is None else failure.describe()))
    return members, verdicts


def score_jury(members: Sequence[JuryMember]) -> Jury:
    """Members' scores per item (a list, one per item; None where that member failed the item): the mean per
    item and Krippendorff's alpha over the items."""
    ok = [m for m in members if m.value is not None and m.error is None]
    items: list[list[float | None]] = [
        list(m.value) if isinstance(m.value, list) else [float(m.value)] for m in ok  # type: ignore[arg-type]
    ]
    width = max((len(i) for i in items), default=0)
    units = [[row[k] if k < len(row) else None for row in items] for k in range(width)]
    means = [round(statistics.fmean(v for v in unit if v is not None), 6) if any(v is not None for v in unit)
             else None for unit in units]
    alpha = krippendorff_alpha_interval(units) if width >= 2 else None
    verdict: float | list[float | None] | None = means if any(isinstance(m.value, list) for m in ok) else (
        means[0] if means else None)
    return Jury(members=list(members), verdict=verdict, scored=len(ok), failed=len(members) - len(ok),
                agreement=Agreement(krippendorff_alpha=None if alpha is None else round(alpha, 6)))


def verdict_jury(members: Sequence[JuryMember], *, failed: str = "Failed", tie: str = "Tie") -> Jury:
    """Members' verdicts: the majority (split → tie), percent agreement and Fleiss' kappa over the one item."""
    ok = [m for m in members if isinstance(m.value, str) and m.value != failed and m.error is None]
    verdicts = [str(m.value) for m in ok]
    votes = vote(verdicts, failed=failed, tie=tie)
    kappa = fleiss_kappa([verdicts]) if len(verdicts) >= 2 else None
    pct = percent_agreement([verdicts])
    return Jury(members=list(members), verdict=votes.majority, scored=len(ok), failed=len(members) - len(ok),
                agreement=Agreement(percent_agreement=None if pct is None else round(pct, 6),
                                    fleiss_kappa=None if kappa is None else round(kappa, 6)))
