"""Tokens and cost per organization, day (UTC) and model, and the daily budget that every model request is
reserved against.

Counters only ever change by `UPDATE … SET x = x + ?` inside one transaction, so several processes (or replicas on
one PostgreSQL database) add up correctly. The budget is kept per organization and day in `budget_daily`, in
billionths of a dollar (integers: sums are exact): what was spent and what requests in flight have reserved. A
request is sent only after one conditional UPDATE (`… WHERE spent + reserved + estimate <= budget`) reserved its
estimated cost: the row's lock makes concurrent reservations of every process and replica take turns, so together
they never pass the budget. The reply settles the reservation to its real cost; a reservation whose process died is
reclaimed once it expires."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from judges.errors import BudgetError, InputError
from judges.models.protocol import Usage
from judges.store.database import Database


def today() -> str:
    """The UTC day, as budgets count it: YYYY-MM-DD."""
    return datetime.now(UTC).date().isoformat()


def _iso(after_s: float) -> str:
    """The UTC time `after_s` seconds from now, as sortable text (reservations' expiry)."""
    return (datetime.now(UTC) + timedelta(seconds=after_s)).isoformat(timespec="milliseconds")


def usd(amount: float) -> str:
    """$5, $1.25, $0.000092: no trailing zeros, to the millionth of a dollar."""
    return "$" + (f"{amount:.6f}".rstrip("0").rstrip(".") or "0")


NANO = 1_000_000_000  # budget_daily counts billionths of a dollar


def nusd(amount: float) -> int:
    return round(amount * NANO)


@dataclass(frozen=True)
class Reservation:
    """A request's estimated cost, held against its organization's budget for `day` until it is settled."""

    id: str
    org: str
    day: str
    nusd: int


@dataclass(frozen=True)
class BudgetView:
    """The day's budget as a reservation attempt saw it, in USD."""

    budget: float
    spent: float
    reserved: float

    def fits(self, amount: float) -> bool:
        """Whether `amount` would fit once the requests in flight are settled (at no cost)."""
        return nusd(self.spent) + nusd(amount) <= nusd(self.budget)


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
        with self.db.transaction() as conn:
            self._record(conn, org, today(), model, usage, requests)

    def _record(self, conn: Any, org: str, day: str, model: str, usage: Usage, requests: int) -> None:
        priced = usage.cost_usd is not None
        conn.execute("INSERT INTO usage_daily (organization_id, day, model) VALUES (?,?,?) "
                     "ON CONFLICT (organization_id, day, model) DO NOTHING", (org, day, model))
        conn.execute("UPDATE usage_daily SET requests = requests + ?, input_tokens = input_tokens + ?, "
                     "output_tokens = output_tokens + ?, cost_usd = cost_usd + ?, "
                     "unpriced_requests = unpriced_requests + ? WHERE organization_id=? AND day=? AND model=?",
                     (requests, usage.input_tokens, usage.output_tokens, usage.cost_usd or 0.0,
                      0 if priced or not requests else requests, org, day, model))
        # The budget's own row, when a reservation made one, spends the same (no row: nothing reserves today yet).
        conn.execute("UPDATE budget_daily SET spent_nusd = spent_nusd + ? WHERE organization_id=? AND day=?",
                     (nusd(usage.cost_usd or 0.0), org, day))

    def reserve(self, org: str, amount: float, ttl_s: float) -> tuple[Reservation | None, BudgetView]:
        """Hold `amount` USD of the organization's budget for today, if spent + reserved + amount stays within it:
        (the reservation, or None when it does not fit; the budget as seen). One conditional UPDATE decides, under
        the row's lock; reservations expired (their process died) are reclaimed first when it does not fit."""
        budget = self.budget_of(org)
        assert budget is not None, "reserve is only asked for an organization with a budget"
        day, want, cap = today(), max(1, nusd(amount)), nusd(budget)
        reservation: Reservation | None = None
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO budget_daily (organization_id, day, spent_nusd) "
                         "SELECT ?, ?, CAST(ROUND(COALESCE(SUM(cost_usd), 0) * 1000000000) AS BIGINT) "
                         "FROM usage_daily WHERE organization_id=? AND day=? "
                         "ON CONFLICT (organization_id, day) DO NOTHING", (org, day, org, day))
            held = self._hold(conn, org, day, want, cap)
            if not held:
                expired = conn.execute("DELETE FROM budget_reservations WHERE organization_id=? AND day=? "
                                       "AND expires_at < ? RETURNING amount_nusd", (org, day, _iso(0))).fetchall()
                if expired:
                    conn.execute("UPDATE budget_daily SET reserved_nusd = reserved_nusd - ? "
                                 "WHERE organization_id=? AND day=?", (sum(int(r["amount_nusd"]) for r in expired),
                                                                       org, day))
                    held = self._hold(conn, org, day, want, cap)
            if held:
                reservation = Reservation(uuid.uuid4().hex, org, day, want)
                conn.execute("INSERT INTO budget_reservations (id, organization_id, day, amount_nusd, expires_at) "
                             "VALUES (?,?,?,?,?)", (reservation.id, org, day, want, _iso(ttl_s)))
            row = conn.execute("SELECT spent_nusd, reserved_nusd FROM budget_daily WHERE organization_id=? AND day=?",
                               (org, day)).fetchone()
        return reservation, BudgetView(budget, int(row["spent_nusd"]) / NANO, int(row["reserved_nusd"]) / NANO)

    @staticmethod
    def _hold(conn: Any, org: str, day: str, want: int, cap: int) -> bool:
        cur = conn.execute("UPDATE budget_daily SET reserved_nusd = reserved_nusd + ? WHERE organization_id=? "
                           "AND day=? AND spent_nusd + reserved_nusd + ? <= ?", (want, org, day, want, cap))
        return bool(cur.rowcount == 1)

    def settle(self, reservation: Reservation, model: str, usage: Usage, requests: int) -> None:
        """The request is done: release its reservation and add what it really cost (and its tokens) to its day."""
        org, day = reservation.org, reservation.day
        with self.db.transaction() as conn:
            released = conn.execute("DELETE FROM budget_reservations WHERE id=?", (reservation.id,)).rowcount == 1
            if released:  # not already reclaimed as expired
                conn.execute("UPDATE budget_daily SET reserved_nusd = reserved_nusd - ? WHERE organization_id=? "
                             "AND day=?", (reservation.nusd, org, day))
            self._record(conn, org, day, model, usage, requests)

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
                f"(UTC day {today()}); calls that ask a model are refused until 00:00 UTC, and a running call "
                "stops before any request the budget cannot cover",
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
