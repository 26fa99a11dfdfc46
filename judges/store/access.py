"""Who may call what: bearer tokens stored hashed with an organization and a role, and each organization's
calls-per-minute counter. Both live in the database, so every replica behind one address agrees.

Roles, lowest first: `member` (judge, compare, search, read), `admin` (also manage agents and guideline
documents), `superadmin` (every organization). A token's secret is shown once, at creation; only its SHA-256
is stored (the secret is 256 random bits, so a plain hash is enough) and compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, get_args

from judges.errors import InputError, OverLimitError

from .database import Database

Role = Literal["member", "admin", "superadmin"]
ROLES: tuple[Role, ...] = get_args(Role)
SECRET_PREFIX = "jm_"


def role_rank(role: str) -> int:
    return ROLES.index(role)


def check_role(role: str) -> Role:
    if role not in ROLES:
        raise InputError(f"role must be one of {', '.join(ROLES)}, not {role!r} (e.g. 'member')")
    return role


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class StoredToken:
    id: str
    organization_id: str
    role: Role
    name: str
    created_at: str
    revoked_at: str | None


class TokenStore:
    """Tokens in the `api_tokens` table (portable SQL)."""

    def __init__(self, db: Database):
        self.db = db

    def create(self, organization: str, role: str, name: str = "") -> tuple[StoredToken, str]:
        """A new token and its secret (the only time the secret exists outside the caller's hands)."""
        if not organization.strip():
            raise InputError("organization must not be empty (e.g. 'acme')")
        role = check_role(role)
        secret = SECRET_PREFIX + secrets.token_urlsafe(32)
        token = StoredToken(uuid.uuid4().hex[:12], organization.strip(), role, name, _iso(_now()), None)
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO api_tokens (id, secret_sha256, organization_id, role, name, created_at) "
                         "VALUES (?,?,?,?,?,?)", (token.id, _digest(secret), token.organization_id, token.role,
                                                  token.name, token.created_at))
        return token, secret

    def list(self, organization: str | None = None) -> list[StoredToken]:
        sql = "SELECT id, organization_id, role, name, created_at, revoked_at FROM api_tokens"
        params: tuple[object, ...] = ()
        if organization is not None:
            sql, params = sql + " WHERE organization_id = ?", (organization,)
        return [StoredToken(r["id"], r["organization_id"], r["role"], r["name"], r["created_at"], r["revoked_at"])
                for r in self.db.query(sql + " ORDER BY created_at, id", params)]

    def revoke(self, token_id: str) -> bool:
        """True when a live token with this id was revoked."""
        with self.db.transaction() as conn:
            cur = conn.execute("UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                               (_iso(_now()), token_id))
            return bool(cur.rowcount)

    def verify(self, secret: str) -> StoredToken | None:
        """The live token whose secret this is, else None."""
        if not secret.startswith(SECRET_PREFIX):
            return None
        digest = _digest(secret)
        rows = self.db.query("SELECT id, secret_sha256, organization_id, role, name, created_at, revoked_at "
                             "FROM api_tokens WHERE secret_sha256 = ? AND revoked_at IS NULL", (digest,))
        for r in rows:
            if hmac.compare_digest(r["secret_sha256"], digest):
                return StoredToken(r["id"], r["organization_id"], r["role"], r["name"], r["created_at"], None)
        return None


class RateLimiter:
    """Requests per minute per organization: tool calls, resource reads, prompts, lists, and each model request a
    call sends (one calibrate_judge may send thousands), counted together. One fixed-window row per organization
    and minute, counted by one atomic `UPDATE ... SET calls = calls + 1` in the database every replica shares."""

    def __init__(self, db: Database, per_minute: int):
        self.db = db
        self.per_minute = per_minute

    def take(self, organization: str, now: datetime | None = None, *, what: str = "call") -> int:
        """Count one request (`what`: "call" for an MCP request, "request" for a model request); OverLimitError
        (saying the limit and when to retry) when the minute is full. Returns the count of this minute, this
        one included."""
        moment = now or _now()
        window = moment.replace(second=0, microsecond=0)
        key = _iso(window)
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO rate_windows (organization_id, window_start, calls) VALUES (?,?,0) "
                         "ON CONFLICT (organization_id, window_start) DO NOTHING", (organization, key))
            conn.execute("UPDATE rate_windows SET calls = calls + 1 WHERE organization_id = ? AND window_start = ?",
                         (organization, key))
            calls = int(conn.execute("SELECT calls FROM rate_windows WHERE organization_id = ? AND window_start = ?",
                                     (organization, key)).fetchone()[0])
            if calls == 1:  # the first call of a minute clears windows older than an hour
                conn.execute("DELETE FROM rate_windows WHERE window_start < ?", (_iso(window - timedelta(hours=1)),))
        if calls > self.per_minute:
            retry = max(1, int((window + timedelta(minutes=1) - moment).total_seconds() + 0.999))
            refused = "a model request was not sent: " if what == "request" else ""
            raise OverLimitError(
                f"{refused}organization {organization!r} has made its {self.per_minute} requests this minute "
                f"(calls, reads, lists and model requests count together: JUDGE_MCP_RATE_LIMIT_PER_MINUTE); "
                f"retry in {retry} s",
            )
        return calls
