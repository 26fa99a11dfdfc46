"""Calibration reports, stored whole (JSON) per organization in the `calibrations` table."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from judges.errors import NotFoundError
from judges.store.database import Database

from .core import CalibrationReport


def chart_uri(calibration_id: str) -> str:
    return f"judge://calibrations/{calibration_id}/chart.png"


class CalibrationStore:
    def __init__(self, db: Database):
        self.db = db

    def save(self, org: str, report: CalibrationReport) -> CalibrationReport:
        """Give the report its id, time and chart link, and store it."""
        calibration_id = str(uuid.uuid4())
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        stored = report.model_copy(update={"calibration_id": calibration_id, "created_at": now,
                                           "chart": chart_uri(calibration_id)})
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO calibrations (id, organization_id, judge, model, items, report, created_at) "
                         "VALUES (?,?,?,?,?,?,?)",
                         (calibration_id, org, stored.judge, stored.model, stored.items, stored.model_dump_json(), now))
        return stored

    def summaries(self, org: str, limit: int = 50) -> list[dict[str, Any]]:
        """The organization's calibrations, newest first: id, judge, model, items and time of each."""
        rows = self.db.query("SELECT id, judge, model, items, created_at FROM calibrations WHERE organization_id=? "
                             "ORDER BY created_at DESC, id LIMIT ?", (org, limit))
        return [{"calibration_id": r["id"], "judge": r["judge"], "model": r["model"], "items": r["items"],
                 "created_at": r["created_at"]} for r in rows]

    def get(self, org: str, calibration_id: str) -> CalibrationReport:
        rows = self.db.query("SELECT report FROM calibrations WHERE id=? AND organization_id=?", (calibration_id, org))
        if not rows:
            raise NotFoundError(f"no calibration {calibration_id!r} in this organization (calibrate_judge returns "
                                "calibration_id)")
        return CalibrationReport.model_validate_json(rows[0]["report"])
