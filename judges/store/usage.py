"""Tokens and cost per organization, day (UTC) and model, and the daily budget that refuses new calls.

Counters only ever grow by `UPDATE … SET x = x + ?` inside one transaction, so several processes (or, later,
replicas on one PostgreSQL database) add up correctly."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, Field

from judges.errors import BudgetError, InputError
from judges.models.protocol import Usage
from judges.store.database import Database


def today() -> str:
    """The UTC day, as budgets count it: YYYY-MM-DD."""
    return datetime.now(UTC).date().isoformat()


def usd(amount: float) -> str:
    """$5, $1.25, $0.000092: no trailing zeros, to the millionth of a dollar."""
    return "$" + (f"{amount:.6f}".rstrip("0").rstrip(".") or "0")


class DayUsage(BaseModel):
    day: str = Field(description="The UTC day, YYYY-MM-DD.")
    model: str
    requests: int
    input_tokens: int
    output_tokens: int
    cost_usd: float = Field(description="USD of the priced requests.")
    unpriced_requests: int = Field(description="Requests to a model with no known price (not in cost_usd).")
    cache_hits: int = Field(default=0, description="Replies answered from the result cache: no model request, no cost.")
    saved_usd: float = Field(default=0.0, description=(
        "USD the cached replies would have cost at the configured prices (those of a model with a known price)."))


class UsageReport(BaseModel):
    organization: str
    days: list[DayUsage] = Field(description="Per day and model, newest day first.")
    total_cost_usd: float
    today_cost_usd: float
    daily_budget_usd: float | None = Field(description="This organization's daily budget; null: no budget.")
    remaining_today_usd: float | None = None


class UsageLedger:
    def __init__(self, db: Database, daily_budget_usd: float | None = None,
                 budgets: Mapping[str, float] | None = None):
        self.db = db
        self.daily_budget_usd = daily_budget_usd
        self.budgets = dict(budgets or {})

    def record(self, org: str, model: str, usage: Usage, requests: int) -> None:
        """Add one model call (its requests, tokens and cost; a null cost counts as unpriced) to today's row."""
        day = today()
        priced = usage.cost_usd is not None
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO usage_daily (organization_id, day, model) VALUES (?,?,?) "
                         "ON CONFLICT (organization_id, day, model) DO NOTHING", (org, day, model))
            conn.execute("UPDATE usage_daily SET requests = requests + ?, input_tokens = input_tokens + ?, "
                         "output_tokens = output_tokens + ?, cost_usd = cost_usd + ?, "
                         "unpriced_requests = unpriced_requests + ? WHERE organization_id=? AND day=? AND model=?",
                         (requests, usage.input_tokens, usage.output_tokens, usage.cost_usd or 0.0,
                          0 if priced or not requests else requests, org, day, model))

    def record_hit(self, org: str, model: str, saved_usd: float | None) -> None:
        """Add one reply answered from the result cache (and what asking the model would have cost, when known)."""
        day = today()
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO usage_daily (organization_id, day, model) VALUES (?,?,?) "
                         "ON CONFLICT (organization_id, day, model) DO NOTHING", (org, day, model))
            conn.execute("UPDATE usage_daily SET cache_hits = cache_hits + 1, saved_usd = saved_usd + ? "
                         "WHERE organization_id=? AND day=? AND model=?", (saved_usd or 0.0, org, day, model))

    def spent(self, org: str, day: str | None = None) -> float:
        """USD the organization spent on the (UTC) day, today by default."""
        rows = self.db.query("SELECT SUM(cost_usd) AS spent FROM usage_daily WHERE organization_id=? AND day=?",
                             (org, day or today()))
        return float(rows[0]["spent"] or 0.0)

    def budget_of(self, org: str) -> float | None:
        return self.budgets.get(org, self.daily_budget_usd)

    def check_budget(self, org: str) -> None:
        """Refuse a call that would start with the organization's daily budget spent (running calls finish)."""
        budget = self.budget_of(org)
        if budget is None:
            return
        spent = self.spent(org)
        if spent >= budget:
            raise BudgetError(
                f"the daily budget of organization {org!r} is spent: {usd(spent)} of {usd(budget)} used today "
                f"(UTC day {today()}); calls that ask a model are refused until 00:00 UTC, calls already running "
                "finish",
                hint="raise JUDGE_MCP_DAILY_BUDGET_USD, or this organization's entry in JUDGE_MCP_ORG_BUDGETS_USD")

    def report(self, org: str, days: int = 7) -> UsageReport:
        """The organization's usage over the last `days` UTC days (today included)."""
        if not 1 <= days <= 366:
            raise InputError(f"days must be between 1 and 366 (got {days}), e.g. 7")
        first = (datetime.now(UTC).date() - timedelta(days=days - 1)).isoformat()
        rows = self.db.query("SELECT * FROM usage_daily WHERE organization_id=? AND day>=? ORDER BY day DESC, model",
                             (org, first))
        listed = [DayUsage(day=r["day"], model=r["model"], requests=r["requests"], input_tokens=r["input_tokens"],
                           output_tokens=r["output_tokens"], cost_usd=round(r["cost_usd"], 8),
                           unpriced_requests=r["unpriced_requests"], cache_hits=r["cache_hits"],
                           saved_usd=round(r["saved_usd"], 8)) for r in rows]
        spent_today = round(sum(d.cost_usd for d in listed if d.day == today()), 8)
        budget = self.budget_of(org)
        return UsageReport(organization=org, days=listed, total_cost_usd=round(sum(d.cost_usd for d in listed), 8),
                           today_cost_usd=spent_today, daily_budget_usd=budget,
                           remaining_today_usd=None if budget is None else round(max(0.0, budget - spent_today), 8))
