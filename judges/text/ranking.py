"""rank_texts: a full ranking of 2..N candidates by a knockout tournament, a round robin (with
Bradley–Terry and Elo ratings) or one score each. Every game is asked in both orders through the
pairwise judge's path (judges.pairwise.judge.pairwise with swap); ties, inconsistent games (the
orders disagree: position bias) and failed games are reported, never hidden. The number of model
calls is stated before any work and bounded by the caller's limit."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

import anyio
import anyio.to_thread
from pydantic import BaseModel, Field

from judges.call import JudgeCall
from judges.errors import InputError
from judges.models.protocol import Usage
from judges.pairwise.judge import CompareResult, pairwise
from judges.progress import Progress, no_progress
from judges.units import once

from .games import (
    Game,
    Method,
    Outcome,
    advancing,
    bradley_terry,
    elo,
    knockout_pairs,
    planned_calls,
    planned_games,
    ranks,
    round_robin_pairs,
    standings,
)
from .scoring import TextScore, builtin_criterion, score_text

PlayAll = Callable[[Sequence[tuple[int, int]], int | None], Awaitable[list["GameRecord"]]]
PAIRWISE_PROMPT = "text/assessment/pairwise@v1"
GAME_CONCURRENCY = 8


class OrderRecord(BaseModel):
    order: Literal["original", "swapped"] = Field(description="original: a shown first; swapped: b shown first.")
    verdict: str = Field(description="Response A / Response B / Tie as the judge saw them, or Failed.")
    winner: int | None = Field(default=None, description="The candidate index this order chose; null for a tie "
                                                         "or a failure.")
    read_as: str | None = None
    failure_kind: str | None = None
    error: str | None = None
    raw_responses: list[str] = []


class GameRecord(BaseModel):
    a: int
    b: int
    round: int | None = Field(default=None, description="Knockout round (1 = first); null in a round robin.")
    outcome: Outcome = Field(description="win, tie (both orders said tie), inconsistent (the orders chose "
                                         "different winners: position bias), failed (no order read).")
    winner: int | None = None
    consistent: bool | None = Field(default=None, description="Both orders agree; null when one order failed.")
    advanced: int | None = Field(default=None, description="Tournament: who went through.")
    decided_by_judge: bool | None = Field(default=None, description="Tournament: false when a tie, an inconsistent "
                                          "or a failed game sent the earlier-listed candidate through.")
    orders: list[OrderRecord]
    usage: Usage = Field(default_factory=Usage)


class RankedCandidate(BaseModel):
    index: int
    rank: int | None = Field(description="1 is best; equal ranks are shared; null when nothing about it was read.")
    wins: int = 0
    losses: int = 0
    ties: int = 0
    inconsistent: int = 0
    failed: int = 0
    bradley_terry: float | None = Field(default=None, description="round_robin: Bradley–Terry strength on an "
                                                                  "Elo-like scale (1000 = average).")
    elo: float | None = Field(default=None, description="round_robin: Elo after the games in order (K=32).")
    round_reached: int | None = Field(default=None, description="tournament: the last round it played or won "
                                                                "(the winner: rounds + 1).")
    score: float | None = Field(default=None, description="score: the 0–100 total; null when it failed.")


class PositionBias(BaseModel):
    first_shown_wins: int = Field(description="Orders read in which the first-shown candidate won.")
    second_shown_wins: int
    ties: int
    inconsistent_games: int
    first_shown_share: float | None = Field(description="first_shown_wins / decisive orders; 0.5 when unbiased.")
    detected: bool = Field(description="An inconsistent game, and the decisive orders lean to one position "
                                       "(share ≥ 0.75 or ≤ 0.25).")
    leans: Literal["first", "second"] | None = None


class Ranking(BaseModel):
    method: Method
    ranking: list[RankedCandidate] = Field(description="Best first.")
    games: list[GameRecord] = []
    scores: list[TextScore] | None = Field(default=None, description="method score: each candidate's score.")
    ties: int = 0
    inconsistent_games: int = 0
    failed_games: int = 0
    position_bias: PositionBias | None = None
    planned_model_calls: int = Field(description="Stated before any work: 2 per game (both orders), 1 per "
                                                 "candidate for score; repair rounds may add one each.")
    model: str = ""
    usage: Usage = Field(default_factory=Usage)

    def no_result(self) -> str | None:
        """Why this ranking rests on no verdict at all (every game, or every score, failed), or None."""
        if self.scores is not None:
            return "no candidate was scored" if self.scores and all(s.total is None for s in self.scores) else None
        if self.games and self.failed_games == len(self.games):
            return f"every game failed ({self.failed_games})"
        return None


def check_plan(method: str, n: int, max_calls: int) -> int:
    if method not in ("tournament", "round_robin", "score"):
        raise InputError(f"method must be tournament, round_robin or score (got {method!r})")
    if n < 2:
        raise InputError(f"candidates: give at least two texts to rank (got {n})")
    calls = planned_calls(method, n)  # type: ignore[arg-type]
    if calls > max_calls:
        cheaper = planned_calls("tournament", n)
        raise InputError(f"rank_texts with method {method} over {n} candidates needs {calls} model calls, above the "
                         f"limit of {max_calls} (setting JUDGE_MCP_RANK_MAX_CALLS); use method tournament "
                         f"({cheaper} calls) or score ({n} calls), or fewer candidates")
    return calls


def _game(a: int, b: int, result: CompareResult, round_: int | None) -> GameRecord:
    orders: list[OrderRecord] = []
    for o in result.meta.get("orders", []):
        first, second = (a, b) if o["order"] == "original" else (b, a)
        chosen = {"Response A": first, "Response B": second}.get(o["verdict"])
        orders.append(OrderRecord(order=o["order"], verdict=o["verdict"], winner=chosen, read_as=o.get("read_as"),
                                  failure_kind=o.get("failure_kind"), error=o.get("error"),
                                  raw_responses=o.get("raw_responses", [])))
    outcome: Outcome
    winner: int | None = None
    if result.value == "Failed":
        outcome = "failed"
    elif result.value == "Tie":
        outcome = "inconsistent" if result.consistent is False else "tie"
    else:
        outcome, winner = "win", (a if result.value == "Response A" else b)
    return GameRecord(a=a, b=b, round=round_, outcome=outcome, winner=winner, consistent=result.consistent,
                      orders=orders, usage=result.usage)


def position_bias(games: Sequence[GameRecord]) -> PositionBias:
    first = second = ties = 0
    for g in games:
        for o in g.orders:
            if o.verdict == "Response A":
                first += 1
            elif o.verdict == "Response B":
                second += 1
            elif o.verdict == "Tie":
                ties += 1
    inconsistent = sum(g.outcome == "inconsistent" for g in games)
    share = first / (first + second) if first + second else None
    leans: Literal["first", "second"] | None = None
    if inconsistent and share is not None and share >= 0.75:
        leans = "first"
    elif inconsistent and share is not None and share <= 0.25:
        leans = "second"
    return PositionBias(first_shown_wins=first, second_shown_wins=second, ties=ties, inconsistent_games=inconsistent,
                        first_shown_share=None if share is None else round(share, 4), detected=leans is not None,
                        leans=leans)


def check_ranking(instruction: str, candidates: Sequence[str], method: str, max_calls: int) -> int:
    """What rank_texts refuses before any model call (also before a background call's job starts): an unknown
    method, fewer than two candidates, a plan above `max_calls`, an empty instruction or candidate. Returns the
    planned model calls."""
    calls = check_plan(method, len(candidates), max_calls)
    if not instruction.strip():
        raise InputError("instruction must not be empty, e.g. \"Write a haiku about autumn.\"")
    for i, c in enumerate(candidates):
        if not c.strip():
            raise InputError(f"candidates[{i}] is empty; every candidate is a non-empty text")
    return calls


async def rank_texts(call: JudgeCall, *, instruction: str, candidates: Sequence[str], method: str = "round_robin",
                     max_calls: int, retries: int = 1, progress: Progress = no_progress) -> Ranking:
    """Rank `candidates` for `instruction`; the plan (games and model calls) is reported before work starts."""
    client = await call.client()
    n = len(candidates)
    calls = check_ranking(instruction, candidates, method, max_calls)
    if method == "score":
        return await _by_score(call, instruction, candidates, calls, progress)
    games_total = planned_games(method, n)  # type: ignore[arg-type]
    await progress(0, games_total, f"{method}: {games_total} games in both orders, {calls} model calls planned")
    limiter = anyio.CapacityLimiter(GAME_CONCURRENCY)
    played: list[GameRecord] = []

    async def play(a: int, b: int, round_: int | None, into: list[GameRecord | None], slot: int) -> None:
        async def run() -> GameRecord:
            result = await pairwise(client, kind="text", instruction=instruction,
                                    candidates=[candidates[a], candidates[b]], source=None,
                                    prompt_id=PAIRWISE_PROMPT, swap=True, retries=retries)
            return _game(a, b, result, round_)
        async with limiter:  # a background job's unit (judges/units.py)
            game = into[slot] = await once(f"game {a}-{b}" + (f" round {round_}" if round_ else ""), GameRecord, run)
        played.append(game)
        await progress(len(played), games_total, f"game {a} v {b}: {game.outcome} ({len(played)} of {games_total})")

    async def play_all(pairs: Sequence[tuple[int, int]], round_: int | None) -> list[GameRecord]:
        slots: list[GameRecord | None] = [None] * len(pairs)
        async with anyio.create_task_group() as tg:
            for slot, (a, b) in enumerate(pairs):
                tg.start_soon(play, a, b, round_, slots, slot)
        return [g for g in slots if g is not None]

    if method == "round_robin":
        games = await play_all(round_robin_pairs(n), None)
        ranked = await anyio.to_thread.run_sync(_round_robin_ranking, n, games)  # Bradley–Terry: n² per round
    else:
        games, ranked = await _tournament(n, play_all)
    usage = sum((g.usage for g in games), Usage())
    return Ranking(method=method, ranking=ranked, games=games,  # type: ignore[arg-type]
                   ties=sum(g.outcome == "tie" for g in games),
                   inconsistent_games=sum(g.outcome == "inconsistent" for g in games),
                   failed_games=sum(g.outcome == "failed" for g in games), position_bias=position_bias(games),
                   planned_model_calls=calls, model=client.name, usage=usage)


def as_games(records: Sequence[GameRecord]) -> list[Game]:
    return [Game(g.a, g.b, g.outcome, g.winner) for g in records]


def _round_robin_ranking(n: int, records: Sequence[GameRecord]) -> list[RankedCandidate]:
    games = as_games(records)
    table = standings(n, games)
    bt = bradley_terry(n, games)
    el = elo(n, games)
    counted = [s.wins + s.losses + s.ties + s.inconsistent > 0 for s in table]
    keys = [(round(bt[i], 6), table[i].points) if counted[i] else (float("-inf"), 0.0) for i in range(n)]
    rank_of = ranks(keys)
    out = [RankedCandidate(index=i, rank=rank_of[i] if counted[i] else None, wins=s.wins, losses=s.losses,
                           ties=s.ties, inconsistent=s.inconsistent, failed=s.failed,
                           bradley_terry=round(bt[i], 2) if counted[i] else None,
                           elo=round(el[i], 2) if counted[i] else None) for i, s in enumerate(table)]
    return sorted(out, key=lambda r: (r.rank is None, r.rank or 0, r.index))


def unpaid(game: GameRecord) -> bool:
    """A game with an order the daily budget could not pay for (failure budget_exceeded)."""
    return any(o.failure_kind == "budget_exceeded" for o in game.orders)


async def _tournament(n: int, play_all: PlayAll) -> tuple[list[GameRecord], list[RankedCandidate]]:
    alive = list(range(n))
    reached = [1] * n
    records: list[GameRecord] = []
    round_ = 0
    while len(alive) > 1:
        round_ += 1
        pairs, byes = knockout_pairs(alive)
        played = await play_all(pairs, round_)
        records.extend(played)
        if any(unpaid(g) for g in played):
            # The budget ran out: the knockout stops here. A game not played sends no one through (an
            # earlier-listed candidate winning by default would be a verdict nobody gave); the games the judge
            # decided in this round still count.
            for g in played:
                if g.outcome == "win" and g.winner is not None and not unpaid(g):
                    g.advanced, g.decided_by_judge = g.winner, True
                    reached[g.winner] = round_ + 1
            break
        nxt: list[int] = []
        for g in played:
            through, decided = advancing(Game(g.a, g.b, g.outcome, g.winner))
            g.advanced, g.decided_by_judge = through, decided
            nxt.append(through)
            reached[through] = round_ + 1
        for b in byes:
            reached[b] = round_ + 1
            nxt.append(b)
        alive = sorted(nxt)
    table = standings(n, as_games(records))
    rank_of = ranks([(float(r),) for r in reached])
    out = [RankedCandidate(index=i, rank=rank_of[i], wins=s.wins, losses=s.losses, ties=s.ties,
                           inconsistent=s.inconsistent, failed=s.failed, round_reached=reached[i])
           for i, s in enumerate(table)]
    return records, sorted(out, key=lambda r: (r.rank or 0, r.index))


async def _by_score(call: JudgeCall, instruction: str, candidates: Sequence[str], calls: int,
                    progress: Progress) -> Ranking:
    await progress(0, len(candidates), f"score: one helpfulness score per candidate, {calls} model calls planned")
    criterion = builtin_criterion("helpfulness")
    results: list[TextScore | None] = [None] * len(candidates)
    done = 0

    async def one(i: int) -> None:
        nonlocal done
        results[i] = await score_text(call, text=candidates[i], criteria=[criterion], instruction=instruction)
        done += 1
        await progress(done, len(candidates), f"candidate {i} scored ({done} of {len(candidates)})")

    async with anyio.create_task_group() as tg:
        for i in range(len(candidates)):
            tg.start_soon(one, i)
    scores = [r for r in results if r is not None]
    totals = [s.total for s in scores]
    rank_of = ranks([(t,) if t is not None else (float("-inf"),) for t in totals])
    ranked = sorted((RankedCandidate(index=i, rank=rank_of[i] if t is not None else None, score=t)
                     for i, t in enumerate(totals)), key=lambda r: (r.rank is None, r.rank or 0, r.index))
    return Ranking(method="score", ranking=ranked, scores=scores, ties=0, planned_model_calls=calls, model=(await call.client()).name,
                   usage=sum((s.usage for s in scores), Usage()))
