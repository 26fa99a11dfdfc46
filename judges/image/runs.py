"""Iteration runs (seed 000): each iteration's aggregates and winner, and plateau detection."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from judges.errors import InputError, NotFoundError
from judges.image.judge import Evaluation, RankedImage
from judges.models.protocol import Usage
from judges.store.database import Database, timestamp


class Plateau(BaseModel):
    detected: bool
    window: int
    threshold: float = Field(description="Relative improvement below which the run has plateaued (0.02 = 2%).")
    history: list[float | None] = Field(description="The best aggregate of each iteration.")
    detected_at: int | None = Field(default=None, description="The iteration at which the plateau was detected.")
    max_iterations: int
    max_iterations_reached: bool
    reason: str | None = None


def detect_plateau(history: Sequence[float | None], window: int = 3, threshold: float = 0.02,
                   max_iterations: int = 10) -> Plateau:
    """A plateau is detected at iteration i (1-based, i > window) when the best aggregate of the
    last `window` iterations improves on the best before them by less than `threshold`, relatively."""
    detected_at = None
    reason = None
    for i in range(window + 1, len(history) + 1):
        before = [h for h in history[: i - window] if h is not None]
        recent = [h for h in history[i - window : i] if h is not None]
        if not before or not recent:
            continue
        best_before, best_recent = max(before), max(recent)
        gain = (best_recent - best_before) / best_before if best_before else float("inf")
        if gain < threshold:
            detected_at = i
            reason = (f"the best aggregate of iterations {i - window + 1}–{i} ({best_recent:g}) improves on "
                      f"{best_before:g} by {gain:.1%}, less than {threshold:.0%}")
            break
    reached = len(history) >= max_iterations
    if reason is None and reached:
        reason = f"max_iterations ({max_iterations}) reached"
    return Plateau(detected=detected_at is not None, window=window, threshold=threshold, history=list(history),
                   detected_at=detected_at, max_iterations=max_iterations, max_iterations_reached=reached, reason=reason)


class Iteration(BaseModel):
    iteration: int
    prompt: str
    winner_index: int | None
    best: float | None = Field(description="The winner's aggregate.")
    mean: float | None = Field(description="Mean aggregate over the images that were scored.")
    ranking: list[RankedImage]
    created_at: str
    usage: Usage = Field(default_factory=Usage, description="The iteration's model use and cost, all judges together.")


class Run(BaseModel):
    run_id: str
    brief: str
    max_iterations: int
    iterations: list[Iteration]
    created_at: str
    updated_at: str = ""
    panel: list[str] = Field(default=[], description="The run's judges (agent ids); a continued run keeps them.")


class RunSummary(BaseModel):
    run_id: str
    brief: str
    iterations: int
    best: float | None = Field(description="The best aggregate of any iteration.")
    panel: list[str]
    created_at: str
    updated_at: str



class RunStore:
    def __init__(self, db: Database):
        self.db = db

    def create(self, org: str, brief: str, max_iterations: int, panel: Sequence[str] = ()) -> str:
        run_id = str(uuid.uuid4())
        now = timestamp()
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO runs (id, organization_id, brief, max_iterations, created_at, updated_at, panel) "
                         "VALUES (?,?,?,?,?,?,?)", (run_id, org, brief, max_iterations, now, now, json.dumps(list(panel))))
        return run_id

    def set_panel(self, org: str, run_id: str, panel: Sequence[str]) -> None:
        with self.db.transaction() as conn:
            conn.execute("UPDATE runs SET panel=? WHERE id=? AND organization_id=?",
                         (json.dumps(list(panel)), run_id, org))

    def summaries(self, org: str, limit: int = 50) -> list[RunSummary]:
        """The organization's runs, most recently updated first."""
        rows = self.db.query(
            "SELECT r.*, (SELECT COUNT(*) FROM iterations i WHERE i.run_id=r.id) AS n, "
            "(SELECT MAX(best) FROM iterations i WHERE i.run_id=r.id) AS top FROM runs r "
            "WHERE r.organization_id=? ORDER BY r.updated_at DESC, r.id LIMIT ?", (org, limit))
        return [RunSummary(run_id=r["id"], brief=r["brief"], iterations=r["n"], best=r["top"],
                           panel=json.loads(r["panel"] or "[]"), created_at=r["created_at"],
                           updated_at=r["updated_at"]) for r in rows]

    def get(self, org: str, run_id: str) -> Run:
        rows = self.db.query("SELECT * FROM runs WHERE id=? AND organization_id=?", (run_id, org))
        if not rows:
            raise NotFoundError(f"no run {run_id!r} in this organization (evaluate_image returns run_id)")
        its = self.db.query("SELECT * FROM iterations WHERE run_id=? ORDER BY iteration", (run_id,))
        return Run(
            run_id=run_id, brief=rows[0]["brief"], max_iterations=rows[0]["max_iterations"],
            created_at=rows[0]["created_at"], updated_at=rows[0]["updated_at"],
            panel=self._panel(rows[0], run_id),
            iterations=[Iteration(iteration=r["iteration"], prompt=r["prompt"], winner_index=r["winner_index"],
                                  best=r["best"], mean=r["mean"], created_at=r["created_at"],
                                  ranking=[RankedImage.model_validate(x) for x in json.loads(r["ranking"])],
                                  usage=Usage.model_validate_json(r["usage"]) if r["usage"] else Usage())
                        for r in its],
        )

    def _panel(self, row: Any, run_id: str) -> list[str]:
        """The stored panel; for a run recorded before panels were stored, the judges of its last iteration."""
        if row["panel"]:
            return list(json.loads(row["panel"]))
        last = self.db.query("SELECT evaluations FROM iterations WHERE run_id=? ORDER BY iteration DESC LIMIT 1",
                             (run_id,))
        if not last:
            return []
        return list(dict.fromkeys(e["agent_id"] for e in json.loads(last[0]["evaluations"])))

    def set_max_iterations(self, org: str, run_id: str, max_iterations: int) -> None:
        with self.db.transaction() as conn:
            conn.execute("UPDATE runs SET max_iterations=?, updated_at=? WHERE id=? AND organization_id=?",
                         (max_iterations, timestamp(), run_id, org))

    def evaluations(self, org: str, run_id: str, iteration: int | None = None) -> tuple[int, list[Evaluation]]:
        """The evaluations of one iteration (default: the last)."""
        run = self.get(org, run_id)
        if not run.iterations:
            raise InputError(f"run {run_id!r} has no iterations yet")
        number = iteration or run.iterations[-1].iteration
        rows = self.db.query("SELECT evaluations FROM iterations WHERE run_id=? AND iteration=?", (run_id, number))
        if not rows:
            raise InputError(f"run {run_id!r} has no iteration {number}")
        return number, [Evaluation.model_validate(e) for e in json.loads(rows[0]["evaluations"])]

    def record(self, run_id: str, prompt: str, ranking: list[RankedImage], evaluations: list[Evaluation]) -> Iteration:
        """Store the run's next iteration and return it with its number. The number is taken in the transaction
        that stores it, after the run's row is locked (the UPDATE), so two calls continuing one run at once, on one
        process or on replicas sharing a database, get consecutive numbers instead of the same one."""
        scored = [r.aggregate_score for r in ranking if r.aggregate_score is not None]
        winner = ranking[0] if ranking and ranking[0].aggregate_score is not None else None
        it = Iteration(iteration=0, prompt=prompt, winner_index=winner.image_index if winner else None,
                       best=winner.aggregate_score if winner else None,
                       mean=round(sum(scored) / len(scored), 4) if scored else None, ranking=ranking,
                       created_at=timestamp(), usage=sum((e.usage for e in evaluations), Usage()))
        payload: list[dict[str, Any]] = [e.model_dump(mode="json") for e in evaluations]
        with self.db.transaction() as conn:
            conn.execute("UPDATE runs SET updated_at=? WHERE id=?", (it.created_at, run_id))
            it.iteration = conn.execute("SELECT COALESCE(MAX(iteration), 0) + 1 FROM iterations WHERE run_id=?",
                                        (run_id,)).fetchone()[0]
            conn.execute(
                "INSERT INTO iterations (run_id, iteration, prompt, winner_index, best, mean, ranking, evaluations, "
                "created_at, usage) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (run_id, it.iteration, prompt, it.winner_index, it.best, it.mean,
                 json.dumps([r.model_dump(mode="json") for r in ranking]), json.dumps(payload), it.created_at,
                 it.usage.model_dump_json()),
            )
        return it
