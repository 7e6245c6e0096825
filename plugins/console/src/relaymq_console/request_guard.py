"""Requests a browser makes for another site are refused before any route runs.

* A state-changing request (POST, PUT, PATCH, DELETE) that a browser sent from
  a page of another site: `Sec-Fetch-Site` other than ``same-origin``/``none``,
  or, from a browser that does not send it, an `Origin` that is not the
  console's own (``null`` included; the console's `Referrer-Policy:
  same-origin` has browsers send its own origin with its own forms). The CSRF
  token guards a session cookie; this also guards what a browser adds by
  itself, HTTP Basic credentials it remembers (after a `/metrics` prompt) and
  the open console without users. Clients that are not browsers (the admin
  CLI, curl, monitoring) send neither header and are not affected.
* On a console without users bound to a local address, a request whose `Host`
  is not a local name: a page of another site whose name was made to resolve
  to 127.0.0.1 (DNS rebinding) would otherwise read and change everything.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from relaymq_console.access import UNSAFE
from relaymq_console.config import LOCAL_HOSTS, ConsoleConfig

log = logging.getLogger("relaymq.console")

SAME_SITE_FETCH = ("same-origin", "none")


def _host_name(host: str) -> str:
    """`host` of a Host header without its port (``[::1]:8161`` -> ``::1``)."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def _is_local(name: str) -> bool:
    if name.lower() in LOCAL_HOSTS or name.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def cross_site(headers: dict[str, str]) -> str | None:
    """Why a state-changing request with these headers comes from another site,
    or None."""
    site = headers.get("sec-fetch-site")
    if site is not None:  # what the browser itself says, whatever the Origin
        return None if site in SAME_SITE_FETCH else f"Sec-Fetch-Site: {site}"
    origin = headers.get("origin")
    if origin is None:
        return None
    own = {h for h in (headers.get("host"), headers.get("x-forwarded-host")) if h}
    netloc = urlsplit(origin).netloc if origin != "null" else ""
    if not netloc or netloc not in own:
        return f"Origin: {origin}"
    return None


class RequestGuard:
    def __init__(self, app: ASGIApp, access: Any, config: ConsoleConfig) -> None:
        self.app = app
        self.access = access
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers") or ()}
        why = None
        if scope.get("method") in UNSAFE:
            reason = cross_site(headers)
            if reason is not None:
                why = f"cross-site request refused ({reason})"
        if why is None and self.access.open and self.config.local:
            host = _host_name(headers.get("host", ""))
            if host and not _is_local(host) and host != self.config.host:
                why = (f"this console has no users and answers requests for local names "
                       f"only, not {host!r}")
        if why is None:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        log.warning("console: %s %s from %s: %s", scope.get("method"), scope.get("path"),
                    client[0] if client else "?", why)
        api = str(scope.get("path", "")).startswith("/api/")
        body = (b'{"error": "' + why.replace('"', "'").encode() + b'"}') if api else why.encode()
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"application/json" if api
                                 else b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
