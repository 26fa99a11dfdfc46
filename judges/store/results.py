"""The result cache: model replies that were read, per organization, keyed by the model and the whole request.

The key is a hash of the model (and its endpoint) and the normalised request: system prompt, messages (an
image by the SHA-256 of its bytes), temperature, max_tokens, the JSON schema and the sample index. The prompt's
id and version are in it through the rendered text they produce. Only replies whose reading succeeded are
stored (`MeteredClient.accept`), so a cached failure is never reused; a hit is read again by the one reading
path, exactly as the first reply was.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from judges.models.protocol import ImagePart, ModelReply, ModelRequest
from judges.store.database import Database


def _iso(at: datetime) -> str:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def cache_key(model: str, request: ModelRequest) -> str:
    """SHA-256 of the model and the normalised request (images by the hash of their bytes)."""
    messages: list[Any] = []
    for m in request.messages:
        parts: list[Any] = []
        for part in m.content:
            if isinstance(part, ImagePart):
                digest = hashlib.sha256(base64.b64decode(part.data_base64)).hexdigest()
                parts.append({"type": "image", "media_type": part.media_type, "sha256": digest})
            else:
                parts.append({"type": "text", "text": part.text})
        messages.append({"role": m.role, "content": parts})
    normal = {"model": model, "system": request.system, "messages": messages, "temperature": request.temperature,
              "max_tokens": request.max_tokens, "json_schema": request.json_schema,
              "schema_name": request.schema_name, "sample": request.sample, "logprobs": request.logprobs}
    return hashlib.sha256(json.dumps(normal, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class ResultCache:
    """Stored replies per organization, with a time to live and at most `max_entries` per organization."""

    def __init__(self, db: Database, ttl_s: float, max_entries: int):
        self.db = db
        self.ttl_s = ttl_s
        self.max_entries = max_entries

    def _cutoff(self) -> str:
        return _iso(datetime.now(UTC) - timedelta(seconds=self.ttl_s))

    def get(self, org: str, key: str) -> ModelReply | None:
        """The stored reply for `key`, if it is younger than the TTL."""
        rows = self.db.query("SELECT reply FROM result_cache WHERE organization_id=? AND cache_key=? AND created_at>=?",
                             (org, key, self._cutoff()))
        return ModelReply.model_validate_json(rows[0]["reply"]) if rows else None

    def put(self, org: str, key: str, model: str, reply: ModelReply) -> None:
        """Store a reply that was read; drop the organization's expired entries and the oldest beyond the cap."""
        now = _iso(datetime.now(UTC))
        with self.db.transaction() as conn:
            # One upsert, not DELETE then INSERT: on PostgreSQL a put racing another of the same key (two replicas,
            # or two calls of one) would not see its uncommitted row, and its INSERT would violate the key.
            conn.execute("INSERT INTO result_cache (organization_id, cache_key, model, reply, created_at) "
                         "VALUES (?,?,?,?,?) ON CONFLICT (organization_id, cache_key) DO UPDATE SET "
                         "model=excluded.model, reply=excluded.reply, created_at=excluded.created_at",
                         (org, key, model, reply.model_dump_json(), now))
            conn.execute("DELETE FROM result_cache WHERE organization_id=? AND created_at<?", (org, self._cutoff()))
            over = conn.execute("SELECT created_at FROM result_cache WHERE organization_id=? "
                                "ORDER BY created_at DESC LIMIT 1 OFFSET ?", (org, self.max_entries)).fetchall()
            if over:
                conn.execute("DELETE FROM result_cache WHERE organization_id=? AND created_at<=?",
                             (org, over[0]["created_at"]))
