"""Bearer tokens for the HTTP transports: JUDGE_MCP_TOKENS ('token=org' or 'token=org:role') and tokens stored
hashed in the database (`judge-mcp tokens create`), each mapped to an organization and a role."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Callable

from mcp.server.auth.provider import AccessToken

from judges.store.access import ROLES, SECRET_PREFIX, TokenStore


def split_role(value: str) -> tuple[str, str]:
    """'org' → (org, 'admin'); 'org:member' → (org, 'member'). The role follows the last ':'."""
    org, sep, role = value.rpartition(":")
    if sep and role in ROLES:
        return org, role
    return value, "admin"


class StaticTokenVerifier:
    """Accepts the configured tokens, then live stored ones; the organization rides in `client_id`, the role
    in `scopes` (server/roles.py reads it)."""

    def __init__(self, tokens: dict[str, str], store: Callable[[], TokenStore | None] | None = None):
        self._tokens = {token: split_role(value) for token, value in tokens.items()}
        self._store = store

    async def verify_token(self, token: str) -> AccessToken | None:
        found = None
        # Compare against every token in constant time, so timing does not reveal a prefix.
        for known, org_role in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = org_role
        if found is None and self._store is not None and token.startswith(SECRET_PREFIX):
            store = self._store()
            if store is not None:
                stored = await store.db.run(store.verify, token)  # off the event loop on PostgreSQL
                if stored is not None:
                    found = (stored.organization_id, stored.role)
        if found is None:
            return None
        return AccessToken(token=token, client_id=found[0], scopes=[found[1]])


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
