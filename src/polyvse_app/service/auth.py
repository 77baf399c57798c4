"""A shared token (`polyvse serve --token`, or $POLYVSE_TOKEN): with one, every /api endpoint wants
``Authorization: Bearer <token>``, or the ``polyvse_token`` cookie, which the web page sets after asking for the
token once (an <img> cannot send a header). The page itself and /openapi.json stay open: they hold no photos.

Closed by default: without a token the service binds only a loopback address, unless the user says
``--allow-unauthenticated`` (check_exposure).
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, HTTPException
from fastapi.security import APIKeyCookie, HTTPAuthorizationCredentials, HTTPBearer

TOKEN_COOKIE = "polyvse_token"
MIN_TOKEN_CHARS = 16

bearer = HTTPBearer(auto_error=False, description="the token `polyvse serve` was started with")
cookie = APIKeyCookie(name=TOKEN_COOKIE, auto_error=False, description="the same token, as the web page sends it")


def check_token(token: str) -> str:
    """The token as given, or ValueError saying why it cannot be one (it travels in a header and a cookie)."""
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(
            f"the token is {len(token)} characters long; use at least {MIN_TOKEN_CHARS}, e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe())'"
        )
    if not all(33 <= ord(c) <= 126 and c not in '";,\\' for c in token):
        raise ValueError(
            "the token may hold visible ASCII characters only, without quotes, ';', ',' or '\\' (it "
            "is sent in a header and a cookie); e.g. python -c 'import secrets; "
            "print(secrets.token_urlsafe())'"
        )
    return token


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only: 127.0.0.0/8, ::1 or localhost (a host name may resolve anywhere)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, token: str | None, allow_unauthenticated: bool = False) -> None:
    """ValueError, saying what to do, for an address other machines can reach without a token (unless allowed)."""
    if token or allow_unauthenticated or is_loopback(host):
        return
    raise ValueError(
        f"--host {host} would serve every indexed photo to anyone who can reach the port, and no token is set. "
        "Set one (POLYVSE_TOKEN=$(python -c 'import secrets; print(secrets.token_urlsafe())'), or --token) so the "
        "API wants `Authorization: Bearer <token>`; or bind 127.0.0.1 (the default); or, on a network you trust, "
        "pass --allow-unauthenticated to serve without one"
    )


def token_dependency(token: str) -> Callable:
    """A FastAPI dependency that lets a request through only with ``token``; 401 with a message otherwise."""
    expected = check_token(token).encode("ascii")

    def require_token(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
        cookie_token: Annotated[str | None, Depends(cookie)],
    ) -> None:
        given = credentials.credentials if credentials is not None else cookie_token
        if given is None:
            raise HTTPException(
                401,
                "this server wants a token: send the header `Authorization: Bearer <token>` "
                "with the token `polyvse serve` was started with (--token or POLYVSE_TOKEN)",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not secrets.compare_digest(given.encode("utf-8", "replace"), expected):
            raise HTTPException(
                401,
                "wrong token: send the token `polyvse serve` was started with",
                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )

    return require_token
