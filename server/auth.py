"""Static bearer tokens mapped to organizations, for the HTTP transports."""

from __future__ import annotations

import hmac
import ipaddress

from mcp.server.auth.provider import AccessToken


class StaticTokenVerifier:
    """Accepts exactly the configured tokens; the token's organization rides in `client_id`."""

    def __init__(self, tokens: dict[str, str]):
        self._tokens = dict(tokens)

    async def verify_token(self, token: str) -> AccessToken | None:
        found = None
        # Compare against every token in constant time, so timing does not reveal a prefix.
        for known, org in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = org
        if found is None:
            return None
        return AccessToken(token=token, client_id=found, scopes=[])


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
